#include "nn/layer_norm.h"

#include "framework/ops.h"

namespace minidl {
namespace {

void check_affine(const char* op, const Tensor& t, const char* name, const Shape& want) {
  MINIDL_CHECK(!t.defined() || t.shape() == want, op, ": expected ", name, " ", want, ", got ",
               t.shape());
}

}  // namespace

// x [*, D1..Dk] -> [*, D1..Dk]
Tensor layer_norm(const Tensor& x, const Shape& shape, const Tensor& weight, const Tensor& bias,
                  double eps) {
  const int64_t k = static_cast<int64_t>(shape.size()), lead = x.dim() - k;
  MINIDL_CHECK(k > 0 && lead >= 0 && Shape(x.shape().begin() + lead, x.shape().end()) == shape,
               "layer_norm: expected input [*, ", to_string(shape).substr(1), " (normalized_shape ",
               shape, "), got ", x.shape());
  check_affine("layer_norm", weight, "weight", shape);
  check_affine("layer_norm", bias, "bias", shape);
  const int64_t d = numel_of(shape);
  const auto flat = [d](const Tensor& t) { return t.defined() ? t.reshape({d}) : t; };
  return layer_norm_rows(x.reshape({x.numel() / d, d}), flat(weight), flat(bias), eps)
      .reshape(x.shape());
}

// x [N, C, *] -> [N, C, *]
Tensor group_norm(const Tensor& x, int64_t groups, const Tensor& weight, const Tensor& bias,
                  double eps) {
  MINIDL_CHECK(x.dim() >= 2 && groups > 0 && x.size(1) % groups == 0,
               "group_norm: expected input [N, C, *] with C divisible by num_groups = ", groups,
               ", got ", x.shape());
  const int64_t c = x.size(1);
  check_affine("group_norm", weight, "weight", {c});
  check_affine("group_norm", bias, "bias", {c});
  return group_norm_rows(x, groups, weight, bias, eps);
}

}  // namespace minidl

namespace minidl::nn {

LayerNorm::LayerNorm(Shape shape, LayerNormOptions o)
    : normalized_shape(std::move(shape)), eps(o.eps) {
  bool positive = !normalized_shape.empty();
  for (int64_t d : normalized_shape) positive = positive && d > 0;
  MINIDL_CHECK(positive && o.eps >= 0,
               "LayerNorm: expected a non-empty normalized_shape of positive ",
               "dims and eps >= 0, got ", normalized_shape, " and ", o.eps);
  if (o.elementwise_affine) {
    weight = register_parameter("weight", Tensor::ones(normalized_shape));
    bias = register_parameter("bias", Tensor::zeros(normalized_shape));
  }
}

// x [*, normalized_shape] -> [*, normalized_shape]
Tensor LayerNorm::forward(const Tensor& x) {
  return layer_norm(x, normalized_shape, weight, bias, eps);
}

GroupNorm::GroupNorm(int64_t g, int64_t c, GroupNormOptions o)
    : num_groups(g), num_channels(c), eps(o.eps) {
  MINIDL_CHECK(
      g > 0 && c > 0 && c % g == 0 && o.eps >= 0,
      "GroupNorm: expected num_channels divisible by num_groups (both positive) and eps >= 0, ",
      "got num_groups ", g, ", num_channels ", c, ", eps ", o.eps);
  if (o.affine) {
    weight = register_parameter("weight", Tensor::ones({c}));
    bias = register_parameter("bias", Tensor::zeros({c}));
  }
}

// x [N, C, *] -> [N, C, *]
Tensor GroupNorm::forward(const Tensor& x) {
  MINIDL_CHECK(x.dim() >= 2 && x.size(1) == num_channels, "GroupNorm(", num_groups, ", ",
               num_channels, "): expected input [N, ", num_channels, ", *], got ", x.shape());
  return group_norm(x, num_groups, weight, bias, eps);
}

}  // namespace minidl::nn
