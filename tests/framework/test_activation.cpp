// Activations of issue 22 (ops.h): hand-computed values, PyTorch's gradients
// at the kinks, finite values for extreme inputs, gradchecks and errors.
// (PyTorch's own values and gradients: test_torch_math.cpp.)
#include <doctest/doctest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

#include "framework/backend/cpu/vec_math.h"
#include "helpers.h"

using namespace minidl;
using minidl::testing::check_values;
using Inputs = std::vector<Tensor>;

namespace {
// gradient of sum(f(x)) at the points xs
Tensor grad_at(const std::function<Tensor(const Tensor&)>& f, std::initializer_list<float> xs) {
  Tensor x = Tensor::of(xs).requires_grad_();
  f(x).sum().backward();
  return x.grad();
}
double phi(double x) { return 0.5 * (1 + std::erf(x / std::sqrt(2.0))); }
}  // namespace

TEST_CASE("leaky_relu, elu, hardtanh by hand, with PyTorch's gradients at the kinks") {
  Tensor x = Tensor::of({-2, 0, 3});
  check_values(leaky_relu(x), {-0.02, 0, 3});
  check_values(leaky_relu(x, 0.5), {-1, 0, 3});
  check_values(grad_at([](const Tensor& v) { return leaky_relu(v, 0.5); }, {-2, 0, 3}),
               {0.5, 0.5, 1});
  check_values(elu(x, 2), {2 * std::expm1(-2.0), 0, 3});
  check_values(grad_at([](const Tensor& v) { return elu(v, 2); }, {-2, 0, 3, 1000}),
               {2 * std::exp(-2.0), 2, 1, 1});  // no 0 * inf at 1000
  check_values(hardtanh(Tensor::of({-3, -1, 0.5, 1, 2})), {-1, -1, 0.5, 1, 1});
  check_values(grad_at([](const Tensor& v) { return hardtanh(v); }, {-3, -1, 0.5, 1, 2}),
               {0, 0, 1, 0, 0});  // strictly inside only
  CHECK_ERROR(hardtanh(x, 1, -1), "hardtanh: min_val 1 is above max_val -1");
}

TEST_CASE("gelu (erf and tanh), silu, softplus, log_sigmoid by hand") {
  Tensor x = Tensor::of({-1.5, 0, 2});
  check_values(gelu(x), {-1.5 * phi(-1.5), 0, 2 * phi(2)});
  auto tanh_gelu = [](double v) {
    return 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
  };
  check_values(gelu(x, "tanh"), {tanh_gelu(-1.5), 0, tanh_gelu(2)});
  check_values(silu(x), {-1.5 / (1 + std::exp(1.5)), 0, 2 / (1 + std::exp(-2.0))});
  check_values(softplus(x), {std::log1p(std::exp(-1.5)), std::log(2.0), std::log1p(std::exp(2.0))});
  // beta x above the threshold: x itself, gradient 1
  check_values(softplus(Tensor::of({3, 1}), 2, 4), {3, std::log1p(std::exp(2.0)) / 2});
  check_values(grad_at([](const Tensor& v) { return softplus(v, 2, 4); }, {3, 1}),
               {1, 1 / (1 + std::exp(-2.0))});
  check_values(log_sigmoid(x),
               {-std::log1p(std::exp(1.5)), -std::log(2.0), -std::log1p(std::exp(-2.0))});
  CHECK_ERROR(gelu(x, "fast"), "gelu: approximate must be \"none\" or \"tanh\", got \"fast\"");
  CHECK_ERROR(silu(Tensor::of_ints({1})), "silu: expected a float tensor, got int64");
}

TEST_CASE("activations stay finite for extreme inputs") {
  Tensor x = Tensor::of({-1e4, -100, 100, 1e4});
  for (const Tensor& y : {log_sigmoid(x), softplus(x), elu(x), gelu(x), silu(x), gelu(x, "tanh")})
    for (float v : y.to_float_vector()) CHECK(std::isfinite(v));
  check_values(log_sigmoid(x), {-1e4, -100, 0, 0});
  check_values(grad_at([](const Tensor& v) { return log_sigmoid(v); }, {-1e4, 0, 1e4}),
               {1, 0.5, 0});
  check_values(softplus(x), {0, std::exp(-100.0), 100, 1e4});
}

