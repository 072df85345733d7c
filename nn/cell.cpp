#include "nn/cell.h"

#include <cxxabi.h>

#include <algorithm>
#include <cstdlib>
#include <typeinfo>

#include "framework/autograd.h"

namespace minidl::nn {
namespace {

// The cells being called on this thread while scope tracking is on, innermost last.
struct Frame {
  const Cell* cell;
  const char* scope;
  bool root;
};
thread_local std::vector<Frame> call_stack;

// "minidl::nn::Dense" -> "Dense"
std::string short_type_name(const Cell& cell) {
  std::string name = cell.type_name();
  size_t end = std::min(name.find('<'), name.size());
  size_t colon = name.rfind("::", end);
  return colon == std::string::npos ? name : name.substr(colon + 2);
}

}  // namespace

const char* Cell::CallScope::enter(const Cell& cell) {
  if (call_stack.empty()) {
    call_stack.push_back({&cell, intern_scope(short_type_name(cell)), true});
    return call_stack.back().scope;
  }
  const Frame& parent = call_stack.back();
  std::string local;
  for (const auto& [name, child] : parent.cell->children_)
    if (child == &cell && local.empty()) local = name;
  if (local.empty()) local = short_type_name(cell);  // called by a cell it is not registered in
  const char* scope = intern_scope(parent.root ? local : parent.scope + ("." + local));
  call_stack.push_back({&cell, scope, false});
  return scope;
}

Cell::CallScope::CallScope(const Cell& cell) : guard_(enter(cell)) {}
Cell::CallScope::~CallScope() { call_stack.pop_back(); }

Tensor Cell::forward(const Tensor& x) {
  throw Error(
      cat(type_name(), ": forward(x) is not implemented for one input ", x.shape(),
          " (override Tensor forward(const Tensor&), or call with the inputs this cell takes)"));
}

Tensor Cell::forward(const Tensor& a, const Tensor& b) {
  throw Error(cat(type_name(), ": forward(a, b) is not implemented for two inputs ", a.shape(),
                  " and ", b.shape(), " (this cell takes one input)"));
}

std::string Cell::type_name() const {
  const char* mangled = typeid(*this).name();
  int status = 0;
  char* demangled = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
  std::string name = status == 0 && demangled ? demangled : mangled;
  std::free(demangled);
  return name;
}

void Cell::check_name(const std::string& name, const char* what) const {
  MINIDL_CHECK(!name.empty() && name.find('.') == std::string::npos, type_name(), ": ", what,
               " name '", name, "' must be non-empty and contain no '.'");
  auto taken = [&](const auto& list) {
    for (const auto& item : list)
      if (item.first == name) return true;
    return false;
  };
  MINIDL_CHECK(!taken(params_) && !taken(buffers_) && !taken(children_), type_name(), ": ", what,
               " name '", name, "' is already registered");
}

Tensor Cell::register_parameter(const std::string& name, Tensor value) {
  check_name(name, "parameter");
  MINIDL_CHECK(value.defined() && is_floating(value.dtype()), type_name(), ": parameter '", name,
               "' must be a defined float tensor");
  value.requires_grad_(true);
  params_.emplace_back(name, value);
  return value;
}

Tensor Cell::register_buffer(const std::string& name, Tensor value) {
  check_name(name, "buffer");
  MINIDL_CHECK(value.defined(), type_name(), ": buffer '", name, "' is undefined");
  buffers_.emplace_back(name, value);
  return value;
}

void Cell::add_child(const std::string& name, Cell* child, std::shared_ptr<Cell> owned) {
  check_name(name, "cell");
  MINIDL_CHECK(child && child != this, type_name(), ": cell '", name,
               "' is null or this cell itself");
  children_.emplace_back(name, child);
  if (owned) owned_.push_back(std::move(owned));
}

Cell& Cell::register_cell(const std::string& name, Cell& child) {
  add_child(name, &child, nullptr);
  return child;
}

void Cell::register_cells(std::initializer_list<NamedCell> cells) {
  for (const NamedCell& c : cells) register_cell(c.name, c.cell);
}

void Cell::collect(const std::string& prefix, bool buffers, TensorDict& out) const {
  for (const auto& [name, t] : buffers ? buffers_ : params_) out.insert(prefix + name, t);
  for (const auto& [name, child] : children_) child->collect(prefix + name + ".", buffers, out);
}

TensorDict Cell::named_parameters() const {
  TensorDict out;
  collect("", false, out);
  return out;
}

TensorDict Cell::named_buffers() const {
  TensorDict out;
  collect("", true, out);
  return out;
}

std::vector<Tensor> Cell::parameters() const {
  std::vector<Tensor> out;
  for (const auto& item : named_parameters()) out.push_back(item.second);
  return out;
}

std::vector<Tensor> Cell::trainable_params() const {
  std::vector<Tensor> out;
  for (const auto& item : named_parameters())
    if (item.second.requires_grad()) out.push_back(item.second);
  return out;
}

void Cell::train(bool on) {
  training_ = on;
  for (auto& item : children_) item.second->train(on);
}

void Cell::zero_grad() {
  for (Tensor& p : parameters()) p.zero_grad();
}

void Cell::to(Device device) {
  for (auto* list : {&params_, &buffers_})
    for (auto& [name, t] : *list) {
      if (t.device() == device) continue;
      Tensor moved = t.detach().to(device);  // the handle stays; its storage moves
      TensorImpl& impl = t.impl();
      impl.storage = moved.impl().storage;
      impl.offset = 0;
      impl.device = device;
      impl.grad = nullptr;
    }
  for (auto& item : children_) item.second->to(device);
}

TensorDict Cell::state_dict() const {
  TensorDict out;
  for (const auto& [name, t] : named_parameters()) out.insert(name, t.detach());
  for (const auto& [name, t] : named_buffers()) out.insert(name, t.detach());
  return out;
}

void Cell::load_state_dict(const TensorDict& dict, bool strict) {
  const TensorDict own = state_dict();
  std::vector<std::string> missing, unexpected, mismatched;
  for (const auto& [name, t] : own) {
    if (!dict.contains(name)) {
      missing.push_back(name);
    } else if (dict.at(name).shape() != t.shape()) {
      mismatched.push_back(
          cat(name, " (checkpoint ", dict.at(name).shape(), ", model ", t.shape(), ")"));
    }
  }
  for (const auto& item : dict)
    if (!own.contains(item.first)) unexpected.push_back(item.first);
  // One line: at most 3 names a kind, then how many more.
  auto list = [](const std::vector<std::string>& names) {
    std::string s;
    for (size_t i = 0; i < std::min<size_t>(names.size(), 3); ++i) s += (i ? ", " : "") + names[i];
    return names.size() > 3 ? cat(s, " and ", names.size() - 3, " more") : s;
  };
  std::string problems;
  if (strict && !missing.empty()) problems += cat("; missing: ", list(missing));
  if (strict && !unexpected.empty()) problems += cat("; unexpected: ", list(unexpected));
  if (!mismatched.empty()) problems += cat("; shape mismatch: ", list(mismatched));
  // Every missing name present under one prefix (a Model checkpoint's "model."):
  // say so, rather than leave the reader to compare the lists.
  std::string prefix;
  for (const std::string& u : unexpected)
    if (!missing.empty() && u.ends_with("." + missing[0])) prefix = u.substr(0, u.size() - missing[0].size());
  const bool all_under_prefix = !prefix.empty() && std::all_of(missing.begin(), missing.end(),
      [&](const std::string& m) { return dict.contains(prefix + m); });
  if (strict && all_under_prefix)
    problems += cat("; the file holds every missing entry under the prefix '", prefix,
                    "' (a training checkpoint: Model::load_checkpoint reads it, as the "
                    "examples' --resume does)");
  MINIDL_CHECK(problems.empty(), type_name(), "::load_state_dict: the state dict does not fit",
               problems);
  NoGradGuard no_grad;
  for (const auto& [name, t] : own)
    if (dict.contains(name)) Tensor(t).copy_(dict.at(name));
}

void Cell::save(const std::string& path) const { save_safetensors(path, state_dict()); }

void Cell::load(const std::string& path, bool strict) {
  load_state_dict(load_safetensors(path), strict);
}

}  // namespace minidl::nn
