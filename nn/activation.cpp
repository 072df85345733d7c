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

}  // namespace minidl::nn
