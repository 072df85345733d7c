// batch_norm (issue 23, framework/ops/norm.cpp): hand-computed training and
// evaluation outputs and running estimates, finite-difference gradients of x,
// weight and bias, the threaded path against the same formula composed of
// ops, a channel far from zero, and errors naming the op and both shapes.
#include <doctest/doctest.h>

#include <cmath>

#include "helpers.h"

using namespace minidl;
using minidl::testing::check_same;
using minidl::testing::check_values;
using Inputs = std::vector<Tensor>;

// Channel 0 holds 1, 3, 5: mean 3, biased variance 8/3, unbiased 4.
// Channel 1 holds 10, 20, 60: mean 30, biased variance 1400/3, unbiased 700.
TEST_CASE("batch_norm by hand: training, running estimates, evaluation") {
  Tensor x = Tensor::of({1, 10, 3, 20, 5, 60}, {3, 2});
  Tensor w = Tensor::of({2, 0.5}), b = Tensor::of({1, -1});
  Tensor rm = Tensor::zeros({2}), rv = Tensor::ones({2});
  // y = w (x - mean) / sqrt(var + 1e-5) + b
  check_values(batch_norm(x, w, b, rm, rv, /*training=*/true),
               {-1.4494851, -1.4629100, 1.0, -1.2314550, 3.4494851, -0.3056349}, 1e-6);
  check_values(rm, {0.3, 3.0});   // 0.9 * 0 + 0.1 * mean
  check_values(rv, {1.3, 70.9});  // 0.9 * 1 + 0.1 * unbiased variance
  // evaluation: (x - 0.3) / sqrt(1.3 + 1e-5) * 2 + 1 ..., the estimates untouched
  check_values(batch_norm(x, w, b, rm, rv, /*training=*/false),
               {2.2278765, -0.5843336, 5.7360951, 0.0094755, 9.2443137, 2.3847119}, 1e-6);
  check_values(rm, {0.3, 3.0});
  // no weight, bias or running estimates: (x - mean) / sqrt(var + eps)
  check_values(batch_norm(x, {}, {}, {}, {}, true, 0.1, 0),
               {-1.2247449, -0.9258201, 0, -0.4629100, 1.2247449, 1.3887301}, 1e-6);
}

TEST_CASE("batch_norm gradients of x, weight and bias match finite differences") {
  manual_seed(5);
  Tensor w = Tensor::of({1.5, -0.7, 0.4}), b = Tensor::of({0.2, 0.3, -0.1});
  for (const Shape& shape : {Shape{3, 3, 2, 2}, Shape{6, 3}, Shape{2, 3, 5}}) {
    CAPTURE(to_string(shape));
    Tensor x = Tensor::randn(shape) * 2 + 1;
    CHECK_GRADCHECK([](const Inputs& in) { return batch_norm(in[0], in[1], in[2], {}, {}, true); },
                    {x, w, b}, {.eps = 1e-2, .rtol = 2e-2, .atol = 5e-3});
    Tensor rm = Tensor::of({0.5, -1, 2}), rv = Tensor::of({0.5, 2, 1.5});
    CHECK_GRADCHECK(
        [&](const Inputs& in) { return batch_norm(in[0], in[1], in[2], rm, rv, false); },
        {x, w, b});
  }
}

namespace {

// The fused op equals the formula composed of ops, values and gradients, for
// x [N, C, ...] of `shape` (statistics over every dim but 1).
void check_composition(const Shape& shape) {
  Tensor x = Tensor::randn(shape), r = Tensor::randn(shape);
  const int64_t C = shape[1];
  Tensor w = Tensor::randn({C}), b = Tensor::randn({C});
  Tensor xf = x.clone().requires_grad_(), wf = w.clone().requires_grad_(),
         bf = b.clone().requires_grad_();
  Tensor fused = batch_norm(xf, wf, bf, {}, {}, true);
  (fused * r).sum().backward();
  Tensor xc = x.clone().requires_grad_(), wc = w.clone().requires_grad_(),
         bc = b.clone().requires_grad_();
  std::vector<int64_t> dims{0};
  Shape pc(shape.size(), 1);
  pc[1] = C;
  for (int64_t d = 2; d < static_cast<int64_t>(shape.size()); ++d) dims.push_back(d);
  Tensor mean = xc.mean(dims, true), d = xc - mean;
  Tensor composed = d / ((d * d).mean(dims, true) + 1e-5).sqrt() * wc.reshape(pc) + bc.reshape(pc);
  (composed * r).sum().backward();
  check_same(fused, composed);
  check_same(xf.grad(), xc.grad());
  check_same(wf.grad(), wc.grad(), 1e-4);  // sums of 25600 products: float32's own rounding
  check_same(bf.grad(), bc.grad(), 1e-4);
}

}  // namespace

