// The host side of the CUDA backend for the CUDA-on-CPU emulator
// (emulator.h): what framework/backend/cuda/runtime.h and cuda.h declare and
// context.cpp, memory.cpp and conv_cudnn.cpp define on a GPU, here on host
// memory and OpenBLAS, and the kernel table of the emulated kernels (CUDA
// graphs as graphs.h records them).
//
// Like the rewritten .cu files, this file is compiled with -Dcuda=cuda_on_cpu:
// every `minidl::cuda` below is minidl::cuda_on_cpu, apart from the library's
// real CUDA backend that the same program may also hold.
#include "cuda_on_cpu/runtime.h"

#include <cblas.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <new>

#include "framework/backend/cuda/cuda.h"
#include "framework/backend/cuda/runtime.h"
#include "framework/error.h"
#include "cuda_on_cpu/graphs.h"

namespace minidl::cuda {

bool cudnn_forced();  // bridge.cpp
bool direct_forced();

namespace {

std::atomic<int64_t> live{0}, peak{0};

// C = alpha op(A) op(B) + beta C, column-major, per batch; the argument
// checks cuBLAS makes (its documentation of cublas<t>gemm) come first.
cublasStatus_t sgemm(cublasHandle_t, cublasOperation_t ta, cublasOperation_t tb, int64_t m,
                     int64_t n, int64_t k, const float* alpha, const float* a, int64_t lda,
                     long long stride_a, const float* b, int64_t ldb, long long stride_b,
                     const float* beta, float* c, int64_t ldc, long long stride_c,
                     int64_t batch) {
  const bool na = ta == CUBLAS_OP_N, nb = tb == CUBLAS_OP_N;
  if (m < 0 || n < 0 || k < 0 || batch < 0 || lda < std::max<int64_t>(1, na ? m : k) ||
      ldb < std::max<int64_t>(1, nb ? k : n) || ldc < std::max<int64_t>(1, m))
    return CUBLAS_STATUS_INVALID_VALUE;
  for (int64_t i = 0; i < batch; ++i)
    cblas_sgemm(CblasColMajor, na ? CblasNoTrans : CblasTrans, nb ? CblasNoTrans : CblasTrans,
                static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), *alpha,
                a + i * stride_a, static_cast<int>(lda), b + i * stride_b, static_cast<int>(ldb),
                *beta, c + i * stride_c, static_cast<int>(ldc));
  return CUBLAS_STATUS_SUCCESS;
}

}  // namespace

[[noreturn]] void fail(const char* file, int line, const char* call, const char* name,
                       const char* description) {
  throw Error(cat(file, ":", line, ": ", call, ": ", name, " (", description, ")"));
}

int bind() { return 0; }
cudaStream_t stream() { return nullptr; }
cublasHandle_t blas_handle() {
  static int handle;
  return reinterpret_cast<cublasHandle_t>(&handle);
}

const Cublas& cublas() {
  static const Cublas table{
      .create = [](cublasHandle_t*) { return CUBLAS_STATUS_SUCCESS; },
      .set_stream = [](cublasHandle_t, cudaStream_t) { return CUBLAS_STATUS_SUCCESS; },
      .set_math_mode = [](cublasHandle_t, cublasMath_t) { return CUBLAS_STATUS_SUCCESS; },
      .set_workspace = [](cublasHandle_t, void*, size_t) { return CUBLAS_STATUS_SUCCESS; },
      .sgemm_strided_batched = sgemm,
      .status_name = [](cublasStatus_t s) {
        return s == CUBLAS_STATUS_SUCCESS ? "CUBLAS_STATUS_SUCCESS" : "CUBLAS_STATUS_INVALID_VALUE";
      },
      .status_string = [](cublasStatus_t s) {
        return s == CUBLAS_STATUS_SUCCESS ? "success" : "an invalid numeric value was used as an argument";
      },
  };
  return table;
}

// No CUDA graphs here: kernels stage their own arguments.
ArgSlot* graph_args(size_t) { return nullptr; }

// Exactly n bytes (64-byte aligned), so that AddressSanitizer sees a kernel
// that reads or writes past a buffer's end.
void* allocate(size_t bytes) {
  live += static_cast<int64_t>(bytes);
  int64_t p = peak.load();
  while (p < live.load() && !peak.compare_exchange_weak(p, live.load())) {
  }
  return ::operator new(bytes, std::align_val_t{64});
}
void deallocate(void* p, size_t bytes) {
  live -= static_cast<int64_t>(bytes);
  ::operator delete(p, std::align_val_t{64});
}