TEST_CASE("gradients of the activations (finite differences)") {
  Tensor away = Tensor::of({-1.5, -0.7, -0.2, 0.3, 0.8, 2.0}, {2, 3});  // no kink in reach
  CHECK_GRADCHECK([](const Inputs& in) { return leaky_relu(in[0], 0.1); }, {away});
  CHECK_GRADCHECK([](const Inputs& in) { return gelu(in[0]); }, {away});
  CHECK_GRADCHECK([](const Inputs& in) { return gelu(in[0], "tanh"); }, {away});
  CHECK_GRADCHECK([](const Inputs& in) { return silu(in[0]); }, {away});
  CHECK_GRADCHECK([](const Inputs& in) { return elu(in[0], 0.8); }, {away});
  CHECK_GRADCHECK([](const Inputs& in) { return softplus(in[0], 1.5); }, {away});
  CHECK_GRADCHECK([](const Inputs& in) { return hardtanh(in[0], -1, 1); }, {away});
  CHECK_GRADCHECK([](const Inputs& in) { return log_sigmoid(in[0]); }, {away});
}

TEST_CASE("activations of float16 inputs compute in float32 and return float16") {
  Tensor x = Tensor::of({-1, 0.5}).to(kFloat16);
  CHECK(gelu(x).dtype() == kFloat16);
  check_values(gelu(x), {-1 * phi(-1), 0.5 * phi(0.5)}, 1e-3);
}

// The CPU's GELU (cpu/vec_math.h's normal CDF, which vectorizes) against
// float64 at 20,001 points over [-9, 9]: within 1e-6 relative (absolute
// below 1e-3), and its gradient (vec::gelu_slope) within 3e-6 of the larger
// of Phi(x) and x phi(x) (measured 5.3e-7 to 6.9e-7 and 2.0e-6 on x86-64
// and x86-64-v3; 0.5 (1 + erff(x / sqrt 2)) was 8e-5 off for negative x,
// its gradient 0.03).
TEST_CASE("gelu and its gradient against float64 over [-9, 9]") {
  std::vector<float> xs;
  for (int i = -10000; i <= 10000; ++i) xs.push_back(static_cast<float>(i * 9e-4));
  Tensor x = Tensor::from_vector(xs).requires_grad_();
  Tensor y = gelu(x);
  y.sum().backward();
  const auto got = y.to_float_vector(), grad = x.grad().to_float_vector();
  double worst = 0, worst_grad = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    const double v = xs[i], cdf = 0.5 * std::erfc(-v / std::sqrt(2.0));
    const double pdf = std::exp(-0.5 * v * v) / std::sqrt(2 * M_PI);
    worst = std::max(worst, std::abs(got[i] - v * cdf) / std::max(std::abs(v * cdf), 1e-3));
    worst_grad = std::max(worst_grad, std::abs(grad[i] - (cdf + v * pdf)) /
                                          std::max(cdf, std::abs(v * pdf)));
  }
  CHECK(worst <= 1e-6);
  CHECK(worst_grad <= 3e-6);
}

// The CPU kernels' vectorizable e^x, sigmoid and tanh (cpu/vec_math.h:
// GELU, the LSTM cell, attention's softmax) against float64 on a fine grid:
// within 1e-7, 2e-7 and 3e-7 relative (measured 9.7e-8, 1.4e-7, 1.7e-7);
// tanh keeps tiny arguments and the sign of zero; NaN stays NaN.
TEST_CASE("cpu/vec_math.h: exp, sigmoid and tanh against float64") {
  namespace vec = minidl::cpu::vec;
  double worst_exp = 0, worst_sigmoid = 0, worst_tanh = 0;
  for (int i = -600000; i <= 600000; ++i) {
    const float x = static_cast<float>(i * 1.45e-4);  // [-87, 87]
    const double e = std::exp(double(x)), s = 1 / (1 + std::exp(-double(x)));
    worst_exp = std::max(worst_exp, std::abs(vec::exp(x) - e) / e);
    if (s > 1e-30) worst_sigmoid = std::max(worst_sigmoid, std::abs(vec::sigmoid(x) - s) / s);
    if (std::abs(x) <= 20 && x != 0) {
      const double t = std::tanh(double(x));
      worst_tanh = std::max(worst_tanh, std::abs(vec::tanh(x) - t) / std::abs(t));
    }
  }
  CHECK(worst_exp <= 1e-7);
  CHECK(worst_sigmoid <= 2e-7);
  CHECK(worst_tanh <= 3e-7);
  CHECK(vec::tanh(1e-20f) == 1e-20f);
  CHECK(std::signbit(vec::tanh(-0.f)));
  CHECK(vec::tanh(50.f) == 1.f);
  CHECK(std::isnan(vec::tanh(NAN)));
  CHECK(std::isnan(vec::sigmoid(NAN)));
  CHECK(std::isnan(vec::exp(NAN)));
}

