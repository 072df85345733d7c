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

// layer_norm_rows, the op under both, against float64 by hand: y, and the
// gradients of x, weight and bias for a random upstream gradient, on rows
// wider than a warp (D = 100) and more rows than one part of the weight
// gradient's sums (R = 70; the CUDA kernels' split points).
TEST_CASE("layer_norm_rows: values and all three gradients against float64") {
  manual_seed(61);
  const int64_t R = 70, D = 100;
  const double eps = 1e-5;
  Tensor x = (Tensor::randn({R, D}) * 3 + 2).requires_grad_();
  Tensor w = Tensor::randn({D}).requires_grad_(), b = Tensor::randn({D}).requires_grad_();
  Tensor g = Tensor::randn({R, D});
  Tensor y = layer_norm_rows(x, w, b, eps);
  (y * g).sum().backward();
  const auto xs = x.detach().to_vector<float>(), ws = w.detach().to_vector<float>(),
             bs = b.detach().to_vector<float>(), gs = g.to_vector<float>();
  std::vector<double> want_y(R * D), want_gx(R * D), want_gw(D, 0), want_gb(D, 0);
  for (int64_t i = 0; i < R; ++i) {
    double m = 0, v = 0, s1 = 0, s2 = 0;
    for (int64_t k = 0; k < D; ++k) m += xs[i * D + k] / double(D);
    for (int64_t k = 0; k < D; ++k) v += (xs[i * D + k] - m) * (xs[i * D + k] - m) / double(D);
    const double rs = 1 / std::sqrt(v + eps);
    for (int64_t k = 0; k < D; ++k) {
      const double xhat = (xs[i * D + k] - m) * rs, gw = gs[i * D + k] * double(ws[k]);
      want_y[i * D + k] = xhat * ws[k] + bs[k];
      want_gw[k] += gs[i * D + k] * xhat;
      want_gb[k] += gs[i * D + k];
      s1 += gw, s2 += gw * xhat;
    }
    for (int64_t k = 0; k < D; ++k) {
      const double xhat = (xs[i * D + k] - m) * rs;
      want_gx[i * D + k] = rs * (gs[i * D + k] * double(ws[k]) - s1 / D - xhat * s2 / D);
    }
  }
  check_close(y, want_y, 1e-5);
  check_close(x.grad(), want_gx, 1e-5);
  check_close(w.grad(), want_gw, 1e-5);
  check_close(b.grad(), want_gb, 1e-5);
  CHECK_THROWS_WITH(layer_norm_rows(Tensor::randn({2, 3}), Tensor::ones({4}), {}, eps),
                    doctest::Contains("expected weight of shape [3] (D of input [2, 3]), got [4]"));
}

// group_norm's fused kernels on sizes that go threaded (8 x 12 x 400 values)
// equal the same normalization composed of layer_norm_rows over each
// (sample, group) row and the per-channel affine: values and all three
// gradients, up to rounding.
TEST_CASE("group_norm equals layer_norm_rows and the affine, threaded") {
  manual_seed(14);
  const int64_t N = 8, C = 12, G = 3;
  Tensor x = Tensor::randn({N, C, 20, 20}) * 3 + 2, r = Tensor::randn({N, C, 20, 20});
  Tensor w = Tensor::randn({C}), b = Tensor::randn({C});
  auto run = [&](bool fused) {
    Tensor xv = x.clone().requires_grad_(), wv = w.clone().requires_grad_();
    Tensor bv = b.clone().requires_grad_();
    Tensor y;
    if (fused) {
      y = group_norm(xv, G, wv, bv, 1e-5);
    } else {
      y = layer_norm_rows(xv.reshape({N * G, -1}), {}, {}, 1e-5).reshape(x.shape());
      y = y * wv.reshape({1, C, 1, 1}) + bv.reshape({1, C, 1, 1});
    }
    (y * r).sum().backward();
    return std::vector<Tensor>{y, xv.grad(), wv.grad(), bv.grad()};
  };
  const std::vector<Tensor> fused = run(true), composed = run(false);
  const char* names[] = {"y", "x grad", "weight grad", "bias grad"};
  for (int i = 0; i < 4; ++i) {
    CAPTURE(names[i]);
    const std::vector<float> want = composed[i].to_vector<float>();
    double largest = 0;
    for (float v : want) largest = std::max(largest, double(std::abs(v)));
    // float32 rounding of sums over up to 3200 terms: 1e-5 of the largest value
    check_close(fused[i], std::vector<double>(want.begin(), want.end()), 1e-5 * (1 + largest));
  }
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
