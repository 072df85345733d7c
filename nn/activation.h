// Activation cells (ReLU, Sigmoid, Tanh, Softmax) and Activation, the
// function-or-name that Dense's options take. All are parameter-free and
// shape-preserving: x [...] -> [...].
#pragma once
#include <concepts>
#include <functional>
#include <string>

#include "nn/cell.h"

namespace minidl::nn {

// An optional activation: empty (identity), a name ("relu", "sigmoid",
// "tanh", "softmax" over the last dim, "log_softmax"; "" or "none" for
// identity), or any Tensor(const Tensor&) callable. An unknown name throws
// minidl::Error listing the known ones.
class Activation {
 public:
  Activation() = default;
  Activation(const char* name) : Activation(std::string(name)) {}
  Activation(const std::string& name);
  // clang-format off
  template <class F>
    requires(std::is_invocable_r_v<Tensor, F&, const Tensor&> && !std::same_as<F, Activation>)
  Activation(F fn) : name_("custom"), fn_(std::move(fn)) {}
  // clang-format on

  Tensor operator()(const Tensor& x) const { return fn_ ? fn_(x) : x; }
  explicit operator bool() const { return static_cast<bool>(fn_); }
  const std::string& name() const { return name_; }

 private:
  std::string name_ = "none";
  std::function<Tensor(const Tensor&)> fn_;
};

class ReLU : public Cell {
 public:
  using Cell::forward;
  Tensor forward(const Tensor& x) override;  // max(x, 0)
};

class Sigmoid : public Cell {
 public:
  using Cell::forward;
  Tensor forward(const Tensor& x) override;  // 1 / (1 + exp(-x))
};

class Tanh : public Cell {
 public:
  using Cell::forward;
  Tensor forward(const Tensor& x) override;
};

class Softmax : public Cell {
 public:
  explicit Softmax(int64_t dim = -1) : dim_(dim) {}
  using Cell::forward;
  Tensor forward(const Tensor& x) override;  // exp(x) / sum(exp(x)) along dim

 private:
  int64_t dim_;
};

}  // namespace minidl::nn