// vec::exp past [-87, 88] (UnaryOp::Exp, the op exp on the CPU): overflow to
// +inf from 88.73 (e^88.72 is the largest float), the subnormal results
// within one subnormal step of e^x, 0 below -104; exp(-inf) = 0, exp(inf)
// = inf.
TEST_CASE("cpu/vec_math.h: exp over the whole float range") {
  namespace vec = minidl::cpu::vec;
  CHECK(vec::exp(88.72f) == doctest::Approx(std::exp(double(88.72f))).epsilon(1e-7));
  CHECK(std::isinf(vec::exp(88.73f)));
  CHECK(std::isinf(vec::exp(1e10f)));
  CHECK(std::isinf(vec::exp(INFINITY)));
  CHECK(vec::exp(-INFINITY) == 0.f);
  CHECK(vec::exp(-104.5f) == 0.f);
  const double step = std::numeric_limits<float>::denorm_min();
  for (float x = -104.f; x < -87.f; x += 0.01f) {
    CAPTURE(x);
    const double want = std::exp(double(x));
    CHECK(std::abs(vec::exp(x) - want) <= std::max(step, 2e-7 * want));
  }
  Tensor big = exp(Tensor::of({-200, -100, 0, 50, 100}));  // the op: the same kernel
  CHECK(big.to_float_vector() ==
        std::vector<float>{0, vec::exp(-100.f), 1, vec::exp(50.f), INFINITY});
}

// vec::exp_or_zero (softmax, the normal CDF, sigmoid, tanh, softplus) is
// vec::exp bit for bit over [-87, 88], in fewer steps, 0 below -87 and at
// -inf, e^88 above 88.
TEST_CASE("cpu/vec_math.h: exp_or_zero is exp over [-87, 88], 0 below") {
  namespace vec = minidl::cpu::vec;
  int differ = 0;
  for (int i = -600000; i <= 606896; ++i) {
    const float x = static_cast<float>(i * 1.45e-4);  // [-87, 88]
    differ += std::bit_cast<uint32_t>(vec::exp_or_zero(x)) != std::bit_cast<uint32_t>(vec::exp(x));
  }
  CHECK(differ == 0);
  CHECK(vec::exp_or_zero(-87.f) == vec::exp(-87.f));
  for (float x : {-87.01f, -100.f, -1e30f, -INFINITY}) CHECK(vec::exp_or_zero(x) == 0.f);
  for (float x : {88.01f, 1e30f, INFINITY}) CHECK(vec::exp_or_zero(x) == vec::exp(88.f));
  CHECK(std::isnan(vec::exp_or_zero(NAN)));
}

// vec::expm1 (ELU) and vec::log1p_unit (softplus, the logits' cross entropy)
// against float64: within 4e-7 and 3e-7 relative (measured 2.5e-7, 2.2e-7);
// tiny arguments keep their relative accuracy (expm1's series, log1p's atanh
// form).
TEST_CASE("cpu/vec_math.h: expm1 and log1p_unit against float64") {
  namespace vec = minidl::cpu::vec;
  double worst_expm1 = 0, worst_log1p = 0;
  for (int i = -600000; i <= 600000; ++i) {
    const float x = static_cast<float>(i * 1.45e-4);  // [-87, 87]
    if (x != 0)
      worst_expm1 = std::max(worst_expm1, std::abs(vec::expm1(x) - std::expm1(double(x))) /
                                              std::abs(std::expm1(double(x))));
    const float u = static_cast<float>(std::abs(i) / 600000.0);  // [0, 1]
    if (u != 0)
      worst_log1p = std::max(worst_log1p, std::abs(vec::log1p_unit(u) - std::log1p(double(u))) /
                                              std::log1p(double(u)));
  }
  MESSAGE("expm1 ", worst_expm1, ", log1p_unit ", worst_log1p);
  CHECK(worst_expm1 <= 4e-7);
  CHECK(worst_log1p <= 3e-7);
  CHECK(vec::expm1(1e-20f) == 1e-20f);
  CHECK(vec::log1p_unit(1e-20f) == 1e-20f);
  CHECK(std::isnan(vec::expm1(NAN)));
  CHECK(std::isnan(vec::log1p_unit(NAN)));
}

