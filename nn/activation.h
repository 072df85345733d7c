// Activation cells (ReLU, Sigmoid, Tanh, Softmax, and PyTorch's LeakyReLU,
// GELU, SiLU, ELU, Softplus, Hardtanh, LogSigmoid) and Activation, the
// function-or-name that Dense's options take. All are parameter-free and
// shape-preserving: x [...] -> [...].
#pragma once
#include <concepts>
#include <functional>
#include <string>

#include "nn/cell.h"

namespace minidl::nn {

// An optional activation: empty (identity), a name ("relu", "sigmoid",
// "tanh", "softmax" over the last dim, "log_softmax", "leaky_relu", "gelu",
// "silu", "elu", "softplus", "hardtanh", "log_sigmoid" with PyTorch's
// default arguments; "" or "none" for
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

// ---- math (issue 22): PyTorch's constructor arguments; see ops.h for each function ----
class LeakyReLU : public Cell {
 public:
  explicit LeakyReLU(double negative_slope = 0.01) : negative_slope_(negative_slope) {}
  using Cell::forward;
  Tensor forward(const Tensor& x) override;  // x > 0 ? x : negative_slope * x

 private:
  double negative_slope_;
};

class GELU : public Cell {
 public:
  // approximate: "none" (erf) or "tanh"; anything else throws
  explicit GELU(std::string approximate = "none");
  using Cell::forward;
  Tensor forward(const Tensor& x) override;  // x * Phi(x)

 private:
  std::string approximate_;
};

class SiLU : public Cell {
 public:
  using Cell::forward;
  Tensor forward(const Tensor& x) override;  // x * sigmoid(x)
};

class ELU : public Cell {
 public:
  explicit ELU(double alpha = 1) : alpha_(alpha) {}
  using Cell::forward;
  Tensor forward(const Tensor& x) override;  // x > 0 ? x : alpha * (exp(x) - 1)

 private:
  double alpha_;
};

class Softplus : public Cell {
 public:
  explicit Softplus(double beta = 1, double threshold = 20) : beta_(beta), threshold_(threshold) {}
  using Cell::forward;
  Tensor forward(const Tensor& x) override;  // log(1 + exp(beta x)) / beta

 private:
  double beta_, threshold_;
};

class Hardtanh : public Cell {
 public:
  // min_val > max_val throws
  explicit Hardtanh(double min_val = -1, double max_val = 1);
  using Cell::forward;
  Tensor forward(const Tensor& x) override;  // clamp(x, min_val, max_val)

 private:
  double min_val_, max_val_;
};

class LogSigmoid : public Cell {
 public:
  using Cell::forward;
  Tensor forward(const Tensor& x) override;  // log(sigmoid(x)), stable
};

}  // namespace minidl::nn
