// LayerNorm / GroupNorm and layer_norm / group_norm: hand-computed values,
// finite-difference gradients (inputs and parameters), PyTorch's parameter
// names, and errors naming both shapes. PyTorch's values: test_torch_attn.cpp.
#include <doctest/doctest.h>
#include <minidl/minidl.h>

#include "cell_gradcheck.h"
#include "check_close.h"
#include "gradcheck.h"

using namespace minidl;
using testing::cell_param_gradcheck;
using testing::check_close;
using testing::gradcheck;

TEST_CASE("LayerNorm of [1, 2, 3] by hand: mean 2, biased variance 2/3") {
  nn::LayerNorm ln(3);
  // (x - 2) / sqrt(2/3 + 1e-5)
  check_close(ln(Tensor::of({1, 2, 3}, {1, 3})), {-1.2247356, 0.0, 1.2247356}, 1e-6);
  ln.weight.copy_(Tensor::of({2, 1, 0.5}));
  ln.bias.copy_(Tensor::of({0, 1, -1}));
  check_close(ln(Tensor::of({1, 2, 3}, {1, 3})), {-2.4494712, 1.0, -0.3876322}, 1e-6);
  // each row on its own; the result keeps the input's shape
  Tensor y = layer_norm(Tensor::of({1, 2, 3, 10, 20, 30}, {2, 1, 3}), {3});
  CHECK(y.shape() == Shape{2, 1, 3});
  check_close(y, {-1.2247356, 0, 1.2247356, -1.2247449, 0, 1.2247449}, 1e-6);
}

TEST_CASE("LayerNorm over the last two dims, and without affine parameters") {
  nn::LayerNorm ln({2, 2}, {.eps = 0, .elementwise_affine = false});
  CHECK(ln.parameters().empty());
  // one group 0, 2, 4, 6: mean 3, variance 5
  check_close(ln(Tensor::of({0, 2, 4, 6}, {1, 2, 2})),
              {-1.3416408, -0.4472136, 0.4472136, 1.3416408}, 1e-6);
}

TEST_CASE("GroupNorm by hand: the mean and variance over C / G channels and every position") {
  nn::GroupNorm gn(2, 4);
  // x [1, 4, 2]: group 0 holds 1, 3, 5, 7 (mean 4, variance 5), group 1 holds 0, 0, 4, 4 (mean 2,
  // variance 4)
  Tensor x = Tensor::of({1, 3, 5, 7, 0, 0, 4, 4}, {1, 4, 2});
  check_close(
      gn(x),
      {-1.3416395, -0.4472132, 0.4472132, 1.3416395, -0.9999988, -0.9999988, 0.9999988, 0.9999988},
      1e-6);
  gn.weight.copy_(Tensor::of({1, 2, 3, 4}));
  gn.bias.copy_(Tensor::of({0, 0, 1, 1}));
  check_close(
      gn(x),
      {-1.3416395, -0.4472132, 0.8944264, 2.6832790, -1.9999964, -1.9999964, 4.9999952, 4.9999952},
      1e-5);
}

TEST_CASE("LayerNorm and GroupNorm gradients match finite differences") {
  Tensor x = Tensor::randn({3, 2, 4}) * 2 + 1;
  nn::LayerNorm ln({2, 4});
  ln.weight.copy_(Tensor::randn({2, 4}));
  ln.bias.copy_(Tensor::randn({2, 4}));
  CHECK_GRADCHECK_RESULT(gradcheck([&](const std::vector<Tensor>& in) { return ln(in[0]); }, {x},
                                   {.eps = 1e-2, .rtol = 2e-2, .atol = 5e-3}));
  CHECK_GRADCHECK_RESULT(cell_param_gradcheck(ln, [&] { return ln(x); }));

  nn::GroupNorm gn(2, 4);
  gn.weight.copy_(Tensor::randn({4}));
  gn.bias.copy_(Tensor::randn({4}));
  Tensor x4 = Tensor::randn({2, 4, 2, 2});
  CHECK_GRADCHECK_RESULT(gradcheck([&](const std::vector<Tensor>& in) { return gn(in[0]); }, {x4},
                                   {.eps = 1e-2, .rtol = 2e-2, .atol = 5e-3}));
  CHECK_GRADCHECK_RESULT(cell_param_gradcheck(gn, [&] { return gn(x4); }));
}

TEST_CASE("LayerNorm and GroupNorm use PyTorch's parameter names and initial values") {
  nn::LayerNorm ln({2, 3});
  nn::GroupNorm gn(2, 6, {.affine = true});
  for (nn::Cell* c : {static_cast<nn::Cell*>(&ln), static_cast<nn::Cell*>(&gn)}) {
    TensorDict sd = c->state_dict();
    CHECK(sd.keys() == std::vector<std::string>{"weight", "bias"});
  }
  CHECK(ln.weight.shape() == Shape{2, 3});
  check_close(ln.weight, {1, 1, 1, 1, 1, 1});
  check_close(gn.bias, {0, 0, 0, 0, 0, 0});
  CHECK(nn::GroupNorm(2, 6, {.affine = false}).parameters().empty());
  // the same in training and evaluation mode (no running estimates)
  Tensor x = Tensor::randn({2, 6, 3});
  const std::vector<float> a = gn(x).to_float_vector();
  gn.eval();
  CHECK(gn(x).to_float_vector() == a);
}

TEST_CASE("LayerNorm and GroupNorm errors name the expected and the got shape") {
  nn::LayerNorm ln({3, 4});
  CHECK_THROWS_WITH(
      ln(Tensor::zeros({2, 4, 3})),
      doctest::Contains("layer_norm: expected input [*, 3, 4] (normalized_shape [3, 4]), "
                        "got [2, 4, 3]"));
  CHECK_THROWS_WITH(ln(Tensor::zeros({4})), doctest::Contains("got [4]"));
  CHECK_THROWS_WITH(layer_norm(Tensor::zeros({2, 3}), {3}, Tensor::ones({4})),
                    doctest::Contains("layer_norm: expected weight [3], got [4]"));
  CHECK_THROWS_WITH(nn::LayerNorm(Shape{}), doctest::Contains("LayerNorm: expected a non-empty"));
  CHECK_THROWS_WITH(nn::GroupNorm(4, 6), doctest::Contains("num_groups 4, num_channels 6"));
  nn::GroupNorm gn(2, 4);
  CHECK_THROWS_WITH(gn(Tensor::zeros({2, 6, 3})),
                    doctest::Contains("GroupNorm(2, 4): expected input [N, 4, *], got [2, 6, 3]"));
  CHECK_THROWS_WITH(group_norm(Tensor::zeros({2, 6}), 4),
                    doctest::Contains("C divisible by num_groups = 4, got [2, 6]"));
  CHECK_THROWS_WITH(group_norm(Tensor::zeros({2, 6}), 3, Tensor::ones({3})),
                    doctest::Contains("group_norm: expected weight [6], got [3]"));
}
