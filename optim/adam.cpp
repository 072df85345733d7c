#include "optim/adam.h"

#include <cmath>
#include <cstring>

namespace minidl::optim {

Adam::Adam(std::vector<Tensor> params, double lr, double beta1, double beta2, double eps,
           double weight_decay)
    : Adam(std::move(params), lr, beta1, beta2, eps, weight_decay, false, "Adam") {}

Adam::Adam(std::vector<Tensor> params, double lr, double beta1, double beta2, double eps,
           double weight_decay, bool decoupled, const char* name)
    : Optimizer(std::move(params), lr, name),
      beta1_(beta1),
      beta2_(beta2),
      eps_(eps),
      weight_decay_(weight_decay),
      decoupled_(decoupled),
      m_(params_.size()),
      v_(params_.size()),
      steps_(params_.size(), 0) {
  check(beta1 >= 0 && beta1 < 1, "beta1", beta1, "0 <= beta1 < 1");
  check(beta2 >= 0 && beta2 < 1, "beta2", beta2, "0 <= beta2 < 1");
  check(eps > 0, "eps", eps, "eps > 0");
  check(weight_decay >= 0, "weight_decay", weight_decay, "weight_decay >= 0");
}

// p [n], g [n], m [n], v [n]: see the header for the rule
void Adam::update(size_t i, float* p, const float* g, int64_t n) {
  if (!m_[i].defined()) {
    m_[i] = Tensor::zeros({n});
    v_[i] = Tensor::zeros({n});
  }
  const int64_t t = ++steps_[i];
  const double bc1 = 1 - std::pow(beta1_, double(t)), bc2 = 1 - std::pow(beta2_, double(t));
  const float step_size = static_cast<float>(lr_ / bc1),
              bc2_sqrt = static_cast<float>(std::sqrt(bc2));
  // 1 - beta in double, then float, as PyTorch passes them as Python scalars
  const float c1 = static_cast<float>(1 - beta1_), b2 = static_cast<float>(beta2_),
              c2 = static_cast<float>(1 - beta2_);
  const float eps = static_cast<float>(eps_), decay = static_cast<float>(1 - lr_ * weight_decay_);
  const float l2 = decoupled_ ? 0.f : static_cast<float>(weight_decay_);
  const bool decoupled = decoupled_;
  float *m = m_[i].data<float>(), *v = v_[i].data<float>();
  for_chunks(n, [=](int64_t begin, int64_t end) {
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

}  // namespace minidl::optim
