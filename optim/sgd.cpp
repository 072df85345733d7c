#include "optim/sgd.h"

namespace minidl::optim {

SGD::SGD(std::vector<Tensor> params, double lr, double weight_decay)
    : Optimizer(std::move(params), lr, "SGD"), weight_decay_(weight_decay) {
  check(weight_decay >= 0, "weight_decay", weight_decay, "weight_decay >= 0");
}

namespace {
// p [n] -= lr * (g [n] + wd * p [n])
void plain_step(float* p, const float* g, int64_t n, double lr_d, double wd_d) {
  const float lr = static_cast<float>(lr_d), wd = static_cast<float>(wd_d);
  for_chunks(n, [=](int64_t begin, int64_t end) {
#pragma omp simd
    for (int64_t j = begin; j < end; ++j) p[j] -= lr * (g[j] + wd * p[j]);
  });
}
}  // namespace

void SGD::update(size_t, float* p, const float* g, int64_t n) {
  plain_step(p, g, n, lr_, weight_decay_);
}

Momentum::Momentum(std::vector<Tensor> params, double lr, double momentum, MomentumOptions opt)
    : Optimizer(std::move(params), lr, "Momentum"),
      momentum_(momentum),
      opt_(opt),
      buffers_(params_.size()) {
  check(momentum >= 0, "momentum", momentum, "momentum >= 0");
  check(opt.weight_decay >= 0, "weight_decay", opt.weight_decay, "weight_decay >= 0");
  check(opt.dampening >= 0 && opt.dampening <= 1, "dampening", opt.dampening,
        "0 <= dampening <= 1");
  if (opt.nesterov)
    check(momentum > 0 && opt.dampening == 0, "momentum", momentum,
          "nesterov needs momentum > 0 and dampening 0");
}

// p [n], g [n], buf [n]: see the header for the rule
void Momentum::update(size_t i, float* p, const float* g, int64_t n) {
  const float lr = static_cast<float>(lr_), wd = static_cast<float>(opt_.weight_decay);
  const float mu = static_cast<float>(momentum_), keep = static_cast<float>(1 - opt_.dampening);
  if (momentum_ == 0) return plain_step(p, g, n, lr_, opt_.weight_decay);
  const bool first = !buffers_[i].defined();
  if (first) buffers_[i] = Tensor::empty({n});
  float* buf = buffers_[i].data<float>();
  const bool nesterov = opt_.nesterov;
  for_chunks(n, [=](int64_t begin, int64_t end) {
#pragma omp simd
    for (int64_t j = begin; j < end; ++j) {
      const float d = g[j] + wd * p[j];
      const float b = first ? d : mu * buf[j] + keep * d;
      buf[j] = b;
      p[j] -= lr * (nesterov ? d + mu * b : b);
    }
  });
}

}  // namespace minidl::optim
