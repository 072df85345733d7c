// CUDA kernels on raw device pointers: the entries of the CUDA backend's
// kernel table and allocator (backend/kernels.h and allocator.h, whose
// contracts they follow). Letters as in kernels.h. This header needs no CUDA
// header; runtime.h (checks, stream, cuBLAS handle, scratch buffers) and
// device.cuh (device-side helpers) are for the backend's own files.
//
// Everything runs on one compute stream of the process's GPU (cuda::device()),
// created at first use; only copy(DeviceToHost) and wait_stream() make the
// host wait for it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "framework/backend/backend.h"

namespace minidl::cuda {

int gpu_count();  // cudaGetDeviceCount, 0 on any error (table.cpp)
// The GPU the backend runs on, on a host of `count` GPUs: cuda::device() at
// its first call, fixed from then on (settings.cpp).
int claim_device(int count);

// ---- memory (memory.cpp): CUDA's stream-ordered allocator on a pool ----
void* allocate(size_t bytes);
void deallocate(void* p, size_t bytes);
void copy(void* dst, const void* src, size_t n, CopyKind kind);
// a block from the pool, filled from a pinned block on the copy stream; the
// compute stream waits for the copy (an event) before its next work
void* upload(const void* src, size_t n);
// page-locked host blocks (cudaHostAlloc), reused once the stream has passed
// the event recorded when they were given back
void* allocate_pinned(size_t bytes);
void deallocate_pinned(void* p, size_t bytes);
void wait_stream();  // the table's synchronize
int64_t current_bytes();
int64_t peak_bytes();
void reset_peak();

// ---- elementwise.cu ----
void fill(DType t, int64_t n, double start, double step, void* dst);
void cast(DType from, DType to, int64_t n, const void* src, void* dst);
void increment(int64_t n, int64_t* x);
void unary(UnaryOp op, float s, int64_t n, const float* x, float* out);
void unary_grad(UnaryOp op, float s, int64_t n, const float* g, const float* x, float* out);
void binary(BinaryOp op, const Broadcast& bc, const float* a, const float* b, float* out);
void dropout(uint64_t seed, uint64_t offset, float keep, int64_t n, const float* x, float* out);

// ---- reduce.cu ----
void reduce(ReduceOp op, int64_t outer, int64_t r, int64_t inner, const float* x, float* out);
void max_backward(int64_t outer, int64_t r, int64_t inner, const float* x, const float* m,
                  const float* g, float* gx);
void argmax(int64_t rows, int64_t cols, const float* x, int64_t* out);
void softmax(bool log, int64_t outer, int64_t d, int64_t inner, const float* x, float* y);
void softmax_backward(bool log, int64_t outer, int64_t d, int64_t inner, const float* y,
                      const float* gy, float* gx);
void scaled_softmax(float scale, int64_t causal, int64_t rows, int64_t s, const float* x, float* y);
void scaled_softmax_backward(float scale, int64_t causal, int64_t rows, int64_t s, const float* y,
                             const float* gy, float* gx);

// ---- blas.cu: cuBLAS GEMM, linear, batched transpose ----
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
          int64_t lda, int64_t stride_a, const float* b, int64_t ldb, int64_t stride_b, float beta,
          float* c, int64_t ldc, int64_t stride_c, int64_t batch);
void linear(int64_t n, int64_t in, int64_t out, const float* x, const float* w, const float* b,
            float* y);
void transpose(int64_t batch, int64_t rows, int64_t cols, const float* src, float* dst);

// ---- conv.cu: im2col + cuBLAS, direct kernels, or cuDNN, per conv_cudnn.cpp's plan ----
void conv2d_forward(const ConvGeometry& g, const float* x, const float* w, const float* b,
                    float* y);
void conv2d_backward(const ConvGeometry& g, const float* x, const float* w, const float* gy,
                     float* gx, float* gw, float* gb);

