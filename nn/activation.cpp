#include "nn/activation.h"

#include <map>

#include "framework/ops.h"

namespace minidl::nn {

Activation::Activation(const std::string& name) : name_(name.empty() ? "none" : name) {
  using Fn = std::function<Tensor(const Tensor&)>;
  static const std::map<std::string, Fn> known{
      {"none", nullptr},
      {"relu", [](const Tensor& x) { return relu(x); }},
      {"sigmoid", [](const Tensor& x) { return sigmoid(x); }},
      {"tanh", [](const Tensor& x) { return tanh(x); }},
      {"softmax", [](const Tensor& x) { return softmax(x, -1); }},
      {"log_softmax", [](const Tensor& x) { return log_softmax(x, -1); }},
      {"leaky_relu", [](const Tensor& x) { return leaky_relu(x); }},
      {"gelu", [](const Tensor& x) { return gelu(x); }},
      {"silu", [](const Tensor& x) { return silu(x); }},
      {"elu", [](const Tensor& x) { return elu(x); }},
      {"softplus", [](const Tensor& x) { return softplus(x); }},
      {"hardtanh", [](const Tensor& x) { return hardtanh(x); }},
      {"log_sigmoid", [](const Tensor& x) { return log_sigmoid(x); }},
  };
  auto it = known.find(name_);
  if (it == known.end()) {
    std::string names;
    for (const auto& k : known) names += (names.empty() ? "" : ", ") + k.first;
    throw Error(cat("Activation: unknown activation '", name, "' (known: ", names, ")"));
  }
  fn_ = it->second;
}

Tensor ReLU::forward(const Tensor& x) { return relu(x); }
Tensor Sigmoid::forward(const Tensor& x) { return sigmoid(x); }
Tensor Tanh::forward(const Tensor& x) { return tanh(x); }
Tensor Softmax::forward(const Tensor& x) { return softmax(x, dim_); }

// ---- math (issue 22) ----
GELU::GELU(std::string approximate) : approximate_(std::move(approximate)) {
  MINIDL_CHECK(approximate_ == "none" || approximate_ == "tanh",
               "GELU: approximate must be \"none\" or \"tanh\", got \"", approximate_, "\"");
}
Hardtanh::Hardtanh(double min_val, double max_val) : min_val_(min_val), max_val_(max_val) {
  MINIDL_CHECK(min_val <= max_val, "Hardtanh: min_val ", min_val, " is above max_val ", max_val);
}
Tensor LeakyReLU::forward(const Tensor& x) { return leaky_relu(x, negative_slope_); }
Tensor GELU::forward(const Tensor& x) { return gelu(x, approximate_); }
Tensor SiLU::forward(const Tensor& x) { return silu(x); }
Tensor ELU::forward(const Tensor& x) { return elu(x, alpha_); }
Tensor Softplus::forward(const Tensor& x) { return softplus(x, beta_, threshold_); }
Tensor Hardtanh::forward(const Tensor& x) { return hardtanh(x, min_val_, max_val_); }
Tensor LogSigmoid::forward(const Tensor& x) { return log_sigmoid(x); }

}  // namespace minidl::nn
