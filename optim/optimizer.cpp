#include "optim/optimizer.h"

#include <omp.h>

#include <cmath>
#include <set>
#include <stdexcept>

#include "framework/autograd.h"

namespace minidl::optim {

Optimizer::Optimizer(std::vector<Tensor> params, double lr, const char* name)
    : params_(std::move(params)), lr_(lr), name_(name) {
  check(lr >= 0, "learning rate", lr, "lr >= 0");
  MINIDL_CHECK(!params_.empty(), name_, ": got an empty parameter list (expected at least one "
               "parameter). If it came from net.trainable_params(), the network registered none: "
               "did its constructor call register_cells({...}) or register_parameter(...)?");
  std::set<TensorImpl*> seen;
  for (size_t i = 0; i < params_.size(); ++i) {
    const Tensor& p = params_[i];
    MINIDL_CHECK(p.defined(), name_, ": parameter ", i, " is undefined");
    MINIDL_CHECK(p.dtype() == kFloat32, name_, ": parameter ", i, " ", p.shape(), " has dtype ",
                 dtype_name(p.dtype()), "; optimizers update float32 parameters");
    MINIDL_CHECK(seen.insert(p.impl_ptr().get()).second, name_, ": parameter ", i, " ", p.shape(),
                 " appears more than once in the parameter list");
  }
}

void Optimizer::check(bool ok, const char* what, double value, const char* rule) const {
  if (!ok || std::isnan(value))
    throw std::invalid_argument(
        cat(name_, ": invalid ", what, " ", value, " (expected ", rule, ")"));
}

void for_chunks(int64_t n, const std::function<void(int64_t, int64_t)>& f) {
  if (n <= 65536) return f(0, n);
#pragma omp parallel
  {
    const int64_t t = omp_get_thread_num(), threads = omp_get_num_threads();
    f(n * t / threads, n * (t + 1) / threads);
  }
}

void Optimizer::set_lr(double lr) {
  check(lr >= 0, "learning rate", lr, "lr >= 0");
  lr_ = lr;
}

void Optimizer::step() {
  NoGradGuard no_grad;
  for (size_t i = 0; i < params_.size(); ++i) {
    Tensor g = params_[i].grad();
    if (!g.defined()) continue;
    MINIDL_CHECK(g.dtype() == kFloat32 && g.numel() == params_[i].numel(), name_, ": gradient ",
                 g.shape(), " (", dtype_name(g.dtype()), ") does not fit parameter ", i, " ",
                 params_[i].shape());
    update(i, params_[i].data<float>(), g.data<float>(), params_[i].numel());
  }
}

void Optimizer::zero_grad() {
  for (Tensor& p : params_) p.zero_grad();
}

}  // namespace minidl::optim