// ---- conv_cudnn.cpp: the per-shape choice (cuda::set_conv_algorithm) ----
// A pass's operands: x [N, C, H, W], w [OC, C, KH, KW], y [N, OC, OH, OW]
// (for the gradients, gy); `out` is what the pass writes (forward: y;
// InputGrad: gx; WeightGrad: gw) and that pass's own input slot is null.
enum class ConvPass { Forward, InputGrad, WeightGrad };
enum class ConvPath { Im2col, Direct, Cudnn };
struct ConvTensors {
  const float* x;
  const float* w;
  const float* y;
  float* out;
};
// Runs the pass by the plan for (pass, g) and says which path ran: conv.cu's
// `im2col` or `direct` (empty where the direct kernels do not take the
// shape), each computing the pass into t.out, or cuDNN. The first call for a
// shape makes the plan, which under ConvAlgorithm::Auto times the paths.
ConvPath run_conv(ConvPass pass, const ConvGeometry& g, const ConvTensors& t,
                  const std::function<void()>& im2col, const std::function<void()>& direct);
std::vector<std::string> conv_choice_lines();  // one per plan made
// Creates cuDNN's handle when the setting is Cudnn (graph.cpp calls it before
// a capture begins: making the handle inside one could synchronise).
void prepare_cudnn_for_capture();

// ---- pool.cu ----
void max_pool_forward(const PoolGeometry& g, const float* x, float* y, int32_t* argmax);
void max_pool_backward(const PoolGeometry& g, const float* gy, const int32_t* argmax, float* gx);
void avg_pool_forward(const PoolGeometry& g, const float* x, float* y);
void avg_pool_backward(const PoolGeometry& g, const float* gy, float* gx);

// ---- loss.cu: labels, gather and the fused cross-entropy ----
// A label outside [0, C) reads nothing: its output (and gradient row) is NaN.
void gather(int64_t n, int64_t c, const float* x, const void* labels, DType lt, float* out);
void gather_backward(int64_t n, int64_t c, const float* g, const void* labels, DType lt, float* gx);
void cross_entropy_forward(int64_t n, int64_t c, int64_t inner, const float* logits,
                           const void* labels, DType lt, float* loss, float* probs);
void binary_cross_entropy_forward(int64_t n, const float* p, const float* t, float* l);
void binary_cross_entropy_backward(int64_t n, const float* g, const float* p, const float* t,
                                   float* gp, float* gt);
void diff_loss_forward(DiffLoss f, float s, float scale, int64_t n, const float* x, const float* y,
                       float* l);
void diff_loss_backward(DiffLoss f, float s, float scale, int64_t n, const float* x, const float* y,
                        const float* g, bool each, float* gx, float* gy);
void cross_entropy_backward(int64_t n, int64_t c, int64_t inner, const void* labels, DType lt,
                            const float* g, float* probs);

// ---- optim.cu: every slice of a step in one launch ----
void update(UpdateRule rule, const UpdateArgs& args, const UpdateSlice* slices, int count);

// ---- shape ops (issue 22): elementwise.cu (strided_copy), index.cu ----
void strided_copy(size_t elem_size, const StridedCopy& map, const void* src, void* dst);
void index_select(size_t elem_size, int64_t outer, int64_t d, int64_t inner, const void* x,
                  int64_t count, const void* index, DType index_dtype, void* out);
void index_add(int64_t outer, int64_t d, int64_t inner, int64_t count, const void* index,
               DType index_dtype, const float* src, float* out);
void gather_dim(int64_t outer, int64_t d, int64_t inner, int64_t count, const float* x,
                const void* index, DType index_dtype, float* out);
void scatter_add_dim(int64_t outer, int64_t d, int64_t inner, int64_t count, const void* index,
                     DType index_dtype, const float* src, float* out);
void where(const Select& sel, const void* cond, DType cond_dtype, const float* a, const float* b,
           float* out);
