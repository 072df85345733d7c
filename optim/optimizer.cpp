#include "optim/optimizer.h"

#include <cmath>
#include <set>
#include <stdexcept>

#include "framework/autograd.h"

namespace minidl::optim {

Optimizer::Optimizer(std::vector<Tensor> params, double lr, const char* name)
    : params_(std::move(params)), steps_(params_.size(), 0), lr_(lr), name_(name) {
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

void Optimizer::set_lr(double lr) {
  check(lr >= 0, "learning rate", lr, "lr >= 0");
  lr_ = lr;
}

void Optimizer::step() {
  NoGradGuard no_grad;
  std::vector<size_t> ready;
  for (size_t i = 0; i < params_.size(); ++i) {
    Tensor g = params_[i].grad();
    if (!g.defined()) continue;
    MINIDL_CHECK(g.dtype() == kFloat32 && g.numel() == params_[i].numel(), name_, ": gradient ",
                 g.shape(), " (", dtype_name(g.dtype()), ") does not fit parameter ", i, " ",
                 params_[i].shape());
    MINIDL_CHECK(g.device() == params_[i].device(), name_, ": gradient of parameter ", i, " ",
                 params_[i].shape(), " is on ", device_name(g.device()), ", the parameter on ",
                 device_name(params_[i].device()));
    ++steps_[i];
    ready.push_back(i);
  }
  if (!ready.empty()) update(ready);
}

void Optimizer::apply(UpdateRule rule, const UpdateArgs& args, const std::vector<size_t>& ready,
                      std::vector<Tensor>* m, std::vector<Tensor>* v) {
  auto state = [&](std::vector<Tensor>* slot, size_t i) -> float* {
    if (!slot) return nullptr;
    Tensor& t = (*slot)[i];
    if (!t.defined()) t = Tensor::zeros({params_[i].numel()}, kFloat32, params_[i].device());
    MINIDL_CHECK(t.device() == params_[i].device(), name_, ": the state of parameter ", i, " ",
                 params_[i].shape(), " is on ", device_name(t.device()), " but the parameter on ",
                 device_name(params_[i].device()), "; move the model before creating the optimizer");
    return t.data_ptr<float>();
  };
  for (Device d : {Device::CPU, Device::CUDA}) {
    std::vector<UpdateSlice> slices;
    for (size_t i : ready) {
      const Tensor& p = params_[i];
      if (p.device() != d) continue;
      slices.push_back({p.data_ptr<float>(), p.grad().data_ptr<float>(), state(m, i), state(v, i),
                        p.numel(), steps_[i]});
    }
    if (!slices.empty())
      kernels(d).update(rule, args, slices.data(), static_cast<int>(slices.size()));
  }
}

void Optimizer::zero_grad() {
  for (Tensor& p : params_) p.zero_grad();
}

}  // namespace minidl::optim
