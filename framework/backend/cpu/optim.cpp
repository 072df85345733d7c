// CPU optimizer updates: PyTorch's SGD, Momentum, Adam(W) and RMSprop formulas, one
// plain SIMD loop per parameter chunk.
#include <omp.h>

#include <cmath>

#include "framework/backend/cpu/cpu.h"
#include "framework/backend/cpu/dispatch.h"

namespace minidl::cpu {
namespace {

// Each rule updates elements [begin, end) of one slice; the loops are plain
// SIMD loops over restrict pointers (as lambdas inlined into update() they
// had compiled to scalar code that reloaded every constant per element).
// sign: -1 with maximize (the gradient negated, exactly), else 1.
float sign_of(const UpdateArgs& a) { return a.maximize ? -1.f : 1.f; }

// p [n] -= lr * (sign * g [n] + wd * p [n])
MINIDL_CLONES void sgd(const UpdateSlice& s, const UpdateArgs& a, int64_t begin, int64_t end) {
  const float lr = static_cast<float>(a.lr), wd = static_cast<float>(a.weight_decay);
  const float sign = sign_of(a);
  float* __restrict p = s.p;
  const float* __restrict g = s.g;
#pragma omp simd
  for (int64_t j = begin; j < end; ++j) p[j] -= lr * (sign * g[j] + wd * p[j]);
}

// p, g, buf = m [n]; see optim/sgd.h for the rule
MINIDL_CLONES void momentum(const UpdateSlice& s, const UpdateArgs& a, int64_t begin, int64_t end) {
  if (a.momentum == 0) return sgd(s, a, begin, end);
  const float lr = static_cast<float>(a.lr), wd = static_cast<float>(a.weight_decay);
  const float mu = static_cast<float>(a.momentum), keep = static_cast<float>(1 - a.dampening);
  const bool first = s.step == 1, nesterov = a.nesterov;
  const float sign = sign_of(a);
  float *__restrict p = s.p, *__restrict buf = s.m;
  const float* __restrict g = s.g;
#pragma omp simd
  for (int64_t j = begin; j < end; ++j) {
    const float d = sign * g[j] + wd * p[j];
    const float b = first ? d : mu * buf[j] + keep * d;
    buf[j] = b;
    p[j] -= lr * (nesterov ? d + mu * b : b);
  }
}

// p, g, m, v [n]; see optim/adam.h for the rule
MINIDL_CLONES void adam(const UpdateSlice& s, const UpdateArgs& a, int64_t begin, int64_t end) {
  const double t = static_cast<double>(s.step);
  const double bc1 = 1 - std::pow(a.beta1, t), bc2 = 1 - std::pow(a.beta2, t);
  const float step_size = static_cast<float>(a.lr / bc1),
              bc2_sqrt = static_cast<float>(std::sqrt(bc2));
  // 1 - beta in double, then float, as PyTorch passes them as Python scalars
  const float c1 = static_cast<float>(1 - a.beta1), b2 = static_cast<float>(a.beta2),
              c2 = static_cast<float>(1 - a.beta2);
  const float eps = static_cast<float>(a.eps), decay = static_cast<float>(1 - a.lr * a.weight_decay);
  const float l2 = a.decoupled ? 0.f : static_cast<float>(a.weight_decay);
  const bool decoupled = a.decoupled;
  const float sign = sign_of(a);
  float *__restrict p = s.p, *__restrict m = s.m, *__restrict v = s.v;
  const float* __restrict g = s.g;
#pragma omp simd
  for (int64_t j = begin; j < end; ++j) {
    if (decoupled) p[j] *= decay;
    const float gj = sign * g[j] + l2 * p[j];
    m[j] += c1 * (gj - m[j]);  // = beta1 m + (1 - beta1) g, as torch's lerp_
    v[j] = b2 * v[j] + c2 * gj * gj;
    p[j] -= step_size * m[j] / (std::sqrt(v[j]) / bc2_sqrt + eps);
  }
}

// p, g, square_avg = v, buf = m (momentum > 0), grad_avg = w (centered) [n];
// see optim/rmsprop.h for the rule, in torch's operation order
MINIDL_CLONES void rmsprop(const UpdateSlice& s, const UpdateArgs& a, int64_t begin, int64_t end) {
  const float lr = static_cast<float>(a.lr), wd = static_cast<float>(a.weight_decay);
  const float alpha = static_cast<float>(a.alpha), c = static_cast<float>(1 - a.alpha);
  const float eps = static_cast<float>(a.eps), mu = static_cast<float>(a.momentum);
  const bool centered = a.centered, momentum = a.momentum > 0;
  const float sign = sign_of(a);
  float *__restrict p = s.p, *__restrict sq = s.v, *__restrict buf = s.m, *__restrict ga = s.w;
  const float* __restrict g = s.g;
#pragma omp simd
  for (int64_t j = begin; j < end; ++j) {
    const float gj = sign * g[j] + wd * p[j];
    sq[j] = sq[j] * alpha + c * gj * gj;
    float avg;
    if (centered) {
      ga[j] = ga[j] * alpha + c * gj;
      avg = std::sqrt(sq[j] - ga[j] * ga[j]) + eps;
    } else {
      avg = std::sqrt(sq[j]) + eps;
    }
    if (momentum) {
      buf[j] = buf[j] * mu + gj / avg;
      p[j] -= lr * buf[j];
    } else {
      p[j] -= lr * (gj / avg);
    }
  }
}

void update_range(UpdateRule rule, const UpdateArgs& args, const UpdateSlice& s, int64_t begin,
                  int64_t end) {
  switch (rule) {
    case UpdateRule::SGD: sgd(s, args, begin, end); break;
    case UpdateRule::Momentum: momentum(s, args, begin, end); break;
    case UpdateRule::Adam: adam(s, args, begin, end); break;
    case UpdateRule::RMSprop: rmsprop(s, args, begin, end); break;
  }
}

}  // namespace

// Updates are memory-bound and elementwise: over 64k elements in all, one
// parallel region takes every slice, each thread a contiguous share of every
// slice of 16k elements and up and whole smaller slices in turn (LeNet's
// largest weight has 48k); any split gives the same bits.
void update(UpdateRule rule, const UpdateArgs& args, const UpdateSlice* slices, int count) {
  int64_t total = 0;
  for (int i = 0; i < count; ++i) total += slices[i].n;
  if (total <= 65536 || omp_get_max_threads() == 1) {
    for (int i = 0; i < count; ++i) update_range(rule, args, slices[i], 0, slices[i].n);
    return;
  }
#pragma omp parallel
  {
    const int64_t t = omp_get_thread_num(), threads = omp_get_num_threads();
    for (int i = 0; i < count; ++i) {
      const int64_t n = slices[i].n;
      if (n >= 16384)
        update_range(rule, args, slices[i], n * t / threads, n * (t + 1) / threads);
      else if (i % threads == t)
        update_range(rule, args, slices[i], 0, n);
    }
  }
}

}  // namespace minidl::cpu
