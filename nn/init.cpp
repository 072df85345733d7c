#include "nn/init.h"

#include <cmath>
#include <map>

#include "framework/autograd.h"
#include "framework/random.h"
#include "nn/cell.h"

namespace minidl::nn::init {
namespace {

// Writes f() into every element of t (float32 directly, float16 or a view
// through a copy).
template <class F>
void fill_with(Tensor& t, const char* what, F f) {
  MINIDL_CHECK(t.defined() && is_floating(t.dtype()), "init::", what,
               ": expected a float tensor, got ",
               t.defined() ? dtype_name(t.dtype()) : "undefined");
  NoGradGuard no_grad;
  Tensor dst = t.dtype() == kFloat32 && t.is_contiguous() ? t : Tensor::empty(t.shape());
  float* p = dst.data<float>();
  for (int64_t i = 0; i < dst.numel(); ++i) p[i] = static_cast<float>(f());
  if (!dst.same(t)) t.copy_(dst);
}

InitFn uniform_bound(const char* what, std::function<double(Fans)> bound) {
  return [what, bound](Tensor& t, Fans fans) {
    const double b = bound(fans);
    RandomGenerator& g = default_generator();
    fill_with(t, what, [&] { return -b + 2 * b * g.uniform(); });
  };
}

InitFn normal_std(const char* what, std::function<double(Fans)> std_of) {
  return [what, std_of](Tensor& t, Fans fans) {
    const double s = std_of(fans);
    RandomGenerator& g = default_generator();
    fill_with(t, what, [&] { return s * g.normal(); });
  };
}

}  // namespace

Fans fans_of(const Shape& s) {
  if (s.empty()) return {1, 1};
  if (s.size() == 1) return {s[0], s[0]};
  int64_t receptive = 1;
  for (size_t i = 2; i < s.size(); ++i) receptive *= s[i];
  return {s[1] * receptive, s[0] * receptive};
}

InitFn constant(double value) {
  return [value](Tensor& t, Fans) { fill_with(t, "constant", [value] { return value; }); };
}
InitFn zeros() { return constant(0); }
InitFn ones() { return constant(1); }

InitFn normal(double std, double mean) {
  MINIDL_CHECK(std >= 0, "init::normal: expected std >= 0, got ", std);
  return [std, mean](Tensor& t, Fans) {
    RandomGenerator& g = default_generator();
    fill_with(t, "normal", [&] { return mean + std * g.normal(); });
  };
}

InitFn uniform(double low, double high) {
  MINIDL_CHECK(low <= high, "init::uniform: expected low <= high, got ", low, " and ", high);
  return [low, high](Tensor& t, Fans) {
    RandomGenerator& g = default_generator();
    fill_with(t, "uniform", [&] { return low + (high - low) * g.uniform(); });
  };
}

InitFn xavier_uniform(double gain) {
  return uniform_bound("xavier_uniform",
                       [gain](Fans f) { return gain * std::sqrt(6.0 / double(f.in + f.out)); });
}
InitFn xavier_normal(double gain) {
  return normal_std("xavier_normal",
                    [gain](Fans f) { return gain * std::sqrt(2.0 / double(f.in + f.out)); });
}
// gain = sqrt(2 / (1 + a^2)); bound = gain * sqrt(3 / fan_in)
InitFn he_uniform(double a) {
  return uniform_bound("he_uniform", [a](Fans f) {
    return std::sqrt(2.0 / (1 + a * a)) * std::sqrt(3.0 / double(f.in));
  });
}
InitFn he_normal(double a) {
  return normal_std("he_normal",
                    [a](Fans f) { return std::sqrt(2.0 / (1 + a * a)) / std::sqrt(double(f.in)); });
}
InitFn fan_in_uniform() {
  return uniform_bound("fan_in_uniform", [](Fans f) { return 1.0 / std::sqrt(double(f.in)); });
}

InitFn from_tensor(const Tensor& values) {
  MINIDL_CHECK(values.defined(), "init::from_tensor: undefined tensor");
  Tensor v = values.detach();
  return [v](Tensor& t, Fans) {
    MINIDL_CHECK(t.numel() == v.numel(), "init::from_tensor: initial values ", v.shape(),
                 " do not fit a parameter of shape ", t.shape());
    NoGradGuard no_grad;
    t.copy_(v);
  };
}

InitFn by_name(const std::string& name) {
  static const std::map<std::string, std::function<InitFn()>> known{
      {"zeros", [] { return zeros(); }},
      {"ones", [] { return ones(); }},
      {"normal", [] { return normal(); }},
      {"uniform", [] { return uniform(-0.07, 0.07); }},
      {"xavier_uniform", [] { return xavier_uniform(); }},
      {"xavier_normal", [] { return xavier_normal(); }},
      {"he_uniform", [] { return he_uniform(); }},
      {"kaiming_uniform", [] { return he_uniform(); }},
      {"he_normal", [] { return he_normal(); }},
      {"kaiming_normal", [] { return he_normal(); }},
      {"fan_in_uniform", [] { return fan_in_uniform(); }},
  };
  auto it = known.find(name);
  if (it == known.end()) {
    std::string names;
    for (const auto& k : known) names += (names.empty() ? "" : ", ") + k.first;
    throw Error(cat("init: unknown initializer '", name, "' (known: ", names, ")"));
  }
  return it->second();
}

void Initializer::operator()(Tensor& t, Fans fans) const { fn_(t, fans); }

}  // namespace minidl::nn::init

namespace minidl::nn {

void add_weight_and_bias(Cell& cell, const Shape& weight_shape, const Initializer& weight_init,
                         const Initializer& bias_init, bool has_bias, Tensor& weight, Tensor& bias) {
  weight = Tensor::empty(weight_shape);
  const init::Fans fans = init::fans_of(weight_shape);
  weight_init(weight, fans);
  cell.register_parameter("weight", weight);
  if (!has_bias) return;
  bias = Tensor::empty({weight_shape[0]});
  bias_init(bias, fans);
  cell.register_parameter("bias", bias);
}

}  // namespace minidl::nn
