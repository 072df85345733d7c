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

namespace {

// The hyperparameters by name: where each sits in UpdateArgs and GroupOptions
// (beta1 and beta2 come from GroupOptions::betas).
struct Number {
  const char* key;
  double UpdateArgs::*arg;
  std::optional<double> GroupOptions::*option;
};
constexpr Number kNumbers[] = {
    {"lr", &UpdateArgs::lr, &GroupOptions::lr},
    {"weight_decay", &UpdateArgs::weight_decay, &GroupOptions::weight_decay},
    {"momentum", &UpdateArgs::momentum, &GroupOptions::momentum},
    {"dampening", &UpdateArgs::dampening, &GroupOptions::dampening},
    {"beta1", &UpdateArgs::beta1, nullptr},
    {"beta2", &UpdateArgs::beta2, nullptr},
    {"eps", &UpdateArgs::eps, &GroupOptions::eps},
    {"alpha", &UpdateArgs::alpha, &GroupOptions::alpha}};
struct Flag {
  const char* key;
  bool UpdateArgs::*arg;
  std::optional<bool> GroupOptions::*option;
};
constexpr Flag kFlags[] = {{"nesterov", &UpdateArgs::nesterov, &GroupOptions::nesterov},
                           {"centered", &UpdateArgs::centered, &GroupOptions::centered},
                           {"maximize", &UpdateArgs::maximize, &GroupOptions::maximize}};

bool is_flag(const std::string& key) {
  for (const Flag& f : kFlags)
    if (key == f.key) return true;
  return false;
}

std::string text_of(const UpdateArgs& a, const std::string& key) {
  for (const Number& n : kNumbers)
    if (key == n.key) return exact_text(a.*n.arg);
  for (const Flag& f : kFlags)
    if (key == f.key) return a.*f.arg ? "true" : "false";
  return "";
}

// Sets `key` of `a` from its text; false when the text is no such value.
bool read_into(UpdateArgs& a, const std::string& key, const std::string& text) {
  for (const Flag& f : kFlags)
    if (key == f.key) {
      if (text != "true" && text != "false") return false;
      a.*f.arg = text == "true";
      return true;
    }
  for (const Number& n : kNumbers)
    if (key == n.key) {
      const char* end = text.data() + text.size();
      auto [ptr, ec] = std::from_chars(text.data(), end, a.*n.arg);
      return ec == std::errc() && ptr == end && !text.empty();
    }
  return false;
}

// The names of the options set in `o`.
std::vector<std::string> set_options(const GroupOptions& o) {
  std::vector<std::string> set;
  for (const Number& n : kNumbers)
    if (n.option && (o.*n.option).has_value()) set.push_back(n.key);
  for (const Flag& f : kFlags)
    if ((o.*f.option).has_value()) set.push_back(f.key);
  if (o.betas) set.push_back("betas");
  return set;
}

// `a` with the options set in `o` over it.
UpdateArgs merged(UpdateArgs a, const GroupOptions& o) {
  for (const Number& n : kNumbers)
    if (n.option && (o.*n.option).has_value()) a.*n.arg = *(o.*n.option);
  for (const Flag& f : kFlags)
    if ((o.*f.option).has_value()) a.*f.arg = *(o.*f.option);
  if (o.betas) std::tie(a.beta1, a.beta2) = *o.betas;
  return a;
}

}  // namespace

Optimizer::Optimizer(const char* name, std::vector<const char*> keys) : name_(name) {
  keys_.push_back("lr");
  keys_.insert(keys_.end(), keys.begin(), keys.end());
  keys_.push_back("maximize");  // every rule's
}

void Optimizer::init(std::vector<ParamGroup> groups, const UpdateArgs& defaults,
                     const GroupOptions& options) {
  check_known(options, "");
  defaults_ = merged(defaults, options);
  check(defaults_.lr >= 0, "learning rate", defaults_.lr, "lr >= 0");
  check_options(defaults_);
  size_t total = 0;
  for (const ParamGroup& g : groups) total += g.params.size();
  MINIDL_CHECK(total > 0, name_, ": got an empty parameter list (expected at least one "
               "parameter). If it came from net.trainable_params(), the network registered none: "
               "did its constructor call register_cells({...}) or register_parameter(...)?");
  for (ParamGroup& g : groups) add_param_group(std::move(g));
}