// Both sizes span the threaded path. [300, 150] (BatchNorm1d's [N, C]) goes
// in blocks of 64 channels down the rows: two whole blocks and a part.
TEST_CASE("batch_norm equals its composition from ops, threaded") {
  manual_seed(23);
  check_composition({64, 3, 20, 20});
  check_composition({300, 150});
}

// Values near 1000 with standard deviation 1: the statistics keep their
// digits (sums shifted by the channel's first value, in double), checked
// against the same formula evaluated in double on the host.
TEST_CASE("batch_norm of a channel far from zero") {
  manual_seed(7);
  const int64_t N = 50, S = 40;
  Tensor x = Tensor::randn({N, 1, S}) + 1000.0;
  const std::vector<float> xs = x.to_float_vector();
  double mean = 0, var = 0;
  for (float v : xs) mean += v / double(xs.size());
  for (float v : xs) var += (v - mean) * (v - mean) / double(xs.size());
  std::vector<double> want;
  for (float v : xs) want.push_back((v - mean) / std::sqrt(var + 1e-5));
  check_values(batch_norm(x, {}, {}, {}, {}, true), want, 1e-4);  // beta = -mean * alpha rounds
}

TEST_CASE("batch_norm of float16 is computed in float32 and cast back, with gradients") {
  manual_seed(3);
  Tensor x = Tensor::randn({4, 2, 3});
  Tensor h = x.to(kFloat16).requires_grad_(), f = x.to(kFloat16).to(kFloat32).requires_grad_();
  Tensor yh = batch_norm(h, {}, {}, {}, {}, true), yf = batch_norm(f, {}, {}, {}, {}, true);
  CHECK(yh.dtype() == kFloat16);
  check_same(cast(yh, kFloat32), cast(cast(yf, kFloat16), kFloat32));
  Tensor r = Tensor::randn({4, 2, 3});
  (cast(yh, kFloat32) * r).sum().backward();
  (yf * r).sum().backward();
  REQUIRE(h.grad().defined());
  check_same(cast(h.grad(), kFloat32), f.grad(), 1e-2);  // the gradient rounded to float16
}

TEST_CASE("batch_norm errors name the op, both shapes and what was expected") {
  Tensor x = Tensor::zeros({4, 3, 2, 2});
  CHECK_ERROR(batch_norm(x, Tensor::ones({4}), {}, {}, {}, true),
              "batch_norm: expected weight of shape [3] (C of input [4, 3, 2, 2]), got [4]");
  CHECK_ERROR(batch_norm(x, {}, Tensor::ones({3, 1}), {}, {}, true),
              "expected bias of shape [3] (C of input [4, 3, 2, 2]), got [3, 1]");
  CHECK_ERROR(batch_norm(x, {}, {}, Tensor::zeros({3}), {}, true),
              "running_mean and running_var both given or both undefined");
  CHECK_ERROR(batch_norm(x, {}, {}, {}, {}, false),
              "evaluation (training false) needs running_mean and running_var");
  CHECK_ERROR(batch_norm(Tensor::zeros({1, 3, 1}), {}, {}, {}, {}, true),
              "more than one value per channel, got input [1, 3, 1]");
  CHECK_ERROR(batch_norm(Tensor::zeros({5}), {}, {}, {}, {}, true),
              "batch_norm: expected a non-empty input [N, C] or [N, C, *], got [5]");
  CHECK_ERROR(batch_norm(Tensor::zeros({0, 3}), {}, {}, {}, {}, true), "got [0, 3]");
}
