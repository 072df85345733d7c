// Dense (fully connected) and MatMul.
#pragma once
#include "nn/activation.h"
#include "nn/cell.h"
#include "nn/init.h"

namespace minidl::nn {

struct DenseOptions {
  // Defaults are PyTorch's: weight and bias U(-1/sqrt(IN), 1/sqrt(IN)).
  Initializer weight_init = "he_uniform";
  Initializer bias_init = "fan_in_uniform";
  bool has_bias = true;
  Activation activation = {};  // applied after the affine map
};

// y = activation(x W^T + b).  x [N, IN] (or [..., IN]) -> [N, OUT] ([..., OUT]).
// Parameters: weight [OUT, IN], bias [OUT] (absent without has_bias).
class Dense : public Cell {
 public:
  Dense(int64_t in_features, int64_t out_features, DenseOptions options = {});
  using Cell::forward;
  Tensor forward(const Tensor& x) override;

  const int64_t in_features, out_features;
  Tensor weight, bias;

 private:
  Activation activation_;
};

// forward(a, b) = matmul(a, b): [M, K] x [K, N] -> [M, N], or batched
// [B, M, K] x [B, K, N] / [K, N] -> [B, M, N]; with transpose_a / transpose_b
// the last two dims of that side are swapped first. No parameters.
// forward(x) with one input throws minidl::Error.
class MatMul : public Cell {
 public:
  explicit MatMul(bool transpose_a = false, bool transpose_b = false)
      : transpose_a_(transpose_a), transpose_b_(transpose_b) {}
  using Cell::forward;
  Tensor forward(const Tensor& a, const Tensor& b) override;

 private:
  bool transpose_a_, transpose_b_;
};

}  // namespace minidl::nn
