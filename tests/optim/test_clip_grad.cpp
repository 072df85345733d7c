// clip_grad_norm_ and clip_grad_value_ against hand arithmetic: gradients
// a = [3, 4], b = [12] have L2 norm 13, L1 norm 19 and largest |g| 12.
#include <doctest/doctest.h>
#include <minidl/minidl.h>

#include <cmath>
#include <stdexcept>

#include "check_close.h"

using namespace minidl;
using testing::check_close;

namespace {

struct Grads {
  Tensor a = Tensor::zeros({2}).requires_grad_(), b = Tensor::zeros({1}).requires_grad_();
  Tensor none = Tensor::zeros({3}).requires_grad_();  // no gradient: skipped
  Grads(std::vector<float> ga = {3, 4}, std::vector<float> gb = {12}) {
    a.set_grad(Tensor::from_vector(ga));
    b.set_grad(Tensor::from_vector(gb));
  }
  std::vector<Tensor> all() const { return {a, none, b}; }
};

}  // namespace

TEST_CASE("clip_grad_norm_ scales by max_norm / (total + 1e-6) and returns the total") {
  Grads g;
  CHECK(optim::clip_grad_norm_(g.all(), /*max_norm=*/6.5).item() == doctest::Approx(13).epsilon(1e-7));
  check_close(g.a.grad(), {1.5, 2}, 1e-6);  // * 6.5 / 13
  check_close(g.b.grad(), {6}, 1e-6);
  CHECK(!g.none.grad().defined());

  Grads l1;
  CHECK(optim::clip_grad_norm_(l1.all(), 9.5, /*norm_type=*/1).item() == doctest::Approx(19));
  check_close(l1.a.grad(), {1.5, 2}, 1e-6);
  Grads inf({3, -14}, {12});
  CHECK(optim::clip_grad_norm_(inf.all(), 7, optim::kInf).item() == 14);
  check_close(inf.a.grad(), {1.5, -7}, 1e-6);
  check_close(inf.b.grad(), {6}, 1e-6);
  // under max_norm: unchanged, bit for bit
  Grads under;
  CHECK(optim::clip_grad_norm_(under.all(), 100).item() == doctest::Approx(13));
  CHECK(under.a.grad().to_float_vector() == std::vector<float>{3, 4});
  // no gradients at all: 0
  CHECK(optim::clip_grad_norm_({g.none}, 1).item() == 0);
}

TEST_CASE("clip_grad_norm_ over a Cell, and a non-finite norm") {
  nn::Dense fc(2, 1);
  for (Tensor p : fc.trainable_params()) p.set_grad(Tensor::full(p.shape(), 2));
  // weight [1, 2], bias [1]: three 2s, norm sqrt(12)
  CHECK(optim::clip_grad_norm_(fc, 1).item() == doctest::Approx(std::sqrt(12.0)).epsilon(1e-7));
  for (const Tensor& p : fc.trainable_params())
    for (float v : p.grad().to_float_vector()) CHECK(v == doctest::Approx(1 / std::sqrt(3.0)));

  Grads nan({3, NAN}, {12});
  CHECK_THROWS_WITH_AS(optim::clip_grad_norm_(nan.all(), 1, 2, /*error_if_nonfinite=*/true),
                       "clip_grad_norm_: the total norm of order 2 of the gradients of 2 "
                       "parameter(s) is nan, so it cannot be clipped (with error_if_nonfinite = "
                       "false the gradients are scaled by it anyway)",
                       Error);
  CHECK(nan.a.grad().to_float_vector()[0] == 3);  // unchanged
  CHECK(std::isnan(optim::clip_grad_norm_(nan.all(), 1).item()));
  CHECK_THROWS_WITH_AS(optim::clip_grad_norm_(nan.all(), -1),
                       "clip_grad_norm_: invalid max_norm -1 (expected max_norm >= 0)",
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(optim::clip_grad_norm_(nan.all(), 1, 0),
                       "clip_grad_norm_: invalid norm_type 0 (expected > 0, or kInf)",
                       std::invalid_argument);
}

TEST_CASE("clip_grad_value_ clamps every element into [-clip_value, clip_value]") {
  Grads g({-3, 0.5}, {NAN});
  optim::clip_grad_value_(g.all(), 1);
  check_close(g.a.grad(), {-1, 0.5});
  CHECK(std::isnan(g.b.grad().to_float_vector()[0]));
  nn::Dense fc(2, 1);
  for (Tensor p : fc.trainable_params()) p.set_grad(Tensor::full(p.shape(), 5));
  optim::clip_grad_value_(fc, 0.25);
  for (const Tensor& p : fc.trainable_params())
    for (float v : p.grad().to_float_vector()) CHECK(v == 0.25f);
  CHECK_THROWS_WITH_AS(optim::clip_grad_value_(fc, -1),
                       "clip_grad_value_: invalid clip_value -1 (expected clip_value >= 0)",
                       std::invalid_argument);
}
