// Issue 22's new kernel paths on CUDA against the CPU (helpers in
// check_cuda.h): the unary maps Abs, Erf, Expm1, Log1p, Rsqrt, Sin, Cos, the
// binary Maximum and Minimum (NaN and ties included), and the compare kernel
// on every dtype; the ops composed from them (clamp, activations, losses)
// once each.
#include <doctest/doctest.h>
#include <minidl/minidl.h>

#include <cmath>
#include <vector>

#include "cuda/check_cuda.h"

using namespace minidl;
using namespace minidl::cuda_suite;

using In = std::vector<Tensor>;

TEST_CASE("cuda: issue 22's unary maps, forward and backward") {
  manual_seed(22);
  Tensor any = Tensor::randn({5, 33}) * 2.0, positive = uniform({5, 33}, 0.1, 4);
  check_op("abs", [](const In& in) { return abs(in[0]); }, {any});
  check_op("erf", [](const In& in) { return erf(in[0]); }, {any});
  check_op("expm1", [](const In& in) { return expm1(in[0]); }, {any});
  check_op("log1p", [](const In& in) { return log1p(in[0]); }, {positive});
  check_op("rsqrt", [](const In& in) { return rsqrt(in[0]); }, {positive});
  check_op("sin", [](const In& in) { return sin(in[0]); }, {any});
  check_op("cos", [](const In& in) { return cos(in[0]); }, {any});
  check_op("clamp", [](const In& in) { return clamp(in[0], -0.5, 1.0); }, {any});
}

TEST_CASE("cuda: maximum and minimum broadcast, with ties and NaN") {
  manual_seed(23);
  Tensor a = Tensor::randn({3, 4, 5}), b = Tensor::randn({4, 1});
  check_op("maximum", [](const In& in) { return maximum(in[0], in[1]); }, {a, b});
  check_op("minimum", [](const In& in) { return minimum(in[0], in[1]); }, {a, b});
  Tensor x = Tensor::of({1, 2, 3, NAN, 5}), y = Tensor::of({1, 3, 2, 0, NAN});  // a tie, NaNs
  check_op("maximum ties", [](const In& in) { return maximum(in[0], in[1]); }, {x, y});
  check_op("minimum ties", [](const In& in) { return minimum(in[0], in[1]); }, {x, y});
}

TEST_CASE("cuda: comparisons on every dtype, broadcast") {
  const int64_t big = int64_t{1} << 40;
  Tensor i64a = Tensor::of_ints({big, big + 1, 16777217, -3}, {4}, kInt64);
  Tensor i64b = Tensor::of_ints({big + 1, big + 1, 16777216, -3}, {4}, kInt64);
  Tensor f32a = Tensor::randn({2, 3, 4}), f32b = Tensor::randn({3, 1});
  Tensor i32a = Tensor::of_ints({1, 5, -2, 7, 0, 3}, {2, 3}, kInt32),
         i32b = Tensor::of_ints({1, 0, 3}, {3}, kInt32);
  const std::vector<std::pair<Tensor, Tensor>> pairs{
      {i64a, i64b},
      {f32a, f32b},
      {f32a.to(kFloat16), f32b.to(kFloat16)},
      {i32a, i32b},
      {i32a, Tensor::of_ints({1, 16777217, 3}, {3}, kInt64)}};
  for (const auto& pair : pairs) {
    const Tensor &a = pair.first, &b = pair.second;
    check_op("eq", [](const In& in) { return eq(in[0], in[1]); }, {a, b});
    check_op("ne", [](const In& in) { return ne(in[0], in[1]); }, {a, b});
    check_op("lt", [](const In& in) { return lt(in[0], in[1]); }, {a, b});
    check_op("le", [](const In& in) { return le(in[0], in[1]); }, {a, b});
    check_op("gt", [](const In& in) { return gt(in[0], in[1]); }, {a, b});
    check_op("ge", [](const In& in) { return ge(in[0], in[1]); }, {a, b});
  }
  CHECK(eq(i64a.cuda(), i64b.cuda()).to_float_vector() == std::vector<float>{0, 1, 0, 1});
}

TEST_CASE("cuda: activations (gelu and leaky_relu fused), reductions and losses") {
  manual_seed(24);
  Tensor x = Tensor::randn({4, 6}) * 3.0;
  check_op("gelu", [](const In& in) { return gelu(in[0]); }, {x});
  check_op("gelu tanh", [](const In& in) { return gelu(in[0], "tanh"); }, {x});
  check_op("elu", [](const In& in) { return elu(in[0]); }, {x});
  check_op("softplus", [](const In& in) { return softplus(in[0], 2, 3); }, {x});
  check_op("log_sigmoid", [](const In& in) { return log_sigmoid(in[0]); }, {x});
  check_op("hardtanh", [](const In& in) { return hardtanh(in[0]); }, {x});
  check_op("leaky_relu", [](const In& in) { return leaky_relu(in[0], 0.2); }, {x});
  check_op("min", [](const In& in) { return min(in[0], {1}); }, {x});
  check_op("var", [](const In& in) { return var(in[0], {0}); }, {x});
  check_op("logsumexp", [](const In& in) { return logsumexp(in[0], {1}); }, {x});
  check_op("norm", [](const In& in) { return norm(in[0], 2, {1}); }, {x});
  CHECK(argmin(x.cuda(), 0).cpu().to_vector<int64_t>() == argmin(x, 0).to_vector<int64_t>());
  Tensor p = uniform({4, 6}, 0, 1), t = uniform({4, 6}, 0, 1);
  check_op("bce", [](const In& in) { return binary_cross_entropy(in[0], in[1]); }, {p, t});
  check_op("bce_with_logits",
           [](const In& in) { return binary_cross_entropy_with_logits(in[0], in[1]); }, {x, t});
  check_op("smooth_l1", [](const In& in) { return smooth_l1_loss(in[0], in[1], "sum", 0.5); },
           {x, t});
  for (const char* r : {"none", "mean"}) {  // one gradient per element, and one for all
    INFO(r);
    check_op("mse", [r](const In& in) { return mse_loss(in[0], in[1], r); }, {x, t});
    check_op("huber", [r](const In& in) { return huber_loss(in[0], in[1], r, 0.3); }, {x, t});
  }
  check_op("pow 2", [](const In& in) { return pow(in[0], 2.0); }, {x});
  Tensor labels = Tensor::of_ints({0, 5, -100, 2}, {4}, kInt64);
  Tensor w = uniform({6}, 0.5, 1.5);
  check_op("cross_entropy options",
           [w](const In& in) {
             return cross_entropy(in[0], in[1], w.to(in[0].device()), -100, "mean", 0.1);
           },
           {x, labels});
}
