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

// Rows up to this long sum their e^x in float32 lanes (Sum below): at most
// 8 additions each, within 1e-7 or so of the sum in double, which cost a
// third of a row of 16's time (four conversions a chunk)
constexpr int64_t kFloatSum = 64;

// x, y [D] -> softmax (log: log_softmax) of the row x * scale; lse =
// log(sum(e^(x * scale))) unless null. Max, then e = e^(x - max) with its
// sum s (Sum: vec::SumF32 or vec::SumF64), then y = e / s, or (x - max) -
// log(s): not x - (max + log(s)), which rounds to max's precision (0.001 at
// 1e4) and would shift every output by that error. The log only where
// wanted. In chunks of eight (vec::F32x8, the last as vec::load_last's),
// each reduction's lanes combined in registers. The last chunk's outputs are
// computed before the whole chunks' are stored and stored after them, so
// that y may be x. Always inlined into loops over rows: a call per row of 16
// took as long again, its constants reloaded each time.
template <class Sum>
MINIDL_LANES void softmax_lanes(bool log, int64_t d, const float* x, float* y, double* lse,
                                float scale) {
  const int64_t whole = d / 8 * 8;
  const bool part = whole < d;
  const auto m = vec::splat<vec::F32x8>(vec::max_of(x, d, scale));
  Sum s;
  vec::F32x8 last_x{}, last_e{};
  if (part) {
    last_x = vec::load_last(x, d) * scale - m;
    last_e = vec::exp_or_zero(last_x);
    s.add(vec::new_lanes(last_e, d));
  }
  for (int64_t k = 0; k < whole; k += 8) {
    const vec::F32x8 e = vec::exp_or_zero(vec::load8(x + k) * scale - m);
    s.add(e);
    if (!log) vec::store8(y + k, e);
  }
  const double sum = s.total(), log_s = log || lse ? std::log(sum) : 0;
  if (lse) *lse = m[0] + log_s;
  const auto c = static_cast<float>(log ? log_s : 1 / sum);
  for (int64_t k = 0; k < whole; k += 8)
    vec::store8(y + k, log ? (vec::load8(x + k) * scale - m) - c : vec::load8(y + k) * c);
  if (part) vec::store_last(y, d, log ? last_x - c : last_e * c);
}

MINIDL_LANES void softmax_row(bool log, int64_t d, const float* x, float* y, double* lse,
                              float scale) {
  if (d <= kFloatSum)
    softmax_lanes<vec::SumF32>(log, d, x, y, lse, scale);
  else
    softmax_lanes<vec::SumF64>(log, d, x, y, lse, scale);
}

// x [rows, D] -> y: softmax_row of each row, y's rows y_stride apart
MINIDL_CLONES void softmax_rows(bool log, int64_t rows, int64_t d, const float* x, float* y,
                                int64_t y_stride, double* lse, float scale) {
  for (int64_t r = 0; r < rows; ++r)
    softmax_row(log, d, x + r * d, y + r * y_stride, lse ? lse + r : nullptr, scale);
}

// x, y [D, inner], columns [0, w) of rows `stride` apart (w <= kSoftmaxSlab)
// -> the same per column as softmax_lanes, each step a vector across the
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

// y, gy, gx [D] -> softmax_backward of the row, times scale, in chunks of
// eight as softmax_lanes's; gx may be gy. The sums in double (see
// kernels.h), then c = hi + lo in two floats, and gx in float32: softmax's
// gy - c as (gy - hi) - lo, exact where gy and hi are close (the
// cancellation) and elsewhere rounded relative to the result, so within a
// few roundings of its float64 value; log_softmax's gy - e^y c as (gy - e^y
// hi) - e^y lo, whose float32 product adds a rounding to the one e^y has
// anyway. In double lanes the outputs took 30-60% longer (rows of 1000).
MINIDL_LANES void softmax_backward_lanes(bool log, int64_t d, const float* y, const float* gy,
                                         float* gx, float scale) {
  const int64_t whole = d / 8 * 8;
  const bool part = whole < d;
  vec::SumF64 sum_g, sum_gy, sum_y;  // log: sum(gy); else sum(gy * y) and sum(y)
  // (always inlined, as vec_math.h's F32x8 functions: a lambda is compiled
  // for the baseline, not for this function's AVX clones)
  auto add = [&](vec::F32x8 v, vec::F32x8 g) __attribute__((always_inline)) {
    if (log) {
      sum_g.add(g);
    } else {
      sum_gy.add_product(g, v);
      sum_y.add(v);
    }
  };
  for (int64_t k = 0; k < whole; k += 8) add(vec::load8(y + k), vec::load8(gy + k));
  vec::F32x8 last_y{}, last_g{};
  if (part) {
    last_y = vec::load_last(y, d);
    last_g = vec::load_last(gy, d);
    add(vec::new_lanes(last_y, d), vec::new_lanes(last_g, d));
  }
  const double c = log ? sum_g.total() : sum_gy.total() / sum_y.total();
  const auto hi = static_cast<float>(c), lo = static_cast<float>(c - hi);
  auto out = [&](vec::F32x8 v, vec::F32x8 g) __attribute__((always_inline)) {
    if (log) {
      const vec::F32x8 e = vec::exp_or_zero(v);
      return ((g - e * hi) - e * lo) * scale;
    }
    return v * ((g - hi) - lo) * scale;
  };
  const vec::F32x8 last = part ? out(last_y, last_g) : vec::F32x8{};
  for (int64_t k = 0; k < whole; k += 8)
    vec::store8(gx + k, out(vec::load8(y + k), vec::load8(gy + k)));
  if (part) vec::store_last(gx, d, last);
}

