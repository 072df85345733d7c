// CPU kernels on raw float32 pointers: GEMM through CBLAS, im2col/col2im,
// pooling. Letters: N batch, C channels, H W input size, KH KW kernel,
// OH OW output size, OC output channels. All arrays are contiguous row-major.
#pragma once
#include <cstdint>

namespace minidl::cpu {

// C[M, N] = alpha * op(A) op(B) + beta * C, op(X) = X or X^T (cblas_sgemm).
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
          const float* a, const float* b, float beta, float* c);
// The same on sub-matrices: row strides lda, ldb, ldc (in elements).
void gemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
          const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
          int64_t ldc);

// src [R, C] -> dst [C, R]
void transpose(const float* src, int64_t rows, int64_t cols, float* dst);

struct ConvGeometry {
  int64_t C, H, W, KH, KW, stride, pad, OH, OW;
};
// im: [C, H, W] -> col: [C*KH*KW, OH*OW] with row stride ld >= OH*OW (zero
// where the window hits padding). A batch writes sample n at col + n*OH*OW.
void im2col(const ConvGeometry& g, const float* im, float* col, int64_t ld);
// col: [C*KH*KW, OH*OW] (row stride ld) -> im: [C, H, W], summing overlapping windows
void col2im(const ConvGeometry& g, const float* col, float* im, int64_t ld);

struct PoolGeometry {
  int64_t NC, H, W, K, stride, pad, OH, OW;
};
// x: [NC, H, W] -> y: [NC, OH, OW], argmax: [NC, OH, OW] flat index into H*W
void max_pool_forward(const PoolGeometry& g, const float* x, float* y, int32_t* argmax);
// gy: [NC, OH, OW] -> gx: [NC, H, W] (gx zeroed first)
void max_pool_backward(const PoolGeometry& g, const float* gy, const int32_t* argmax, float* gx);
// Average over the window's cells, padding counted (PyTorch's count_include_pad).
void avg_pool_forward(const PoolGeometry& g, const float* x, float* y);
void avg_pool_backward(const PoolGeometry& g, const float* gy, float* gx);

}  // namespace minidl::cpu
