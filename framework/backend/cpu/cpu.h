// CPU kernels on raw pointers: the entries of the CPU's backend (backend/backend.h)
// and the helpers they share (GEMM through CBLAS, im2col/col2im). Letters as
// in kernels.h. All arrays are contiguous row-major.
#pragma once
#include <algorithm>
#include <cstdint>
#include <exception>
#include <utility>
#include <vector>

#include "framework/backend/backend.h"

namespace minidl::cpu {

const Backend& backend();

// ---- memory (memory.cpp): 64-byte aligned blocks, freed ones cached for reuse ----
void* allocate(size_t bytes);
void deallocate(void* p, size_t bytes);
int64_t current_bytes();
int64_t peak_bytes();
void reset_peak();
// An uninitialised float buffer from the allocator, counted like a tensor.
class Scratch {
 public:
  explicit Scratch(int64_t floats);
  ~Scratch();
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  float* data() const { return data_; }

 private:
  size_t bytes_;
  float* data_;
};

// The first exception thrown by work inside an OpenMP parallel region, where
// it may not cross the region's end: run(f) keeps it (f's later throws on
// any thread are dropped), rethrow() throws it once the region is left.
class FirstError {
 public:
  template <class F>
  void run(F&& f) noexcept {
    try {
      f();
    } catch (...) {
#pragma omp critical(minidl_first_error)
      if (!error_) error_ = std::current_exception();
    }
  }
  void rethrow() const {
    if (error_) std::rethrow_exception(error_);
  }

 private:
  std::exception_ptr error_;
};

// ---- threads, GEMM and transpose (blas.cpp) ----
void set_pool_threads(int n);  // OpenMP's and OpenBLAS's (framework/threads.h decides n)
// C[M, N] = alpha * op(A) op(B) + beta * C, op(X) = X or X^T: oneDNN's sgemm
// where it measured faster (blas.cpp, dnnl_gemm_fits), else OpenBLAS's
// (always after set_dnnl_gemm(false): tests and bench_ops --gemm openblas).
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
          const float* a, const float* b, float beta, float* c);
// The same on sub-matrices: row strides lda, ldb, ldc (in elements).
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
          const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
          int64_t ldc);
void set_dnnl_gemm(bool on);
// src [R, C] -> dst [C, R]
void transpose(const float* src, int64_t rows, int64_t cols, float* dst);

// ---- windows of convolution and pooling ----
// The outputs [lo, hi) of a row of OW whose input column o*stride + offset
// lies in [0, W) (offset: the window's column minus the padding)
inline std::pair<int64_t, int64_t> inside_columns(int64_t W, int64_t OW, int64_t stride,
                                                  int64_t offset) {
  auto ceil_div = [](int64_t a, int64_t b) { return a >= 0 ? (a + b - 1) / b : -(-a / b); };
  const int64_t lo = std::clamp<int64_t>(ceil_div(-offset, stride), 0, OW);
  return {lo, std::clamp<int64_t>(ceil_div(W - offset, stride), lo, OW)};
}

// plane [H, W] -> padded [H + 2 ph, W + 2 pw], zeros around
inline void pad_plane(const float* plane, int64_t H, int64_t W, int64_t ph, int64_t pw,
                      std::vector<float>& padded) {
  const int64_t PW = W + 2 * pw;
  padded.assign((H + 2 * ph) * PW, 0.f);
  for (int64_t h = 0; h < H; ++h)
    std::copy(plane + h * W, plane + (h + 1) * W, padded.data() + (h + ph) * PW + pw);
}

// ---- im2col (conv.cpp) ----
// One channel group (Cg = C/groups channels, im at the group's first):
// im: [Cg, H, W] -> col: [Cg*KH*KW, OH*OW] with row stride ld >= OH*OW (zero
// where the window hits padding). A batch writes sample n at col + n*OH*OW.
void im2col(const ConvGeometry& g, const float* im, float* col, int64_t ld);
// col: [Cg*KH*KW, OH*OW] (row stride ld) -> im: [Cg, H, W], summing overlapping windows
void col2im(const ConvGeometry& g, const float* col, float* im, int64_t ld);

// ---- direct convolution with 16 samples in the vector lanes (conv_lanes.cpp) ----
// Whether it takes g: stride 1, square padding below the kernel, dilation 1,
// one group, N >= 16 with at most
// a quarter of the last lane block empty, and AVX-512 compiled in and on this CPU.
bool lanes_conv_fits(const ConvGeometry& g);
// The contracts of conv2d_forward and conv2d_backward (kernels.h).
void lanes_conv_forward(const ConvGeometry& g, const float* x, const float* w, const float* b,
                        float* y);
void lanes_conv_backward(const ConvGeometry& g, const float* x, const float* w, const float* gy,
                         float* gx, float* gw, float* gb);
// The fused conv2d + relu + 2x2 max pool entries (kernels.h) on the same
// lanes: state_bytes is 0 where lanes_conv_fits(g) is false or OH, OW < 2.
int64_t lanes_relu_pool_state_bytes(const ConvGeometry& g);
void lanes_relu_pool_forward(const ConvGeometry& g, const float* x, const float* w, const float* b,
                             float* y, void* state);
void lanes_relu_pool_backward(const ConvGeometry& g, const float* x, const float* w,
                              const float* gy, const void* state, float* gx, float* gw, float* gb);

