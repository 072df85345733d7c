// Parameter initializers. Each fills a float tensor in place from the global
// seeded generator (random.h: manual_seed(s) makes it reproducible) and gets
// the fans of the weight it belongs to, so a bias can be scaled by its
// weight's fan_in as PyTorch does.
//
// Fans: Dense weight [OUT, IN] has fan_in = IN, fan_out = OUT; Conv2d weight
// [OC, C, KH, KW] has fan_in = C*KH*KW, fan_out = OC*KH*KW.
//
// By name (the strings MindSpore accepts, plus two of ours):
//   "zeros", "ones"
//   "normal"          N(0, 0.01^2)                 (MindSpore's sigma)
//   "uniform"         U(-0.07, 0.07)               (MindSpore's scale)
//   "xavier_uniform"  U(-b, b), b = sqrt(6 / (fan_in + fan_out))
//   "xavier_normal"   N(0, 2 / (fan_in + fan_out))
//   "he_uniform" = "kaiming_uniform"
//                     U(-b, b), b = sqrt(6 / ((1 + a^2) fan_in)) with
//                     a = sqrt(5): b = 1/sqrt(fan_in), PyTorch's default for
//                     Linear and Conv2d weights. Pass he_uniform(0) for the
//                     textbook sqrt(6 / fan_in).
//   "he_normal" = "kaiming_normal"   N(0, 2 / fan_in)  (a = 0)
//   "fan_in_uniform"  U(-1/sqrt(fan_in), 1/sqrt(fan_in)), PyTorch's bias default
// An unknown name throws minidl::Error listing the known ones.
#pragma once
#include <cmath>
#include <concepts>
#include <functional>
#include <string>

#include "framework/tensor.h"

namespace minidl::nn::init {

struct Fans {
  int64_t in = 1, out = 1;
};
// Fans of a weight of this shape (1-D: in = out = n; 0-D: 1, 1).
Fans fans_of(const Shape& weight_shape);

using InitFn = std::function<void(Tensor& t, Fans fans)>;

InitFn zeros();
InitFn ones();
InitFn constant(double value);
InitFn normal(double std = 0.01, double mean = 0);
InitFn uniform(double low, double high);  // U(low, high)
InitFn xavier_uniform(double gain = 1);
InitFn xavier_normal(double gain = 1);
InitFn he_uniform(double a = std::sqrt(5.0));
InitFn he_normal(double a = 0);
InitFn fan_in_uniform();
// Copies `values` (same number of elements) into the tensor.
InitFn from_tensor(const Tensor& values);
// The initializer called `name` (see above).
InitFn by_name(const std::string& name);

// What options structs hold: a name, a function, or a Tensor of values.
//   nn::Dense fc{4, 3, {.weight_init = "xavier_uniform", .bias_init = "zeros"}};
//   nn::Dense fc{4, 3, {.weight_init = nn::init::normal(0.1)}};
//   nn::Dense fc{4, 3, {.weight_init = [](Tensor& w) { w.fill_(0.5); }}};
class Initializer {
 public:
  Initializer(const char* name) : Initializer(std::string(name)) {}
  Initializer(const std::string& name) : name_(name), fn_(by_name(name)) {}
  Initializer(const Tensor& values) : name_("tensor"), fn_(from_tensor(values)) {}
  // clang-format off
  template <class F>
    requires(std::invocable<F&, Tensor&, Fans> && !std::same_as<F, Initializer>)
  Initializer(F fn) : name_("custom"), fn_(std::move(fn)) {}
  template <class F>
    requires(std::invocable<F&, Tensor&> && !std::invocable<F&, Tensor&, Fans>)
  Initializer(F fn) : name_("custom"), fn_([fn](Tensor& t, Fans) mutable { fn(t); }) {}
  // clang-format on

  // Fills t in place (outside autograd). `fans` are those of the weight.
  void operator()(Tensor& t, Fans fans) const;
  const std::string& name() const { return name_; }

 private:
  std::string name_;
  InitFn fn_;
};

}  // namespace minidl::nn::init

namespace minidl::nn {
using init::Initializer;
class Cell;

// What Dense and Conv2d share: makes weight [OUT, ...] and, with has_bias,
// bias [OUT], fills both from the weight's fans (init::fans_of), and registers
// them on `cell` as "weight" and "bias".
void add_weight_and_bias(Cell& cell, const Shape& weight_shape, const Initializer& weight_init,
                         const Initializer& bias_init, bool has_bias, Tensor& weight, Tensor& bias);
}
