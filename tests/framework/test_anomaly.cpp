// detect_anomaly: the first op whose output or gradient holds NaN or inf
// throws, naming it; off, the same computations run through.
#include <doctest/doctest.h>

#include <limits>

#include "helpers.h"

using namespace minidl;

namespace {
struct AnomalyOn {
  AnomalyOn() { set_detect_anomaly(true); }
  ~AnomalyOn() { set_detect_anomaly(false); }
};
}  // namespace

TEST_CASE("detect_anomaly names the forward op that made a NaN from finite inputs") {
  Tensor x = Tensor::of({-1, 4}).requires_grad_();
  Tensor y = (x * 2.0).sqrt();  // sqrt(-2) is NaN
  CHECK(std::isnan(y.at({0})));  // off: no check
  AnomalyOn on;
  CHECK_ERROR((x * 2.0).sqrt(), "detect_anomaly: the forward of sqrt produced NaN or inf in its "
                                "output [2]; its inputs were finite");
}

TEST_CASE("detect_anomaly says when a leaf already held the NaN") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor w = Tensor::from_vector(std::vector<float>{1, nan}).requires_grad_();
  AnomalyOn on;
  CHECK_ERROR(w * 3.0, "the forward of mul produced NaN or inf in its output [2]; its inputs 0 [2] "
                       "already held NaN or inf");
}

TEST_CASE("detect_anomaly names the backward op whose gradient overflowed") {
  // sqrt(x) = x^0.5 is finite at 0; its derivative 0.5 x^-0.5 is not.
  Tensor x = Tensor::of({0, 4}).requires_grad_();
  AnomalyOn on;
  Tensor y = pow(x, 0.5).sum();
  CHECK_ERROR(y.backward(), "detect_anomaly: the backward of pow produced NaN or inf in the "
                            "gradient of input 0 [2]; its inputs were finite");
}