// y, gy, gx [rows, D] -> softmax_backward_lanes of each row
MINIDL_CLONES void softmax_backward_rows(bool log, int64_t rows, int64_t d, const float* y,
                                         const float* gy, float* gx) {
  for (int64_t r = 0; r < rows; ++r)
    softmax_backward_lanes(log, d, y + r * d, gy + r * d, gx + r * d, 1.f);
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

// Calls f(offset, w) for each slab of up to kSlab columns of [outer, D,
// inner], in parallel
template <class F>
void for_each_slab(int64_t outer, int64_t d, int64_t inner, F f) {
  const int64_t slabs = (inner + kSlab - 1) / kSlab, items = outer * slabs;
#pragma omp parallel for if (outer * d * inner > 65536 && items > 1)
  for (int64_t it = 0; it < items; ++it) {
    const int64_t o = it / slabs, j0 = it % slabs * kSlab;
    f(o * d * inner + j0, std::min(kSlab, inner - j0));
  }
}

// Calls f(row0, n) for blocks of n rows of [rows, D], about 8,192 elements
// each (at most kSlab rows), in parallel. Rows shorter than a chunk of
// eight (vec::load_last's copy each time: rows of 4 took three times as
// long) go through transposed copies [D, n] instead, so that the slab
// functions' vectors run across rows.
template <class F>
void for_each_row_block(int64_t rows, int64_t d, F f) {
  const int64_t per = std::clamp<int64_t>(8192 / std::max<int64_t>(d, 1), 1, kSlab);
  const int64_t blocks = (rows + per - 1) / per;
#pragma omp parallel for if (rows * d > 65536 && blocks > 1)
  for (int64_t b = 0; b < blocks; ++b) f(b * per, std::min(per, rows - b * per));
}

}  // namespace

// x [outer, D, inner] -> y
void softmax(bool log, int64_t outer, int64_t d, int64_t inner, const float* x, float* y) {
  if (inner == 1 && d < 8) {
    for_each_row_block(outer, d, [&](int64_t r0, int64_t n) {
      float xt[7 * kSlab], yt[7 * kSlab];
      transpose(x + r0 * d, n, d, xt);  // [n, D] -> [D, n]
      softmax_slab(log, d, n, n, xt, yt);
      transpose(yt, d, n, y + r0 * d);
    });
    return;
  }
  if (inner == 1) {
    for_each_row_block(outer, d, [&](int64_t r0, int64_t n) {
      softmax_rows(log, n, d, x + r0 * d, y + r0 * d, d, nullptr, 1.f);
    });
    return;
  }
  for_each_slab(outer, d, inner,
                [&](int64_t at, int64_t w) { softmax_slab(log, d, inner, w, x + at, y + at); });
}

// y, gy [outer, D, inner] -> gx. Softmax's sum(gy * y) is taken over sum(y)
// (1 up to the rounding of y): the float32 probabilities' own errors then move
// each gx[k] by its own relative size only, where a near-one probability's
// rounding would otherwise shift every gx of the row by a few 1e-8.
void softmax_backward(bool log, int64_t outer, int64_t d, int64_t inner, const float* y,
                      const float* gy, float* gx) {
  if (inner == 1 && d < 8) {
    for_each_row_block(outer, d, [&](int64_t r0, int64_t n) {
      float yt[7 * kSlab], gt[7 * kSlab], xt[7 * kSlab];
      transpose(y + r0 * d, n, d, yt);
      transpose(gy + r0 * d, n, d, gt);
      softmax_backward_slab(log, d, n, n, yt, gt, xt);
      transpose(xt, d, n, gx + r0 * d);
    });
    return;
  }
  if (inner == 1) {
    for_each_row_block(outer, d, [&](int64_t r0, int64_t n) {
      softmax_backward_rows(log, n, d, y + r0 * d, gy + r0 * d, gx + r0 * d);
    });
    return;
  }
  for_each_slab(outer, d, inner, [&](int64_t at, int64_t w) {
    softmax_backward_slab(log, d, inner, w, y + at, gy + at, gx + at);
  });
}

// x [rows, S] -> y: row r's first n columns (n = S, or i + 1 for row i = r %
// causal of a causal stack) in softmax(x * scale), the rest 0
MINIDL_CLONES void scaled_softmax(float scale, int64_t causal, int64_t rows, int64_t s,
                                  const float* x, float* y) {
#pragma omp parallel for if (rows * s > 65536)
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t n = causal > 0 ? std::min(s, r % causal + 1) : s;
    softmax_row(false, n, x + r * s, y + r * s, nullptr, scale);
    std::fill(y + r * s + n, y + (r + 1) * s, 0.f);
  }
}

// y, gy [rows, S] -> gx = softmax_backward(y, gy) * scale over each row's
// first n columns (as in scaled_softmax), 0 beyond
MINIDL_CLONES void scaled_softmax_backward(float scale, int64_t causal, int64_t rows, int64_t s,
                                           const float* y, const float* gy, float* gx) {
#pragma omp parallel for if (rows * s > 65536)
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t n = causal > 0 ? std::min(s, r % causal + 1) : s;
    softmax_backward_lanes(false, n, y + r * s, gy + r * s, gx + r * s, scale);
    std::fill(gx + r * s + n, gx + (r + 1) * s, 0.f);
  }
}

}  // namespace minidl::cpu
