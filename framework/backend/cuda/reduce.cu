// CUDA kernels for reductions over [outer, R, inner], argmax over rows and
// softmax / log-softmax along a dim. Rows that are contiguous (inner == 1) get
// one warp each; strided columns get one thread each, reading neighbouring
// columns side by side. Where that leaves most of the GPU idle (a few long
// rows, as a whole-tensor sum; a few columns over many rows, as a bias
// gradient), R is cut into parts that blocks fold side by side, and a second
// pass folds the parts: in a fixed order both times (deterministic).
#include <cfloat>

#include "framework/backend/cuda/device.cuh"

namespace minidl::cuda {
namespace {


// Sum (or NaN-propagating Max) of a warp's row, every lane gets it
template <ReduceOp Op>
__device__ float warp_fold(float v) {
  return Op == ReduceOp::Sum ? warp_sum(v) : warp_max(v);
}
template <ReduceOp Op>
__device__ float fold(float a, float b) {
  return Op == ReduceOp::Sum ? a + b : nan_max(a, b);
}

// x [rows, R] -> out [rows], one warp per row
template <ReduceOp Op>
__global__ void reduce_rows_kernel(int64_t rows, int64_t r, const float* x, float* out) {
  const int lane = threadIdx.x % 32;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * kWarpsPerBlock;
  for (int64_t row = thread_index() / 32; row < rows; row += warps) {
    const float* xr = x + row * r;
    float acc = Op == ReduceOp::Sum ? 0.f : -INFINITY;
    for (int64_t k = lane; k < r; k += 32) acc = fold<Op>(acc, xr[k]);
    acc = warp_fold<Op>(acc);
    if (lane == 0) out[row] = acc;
  }
}

// x [outer, R, inner] -> out [outer, inner], one block per 32 columns of an
// outer index: warp w folds rows w, w + 8, ..., its lanes neighbouring
// columns, then warp 0 folds the 8 partials in order (deterministic). One
// thread per column folded all R rows in one chain of loads: 13 us for a
// [64, 120] bias gradient on an H200.
// With parts: x holds `rows` rows in all per outer index of the caller's
// (rows = r otherwise), outer counting its parts of r rows, the last cut short.
template <ReduceOp Op>
__global__ void reduce_columns_kernel(int64_t outer, int64_t r, int64_t inner, const float* x,
                                      float* out, int64_t rows) {
  __shared__ float partial[kThreads];  // [warp][lane]
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t tiles = (inner + 31) / 32, parts = (rows + r - 1) / r;
  for (int64_t t = blockIdx.x; t < outer * tiles; t += gridDim.x) {
    const int64_t o = t / tiles, c = t % tiles * 32 + lane;
    const int64_t first = o % parts * r, n = first + r < rows ? r : rows - first;  // rows of part
    const float* xo = x + (o / parts * rows + first) * inner;
    float acc = Op == ReduceOp::Sum ? 0.f : -INFINITY;
    if (c < inner)
      for (int64_t k = warp; k < n; k += kWarpsPerBlock) acc = fold<Op>(acc, xo[k * inner + c]);
    partial[threadIdx.x] = acc;
    __syncthreads();
    if (warp == 0 && c < inner) {
      for (int w = 1; w < kWarpsPerBlock; ++w) acc = fold<Op>(acc, partial[w * 32 + lane]);
      out[o * inner + c] = acc;
    }
    __syncthreads();  // partial is reused by the next tile
  }
}

// x [rows, R] -> out [rows, parts], block (row, p) folding x[row, p * kRowPart ..]
// (a whole-tensor sum of 12,288 floats took one warp 50 us on an H200)
constexpr int64_t kRowPart = 2048;
template <ReduceOp Op>
__global__ void reduce_row_parts_kernel(int64_t rows, int64_t r, int64_t parts, const float* x,
                                        float* out) {
  __shared__ float warps[kWarpsPerBlock];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  for (int64_t bp = blockIdx.x; bp < rows * parts; bp += gridDim.x) {
    const int64_t row = bp / parts, begin = bp % parts * kRowPart;
    const int64_t end = begin + kRowPart < r ? begin + kRowPart : r;
    float acc = Op == ReduceOp::Sum ? 0.f : -INFINITY;
    for (int64_t k = begin + threadIdx.x; k < end; k += blockDim.x) acc = fold<Op>(acc, x[row * r + k]);
    acc = warp_fold<Op>(acc);
    if (lane == 0) warps[warp] = acc;
    __syncthreads();
    if (threadIdx.x == 0) {
      for (int w = 1; w < kWarpsPerBlock; ++w) acc = fold<Op>(acc, warps[w]);
      out[bp] = acc;
    }
    __syncthreads();  // warps is reused by the next part
  }
}

// Columns of [outer, R, inner] cut into parts of kColumnPart rows when fewer
// than kFewTiles blocks would cover them (a [1024, 64] bias gradient: 2 blocks)
constexpr int64_t kColumnPart = 64, kFewTiles = 128;

template <ReduceOp Op>
void reduce_as(int64_t outer, int64_t r, int64_t inner, const float* x, float* out) {
  const int64_t tiles = (inner + 31) / 32;
  if (inner == 1 && outer < 1024 && r >= 2 * kRowPart) {
    const int64_t parts = (r + kRowPart - 1) / kRowPart;
    Scratch<float> part(outer * parts);
    reduce_row_parts_kernel<Op><<<blocks_for(outer * parts, 1), kThreads, 0, stream()>>>(
        outer, r, parts, x, part.data());
    CUDA_CHECK_LAUNCH();
    return reduce_as<Op>(outer, parts, 1, part.data(), out);
  }
  if (inner > 1 && outer * tiles < kFewTiles && r >= 2 * kColumnPart) {
    // [outer, R, inner] as [outer * parts, kColumnPart, inner] (the last part
    // padded by nothing: its block stops at R), then [outer, parts, inner]
    const int64_t parts = (r + kColumnPart - 1) / kColumnPart;
    Scratch<float> part(outer * parts * inner);
    reduce_columns_kernel<Op><<<blocks_for(outer * parts * tiles, 1), kThreads, 0, stream()>>>(
        outer * parts, kColumnPart, inner, x, part.data(), r);
    CUDA_CHECK_LAUNCH();
    return reduce_as<Op>(outer, parts, inner, part.data(), out);
  }
  if (inner == 1) {
    reduce_rows_kernel<Op><<<blocks_for(outer * 32), kThreads, 0, stream()>>>(outer, r, x, out);
  } else {
    reduce_columns_kernel<Op>
        <<<blocks_for(outer * tiles, 1), kThreads, 0, stream()>>>(outer, r, inner, x, out, r);
  }
  CUDA_CHECK_LAUNCH();
}

// x [outer, R, inner], m, g [outer, inner] -> gx = (x == m) * (g / ties):
// a row (inner 1) to a warp, whose lanes count their ties and sum the
// counts (whole numbers: exact in any order), else a column to a thread
__global__ void max_backward_kernel(int64_t outer, int64_t r, int64_t inner, const float* x,
                                    const float* m, const float* g, float* gx) {
  const int lane = threadIdx.x % 32;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * kWarpsPerBlock;
  if (inner == 1) {
    for (int64_t row = thread_index() / 32; row < outer; row += warps) {
      const float* xr = x + row * r;
      float ties = 0.f;
      for (int64_t k = lane; k < r; k += 32) ties += xr[k] == m[row] ? 1.f : 0.f;
      const float q = g[row] / warp_sum(ties);
      for (int64_t k = lane; k < r; k += 32) gx[row * r + k] = (xr[k] == m[row] ? 1.f : 0.f) * q;
    }
    return;
  }
  for (int64_t c = thread_index(); c < outer * inner; c += thread_count()) {
    const int64_t o = c / inner, i = c % inner;
    const float* xc = x + o * r * inner + i;
    float ties = 0.f;
    for (int64_t k = 0; k < r; ++k) ties += xc[k * inner] == m[c] ? 1.f : 0.f;
    const float q = g[c] / ties;
    for (int64_t k = 0; k < r; ++k)
      gx[(o * r + k) * inner + i] = (xc[k * inner] == m[c] ? 1.f : 0.f) * q;
  }
}

// x [rows, cols] -> out [rows], the first largest column, one warp per row.
// Lanes keep their own best (strictly larger replaces), then the warp picks
// the largest value, the smallest column among equals.
__global__ void argmax_kernel(int64_t rows, int64_t cols, const float* x, int64_t* out) {
  const int lane = threadIdx.x % 32;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * kWarpsPerBlock;
  for (int64_t row = thread_index() / 32; row < rows; row += warps) {
    const float* xr = x + row * cols;
    float best = -INFINITY;
    int64_t arg = cols;  // none yet
    for (int64_t k = lane; k < cols; k += 32)
      if (arg == cols || xr[k] > best) best = xr[k], arg = k;
    for (int offset = 16; offset > 0; offset >>= 1) {
      const float ob = __shfl_xor_sync(0xffffffffu, best, offset);
      const int64_t oa = __shfl_xor_sync(0xffffffffu, arg, offset);
      if (oa != cols && (arg == cols || ob > best || (ob == best && oa < arg))) best = ob, arg = oa;
    }
    if (lane == 0) out[row] = arg == cols ? 0 : arg;
  }
}

// x [outer, D] -> y, softmax (or log-softmax) of each row, one warp per row
__global__ void softmax_rows_kernel(bool log, int64_t rows, int64_t d, const float* x, float* y) {
  const int lane = threadIdx.x % 32;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * kWarpsPerBlock;
  for (int64_t row = thread_index() / 32; row < rows; row += warps) {
    const float* xr = x + row * d;
    float* yr = y + row * d;
    float m = -INFINITY;
    for (int64_t k = lane; k < d; k += 32) m = fmaxf(m, xr[k]);
    m = warp_max(m);
    float s = 0.f;
    for (int64_t k = lane; k < d; k += 32) s += expf(xr[k] - m);
    // (x - m) - log(s), not x - (m + log(s)): see the CPU kernel
    const float log_s = logf(warp_sum(s));
    for (int64_t k = lane; k < d; k += 32) {
      const float v = (xr[k] - m) - log_s;
      yr[k] = log ? v : expf(v);
    }
  }
}

// x [outer, D, inner] -> y, softmax along D, one thread per (outer, inner) column
__global__ void softmax_columns_kernel(bool log, int64_t outer, int64_t d, int64_t inner,
                                       const float* x, float* y) {
  for (int64_t i = thread_index(); i < outer * inner; i += thread_count()) {
    const int64_t off = (i / inner) * d * inner + i % inner;
    const float* xc = x + off;
    float* yc = y + off;
    float m = xc[0];
    for (int64_t k = 1; k < d; ++k) m = fmaxf(m, xc[k * inner]);
    float s = 0.f;
    for (int64_t k = 0; k < d; ++k) s += expf(xc[k * inner] - m);
    const float log_s = logf(s);
    for (int64_t k = 0; k < d; ++k) {
      const float v = (xc[k * inner] - m) - log_s;
      yc[k * inner] = log ? v : expf(v);
    }
  }
}

// y, gy [outer, D, inner] -> gx, one thread per (outer, inner) line, sums in
// double as on the CPU (kernels.h's softmax_backward)
__global__ void softmax_backward_kernel(bool log, int64_t outer, int64_t d, int64_t inner,
                                        const float* y, const float* gy, float* gx) {
  for (int64_t i = thread_index(); i < outer * inner; i += thread_count()) {
    const int64_t off = (i / inner) * d * inner + i % inner;
    double sum_g = 0, sum_gy = 0, sum_y = 0;
    for (int64_t k = 0; k < d; ++k) {
      const double g = gy[off + k * inner], yk = y[off + k * inner];
      sum_g += g;
      sum_gy += g * yk;
      sum_y += yk;
    }
    const double dot = sum_gy / sum_y;
    for (int64_t k = 0; k < d; ++k) {
      const int64_t j = off + k * inner;
      gx[j] = log ? static_cast<float>(gy[j] - exp(static_cast<double>(y[j])) * sum_g)
                  : static_cast<float>(y[j] * (gy[j] - dot));
    }
  }
}

// y, gy [rows, D] -> gx, one warp per row (the attention's [B, heads, T, T]
// scores took a thread per row 50 us on an H200); the sums in double, folded
// across the warp in a fixed order
__global__ void softmax_backward_rows_kernel(bool log, int64_t rows, int64_t d, const float* y,
                                             const float* gy, float* gx) {
  const int lane = threadIdx.x % 32;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * kWarpsPerBlock;
  for (int64_t row = thread_index() / 32; row < rows; row += warps) {
    const int64_t off = row * d;
    double sum_g = 0, sum_gy = 0, sum_y = 0;
    for (int64_t k = lane; k < d; k += 32) {
      const double g = gy[off + k], yk = y[off + k];
      sum_g += g;
      sum_gy += g * yk;
      sum_y += yk;
    }
    sum_g = warp_sum(sum_g), sum_gy = warp_sum(sum_gy), sum_y = warp_sum(sum_y);
    const double dot = sum_gy / sum_y;
    for (int64_t k = lane; k < d; k += 32) {
      const int64_t j = off + k;
      gx[j] = log ? static_cast<float>(gy[j] - exp(static_cast<double>(y[j])) * sum_g)
                  : static_cast<float>(y[j] * (gy[j] - dot));
    }
  }
}

// x [rows, S] -> y, softmax(x * scale) over each row's first n columns (n = S,
// or i + 1 for row i = r % causal of a causal stack), 0 beyond; one warp per row
__global__ void scaled_softmax_kernel(float scale, int64_t causal, int64_t rows, int64_t s,
                                      const float* x, float* y) {
  const int lane = threadIdx.x % 32;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * kWarpsPerBlock;
  for (int64_t row = thread_index() / 32; row < rows; row += warps) {
    const float* xr = x + row * s;
    float* yr = y + row * s;
    const int64_t i = causal > 0 ? row % causal + 1 : s, n = i < s ? i : s;
    float m = -INFINITY;
    for (int64_t k = lane; k < n; k += 32) m = fmaxf(m, xr[k] * scale);
    m = warp_max(m);
    float sum = 0.f;
    for (int64_t k = lane; k < n; k += 32) sum += expf(xr[k] * scale - m);
    const float log_s = logf(warp_sum(sum));
    for (int64_t k = lane; k < s; k += 32) yr[k] = k < n ? expf((xr[k] * scale - m) - log_s) : 0.f;
  }
}

// y, gy [rows, S] -> gx = softmax's backward * scale over each row's first n
// columns, 0 beyond; one warp per row, the sums in double in a fixed order
__global__ void scaled_softmax_backward_kernel(float scale, int64_t causal, int64_t rows,
                                               int64_t s, const float* y, const float* gy,
                                               float* gx) {
  const int lane = threadIdx.x % 32;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * kWarpsPerBlock;
  for (int64_t row = thread_index() / 32; row < rows; row += warps) {
    const int64_t off = row * s, i = causal > 0 ? row % causal + 1 : s, n = i < s ? i : s;
    double sum_gy = 0, sum_y = 0;
    for (int64_t k = lane; k < n; k += 32) {
      sum_gy += static_cast<double>(gy[off + k]) * y[off + k];
      sum_y += y[off + k];
    }
    sum_gy = warp_sum(sum_gy), sum_y = warp_sum(sum_y);
    const double dot = sum_gy / sum_y;
    for (int64_t k = lane; k < s; k += 32)
      gx[off + k] = k < n ? static_cast<float>(y[off + k] * (gy[off + k] - dot)) * scale : 0.f;
  }
}

}  // namespace

void reduce(ReduceOp op, int64_t outer, int64_t r, int64_t inner, const float* x, float* out) {
  if (outer * inner == 0) return;
  if (op == ReduceOp::Sum) return reduce_as<ReduceOp::Sum>(outer, r, inner, x, out);
  reduce_as<ReduceOp::Max>(outer, r, inner, x, out);
}

void max_backward(int64_t outer, int64_t r, int64_t inner, const float* x, const float* m,
                  const float* g, float* gx) {
  if (outer * r * inner == 0) return;
  const int64_t threads = inner == 1 ? outer * 32 : outer * inner;
  max_backward_kernel<<<blocks_for(threads), kThreads, 0, stream()>>>(outer, r, inner, x, m, g,
                                                                     gx);
  CUDA_CHECK_LAUNCH();
}

void argmax(int64_t rows, int64_t cols, const float* x, int64_t* out) {
  if (rows == 0) return;
  argmax_kernel<<<blocks_for(rows * 32), kThreads, 0, stream()>>>(rows, cols, x, out);
  CUDA_CHECK_LAUNCH();
}

void softmax(bool log, int64_t outer, int64_t d, int64_t inner, const float* x, float* y) {
  if (outer * d * inner == 0) return;
  if (inner == 1) {
    softmax_rows_kernel<<<blocks_for(outer * 32), kThreads, 0, stream()>>>(log, outer, d, x, y);
  } else {
    softmax_columns_kernel<<<blocks_for(outer * inner), kThreads, 0, stream()>>>(log, outer, d,
                                                                                 inner, x, y);
  }
  CUDA_CHECK_LAUNCH();
}

void softmax_backward(bool log, int64_t outer, int64_t d, int64_t inner, const float* y,
                      const float* gy, float* gx) {
  if (outer * d * inner == 0) return;
  if (inner == 1)
    softmax_backward_rows_kernel<<<blocks_for(outer * 32), kThreads, 0, stream()>>>(log, outer, d,
                                                                                    y, gy, gx);
  else
    softmax_backward_kernel<<<blocks_for(outer * inner), kThreads, 0, stream()>>>(log, outer, d,
                                                                                  inner, y, gy, gx);
  CUDA_CHECK_LAUNCH();
}

void scaled_softmax(float scale, int64_t causal, int64_t rows, int64_t s, const float* x, float* y) {
  if (rows * s == 0) return;
  scaled_softmax_kernel<<<blocks_for(rows * 32), kThreads, 0, stream()>>>(scale, causal, rows, s,
                                                                          x, y);
  CUDA_CHECK_LAUNCH();
}

void scaled_softmax_backward(float scale, int64_t causal, int64_t rows, int64_t s, const float* y,
                             const float* gy, float* gx) {
  if (rows * s == 0) return;
  scaled_softmax_backward_kernel<<<blocks_for(rows * 32), kThreads, 0, stream()>>>(
      scale, causal, rows, s, y, gy, gx);
  CUDA_CHECK_LAUNCH();
}

}  // namespace minidl::cuda
