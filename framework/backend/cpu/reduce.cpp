// CPU kernels for the table's reductions and softmax: reduce, argmax,
// softmax and its backward (see backend/kernels.h).
#include <algorithm>
#include <cmath>
#include <limits>

#include "framework/backend/cpu/cpu.h"
#include "framework/backend/cpu/dispatch.h"
#include "framework/backend/cpu/vec_math.h"

namespace minidl::cpu {

// x [outer, R, inner] -> out [outer, inner]
void reduce(ReduceOp op, int64_t outer, int64_t r, int64_t inner, const float* x, float* out) {
  auto fold = [&](float init, auto f) {
    std::fill(out, out + outer * inner, init);
#pragma omp parallel for if (outer * r * inner > 65536 && outer > 1)
    for (int64_t o = 0; o < outer; ++o) {
      float* dst = out + o * inner;
      if (inner == 1) {  // along a row: in a register, in the same order
        float acc = init;
        for (int64_t k = 0; k < r; ++k) acc = f(acc, x[o * r + k]);
        dst[0] = acc;
        continue;
      }
      for (int64_t k = 0; k < r; ++k) {
        const float* src = x + (o * r + k) * inner;
        for (int64_t i = 0; i < inner; ++i) dst[i] = f(dst[i], src[i]);
      }
    }
  };
  if (op == ReduceOp::Sum) return fold(0.f, [](float a, float b) { return a + b; });
  fold(-std::numeric_limits<float>::infinity(),
       [](float a, float b) { return b > a || b != b ? b : a; });
}

// x [rows, cols] -> out [rows]
void argmax(int64_t rows, int64_t cols, const float* x, int64_t* out) {
  for (int64_t i = 0; i < rows; ++i)
    out[i] = std::max_element(x + i * cols, x + (i + 1) * cols) - (x + i * cols);
}

// x [outer, D, inner] -> y
void softmax(bool log, int64_t outer, int64_t d, int64_t inner, const float* px, float* py) {
#pragma omp parallel for collapse(2) if (outer * d * inner > 65536)
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      const float* xs = px + o * d * inner + i;
      float* ys = py + o * d * inner + i;
      float m = xs[0];
      for (int64_t k = 1; k < d; ++k) m = std::max(m, xs[k * inner]);
      double s = 0;
      for (int64_t k = 0; k < d; ++k) s += std::exp(static_cast<double>(xs[k * inner] - m));
      // (x - m) - log(s), not x - (m + log(s)): m + log(s) rounds to m's
      // precision (0.001 at 1e4) and would shift every output by that error.
      const float log_s = static_cast<float>(std::log(s));
      for (int64_t k = 0; k < d; ++k) {
        float v = (xs[k * inner] - m) - log_s;
        ys[k * inner] = log ? v : std::exp(v);
      }
    }
}

// y, gy [outer, D, inner] -> gx. Softmax's sum(gy * y) is taken over sum(y)
// (1 up to the rounding of y): the float32 probabilities' own errors then move
// each gx[k] by its own relative size only, where a near-one probability's
// rounding would otherwise shift every gx of the row by a few 1e-8.
void softmax_backward(bool log, int64_t outer, int64_t d, int64_t inner, const float* y,
                      const float* gy, float* gx) {
#pragma omp parallel for collapse(2) if (outer * d * inner > 65536)
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      const int64_t first = o * d * inner + i;
      const float *ys = y + first, *gs = gy + first;
      float* out = gx + first;
      double sum_g = 0, sum_gy = 0, sum_y = 0;
      for (int64_t k = 0; k < d; ++k) {
        const double g = gs[k * inner], yk = ys[k * inner];
        sum_g += g;
        sum_gy += g * yk;
        sum_y += yk;
      }
      const double dot = sum_gy / sum_y;
      for (int64_t k = 0; k < d; ++k) {
        const int64_t j = k * inner;
        out[j] = log ? static_cast<float>(gs[j] - std::exp(double(ys[j])) * sum_g)
                     : static_cast<float>(ys[j] * (gs[j] - dot));
      }
    }
}

// x [rows, S] -> y: row r's first n columns (n = S, or i + 1 for row i = r %
// causal of a causal stack) in softmax(x * scale), the rest 0. e^(v - max)
// by vec::exp (vectorized), summed in double, then scaled by 1 / sum.
MINIDL_CLONES void scaled_softmax(float scale, int64_t causal, int64_t rows, int64_t s,
                                  const float* x, float* y) {
#pragma omp parallel for if (rows * s > 65536)
  for (int64_t r = 0; r < rows; ++r) {
    const float* xs = x + r * s;
    float* ys = y + r * s;
    const int64_t n = causal > 0 ? std::min(s, r % causal + 1) : s;
    float m = xs[0] * scale;
#pragma omp simd reduction(max : m)
    for (int64_t k = 1; k < n; ++k) m = std::max(m, xs[k] * scale);
    double sum = 0;
#pragma omp simd reduction(+ : sum)
    for (int64_t k = 0; k < n; ++k) sum += ys[k] = vec::exp(xs[k] * scale - m);
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
