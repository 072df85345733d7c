#include "nn/dense.h"

#include "framework/ops.h"

namespace minidl::nn {

Dense::Dense(int64_t in, int64_t out, DenseOptions opt)
    : in_features(in), out_features(out), activation_(std::move(opt.activation)) {
  MINIDL_CHECK(in > 0 && out > 0, "Dense: expected positive in and out features, got ", in, " and ",
               out);
  add_weight_and_bias(*this, {out, in}, opt.weight_init, opt.bias_init, opt.has_bias, weight, bias);
}

// x [..., IN] -> [..., OUT]
Tensor Dense::forward(const Tensor& x) {
  MINIDL_CHECK(x.dim() >= 1 && x.size(-1) == in_features, "Dense(", in_features, ", ", out_features,
               "): expected input [N, ", in_features, "], got ", x.shape());
  if (x.dim() == 2) return activation_(linear(x, weight, bias));
  Shape out_shape = x.shape();
  out_shape.back() = out_features;
  return activation_(linear(x.reshape({-1, in_features}), weight, bias).reshape(out_shape));
}

// a [..., M, K] x b [..., K, N] -> [..., M, N]
Tensor MatMul::forward(const Tensor& a, const Tensor& b) {
  Tensor lhs = transpose_a_ ? transpose(a, -2, -1) : a;
  Tensor rhs = transpose_b_ ? transpose(b, -2, -1) : b;
  return matmul(lhs, rhs);
}

}  // namespace minidl::nn
