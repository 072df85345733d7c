// GEMM through cuBLAS, linear (a bias kernel + GEMM) and the batched tiled
// transpose. minidl is row-major and cuBLAS column-major: a row-major C [M, N]
// is a column-major C^T [N, M], and C^T = op(B)^T op(A)^T, so every call
// swaps the operands (B first) and the sizes (N before M) and keeps the flags.
// float32 GEMMs use TF32 tensor cores only when minidl::cuda::allow_tf32().
#include "framework/backend/cuda/device.cuh"
#include "framework/cuda.h"

namespace minidl::cuda {
namespace {

// c_i [M, N] (row stride ldc) *= beta, or = 0 when beta is 0: a GEMM with K = 0
__global__ void scale_kernel(int64_t batch, int64_t m, int64_t n, float beta, float* c, int64_t ldc,
                             int64_t stride_c) {
  for (int64_t i = thread_index(); i < batch * m * n; i += thread_count()) {
    float* ci = c + (i / (m * n)) * stride_c + (i % (m * n)) / n * ldc + i % n;
    *ci = beta == 0.f ? 0.f : beta * *ci;
  }
}

// y [N, OUT] = b [OUT] in every row
__global__ void bias_rows_kernel(int64_t n, int64_t out, const float* b, float* y) {
  for (int64_t i = thread_index(); i < n * out; i += thread_count()) y[i] = b[i % out];
}

// src [batch, rows, cols] -> dst [batch, cols, rows], through a 32x32 tile in
// shared memory (one column of padding avoids bank conflicts); blocks of 32x8
// threads, each thread moving 4 elements. Grid-stride over tiles and batches.
constexpr int kTile = 32, kTileRows = 8;
__global__ void transpose_kernel(int64_t batch, int64_t rows, int64_t cols, const float* src,
                                 float* dst) {
  __shared__ float tile[kTile][kTile + 1];
  const int64_t tiles_r = (rows + kTile - 1) / kTile, tiles_c = (cols + kTile - 1) / kTile;
  for (int64_t t = blockIdx.x; t < batch * tiles_r * tiles_c; t += gridDim.x) {
    const int64_t b = t / (tiles_r * tiles_c), tr = t / tiles_c % tiles_r, tc = t % tiles_c;
    const float* s = src + b * rows * cols;
    float* d = dst + b * rows * cols;
    for (int i = threadIdx.y; i < kTile; i += kTileRows) {
      const int64_t r = tr * kTile + i, c = tc * kTile + threadIdx.x;
      if (r < rows && c < cols) tile[i][threadIdx.x] = s[r * cols + c];
    }
    __syncthreads();
    for (int i = threadIdx.y; i < kTile; i += kTileRows) {
      const int64_t c = tc * kTile + i, r = tr * kTile + threadIdx.x;
      if (r < rows && c < cols) d[c * rows + r] = tile[threadIdx.x][i];
    }
    __syncthreads();  // the tile is reused by the next iteration
  }
}

}  // namespace

void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
          int64_t lda, int64_t stride_a, const float* b, int64_t ldb, int64_t stride_b, float beta,
          float* c, int64_t ldc, int64_t stride_c, int64_t batch) {
  if (m == 0 || n == 0 || batch == 0) return;
  if (k == 0) {  // cuBLAS rejects lda = 0; the product is empty
    scale_kernel<<<blocks_for(batch * m * n), kThreads, 0, stream()>>>(batch, m, n, beta, c, ldc,
                                                                       stride_c);
    CUDA_CHECK_LAUNCH();
    return;
  }
  cublasHandle_t h = blas_handle();
  CUBLAS_CHECK(
      cublas().set_math_mode(h, allow_tf32() ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH));
  const cublasOperation_t op_a = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_b = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  CUBLAS_CHECK(cublas().sgemm_strided_batched(h, op_b, op_a, n, m, k, &alpha, b, ldb, stride_b, a,
                                               lda, stride_a, &beta, c, ldc, stride_c, batch));
}

// x [N, IN], w [OUT, IN], b [OUT] or null -> y [N, OUT] = b + x w^T
void linear(int64_t n, int64_t in, int64_t out, const float* x, const float* w, const float* b,
            float* y) {
  if (n == 0 || out == 0) return;
  if (b) {
    bias_rows_kernel<<<blocks_for(n * out), kThreads, 0, stream()>>>(n, out, b, y);
    CUDA_CHECK_LAUNCH();
  }
  gemm(false, true, n, out, in, 1.f, x, in, 0, w, in, 0, b ? 1.f : 0.f, y, out, 0, 1);
}

// src [batch, rows, cols] -> dst [batch, cols, rows]
void transpose(int64_t batch, int64_t rows, int64_t cols, const float* src, float* dst) {
  if (batch * rows * cols == 0) return;
  const int64_t tiles = batch * ((rows + kTile - 1) / kTile) * ((cols + kTile - 1) / kTile);
  transpose_kernel<<<blocks_for(tiles, 1), dim3(kTile, kTileRows), 0, stream()>>>(batch, rows, cols,
                                                                                  src, dst);
  CUDA_CHECK_LAUNCH();
}

}  // namespace minidl::cuda
