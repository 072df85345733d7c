// The CPU's backend: its allocator (backend/allocator.h) and every entry of
// its kernel table (backend/kernels.h), filled from cpu.h; no graphs.
#include <omp.h>

#include <cstring>

#include "framework/backend/cpu/cpu.h"

namespace minidl::cpu {
namespace {

void copy(void* dst, const void* src, size_t n, CopyKind) {
  if (n) std::memmove(dst, src, n);
}

// src [batch, rows, cols] -> dst [batch, cols, rows]
void transpose_batch(int64_t batch, int64_t rows, int64_t cols, const float* src, float* dst) {
  for (int64_t i = 0; rows * cols > 0 && i < batch; ++i)
    transpose(src + i * rows * cols, rows, cols, dst + i * rows * cols);
}

// Products of under 2^22 multiply-adds each (attention's q k^T and w v per
// head), two and more of them, on two threads and more: each thread takes
// whole products, its library calls on itself alone, as one thread computes
// them (the same bits), instead of a parallel region per product. bench_ops'
// attn_16x4x64 on two threads ran at 30-34 GFLOP/s so, against 15-24 (six
// interleaved runs each; bench/README.md, session 36).
void gemm_batch(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                int64_t lda, int64_t sa, const float* b, int64_t ldb, int64_t sb, float beta,
                float* c, int64_t ldc, int64_t sc, int64_t batch) {
  auto one = [&](int64_t i) {
    gemm(ta, tb, m, n, k, alpha, a + i * sa, lda, b + i * sb, ldb, beta, c + i * sc, ldc);
  };
  if (batch < 2 || m * n * k >= (int64_t{1} << 22) || omp_get_max_threads() < 2 ||
      omp_in_parallel()) {
    for (int64_t i = 0; i < batch; ++i) one(i);
    return;
  }
  FirstError error;
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < batch; ++i) error.run([&] { one(i); });
  error.rethrow();
}

}  // namespace

const Backend& backend() {
  static const Allocator memory{
      .allocate = allocate,
      .deallocate = deallocate,
      .copy = copy,
      .upload = nullptr,
      .allocate_pinned = allocate,
      .deallocate_pinned = deallocate,
      .synchronize = [] {},
      .current_bytes = current_bytes,
      .peak_bytes = peak_bytes,
      .reset_peak = reset_peak,
  };
  static const Kernels k{
      .fill = fill,
      .cast = cast,
      .increment = increment,
      .unary = unary,
      .unary_grad = unary_grad,
      .binary = binary,
      .dropout = dropout,
      .reduce = reduce,
      .max_backward = max_backward,
      .argmax = argmax,
      .softmax = softmax,
      .softmax_backward = softmax_backward,
      .scaled_softmax = scaled_softmax,
      .scaled_softmax_backward = scaled_softmax_backward,
      .gemm = gemm_batch,
      .linear = linear,
      .transpose = transpose_batch,
      .conv2d_forward = conv2d_forward,
      .conv2d_backward = conv2d_backward,
      .max_pool_forward = max_pool_forward,
      .max_pool_backward = max_pool_backward,
      .avg_pool_forward = avg_pool_forward,
      .avg_pool_backward = avg_pool_backward,
      .conv2d_relu_pool_state_bytes = lanes_relu_pool_state_bytes,
      .conv2d_relu_pool_forward = lanes_relu_pool_forward,
      .conv2d_relu_pool_backward = lanes_relu_pool_backward,
      .gather = gather,
      .gather_backward = gather_backward,
      .cross_entropy_forward = cross_entropy_forward,
      .cross_entropy_backward = cross_entropy_backward,
      .binary_cross_entropy_forward = binary_cross_entropy_forward,
      .binary_cross_entropy_backward = binary_cross_entropy_backward,
      .diff_loss_forward = diff_loss_forward,
      .diff_loss_backward = diff_loss_backward,
      .update = update,
      // ---- shape ops (issue 22) ----
      .strided_copy = strided_copy,
      .index_select = index_select,
      .index_add = index_add,
      .gather_dim = gather_dim,
      .scatter_add_dim = scatter_add_dim,
      .where = where,
      // ---- math (issue 22) ----
      .compare = compare,
      // ---- convolution family and resizing (issue 22) ----
      .upsample_nearest_forward = upsample_nearest_forward,
      .upsample_nearest_backward = upsample_nearest_backward,
      .upsample_bilinear_forward = upsample_bilinear_forward,
      .upsample_bilinear_backward = upsample_bilinear_backward,
      // ---- batch norm (issue 23) ----
      .batch_norm_forward = batch_norm_forward,
      .batch_norm_backward = batch_norm_backward,
      .layer_norm_forward = layer_norm_forward,
      .layer_norm_backward = layer_norm_backward,
      .group_norm_forward = group_norm_forward,
      .group_norm_backward = group_norm_backward,
      .lstm_cell_forward = lstm_cell_forward,
      .lstm_cell_backward = lstm_cell_backward,
      .lstm_step_forward = lstm_step_forward,
      .lstm_step_backward = lstm_step_backward,
      .gru_cell_forward = gru_cell_forward,
      .gru_cell_backward = gru_cell_backward,
      .gru_step_forward = gru_step_forward,
      .gru_step_backward = gru_step_backward,
  };
  static const Backend b{.name = "cpu", .allocator = &memory, .kernels = &k, .graphs = nullptr};
  return b;
}

}  // namespace minidl::cpu
