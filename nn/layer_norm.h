// Layer and group normalization (PyTorch's LayerNorm and GroupNorm), and their
// functional forms.
//
// Both normalize with the mean and the biased variance of a group of values,
//   y = (x - mean) / sqrt(var + eps) * weight + bias,
// over the last dims given by normalized_shape (layer norm: one group per
// leading index), or over C / G channels and every spatial position (group
// norm: G groups per sample). Unlike BatchNorm there are no running
// estimates: training and evaluation compute the same thing. Both run the
// layer_norm_rows op (framework/ops.h: one kernel forward, a row per group):
// layer norm with its weight and bias fused, group norm without, its
// per-channel weight and bias applied after. Errors name the op, the expected
// and the got shape.
#pragma once
#include "nn/cell.h"

namespace minidl {

// x [*, D1, ..., Dk], normalized_shape [D1, ..., Dk], weight and bias
// [D1, ..., Dk] or undefined -> [*, D1, ..., Dk] (torch.nn.functional.layer_norm).
Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = {},
                  const Tensor& bias = {}, double eps = 1e-5);
// x [N, C, *] with C divisible by num_groups, weight and bias [C] or undefined
// -> [N, C, *] (torch.nn.functional.group_norm).
Tensor group_norm(const Tensor& x, int64_t num_groups, const Tensor& weight = {},
                  const Tensor& bias = {}, double eps = 1e-5);

}  // namespace minidl

namespace minidl::nn {

struct LayerNormOptions {
  double eps = 1e-5;
  bool elementwise_affine = true;  // learnable weight and bias
};

// x [*, normalized_shape] -> the same shape. Parameters: weight (ones) and
// bias (zeros), both normalized_shape, absent without elementwise_affine.
//   nn::LayerNorm ln(512);                 // the last dim
//   nn::LayerNorm ln2({8, 8}, {.eps = 1e-6});  // the last two dims
class LayerNorm : public Cell {
 public:
  explicit LayerNorm(Shape normalized_shape, LayerNormOptions options = {});
  explicit LayerNorm(int64_t normalized_dim, LayerNormOptions options = {})
      : LayerNorm(Shape{normalized_dim}, options) {}
  using Cell::forward;
  Tensor forward(const Tensor& x) override;

  const Shape normalized_shape;
  const double eps;
  Tensor weight, bias;  // undefined without elementwise_affine
};

struct GroupNormOptions {
  double eps = 1e-5;
  bool affine = true;  // learnable per-channel weight and bias
};

// x [N, C, *] -> [N, C, *]; C = num_channels, divisible by num_groups.
// Parameters: weight [C] (ones), bias [C] (zeros), absent without affine.
class GroupNorm : public Cell {
 public:
  GroupNorm(int64_t num_groups, int64_t num_channels, GroupNormOptions options = {});
  using Cell::forward;
  Tensor forward(const Tensor& x) override;

  const int64_t num_groups, num_channels;
  const double eps;
  Tensor weight, bias;  // undefined without affine
};

}  // namespace minidl::nn
