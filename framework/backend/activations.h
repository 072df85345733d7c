// The pointwise formulas of the fused activations (PyTorch's, as its CPU
// kernels write them), shared by the CPU and CUDA kernels: leaky ReLU, GELU
// (exact erf form and tanh approximation) and SiLU, forward and derivative, and
// binary cross entropy's terms. The
// CPU's exact GELU takes Phi from cpu/vec_math.h instead (it vectorizes, and
// keeps its accuracy for negative x); CUDA's uses gelu and gelu_grad here.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

#include "framework/backend/host_device.h"

namespace minidl::act {

// c ? a : b, both already computed. On the host by bit operations (also
// cpu/vec_math.h's select): with ?: the compiler may move a side's float
// operations into its branch, and, since they might trap, it then cannot
// run both sides in one vector loop.
MINIDL_HOST_DEVICE inline float pick(bool c, float a, float b) {
#if defined(__CUDA_ARCH__)
  return c ? a : b;
#else
  uint32_t ua, ub;
  std::memcpy(&ua, &a, 4);
  std::memcpy(&ub, &b, 4);
  const uint32_t m = 0u - static_cast<uint32_t>(c), r = (ua & m) | (ub & ~m);
  float out;
  std::memcpy(&out, &r, 4);
  return out;
#endif
}

// x > 0 ? x : slope x; derivative 1 or slope (slope at 0, NaN too)
MINIDL_HOST_DEVICE inline float leaky_relu(float x, float slope) { return x > 0.f ? x : x * slope; }
MINIDL_HOST_DEVICE inline float leaky_relu_slope(float x, float slope) { return x > 0.f ? 1.f : slope; }

// x Phi(x) = 0.5 x (1 + erf(x / sqrt(2))); gradient g (Phi(x) + x phi(x))
MINIDL_HOST_DEVICE inline float gelu(float x) { return x * 0.5f * (1.f + erff(x * 0.70710678f)); }
MINIDL_HOST_DEVICE inline float gelu_grad(float g, float x) {
  const float cdf = 0.5f * (1.f + erff(x * 0.70710678f));
  const float pdf = 0.39894228f * expf(-0.5f * x * x);  // 1 / sqrt(2 pi)
  return g * (cdf + x * pdf);
}

// 0.5 x (1 + tanh(b (x + k x^3))), b = sqrt(2 / pi), k = 0.044715, and its
// gradient; the *_of forms take t = tanh(gelu_tanh_arg(x)) from the caller
// (the CPU's vectorizing tanh)
MINIDL_HOST_DEVICE inline float gelu_tanh_arg(float x) {
  return 0.79788456f * (x + 0.044715f * x * x * x);
}
MINIDL_HOST_DEVICE inline float gelu_tanh_of(float x, float t) { return 0.5f * x * (1.f + t); }
MINIDL_HOST_DEVICE inline float gelu_tanh_grad_of(float g, float x, float t) {
  const float left = 0.5f * (1.f + t);
  const float right = 0.5f * x * (1.f - t * t) * 0.79788456f * (1.f + 3.f * 0.044715f * x * x);
  return g * (left + right);
}
MINIDL_HOST_DEVICE inline float gelu_tanh(float x) {
  return gelu_tanh_of(x, tanhf(gelu_tanh_arg(x)));
}
MINIDL_HOST_DEVICE inline float gelu_tanh_grad(float g, float x) {
  return gelu_tanh_grad_of(g, x, tanhf(gelu_tanh_arg(x)));
}

// x <= 0 ? alpha expm1(x) : x; derivative alpha exp(x) or 1 (alpha at 0;
// NaN kept, as PyTorch's), from em1 = expm1(x) and e = exp(x) computed by
// the caller
MINIDL_HOST_DEVICE inline float elu_of(float x, float alpha, float em1) {
  return pick(x <= 0.f, alpha * em1, x);
}
MINIDL_HOST_DEVICE inline float elu_slope_of(float x, float alpha, float e) {
  return pick(x <= 0.f, alpha * e, 1.f);
}

// softplus of z (= beta x): z above the threshold: z; else log(1 + e^z) =
// max(z, 0) + log1p(e^-|z|), from l = log1p(exp(-|z|)); its derivative in z,
// 1 or sigmoid(z) = 1 / (1 + e^-z), from e = exp(-z): the choice as a factor
// 0 or 1 of e, with no constant side that a compiler could branch to
MINIDL_HOST_DEVICE inline float softplus_of(float z, float threshold, float l) {
  return pick(z > threshold, z, pick(z > 0.f, z, 0.f) + l);
}
MINIDL_HOST_DEVICE inline float softplus_slope_of(float z, float threshold, float e) {
  return 1.f / (1.f + e * (z <= threshold ? 1.f : 0.f));
}

// smooth L1 of d = x - y: |d| < beta ? 0.5 d^2 / beta : |d| - 0.5 beta; its
// derivative d / beta or sign(d) (NaN kept)
MINIDL_HOST_DEVICE inline float smooth_l1(float d, float beta) {
  const float a = fabsf(d);
  return pick(a < beta, 0.5f * d * d / beta, a - 0.5f * beta);
}
MINIDL_HOST_DEVICE inline float smooth_l1_grad(float d, float beta) {
  return pick(fabsf(d) < beta, d / beta, pick(d > 0.f, 1.f, pick(d < 0.f, -1.f, d)));
}

// binary cross entropy of sigmoid(x) against t, stable for any x:
// max(x, 0) - x t + log1p(exp(-|x|)), from l = log1p(exp(-|x|)); its
// derivative in x, sigmoid(x) - t, from s = sigmoid(x)
MINIDL_HOST_DEVICE inline float bce_logits_of(float x, float t, float l) {
  return pick(x > 0.f, x, 0.f) - x * t + l;
}
MINIDL_HOST_DEVICE inline float bce_logits_grad_of(float t, float s) { return s - t; }

// x sigmoid(x), and its gradient g s (1 + x (1 - s)) (PyTorch's), from
// s = sigmoid(x) computed by the caller
MINIDL_HOST_DEVICE inline float silu_of(float x, float s) { return x * s; }
MINIDL_HOST_DEVICE inline float silu_grad_of(float g, float x, float s) {
  return g * (s * (1.f + x * (1.f - s)));
}

// Binary cross entropy of p against t, PyTorch's: logs floored at -100 (NaN
// kept), l = -(t log p + (1 - t) log(1 - p)); gradients g (p - t) /
// max(p (1 - p), 1e-12) for p and g (log(1 - p) - log p) for t.
MINIDL_HOST_DEVICE inline float floored_log(float x) {
  const float l = logf(x);
  return l < -100.f ? -100.f : l;
}
MINIDL_HOST_DEVICE inline float bce(float p, float t) {
  return -(t * floored_log(p) + (1.f - t) * floored_log(1.f - p));
}
MINIDL_HOST_DEVICE inline float bce_grad_p(float g, float p, float t) {
  const float v = p * (1.f - p);
  return g * ((p - t) / (v < 1e-12f ? 1e-12f : v));
}
MINIDL_HOST_DEVICE inline float bce_grad_t(float g, float p) {
  return g * (floored_log(1.f - p) - floored_log(p));
}

}  // namespace minidl::act
