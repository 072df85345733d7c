#include "optim/optimizer.h"

#include <charconv>

#include <cmath>
#include <set>
#include <stdexcept>

#include "framework/autograd.h"
#include "framework/backend/backend.h"

namespace minidl::optim {

std::string exact_text(double v) {
  char text[32];
  const auto end = std::to_chars(text, text + sizeof text, v, std::chars_format::general).ptr;
  return std::string(text, end);
}

Settings Optimizer::hyperparameters() const { return {{"lr", exact_text(lr_)}}; }

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
  for (Device d : present_devices()) {
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

StateDict Optimizer::state_dict() const {
  StateDict s;
  s.values["name"] = name_;
  s.set_double("lr", lr_);
  s.tensors.insert("steps", Tensor::from_vector(steps_, {static_cast<int64_t>(steps_.size())}));
  // state_slots() only names the vectors; they are read here, not changed
  for (const StateSlot& slot : const_cast<Optimizer*>(this)->state_slots())
    for (size_t i = 0; i < slot.state->size(); ++i)
      if ((*slot.state)[i].defined())
        s.tensors.insert(cat(slot.key, ".", i), (*slot.state)[i].cpu());
  return s;
}

void Optimizer::load_state_dict(const StateDict& s) {
  const std::string what = cat(name_, "::load_state_dict");
  const std::string& kind = s.get("name", what.c_str());
  MINIDL_CHECK(kind == name_, what, ": the state is a ", kind, "'s, expected a ", name_, "'s");
  const double lr = s.get_double("lr", what.c_str());
  MINIDL_CHECK(std::isfinite(lr) && lr >= 0, what, ": 'lr' is ", s.values.at("lr"),
               ", expected a finite number >= 0");
  const int64_t n = static_cast<int64_t>(params_.size());
  MINIDL_CHECK(s.tensors.contains("steps"), what, ": 'steps' is missing (expected int64 [", n,
               "], each parameter's updates)");
  const Tensor& steps_t = s.tensors.at("steps");
  MINIDL_CHECK(steps_t.dtype() == kInt64 && steps_t.shape() == Shape{n}, what, ": 'steps' is ",
               dtype_name(steps_t.dtype()), " ", steps_t.shape(), ", expected int64 [", n,
               "] (one count per parameter)");
  const std::vector<int64_t> steps = steps_t.to_vector<int64_t>();
  for (int64_t i = 0; i < n; ++i)
    MINIDL_CHECK(steps[i] >= 0 && steps[i] <= kMaxSteps, what, ": 'steps' entry ", i, " is ",
                 steps[i], ", expected 0 to 2^53 (the updates parameter ", i, " ",
                 params_[i].shape(), " has taken)");

  // Every state tensor is checked first, then all are taken at once.
  const std::vector<StateSlot> slots = state_slots();
  std::set<std::string> known = {"steps"};
  std::string expected = "'steps'";
  std::vector<std::vector<Tensor>> loaded(slots.size(), std::vector<Tensor>(params_.size()));
  for (size_t k = 0; k < slots.size(); ++k) {
    const StateSlot& slot = slots[k];
    expected += cat(", '", slot.key, ".<i>'");
    for (int64_t i = 0; i < n; ++i) {
      const std::string name = cat(slot.key, ".", i);
      const Tensor& p = params_[i];
      known.insert(name);
      if (!s.tensors.contains(name)) {
        MINIDL_CHECK(!slot.required || steps[i] == 0, what, ": '", name, "' is missing, but "
                     "parameter ", i, " ", p.shape(), " has taken ", steps[i], " step(s) "
                     "(expected its ", slot.key, ", float32 [", p.numel(), "])");
        continue;
      }
      MINIDL_CHECK(steps[i] > 0, what, ": '", name, "' is present, but parameter ", i, " ",
                   p.shape(), " has taken 0 steps (expected no ", slot.key,
                   " before its first update)");
      const Tensor& t = s.tensors.at(name);
      MINIDL_CHECK(t.dtype() == kFloat32 && t.shape() == Shape{p.numel()}, what, ": '", name,
                   "' is ", dtype_name(t.dtype()), " ", t.shape(), ", expected float32 [",
                   p.numel(), "] for parameter ", i, " ", p.shape());
      const Tensor host = t.cpu();
      const float* x = host.data<float>();
      for (int64_t j = 0; j < p.numel(); ++j)
        MINIDL_CHECK(std::isfinite(x[j]) && (!slot.nonnegative || x[j] >= 0), what, ": '", name,
                     "' element ", j, " is ", x[j], ", expected a finite number",
                     slot.nonnegative ? " >= 0" : "");
      loaded[k][i] = Tensor::empty({p.numel()}, kFloat32, p.device());
      loaded[k][i].copy_(host);
    }
  }
  for (const auto& [name, t] : s.tensors)
    MINIDL_CHECK(known.count(name), what, ": unexpected entry '", name, "' (expected ", expected,
                 " with i < ", n, ")");
  lr_ = lr;
  steps_ = steps;
  for (size_t k = 0; k < slots.size(); ++k) *slots[k].state = std::move(loaded[k]);
}

void Optimizer::zero_grad(bool set_to_none) {
  for (Tensor& p : params_) {
    if (set_to_none) p.zero_grad();
    else if (Tensor g = p.grad(); g.defined()) g.fill_(0);
  }
}

}  // namespace minidl::optim