// No timing here: Direct takes the direct kernels where they apply, Auto and
// Im2col take im2col, whose GEMMs run natively (OpenBLAS) where the direct
// kernels' threads are emulated one by one (LeNet's 20 steps took 97 s with
// them); forcing cuDNN fails as it does where cuDNN is missing.
ConvPath run_conv(ConvPass, const ConvGeometry& g, const ConvTensors&,
                  const std::function<void()>& im2col, const std::function<void()>& direct) {
  MINIDL_CHECK(!cudnn_forced(), "CUDA backend: cuDNN is not emulated on the CPU (tools/cuda_on_cpu)");
  const bool empty = g.N * g.C * g.OC * g.OH * g.OW == 0;
  if (direct && !empty && direct_forced()) {
    direct();
    return ConvPath::Direct;
  }
  im2col();
  return ConvPath::Im2col;
}

}  // namespace minidl::cuda

namespace minidl::testing {

void install_cuda_on_cpu() {
  namespace k = minidl::cuda;
  static Allocator memory{
      .allocate = k::allocate,
      .deallocate = k::deallocate,
      .copy = [](void* dst, const void* src, size_t n, CopyKind) { std::memmove(dst, src, n); },
      .upload = nullptr,  // the front end allocates and copies
      .allocate_pinned = [](size_t n) { return ::operator new(n, std::align_val_t{64}); },
      .deallocate_pinned = [](void* p, size_t) { ::operator delete(p, std::align_val_t{64}); },
      .synchronize = [] {},
      .current_bytes = [] { return k::live.load(); },
      .peak_bytes = [] { return k::peak.load(); },
      .reset_peak = [] { k::peak = k::live.load(); },
  };
  static Kernels table{
      .fill = k::fill,
      .cast = k::cast,
      .increment = k::increment,
      .unary = k::unary,
      .unary_grad = k::unary_grad,
      .binary = k::binary,
      .dropout = k::dropout,
      .reduce = k::reduce,
      .max_backward = k::max_backward,
      .argmax = k::argmax,
      .softmax = k::softmax,
      .softmax_backward = k::softmax_backward,
      .scaled_softmax = k::scaled_softmax,
      .scaled_softmax_backward = k::scaled_softmax_backward,
      .gemm = k::gemm,
      .linear = k::linear,
      .transpose = k::transpose,
      .conv2d_forward = k::conv2d_forward,
      .conv2d_backward = k::conv2d_backward,
      .max_pool_forward = k::max_pool_forward,
      .max_pool_backward = k::max_pool_backward,
      .avg_pool_forward = k::avg_pool_forward,
      .avg_pool_backward = k::avg_pool_backward,
      .conv2d_relu_pool_state_bytes = nullptr,
      .conv2d_relu_pool_forward = nullptr,
      .conv2d_relu_pool_backward = nullptr,
      .gather = k::gather,
      .gather_backward = k::gather_backward,
      .cross_entropy_forward = k::cross_entropy_forward,
      .cross_entropy_backward = k::cross_entropy_backward,
      .binary_cross_entropy_forward = k::binary_cross_entropy_forward,
      .binary_cross_entropy_backward = k::binary_cross_entropy_backward,
      .diff_loss_forward = k::diff_loss_forward,
      .diff_loss_backward = k::diff_loss_backward,
      .update = k::update,
      // ---- shape ops (issue 22) ----
      .strided_copy = k::strided_copy,
      .index_select = k::index_select,
      .index_add = k::index_add,
      .gather_dim = k::gather_dim,
      .scatter_add_dim = k::scatter_add_dim,
      .where = k::where,
      // ---- math (issue 22) ----
      .compare = k::compare,
      // ---- convolution family and resizing (issue 22) ----
      .upsample_nearest_forward = k::upsample_nearest_forward,
      .upsample_nearest_backward = k::upsample_nearest_backward,
      .upsample_bilinear_forward = k::upsample_bilinear_forward,
      .upsample_bilinear_backward = k::upsample_bilinear_backward,
      // ---- batch norm (issue 23) ----
      .batch_norm_forward = k::batch_norm_forward,
      .batch_norm_backward = k::batch_norm_backward,
      .layer_norm_forward = k::layer_norm_forward,
      .layer_norm_backward = k::layer_norm_backward,
      .group_norm_forward = k::group_norm_forward,
      .group_norm_backward = k::group_norm_backward,
      .lstm_cell_forward = k::lstm_cell_forward,
      .lstm_cell_backward = k::lstm_cell_backward,
      .lstm_step_forward = k::lstm_step_forward,
      .lstm_step_backward = k::lstm_step_backward,
      .gru_cell_forward = k::gru_cell_forward,
      .gru_cell_backward = k::gru_cell_backward,
      .gru_step_forward = k::gru_step_forward,
      .gru_step_backward = k::gru_step_backward,
  };
  // graphs recorded and replayed as on the emulated device
  static const GraphOps graphs = testing::emulate_graphs(memory, table);
  static const Backend backend{"cuda on cpu", &memory, &table, &graphs};
  register_backend(Device::CUDA, &backend);
}

}  // namespace minidl::testing
