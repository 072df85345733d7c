// Float32 e^x, log x, e^x - 1, the normal CDF, sigmoid and tanh in plain
// arithmetic, so that a loop over them vectorizes (glibc's expf, logf, erff
// and tanhf are scalar calls: a fifth of a tiny_gpt step on the CPU went to
// erff, of a char_lstm step to tanhf and its expm1f). The CPU's exp and log
// ops, its activations and the LSTM and GRU cells use them; CUDA's keep the
// device's own functions.
#pragma once
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "framework/backend/activations.h"

namespace minidl::cpu::vec {

// Eight floats in one vector register (GCC's vector extension: one AVX
// register, two SSE ones in the baseline build), for a loop along a short
// row, where OpenMP's simd loops spent more time on their reductions'
// set-up and their horizontal steps through memory than on the row: see
// reduce.cpp's softmax rows. exp_parts, two_to, exp_or_zero and max2 take
// a float or an F32x8, with the same steps lane by lane. (GCC notes, in
// each file that includes this one, that an F32x8 passed by value in the
// baseline build has another ABI than with AVX: silenced, since no call
// crosses the two, as below.)
#pragma GCC diagnostic ignored "-Wpsabi"
//
// Every function that takes or gives an F32x8 is always inlined: one left
// out of line would be compiled for the baseline while an AVX caller passes
// its vectors in AVX registers (a crash in a test program at -O2, and at
// -O0 a lambda taking F32x8s computed garbage). Lambdas that take them say
// __attribute__((always_inline)).
#define MINIDL_LANES [[gnu::always_inline]] inline
using F32x8 = float __attribute__((vector_size(32)));
using I32x8 = int32_t __attribute__((vector_size(32)));
using U32x8 = uint32_t __attribute__((vector_size(32)));
using F64x4 = double __attribute__((vector_size(32)));

// cond ? a : b, both already computed, by bit operations (act::pick, which
// the CPU and CUDA activations share). With a plain ?: the compiler computes
// an operand only on its side, and since floating-point operations may trap
// it cannot run both: the loop then does not vectorize. Lane by lane for
// F32x8, cond a comparison's mask.
inline float select(bool cond, float a, float b) { return act::pick(cond, a, b); }
MINIDL_LANES F32x8 select(I32x8 cond, F32x8 a, F32x8 b) { return cond ? a : b; }

// c in every lane of V (float or F32x8)
template <class V>
MINIDL_LANES V splat(float c) {
  return V{} + c;
}

// A float's bits and back, as uint32_t or U32x8
inline uint32_t bits(float x) { return std::bit_cast<uint32_t>(x); }
MINIDL_LANES U32x8 bits(F32x8 x) { return std::bit_cast<U32x8>(x); }
inline float from_bits(uint32_t b) { return std::bit_cast<float>(b); }
MINIDL_LANES F32x8 from_bits(U32x8 b) { return std::bit_cast<F32x8>(b); }

// e^x's two factors: x = n ln2 + r with |r| <= ln2 / 2 (ln2 in two parts,
// Cody and Waite), e^r by its Taylor polynomial to r^7, and n, rounded by
// adding and removing 1.5 * 2^23, kept as n + 1.5 * 2^23 (whose low bits
// hold n as an integer).
template <class V>
struct ExpParts {
  V shifted_n, e_r;
};
template <class V>
MINIDL_LANES ExpParts<V> exp_parts(V x) {
  const V n = (x * 1.44269504f + 12582912.f) - 12582912.f;
  const V r = (x - n * 0.693145752f) - n * 1.42860677e-6f;
  const V p = ((((((1.f / 5040 * r + 1.f / 720) * r + 1.f / 120) * r + 1.f / 24) * r +
                  1.f / 6) * r + 0.5f) * r + 1.f) * r + 1.f;
  return {n + 12582912.f, p};
}

// 2^n for n in [-126, 127], from exp_parts' shifted n (unsigned arithmetic:
// an n out of range gives a wrong power, never undefined behaviour)
template <class V>
MINIDL_LANES V two_to(V shifted_n) {
  const auto n = bits(shifted_n) - 0x4B400000u;
  return from_bits((n + 127u) << 23);
}

// e^x, within 1e-7 relative of e^x for x in [-87, 88]; +inf above 88.73,
// the subnormals below -87.3 and 0 below -104 (inputs are clamped to
// [-104, 89] first), NaN kept: e^r 2^n as e^r 2^(n/2) 2^(n - n/2), so that
// n may pass the exponent's range.
inline float exp(float x) {
  x = select(x < -104.f, -104.f, select(x > 89.f, 89.f, x));
  const ExpParts<float> e = exp_parts(x);
  const int32_t n = std::bit_cast<int32_t>(e.shifted_n) - 0x4B400000;
  const int32_t half = n / 2;
  auto power = [](int32_t k) { return std::bit_cast<float>(static_cast<uint32_t>(k + 127) << 23); };
  return e.e_r * power(half) * power(n - half);
}

// log x for every float: x = m 2^k with m in [sqrt(1/2), sqrt(2)) (a
// subnormal x scaled by 2^23 first), log x = k ln2 + 2 atanh(t), t = (m - 1)
// / (m + 1), |t| <= 0.172, by its odd series to t^11 (the next term is below
// 1e-10 of it), ln2 in two parts as exp's. 0 gives -inf, +inf +inf, a
// negative x or NaN NaN.
inline float log(float x) {
  const bool tiny = x < 1.17549435e-38f;  // subnormal (0 and negatives are chosen below)
  const int32_t bits = std::bit_cast<int32_t>(select(tiny, x * 8388608.f, x));
  const int32_t k = (bits - 0x3f3504f3) >> 23;  // 0x3f3504f3: sqrt(1/2)
  const float m = std::bit_cast<float>(bits - k * (1 << 23));
  const float t = (m - 1.f) / (m + 1.f), t2 = t * t;
  const float s = 2.f * t * (1.f + t2 * (1.f / 3 + t2 * (1.f / 5 + t2 * (1.f / 7 + t2 * (1.f / 9 +
                  t2 * (1.f / 11))))));
  const float kf = static_cast<float>(k) - select(tiny, 23.f, 0.f);
  const float r = kf * 0.693145752f + (s + kf * 1.42860677e-6f);
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  return select((x > 0.f) & (x < inf), r, select(x == 0.f, -inf, select(x == inf, inf, nan)));
}

// e^x, with x above 88 taken as 88, and 0 below -87 (where e^x < 1.7e-38):
// a softmax's -inf entries (masked out) give exact zeros. Over [-87, 88] it
// equals exp(x) bit for bit, in fewer steps: 2^n in one scaling (n stays in
// the exponent's range there), one clamp. NaN kept.
template <class V>
MINIDL_LANES V exp_or_zero(V x) {
  const ExpParts<V> e = exp_parts(select(x > 88.f, splat<V>(88.f), x));
  return select(x < -87.f, splat<V>(0.f), e.e_r * two_to(e.shifted_n));
}

// The larger of a and b, NaN from either side, by select (vectorizes)
template <class V>
MINIDL_LANES V max2(V a, V b) {
  return select((b > a) | (b != b), b, a);
}

// Eight floats at p, and back
MINIDL_LANES F32x8 load8(const float* p) {
  F32x8 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
MINIDL_LANES void store8(float* p, F32x8 v) { std::memcpy(p, &v, sizeof v); }

// A row x [D] goes by whole chunks of eight, then, where D % 8 != 0, a last
// chunk: the eight ending at D when D >= 8 (its first 8 - D % 8 lanes repeat
// the chunk before, which a max takes twice harmlessly and a store writes
// with the same values), else x[0, D) padded with x[0]. Element by element
// into a vector, a row of 10 took ten times a row of 16.
MINIDL_LANES F32x8 load_last(const float* x, int64_t d) {
  if (d >= 8) return load8(x + d - 8);
  float t[8];
  std::fill(t, t + 8, x[0]);
  std::copy(x, x + d, t);
  return load8(t);
}
MINIDL_LANES void store_last(float* x, int64_t d, F32x8 v) {
  if (d >= 8) return store8(x + d - 8, v);
  float t[8];
  store8(t, v);
  std::copy(t, t + d, x);
}
// v with the last chunk's repeated or padding lanes set to 0, for a sum
MINIDL_LANES F32x8 new_lanes(F32x8 v, int64_t d) {
  const I32x8 lane = {0, 1, 2, 3, 4, 5, 6, 7};
  const auto n = static_cast<int32_t>(d % 8);
  return select(d >= 8 ? lane >= 8 - n : lane < n, v, F32x8{});
}

// The max (sum) of v's lanes in every lane: three exchanges of halves, in
// registers
MINIDL_LANES F32x8 all_max(F32x8 v) {
  v = max2(v, __builtin_shufflevector(v, v, 4, 5, 6, 7, 0, 1, 2, 3));
  v = max2(v, __builtin_shufflevector(v, v, 2, 3, 0, 1, 6, 7, 4, 5));
  return max2(v, __builtin_shufflevector(v, v, 1, 0, 3, 2, 5, 4, 7, 6));
}
MINIDL_LANES F32x8 all_sum(F32x8 v) {
  v += __builtin_shufflevector(v, v, 4, 5, 6, 7, 0, 1, 2, 3);
  v += __builtin_shufflevector(v, v, 2, 3, 0, 1, 6, 7, 4, 5);
  return v + __builtin_shufflevector(v, v, 1, 0, 3, 2, 5, 4, 7, 6);
}

// An F32x8's first (low) and last (high) four lanes in double
MINIDL_LANES F64x4 low(F32x8 v) {
  return __builtin_convertvector(__builtin_shufflevector(v, v, 0, 1, 2, 3), F64x4);
}
MINIDL_LANES F64x4 high(F32x8 v) {
  return __builtin_convertvector(__builtin_shufflevector(v, v, 4, 5, 6, 7), F64x4);
}

// A running sum of F32x8s in eight float lanes (SumF32) or in double, in
// four lanes (SumF64)
struct SumF32 {
  F32x8 lanes{};
  MINIDL_LANES void add(F32x8 v) { lanes += v; }
  MINIDL_LANES double total() const { return all_sum(lanes)[0]; }
};
struct SumF64 {
  F64x4 lanes{};
  MINIDL_LANES void add(F32x8 v) { lanes += low(v) + high(v); }
  MINIDL_LANES void add_product(F32x8 a, F32x8 b) {  // a * b, exact in double
    lanes += low(a) * low(b) + high(a) * high(b);
  }
  MINIDL_LANES double total() const { return (lanes[0] + lanes[2]) + (lanes[1] + lanes[3]); }
};

// max of x[0..n) * scale, n >= 1, NaN if any: two running F32x8 maxima
// (two chains of max2), the last chunk as load_last's, combined by all_max.
// Neither a max reduction nor std::max vectorizes (GCC keeps their order,
// for NaN); max2 does. A chain of 15 scalar max2 took 80 ns a call, most of
// a 21-wide softmax row's time.
MINIDL_LANES float max_of(const float* x, int64_t n, float scale = 1.f) {
  const int64_t whole = n / 8 * 8;
  F32x8 m = splat<F32x8>(x[0] * scale), m2 = m;
  int64_t k = 0;
  for (; k + 16 <= whole; k += 16) {
    m = max2(m, load8(x + k) * scale);
    m2 = max2(m2, load8(x + k + 8) * scale);
  }
  if (k < whole) m = max2(m, load8(x + k) * scale);
  if (whole < n) m2 = max2(m2, load_last(x, n) * scale);
  return all_max(max2(m, m2))[0];
}

// Phi(x) = P(N(0, 1) <= x) = erfc(-x / sqrt(2)) / 2. erfc(z), z >= 0, is
// t exp(-z^2 + q(t)), t = 1 / (1 + z / 2), q the Chebyshev fit of Press et
// al., Numerical Recipes (2nd ed., 6.2: fractional error below 1.2e-7); for
// x >= 0, Phi = 1 - erfc(z) / 2. Unlike (1 + erf(x / sqrt(2))) / 2 it keeps
// its relative accuracy for negative x (GELU within 7e-7 of its float64
// value over [-9, 9], where that form was 8e-5 off: tests/framework/
// test_activation.cpp). Phi is 0 below -13.2 (where it is under 1e-38).
struct ErfcParts {
  float t, q;
};
inline ErfcParts erfc_parts(float x) {
  const float z = std::fabs(x) * 0.70710678f, t = 1.f / (1.f + 0.5f * z);
  float q = 0.17087277f * t - 0.82215223f;
  q = (q * t + 1.48851587f) * t - 1.13520398f;
  q = (q * t + 0.27886807f) * t - 0.18628806f;
  q = (q * t + 0.09678418f) * t + 0.37409196f;
  q = (q * t + 1.00002368f) * t - 1.26551223f;
  return {t, q};
}
inline float normal_cdf(float x) {
  const ErfcParts p = erfc_parts(x);
  const float below = 0.5f * p.t * exp_or_zero(p.q - 0.5f * x * x);
  return select(x < 0.f, below, 1.f - below);
}

// GELU's derivative Phi(x) + x phi(x), with phi(x) = e^(-x^2 / 2) /
// sqrt(2 pi): one e^(-x^2 / 2) serves both, Phi's e^q(t) (q in [-1.27, 0])
// is e^-0.625 e^(q + 0.625) by its Taylor polynomial to (q + 0.625)^8
// (within 5e-8 relative).
inline float gelu_slope(float x) {
  const ErfcParts p = erfc_parts(x);
  const float e = exp_or_zero(-0.5f * x * x), r = p.q + 0.625f;
  const float e_q = ((((((((1.f / 40320 * r + 1.f / 5040) * r + 1.f / 720) * r + 1.f / 120) * r +
                         1.f / 24) * r + 1.f / 6) * r + 0.5f) * r + 1.f) * r + 1.f);
  const float below = (0.5f * 0.53526143f) * p.t * e_q * e;
  return select(x < 0.f, below, 1.f - below) + x * (0.39894228f * e);
}

// 1 / (1 + e^-x), within 2e-7 relative where the result is above 1e-30
inline float sigmoid(float x) { return 1.f / (1.f + vec::exp_or_zero(-x)); }

// tanh x: for |x| < 0.4 its odd Taylor series to x^13 (the next term is below
// 1e-8 of it), else 1 - 2 / (e^(2|x|) + 1) with x's sign; within 3e-7
// relative of tanh x over [-20, 20]
inline float tanh(float x) {
  const float a = std::fabs(x), x2 = x * x;
  const float series =
      x * (1.f + x2 * (-1.f / 3 + x2 * (2.f / 15 + x2 * (-17.f / 315 + x2 * (62.f / 2835 +
           x2 * (-1382.f / 155925 + x2 * (21844.f / 6081075)))))));
  const float far = std::copysign(1.f - 2.f / (vec::exp_or_zero(2.f * a) + 1.f), x);
  return select(a < 0.4f, series, far);
}

// e^x - 1: for |x| < 0.35 its Taylor series to x^8 (the next term is below
// 1e-8 of it), else exp(x) - 1 (within 4e-7 relative there)
inline float expm1(float x) {
  const float series =
      x * (1.f + x * (0.5f + x * (1.f / 6 + x * (1.f / 24 + x * (1.f / 120 + x * (1.f / 720 +
           x * (1.f / 5040 + x * (1.f / 40320))))))));
  return select(std::fabs(x) < 0.35f, series, vec::exp(x) - 1.f);
}

// log(1 + u) for u in [0, 1] (log1p(exp(-|z|)) in softplus and the logits'
// cross entropy): 2 atanh(t), t = u / (2 + u) <= 1/3, by its odd series to
// t^15 (the next term is below 2e-9 of it)
inline float log1p_unit(float u) {
  const float t = u / (2.f + u), t2 = t * t;
  return 2.f * t * (1.f + t2 * (1.f / 3 + t2 * (1.f / 5 + t2 * (1.f / 7 + t2 * (1.f / 9 +
                    t2 * (1.f / 11 + t2 * (1.f / 13 + t2 * (1.f / 15))))))));
}

}  // namespace minidl::cpu::vec