void Optimizer::check_known(const GroupOptions& options, const std::string& where) const {
  for (const std::string& key : set_options(options)) {
    bool used = false;
    for (const char* k : keys_)
      used = used || key == k || (key == "betas" && std::string(k) == "beta1");
    if (!used) {
      std::string known;
      for (const char* k : keys_) known += cat(known.empty() ? "" : ", ", k);
      throw std::invalid_argument(cat(name_, ": option ", key, " set", where, " is not one of ",
                                      name_, "'s (", known, ")"));
    }
  }
}

Optimizer::Group Optimizer::make_group(ParamGroup group, size_t index) const {
  const std::string where = index > 0 ? cat(" (parameter group ", index, ")") : "";
  check_known(group.options, where);
  Group g{std::move(group.params), merged(defaults_, group.options), params_.size()};
  try {
    check(g.options.lr >= 0, "learning rate", g.options.lr, "lr >= 0");
    check_options(g.options);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(e.what() + where);
  }
  std::set<TensorImpl*> seen;
  for (const Tensor& p : params_) seen.insert(p.impl_ptr().get());
  for (size_t j = 0; j < g.params.size(); ++j) {
    const Tensor& p = g.params[j];
    const size_t i = g.first + j;  // its index in parameters()
    MINIDL_CHECK(p.defined(), name_, ": parameter ", i, where, " is undefined");
    MINIDL_CHECK(p.dtype() == kFloat32, name_, ": parameter ", i, " ", p.shape(), where,
                 " has dtype ", dtype_name(p.dtype()), "; optimizers update float32 parameters");
    MINIDL_CHECK(seen.insert(p.impl_ptr().get()).second, name_, ": parameter ", i, " ", p.shape(),
                 where, " appears more than once in the parameter list");
  }
  return g;
}

void Optimizer::add_param_group(ParamGroup group) {
  Group g = make_group(std::move(group), groups_.size());
  params_.insert(params_.end(), g.params.begin(), g.params.end());
  steps_.resize(params_.size(), 0);
  for (const StateSlot& slot : state_slots()) slot.state->resize(params_.size());
  groups_.push_back(std::move(g));
}

size_t Optimizer::group_of(size_t i) const {
  size_t g = 0;
  while (g + 1 < groups_.size() && groups_[g + 1].first <= i) ++g;
  return g;
}

void Optimizer::check(bool ok, const char* what, double value, const char* rule) const {
  if (!ok || std::isnan(value))
    throw std::invalid_argument(
        cat(name_, ": invalid ", what, " ", value, " (expected ", rule, ")"));
}

void Optimizer::set_lr(double lr) {
  check(lr >= 0, "learning rate", lr, "lr >= 0");
  for (Group& g : groups_) g.options.lr = lr;
}

void Optimizer::set_lr(size_t group, double lr) {
  MINIDL_CHECK(group < groups_.size(), name_, "::set_lr: parameter group ", group,
               " does not exist (the optimizer has ", groups_.size(), ")");
  check(lr >= 0, "learning rate", lr, "lr >= 0");
  groups_[group].options.lr = lr;
}

Settings Optimizer::hyperparameters() const {
  Settings s;
  for (size_t g = 0; g < groups_.size(); ++g) {
    if (g == 1) s.emplace_back("param groups", cat(groups_.size()));
    const std::string prefix = g > 0 ? cat("group ", g, " ") : "";
    for (const char* key : keys_) s.emplace_back(prefix + key, text_of(groups_[g].options, key));
  }
  return s;
}

std::vector<Tensor> Optimizer::state_tensors() const {
  std::vector<Tensor> all;
  // state_slots() only names the vectors; they are read here, not changed
  for (const StateSlot& slot : const_cast<Optimizer*>(this)->state_slots())
    all.insert(all.end(), slot.state->begin(), slot.state->end());
  return all;
}