// ---- oneDNN's convolutions (conv_dnnl.cpp) ----
// Whether it takes g (with a bias or not) for its forward, and its backward
// for the passes dnnl_conv_takes: a kernel above 1x1 at stride 2 or more or
// on 16 channels or more (on fewer too where the CPU lacks AVX-512), groups
// only where oneDNN has a kernel for them, no negative padding after (never
// after set_dnnl_conv(false): tests and bench_ops --conv im2col compare).
bool dnnl_conv_fits(const ConvGeometry& g, bool bias);
void set_dnnl_conv(bool on);
// The contracts of conv2d_forward and conv2d_backward (kernels.h).
void dnnl_conv_forward(const ConvGeometry& g, const float* x, const float* w, const float* b,
                       float* y);
void dnnl_conv_backward(const ConvGeometry& g, const float* x, const float* w, const float* gy,
                        float* gx, float* gw, float* gb);
// Whether oneDNN takes pass p of a geometry it fits (the others run on
// conv.cpp's columns): not where it runs the pass by its GEMM-based fallback
// (im2col + sgemm sample by sample), nor, under 16 input channels of one
// group, the input gradient with AVX-512 and either gradient without it
// (but at stride 1 from 4 channels)
enum class ConvPass { Forward, Data, Weights };
bool dnnl_conv_takes(const ConvGeometry& g, bool bias, ConvPass p);

// ---- table entries (see kernels.h for each contract), by file as in backend/cuda ----
// elementwise.cpp
void fill(DType t, int64_t n, double start, double step, void* dst);
void cast(DType from, DType to, int64_t n, const void* src, void* dst);
void increment(int64_t n, int64_t* x);
void unary(UnaryOp op, float s, int64_t n, const float* x, float* out);
void unary_grad(UnaryOp op, float s, int64_t n, const float* g, const float* x, float* out);
void binary(BinaryOp op, const Broadcast& bc, const float* a, const float* b, float* out);
void dropout(uint64_t seed, uint64_t offset, float keep, int64_t n, const float* x, float* out);
// reduce.cpp
void reduce(ReduceOp op, int64_t outer, int64_t r, int64_t inner, const float* x, float* out);
void max_backward(int64_t outer, int64_t r, int64_t inner, const float* x, const float* m,
                  const float* g, float* gx);
void argmax(int64_t rows, int64_t cols, const float* x, int64_t* out);
void softmax(bool log, int64_t outer, int64_t d, int64_t inner, const float* x, float* y);
// x [rows, D] -> y: the softmax (log: log_softmax) of each row x * scale,
// y's rows y_stride apart (D; 0: one row, each written over the last); lse
// [rows] = log(sum(e^(x * scale))) unless null
void softmax_rows(bool log, int64_t rows, int64_t d, const float* x, float* y, int64_t y_stride,
                  double* lse = nullptr, float scale = 1.f);
// Columns one softmax_slab call takes at most
constexpr int64_t kSoftmaxSlab = 256;
// x, y [D, stride], columns [0, w) (w <= kSoftmaxSlab) -> the softmax (log:
// log_softmax) of each column, as softmax_rows'; lse [w] = log(sum(e^x)) of
// each unless null
void softmax_slab(bool log, int64_t d, int64_t stride, int64_t w, const float* x, float* y,
                  double* lse = nullptr);
void softmax_backward(bool log, int64_t outer, int64_t d, int64_t inner, const float* y,
                      const float* gy, float* gx);
void scaled_softmax(float scale, int64_t causal, int64_t rows, int64_t s, const float* x, float* y);
void scaled_softmax_backward(float scale, int64_t causal, int64_t rows, int64_t s, const float* y,
                             const float* gy, float* gx);
// blas.cpp (with gemm and transpose above)
void linear(int64_t n, int64_t in, int64_t out, const float* x, const float* w, const float* b,
            float* y);
// conv.cpp
void conv2d_forward(const ConvGeometry& g, const float* x, const float* w, const float* b,
                    float* y);
void conv2d_backward(const ConvGeometry& g, const float* x, const float* w, const float* gy,
                     float* gx, float* gw, float* gb);
// pool.cpp
void max_pool_forward(const PoolGeometry& g, const float* x, float* y, int32_t* argmax);
void max_pool_backward(const PoolGeometry& g, const float* gy, const int32_t* argmax, float* gx);
void avg_pool_forward(const PoolGeometry& g, const float* x, float* y);
void avg_pool_backward(const PoolGeometry& g, const float* gy, float* gx);
// loss.cpp
void gather(int64_t n, int64_t c, const float* x, const void* labels, DType lt, float* out);
void gather_backward(int64_t n, int64_t c, const float* g, const void* labels, DType lt,
                     float* gx);
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
// optim.cpp
void update(UpdateRule rule, const UpdateArgs& args, const UpdateSlice* slices, int count);
// ---- math (issue 22) ----
// elementwise.cpp
void compare(CompareOp op, DType t, const Broadcast& bc, const void* a, const void* b, float* out);

// ---- shape ops (issue 22): elementwise.cpp (strided_copy), index.cpp ----
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
// A whole step with the hidden path's GEMM (kernels.h): the GEMM, then the cell
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

}  // namespace minidl::cpu