// ---- math (issue 22) ----
// elementwise.cu
void compare(CompareOp op, DType t, const Broadcast& bc, const void* a, const void* b, float* out);
// ---- convolution family and resizing (issue 22): pool.{cpp,cu} ----
void upsample_nearest_forward(int64_t nc, int64_t h, int64_t w, int64_t oh, int64_t ow,
                              const int32_t* rows, const int32_t* cols, const float* x, float* y);
void upsample_nearest_backward(int64_t nc, int64_t h, int64_t w, int64_t oh, int64_t ow,
                               const int32_t* row_first, const int32_t* col_first, const float* gy,
                               float* gx);
void upsample_bilinear_forward(int64_t nc, int64_t h, int64_t w, int64_t oh, int64_t ow,
                               LinearAxis rows, LinearAxis cols, const float* x, float* y);
void upsample_bilinear_backward(int64_t nc, int64_t h, int64_t w, int64_t oh, int64_t ow,
                                LinearAxis rows, LinearAxis cols, const float* gy, float* gx);

// ---- batch norm (issue 23): norm.{cpp,cu} ----
void batch_norm_forward(bool training, int64_t n, int64_t c, int64_t s, const float* x,
                        const float* weight, const float* bias, float* running_mean,
                        float* running_var, double momentum, double eps, float* save_mean,
                        float* save_invstd, float* y);
void batch_norm_backward(bool training, int64_t n, int64_t c, int64_t s, const float* x,
                         const float* gy, const float* save_mean, const float* save_invstd,
                         const float* weight, float* gx, float* gweight, float* gbias);
void layer_norm_forward(int64_t r, int64_t d, double eps, const float* x, const float* weight,
                        const float* bias, float* mean, float* rstd, float* y);
void layer_norm_backward(int64_t r, int64_t d, const float* x, const float* gy, const float* mean,
                         const float* rstd, const float* weight, float* gx, float* gweight,
                         float* gbias);
void group_norm_forward(int64_t n, int64_t c, int64_t s, int64_t g, double eps, const float* x,
                        const float* weight, const float* bias, float* mean, float* rstd,
                        float* y);
void group_norm_backward(int64_t n, int64_t c, int64_t s, int64_t g, const float* x,
                         const float* gy, const float* mean, const float* rstd,
                         const float* weight, float* gx, float* gweight, float* gbias);

// ---- the LSTM cell's pointwise part (issue 23): rnn.{cpp,cu} ----
void lstm_cell_forward(int64_t b, int64_t h, const float* a, const float* c, float* act,
                       float* c_out, float* h_out);
void lstm_cell_backward(int64_t b, int64_t h, const float* act, const float* c,
                        const float* gh, const float* gc_next, float* ga, float* gc);
// A whole step with the hidden path's GEMM (kernels.h; CUDA fuses small layers')
void lstm_step_forward(int64_t b, int64_t h, const float* w, const float* hp, float* a,
                       const float* c, float* act, float* c_out, float* h_out);
void lstm_step_backward(int64_t b, int64_t h, const float* w, const float* wt, const float* g,
                        const float* act, const float* c, float* dh, const float* gc_next,
                        float* ga, float* gc);

// ---- the GRU cell's pointwise part (issue 23): rnn.{cpp,cu} ----
void gru_cell_forward(int64_t b, int64_t h, const float* gx, const float* gh, const float* hp,
                      float* act, float* h_out);
void gru_cell_backward(int64_t b, int64_t h, const float* act, const float* hp, const float* gy,
                       float* ggx, float* ggh, float* ghp);
void gru_step_forward(int64_t b, int64_t h, const float* w, const float* hp, const float* gx,
                      float* gh, float* act, float* h_out);
void gru_step_backward(int64_t b, int64_t h, const float* w, const float* wt, const float* g,
                       const float* act, const float* hp, float* dh, float* ggx, float* ggh,
                       float* ghp);

}  // namespace minidl::cuda
