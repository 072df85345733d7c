// CPU optimizer updates: PyTorch's SGD, Momentum and Adam(W) formulas, one
// plain SIMD loop per parameter chunk.
#include <omp.h>

#include <cmath>

#include "framework/backend/cpu/cpu.h"

namespace minidl::cpu {
namespace {

// Calls f(begin, end) over [0, n), one chunk per OpenMP thread when n is over
// 64k elements (updates are memory-bound), else f(0, n). The loop inside f
// stays a plain SIMD loop: `omp parallel for simd` over an update compiled to
// scalar code.
template <class F>
void for_chunks(int64_t n, F f) {
  if (n <= 65536) return f(0, n);
#pragma omp parallel
  {
    const int64_t t = omp_get_thread_num(), threads = omp_get_num_threads();
    f(n * t / threads, n * (t + 1) / threads);
  }
}

// p [n] -= lr * (g [n] + wd * p [n])
void sgd(const UpdateSlice& s, const UpdateArgs& a) {
  const float lr = static_cast<float>(a.lr), wd = static_cast<float>(a.weight_decay);
  float* p = s.p;
  const float* g = s.g;
  for_chunks(s.n, [=](int64_t begin, int64_t end) {
#pragma omp simd
    for (int64_t j = begin; j < end; ++j) p[j] -= lr * (g[j] + wd * p[j]);
  });
}

// p, g, buf = m [n]; see optim/sgd.h for the rule
void momentum(const UpdateSlice& s, const UpdateArgs& a) {
  if (a.momentum == 0) return sgd(s, a);
  const float lr = static_cast<float>(a.lr), wd = static_cast<float>(a.weight_decay);
  const float mu = static_cast<float>(a.momentum), keep = static_cast<float>(1 - a.dampening);
  const bool first = s.step == 1, nesterov = a.nesterov;
  float *p = s.p, *buf = s.m;
  const float* g = s.g;
  for_chunks(s.n, [=](int64_t begin, int64_t end) {
#pragma omp simd
    for (int64_t j = begin; j < end; ++j) {
      const float d = g[j] + wd * p[j];
      const float b = first ? d : mu * buf[j] + keep * d;
      buf[j] = b;
      p[j] -= lr * (nesterov ? d + mu * b : b);
    }
  });
}

// p, g, m, v [n]; see optim/adam.h for the rule
void adam(const UpdateSlice& s, const UpdateArgs& a) {
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
  float *p = s.p, *m = s.m, *v = s.v;
  const float* g = s.g;
  for_chunks(s.n, [=](int64_t begin, int64_t end) {
#pragma omp simd
    for (int64_t j = begin; j < end; ++j) {
      if (decoupled) p[j] *= decay;
      const float gj = g[j] + l2 * p[j];
      m[j] += c1 * (gj - m[j]);  // = beta1 m + (1 - beta1) g, as torch's lerp_
      v[j] = b2 * v[j] + c2 * gj * gj;
      p[j] -= step_size * m[j] / (std::sqrt(v[j]) / bc2_sqrt + eps);
    }
  });
}

}  // namespace

void update(UpdateRule rule, const UpdateArgs& args, const UpdateSlice* slices, int count) {
  for (int i = 0; i < count; ++i) {
    switch (rule) {
      case UpdateRule::SGD: sgd(slices[i], args); break;
      case UpdateRule::Momentum: momentum(slices[i], args); break;
      case UpdateRule::Adam: adam(slices[i], args); break;
    }
  }
}

}  // namespace minidl::cpu
