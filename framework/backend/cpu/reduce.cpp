// CPU kernels for the table's reductions and softmax: reduce, argmax,
// softmax and its backward (see backend/kernels.h).
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "framework/backend/cpu/cpu.h"
#include "framework/backend/cpu/dispatch.h"
#include "framework/backend/cpu/vec_math.h"

namespace minidl::cpu {

// x [outer, R, inner] -> out [outer, inner]. Along a row (inner 1) a sum
// runs in 16 lanes (OpenMP's simd reduction) and a max in vec::max_of.
MINIDL_CLONES void reduce(ReduceOp op, int64_t outer, int64_t r, int64_t inner, const float* x,
                          float* out) {
  const bool sum = op == ReduceOp::Sum;
  if (inner == 1) {
#pragma omp parallel for if (outer * r > 65536 && outer > 1)
    for (int64_t o = 0; o < outer; ++o) {
      const float* row = x + o * r;
      float acc = 0;
      if (sum) {
#pragma omp simd reduction(+ : acc)
        for (int64_t k = 0; k < r; ++k) acc += row[k];
      }
      out[o] = sum ? acc : r > 0 ? vec::max_of(row, r) : -std::numeric_limits<float>::infinity();
    }
    return;
  }
  std::fill(out, out + outer * inner, sum ? 0.f : -std::numeric_limits<float>::infinity());
#pragma omp parallel for if (outer * r * inner > 65536 && outer > 1)
  for (int64_t o = 0; o < outer; ++o) {
    float* dst = out + o * inner;
    for (int64_t k = 0; k < r; ++k) {
      const float* src = x + (o * r + k) * inner;
      if (sum) {
#pragma omp simd
        for (int64_t i = 0; i < inner; ++i) dst[i] += src[i];
      } else {
#pragma omp simd
        for (int64_t i = 0; i < inner; ++i) dst[i] = vec::max2(dst[i], src[i]);
      }
    }
  }
}

// x [outer, R, inner], m, g [outer, inner] -> gx = (x == m) * (g / ties).
// A row (inner 1) is read twice while it is in L1: its ties, then gx; a
// slab [R, inner] counts the ties of its columns side by side first. The
// counts are whole numbers, so their order leaves them exact.
MINIDL_CLONES void max_backward(int64_t outer, int64_t r, int64_t inner, const float* x,
                                const float* m, const float* g, float* gx) {
  auto hit = [](float a, float b) { return a == b ? 1.f : 0.f; };
  if (inner == 1) {
#pragma omp parallel for if (outer * r > 65536 && outer > 1)
    for (int64_t o = 0; o < outer; ++o) {
      const float* __restrict row = x + o * r;
      float* __restrict out = gx + o * r;
      const float mo = m[o];
      float ties = 0;
#pragma omp simd reduction(+ : ties)
      for (int64_t k = 0; k < r; ++k) ties += hit(row[k], mo);
      const float q = g[o] / ties;
      for (int64_t k = 0; k < r; ++k) out[k] = hit(row[k], mo) * q;
    }
    return;
  }
#pragma omp parallel for if (outer * r * inner > 65536 && outer > 1)
  for (int64_t o = 0; o < outer; ++o) {
    thread_local std::vector<float> q;
    q.assign(inner, 0.f);  // ties, then g / ties
    const float* __restrict mo = m + o * inner;
    for (int64_t k = 0; k < r; ++k) {
      const float* __restrict src = x + (o * r + k) * inner;
      for (int64_t i = 0; i < inner; ++i) q[i] += hit(src[i], mo[i]);
    }
    for (int64_t i = 0; i < inner; ++i) q[i] = g[o * inner + i] / q[i];
    for (int64_t k = 0; k < r; ++k) {
      const float* __restrict src = x + (o * r + k) * inner;
      float* __restrict dst = gx + (o * r + k) * inner;
      for (int64_t i = 0; i < inner; ++i) dst[i] = hit(src[i], mo[i]) * q[i];
    }
  }
}

// x [rows, cols] -> out [rows]
void argmax(int64_t rows, int64_t cols, const float* x, int64_t* out) {
  for (int64_t i = 0; i < rows; ++i)
    out[i] = std::max_element(x + i * cols, x + (i + 1) * cols) - (x + i * cols);
}

// x, y [D] -> softmax (log: log_softmax) of the row; lse = log(sum(e^x))
// unless null. Max, then e = e^(x - max) with its sum s in double, then y =
// e / s, or (x - max) - log(s): not x - (max + log(s)), which rounds to max's
// precision (0.001 at 1e4) and would shift every output by that error. The
// log only where wanted: on a row of 16 it was half a softmax's time.
MINIDL_CLONES void softmax_row(bool log, int64_t d, const float* x, float* y, double* lse) {
  const float m = vec::max_of(x, d);
  double s = 0;
#pragma omp simd reduction(+ : s)
  for (int64_t k = 0; k < d; ++k) s += y[k] = vec::exp_or_zero(x[k] - m);
  const double log_s = log || lse ? std::log(s) : 0;
  if (lse) *lse = m + log_s;
  if (log) {
#pragma omp simd
    for (int64_t k = 0; k < d; ++k) y[k] = (x[k] - m) - static_cast<float>(log_s);
  } else {
    const auto inv = static_cast<float>(1 / s);
#pragma omp simd
    for (int64_t k = 0; k < d; ++k) y[k] *= inv;
  }
}

// x, y [D, inner], columns [0, w) of rows `stride` apart (w <= kSoftmaxSlab)
// -> the same per column as softmax_row, each step a vector across the
// columns; lse [w] unless null
MINIDL_CLONES void softmax_slab(bool log, int64_t d, int64_t stride, int64_t w, const float* x,
                                float* y, double* lse) {
  float m[kSoftmaxSlab], last[kSoftmaxSlab];  // last: log(s) or 1 / s
  double s[kSoftmaxSlab] = {};
  std::copy(x, x + w, m);
  for (int64_t k = 1; k < d; ++k) {
    const float* xk = x + k * stride;
#pragma omp simd
    for (int64_t j = 0; j < w; ++j) m[j] = vec::max2(m[j], xk[j]);
  }
  for (int64_t k = 0; k < d; ++k) {
    const float* xk = x + k * stride;
    float* yk = y + k * stride;
#pragma omp simd
    for (int64_t j = 0; j < w; ++j) s[j] += yk[j] = vec::exp_or_zero(xk[j] - m[j]);
  }
  for (int64_t j = 0; j < w; ++j) {
    const double log_s = log || lse ? std::log(s[j]) : 0;
    last[j] = static_cast<float>(log ? log_s : 1 / s[j]);
    if (lse) lse[j] = m[j] + log_s;
  }
  for (int64_t k = 0; k < d; ++k) {
    const float* xk = x + k * stride;
    float* yk = y + k * stride;
    if (log) {
#pragma omp simd
      for (int64_t j = 0; j < w; ++j) yk[j] = (xk[j] - m[j]) - last[j];
    } else {
#pragma omp simd
      for (int64_t j = 0; j < w; ++j) yk[j] *= last[j];
    }
  }
}

namespace {

constexpr int64_t kSlab = kSoftmaxSlab;

// y, gy, gx [D] -> softmax_backward of the row (sums in double)
MINIDL_CLONES void softmax_backward_row(bool log, int64_t d, const float* y, const float* gy,
                                        float* gx) {
  double sum_g = 0, sum_gy = 0, sum_y = 0;
#pragma omp simd reduction(+ : sum_g, sum_gy, sum_y)
  for (int64_t k = 0; k < d; ++k) {
    sum_g += gy[k];
    sum_gy += double(gy[k]) * y[k];
    sum_y += y[k];
  }
  const double dot = sum_gy / sum_y;
  if (log) {
#pragma omp simd
    for (int64_t k = 0; k < d; ++k)
      gx[k] = static_cast<float>(gy[k] - double(vec::exp_or_zero(y[k])) * sum_g);
  } else {
#pragma omp simd
    for (int64_t k = 0; k < d; ++k) gx[k] = static_cast<float>(y[k] * (gy[k] - dot));
  }
}

// y, gy, gx [D, inner], columns [0, w) of rows `stride` apart -> the same
// per column as softmax_backward_row
MINIDL_CLONES void softmax_backward_slab(bool log, int64_t d, int64_t stride, int64_t w,
                                         const float* y, const float* gy, float* gx) {
  double sum_g[kSlab] = {}, sum_gy[kSlab] = {}, sum_y[kSlab] = {};
  for (int64_t k = 0; k < d; ++k) {
    const float *yk = y + k * stride, *gk = gy + k * stride;
#pragma omp simd
    for (int64_t j = 0; j < w; ++j) {
      sum_g[j] += gk[j];
      sum_gy[j] += double(gk[j]) * yk[j];
      sum_y[j] += yk[j];
    }
  }
  for (int64_t j = 0; j < w; ++j) sum_gy[j] /= sum_y[j];  // the dot
  for (int64_t k = 0; k < d; ++k) {
    const float *yk = y + k * stride, *gk = gy + k * stride;
    float* out = gx + k * stride;
    if (log) {
#pragma omp simd
      for (int64_t j = 0; j < w; ++j)
        out[j] = static_cast<float>(gk[j] - double(vec::exp_or_zero(yk[j])) * sum_g[j]);
    } else {
#pragma omp simd
      for (int64_t j = 0; j < w; ++j) out[j] = static_cast<float>(yk[j] * (gk[j] - sum_gy[j]));
    }
  }
}

// Calls f(offset, w) for each row (inner == 1: offset o * D, w = 1) or slab
// of up to kSlab columns of [outer, D, inner], in parallel
template <class F>
void for_each_slab(int64_t outer, int64_t d, int64_t inner, F f) {
  const int64_t slabs = (inner + kSlab - 1) / kSlab, items = outer * slabs;
#pragma omp parallel for if (outer * d * inner > 65536 && items > 1)
  for (int64_t it = 0; it < items; ++it) {
    const int64_t o = it / slabs, j0 = it % slabs * kSlab;
    f(o * d * inner + j0, std::min(kSlab, inner - j0));
  }
}

// Rows of at most kShortRow go kSlab at a time through transposed copies
// [D, kSlab], so that the slab functions' vectors run across rows. Row by row,
// a row's fixed work (its max's and sums' reductions) outweighs the row's:
// softmax forward and backward on rows of 16 took 2.0 ms against the blocks'
// 1.4, on rows of 4 6.2-7.0 against 3.0-3.5 (262,144 elements, one thread,
// 2026-11-29); from 24 they tie, and at 48 and 64 row by row is faster.
constexpr int64_t kShortRow = 16;

// Calls f(row0, w, buffer) for blocks of up to kSlab rows of [rows, D] (D <=
// kShortRow), in parallel; buffer: the thread's, three [D, kSlab]
template <class F>
void for_each_row_block(int64_t rows, int64_t d, F f) {
  const int64_t blocks = (rows + kSlab - 1) / kSlab;
#pragma omp parallel if (rows * d > 65536 && blocks > 1)
  {
    std::vector<float> buffer(3 * d * kSlab);
#pragma omp for
    for (int64_t b = 0; b < blocks; ++b)
      f(b * kSlab, std::min(kSlab, rows - b * kSlab), buffer.data());
  }
}

}  // namespace

// x [outer, D, inner] -> y
void softmax(bool log, int64_t outer, int64_t d, int64_t inner, const float* x, float* y) {
  if (inner == 1 && d <= kShortRow) {
    for_each_row_block(outer, d, [&](int64_t r0, int64_t w, float* buffer) {
      float *xt = buffer, *yt = buffer + d * w;
      transpose(x + r0 * d, w, d, xt);  // [w, D] -> [D, w]
      softmax_slab(log, d, w, w, xt, yt);
      transpose(yt, d, w, y + r0 * d);
    });
    return;
  }
  for_each_slab(outer, d, inner, [&](int64_t at, int64_t w) {
    if (inner == 1) softmax_row(log, d, x + at, y + at);
    else softmax_slab(log, d, inner, w, x + at, y + at);
  });
}

// y, gy [outer, D, inner] -> gx. Softmax's sum(gy * y) is taken over sum(y)
// (1 up to the rounding of y): the float32 probabilities' own errors then move
// each gx[k] by its own relative size only, where a near-one probability's
// rounding would otherwise shift every gx of the row by a few 1e-8.
void softmax_backward(bool log, int64_t outer, int64_t d, int64_t inner, const float* y,
                      const float* gy, float* gx) {
  if (inner == 1 && d <= kShortRow) {
    for_each_row_block(outer, d, [&](int64_t r0, int64_t w, float* buffer) {
      float *yt = buffer, *gt = buffer + d * w, *xt = buffer + 2 * d * w;
      transpose(y + r0 * d, w, d, yt);
      transpose(gy + r0 * d, w, d, gt);
      softmax_backward_slab(log, d, w, w, yt, gt, xt);
      transpose(xt, d, w, gx + r0 * d);
    });
    return;
  }
  for_each_slab(outer, d, inner, [&](int64_t at, int64_t w) {
    if (inner == 1) softmax_backward_row(log, d, y + at, gy + at, gx + at);
    else softmax_backward_slab(log, d, inner, w, y + at, gy + at, gx + at);
  });
}

// x [rows, S] -> y: row r's first n columns (n = S, or i + 1 for row i = r %
// causal of a causal stack) in softmax(x * scale), the rest 0. e^(v - max)
// by vec::exp_or_zero (vectorized), summed in double, then scaled by 1 / sum.
MINIDL_CLONES void scaled_softmax(float scale, int64_t causal, int64_t rows, int64_t s,
                                  const float* x, float* y) {
#pragma omp parallel for if (rows * s > 65536)
  for (int64_t r = 0; r < rows; ++r) {
    const float* xs = x + r * s;
    float* ys = y + r * s;
    const int64_t n = causal > 0 ? std::min(s, r % causal + 1) : s;
    float m = xs[0] * scale;  // max(x) * scale where scale > 0 (rounding keeps the order)
    if (scale > 0) m = vec::max_of(xs, n) * scale;
    else
      for (int64_t k = 1; k < n; ++k) m = std::max(m, xs[k] * scale);
    double sum = 0;
#pragma omp simd reduction(+ : sum)
    for (int64_t k = 0; k < n; ++k) sum += ys[k] = vec::exp_or_zero(xs[k] * scale - m);
    const auto inv = static_cast<float>(1 / sum);
#pragma omp simd
    for (int64_t k = 0; k < n; ++k) ys[k] *= inv;
    std::fill(ys + n, ys + s, 0.f);
  }
}

// y, gy [rows, S] -> gx = softmax_backward(y, gy) * scale over each row's
// first n columns (as in scaled_softmax), 0 beyond
MINIDL_CLONES void scaled_softmax_backward(float scale, int64_t causal, int64_t rows, int64_t s,
                                           const float* y, const float* gy, float* gx) {
#pragma omp parallel for if (rows * s > 65536)
  for (int64_t r = 0; r < rows; ++r) {
    const float *ys = y + r * s, *gs = gy + r * s;
    float* out = gx + r * s;
    const int64_t n = causal > 0 ? std::min(s, r % causal + 1) : s;
    double sum_gy = 0, sum_y = 0;
    for (int64_t k = 0; k < n; ++k) {
      sum_gy += double(gs[k]) * ys[k];
      sum_y += ys[k];
    }
    const double dot = sum_gy / sum_y;
    for (int64_t k = 0; k < n; ++k) out[k] = static_cast<float>(ys[k] * (gs[k] - dot)) * scale;
    std::fill(out + n, out + s, 0.f);
  }
}

}  // namespace minidl::cpu