void Optimizer::step() {
  NoGradGuard no_grad;
  for (const Group& group : groups_) {
    std::vector<size_t> ready;
    for (size_t i = group.first; i < group.first + group.params.size(); ++i) {
      Tensor g = params_[i].grad();
      if (!g.defined()) continue;
      MINIDL_CHECK(g.dtype() == kFloat32 && g.numel() == params_[i].numel(), name_, ": gradient ",
                   g.shape(), " (", dtype_name(g.dtype()), ") does not fit parameter ", i, " ",
                   params_[i].shape());
      MINIDL_CHECK(g.device() == params_[i].device(), name_, ": gradient of parameter ", i, " ",
                   params_[i].shape(), " is on ", device_name(g.device()), ", the parameter on ",
                   device_name(params_[i].device()));
      ready.push_back(i);
    }
    for (size_t i : ready) ++steps_[i];
    if (!ready.empty()) update(group.options, ready);
  }
}

void Optimizer::apply(UpdateRule rule, const UpdateArgs& args, const std::vector<size_t>& ready,
                      std::vector<Tensor>* m, std::vector<Tensor>* v, std::vector<Tensor>* w) {
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
                        p.numel(), steps_[i], state(w, i)});
    }
    if (!slices.empty())
      kernels(d).update(rule, args, slices.data(), static_cast<int>(slices.size()));
  }
}

StateDict Optimizer::state_dict() const {
  StateDict s;
  s.values["name"] = name_;
  s.set_int("param_groups", static_cast<int64_t>(groups_.size()));
  for (size_t g = 0; g < groups_.size(); ++g) {
    const std::string prefix = cat("param_groups.", g, ".");
    s.set_int(prefix + "params", static_cast<int64_t>(groups_[g].params.size()));
    for (const char* key : keys_) s.values[prefix + key] = text_of(groups_[g].options, key);
  }
  s.tensors.insert("steps", Tensor::from_vector(steps_, {static_cast<int64_t>(steps_.size())}));
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

  // The groups: as many, each as large, each's hyperparameters valid.
  std::vector<UpdateArgs> options;
  if (!s.values.count("param_groups") && s.values.count("lr")) {  // before parameter groups
    MINIDL_CHECK(groups_.size() == 1, what, ": the state holds 1 parameter group (only 'lr'), "
                 "this ", name_, " has ", groups_.size());
    options.push_back(groups_[0].options);
    options[0].lr = s.get_double("lr", what.c_str());
    MINIDL_CHECK(std::isfinite(options[0].lr) && options[0].lr >= 0, what, ": 'lr' is ",
                 s.values.at("lr"), ", expected a finite number >= 0");
  } else {
    const int64_t count = s.get_int("param_groups", what.c_str());
    MINIDL_CHECK(count == static_cast<int64_t>(groups_.size()), what, ": the state holds ", count,
                 " parameter group(s), this ", name_, " has ", groups_.size());
    for (size_t g = 0; g < groups_.size(); ++g) {
      const std::string prefix = cat("param_groups.", g, ".");
      const int64_t params = s.get_int(prefix + "params", what.c_str());
      MINIDL_CHECK(params == static_cast<int64_t>(groups_[g].params.size()), what,
                   ": parameter group ", g, " holds ", params, " parameter(s) in the state, ",
                   groups_[g].params.size(), " in this ", name_);
      UpdateArgs a = groups_[g].options;
      for (const char* key : keys_) {
        if (key == std::string("maximize") && !s.values.count(prefix + key)) {
          a.maximize = false;  // a state saved before maximize existed
          continue;
        }
        const std::string& text = s.get(prefix + key, what.c_str());
        MINIDL_CHECK(read_into(a, key, text), what, ": '", prefix, key, "' is '", text,
                     "', expected ", is_flag(key) ? "true or false" : "a number");
      }
      MINIDL_CHECK(std::isfinite(a.lr) && a.lr >= 0, what, ": '", prefix, "lr' is ",
                   s.values.at(prefix + "lr"), ", expected a finite number >= 0");
      try {
        check_options(a);
      } catch (const std::invalid_argument& e) {
        throw Error(cat(what, ": parameter group ", g, ": ", e.what()));
      }
      options.push_back(a);
    }
  }

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
        MINIDL_CHECK(!slot.required(options[group_of(i)]) || steps[i] == 0, what, ": '", name,
                     "' is missing, but parameter ", i, " ", p.shape(), " has taken ", steps[i],
                     " step(s) (expected its ", slot.key, ", float32 [", p.numel(), "])");
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
  for (size_t g = 0; g < groups_.size(); ++g) groups_[g].options = options[g];
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