// The fused ELU, softplus, smooth L1 and logits' cross entropy (one kernel
// each way) against their float64 formulas on a grid, values and
// gradients, within 1e-6 of max(|value|, 1) (measured at most 1.2e-7);
// NaN in, NaN out (PyTorch's).
TEST_CASE("elu, softplus, smooth_l1_loss, bce_with_logits against float64 on a grid") {
  std::vector<float> xs;
  for (int i = -3000; i <= 3000; ++i) xs.push_back(static_cast<float>(i * 0.01 + 0.003));
  const int64_t n = static_cast<int64_t>(xs.size());
  const Tensor t = Tensor::rand({n});
  const std::vector<float> tv = t.to_float_vector();
  struct Case {
    std::string name;
    std::function<Tensor(const Tensor&)> f;
    std::function<double(double, double)> y, dy;  // (x, target) -> value, derivative
  };
  const std::vector<Case> cases{
      {"elu", [](const Tensor& x) { return elu(x, 1.5); },
       [](double x, double) { return x > 0 ? x : 1.5 * std::expm1(x); },
       [](double x, double) { return x > 0 ? 1 : 1.5 * std::exp(x); }},
      {"softplus", [](const Tensor& x) { return softplus(x); },
       [](double x, double) { return x > 20 ? x : std::log1p(std::exp(x)); },
       [](double x, double) { return x > 20 ? 1 : 1 / (1 + std::exp(-x)); }},
      {"softplus beta 2", [](const Tensor& x) { return softplus(x, 2, 10); },
       [](double x, double) { return 2 * x > 10 ? x : std::log1p(std::exp(2 * x)) / 2; },
       [](double x, double) { return 2 * x > 10 ? 1 : 1 / (1 + std::exp(-2 * x)); }},
      {"smooth_l1", [t](const Tensor& x) { return smooth_l1_loss(x, t, "none", 0.5); },
       [](double x, double y) {
         const double d = x - y;
         return std::abs(d) < 0.5 ? d * d : std::abs(d) - 0.25;
       },
       [](double x, double y) {
         const double d = x - y;
         return std::abs(d) < 0.5 ? 2 * d : d > 0 ? 1 : -1;
       }},
      {"bce_with_logits",
       [t](const Tensor& x) { return binary_cross_entropy_with_logits(x, t, {}, {}, "none"); },
       [](double x, double y) {
         return std::max(x, 0.0) - x * y + std::log1p(std::exp(-std::abs(x)));
       },
       [](double x, double y) { return 1 / (1 + std::exp(-x)) - y; }}};
  for (const Case& c : cases) {
    CAPTURE(c.name);
    Tensor x = Tensor::from_vector(xs).requires_grad_();
    const Tensor y = c.f(x);
    y.sum().backward();
    const std::vector<float> got = y.to_float_vector(), grad = x.grad().to_float_vector();
    double worst = 0, worst_grad = 0;
    for (int64_t i = 0; i < n; ++i) {
      const double want = c.y(xs[i], tv[i]), want_grad = c.dy(xs[i], tv[i]);
      worst = std::max(worst, std::abs(got[i] - want) / std::max(std::abs(want), 1.0));
      worst_grad =
          std::max(worst_grad, std::abs(grad[i] - want_grad) / std::max(std::abs(want_grad), 1.0));
    }
    MESSAGE(c.name, ": ", worst, ", gradient ", worst_grad);
    CHECK(worst <= 1e-6);
    CHECK(worst_grad <= 1e-6);
    const Tensor nan = c.f(Tensor::full({n}, NAN));
    CHECK(std::isnan(nan.to_float_vector()[0]));
  }
}

// vec::log (UnaryOp::Log, the op log on the CPU) against float64 from the
// smallest subnormal to the largest float: within 3e-7 of max(|log x|, |x -
// 1|) (measured 2.2e-7); log 0 = -inf, log inf = inf, NaN for negatives and
// NaN.
TEST_CASE("cpu/vec_math.h: log against float64 over the whole float range") {
  namespace vec = minidl::cpu::vec;
  double worst = 0;
  for (float x = std::numeric_limits<float>::denorm_min(); x < 3e38f;
       x = std::max(x * 1.0001f, std::nextafter(x, INFINITY))) {
    const double want = std::log(double(x));
    worst = std::max(worst, std::abs(vec::log(x) - want) /
                                std::max(std::abs(want), std::abs(double(x) - 1)));
  }
  for (int i = -100000; i <= 100000; ++i) {  // around 1, where log x is small
    const float x = 1.f + static_cast<float>(i) * 1e-6f;
    if (x == 1.f) continue;
    worst = std::max(worst, std::abs(vec::log(x) - std::log(double(x))) / std::abs(double(x) - 1));
  }
  MESSAGE("log: ", worst);
  CHECK(worst <= 3e-7);
  CHECK(vec::log(1.f) == 0.f);
  CHECK(vec::log(0.f) == -std::numeric_limits<float>::infinity());
  CHECK(vec::log(INFINITY) == INFINITY);
  CHECK(std::isnan(vec::log(-1.f)));
  CHECK(std::isnan(vec::log(NAN)));
  CHECK(log(Tensor::of({0, 1, 2})).to_float_vector() ==
        std::vector<float>{-INFINITY, 0, vec::log(2.f)});
}
