// Elementwise ops: add sub mul div (with NumPy broadcasting), neg exp log pow
// sqrt relu sigmoid tanh, and dropout. Each has a hand-computed forward case
// and a finite-difference gradient check.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "helpers.h"

using namespace minidl;
using minidl::testing::check_same;
using minidl::testing::check_values;
using minidl::testing::distinct;
using Inputs = std::vector<Tensor>;

namespace {

// A naive broadcasting reference: out[idx] = f(a[idx'], b[idx'']) over up to 4 dims.
template <class F>
Tensor naive_broadcast(const Tensor& a, const Tensor& b, F f) {
  Shape out = broadcast_shape(a.shape(), b.shape(), "naive");
  auto pad4 = [](const Shape& s) {
    Shape p(4 - s.size(), 1);
    p.insert(p.end(), s.begin(), s.end());
    return p;
  };
  Shape o4 = pad4(out), a4 = pad4(a.shape()), b4 = pad4(b.shape());
  std::vector<float> va = a.to_float_vector(), vb = b.to_float_vector(), vo;
  auto index = [](const Shape& s, int64_t i, int64_t j, int64_t k, int64_t l) {
    i = s[0] == 1 ? 0 : i, j = s[1] == 1 ? 0 : j, k = s[2] == 1 ? 0 : k, l = s[3] == 1 ? 0 : l;
    return ((i * s[1] + j) * s[2] + k) * s[3] + l;
  };
  for (int64_t i = 0; i < o4[0]; ++i)
    for (int64_t j = 0; j < o4[1]; ++j)
      for (int64_t k = 0; k < o4[2]; ++k)
        for (int64_t l = 0; l < o4[3]; ++l)
          vo.push_back(f(va[index(a4, i, j, k, l)], vb[index(b4, i, j, k, l)]));
  return Tensor::from_vector(vo, out);
}

}  // namespace

TEST_CASE("add, sub, mul, div on equal shapes (hand-computed)") {
  Tensor a = Tensor::of({1, 2, 3, 4}, {2, 2}), b = Tensor::of({0.5, -1, 4, 8}, {2, 2});
  check_values(add(a, b), {1.5, 1, 7, 12});
  check_values(sub(a, b), {0.5, 3, -1, -4});
  check_values(mul(a, b), {0.5, -2, 12, 32});
  check_values(div(a, b), {2, -2, 0.75, 0.5});
  check_values(a + b, {1.5, 1, 7, 12});
  check_values(a - b, {0.5, 3, -1, -4});
  check_values(a * b, {0.5, -2, 12, 32});
  check_values(a / b, {2, -2, 0.75, 0.5});
  CHECK(add(a, b).shape() == Shape{2, 2});
}

TEST_CASE("binary ops broadcast [2,3] with [3]") {
  Tensor a = Tensor::of({1, 2, 3, 4, 5, 6}, {2, 3}), b = Tensor::of({10, 20, 30});
  check_values(a + b, {11, 22, 33, 14, 25, 36});
  check_values(b + a, {11, 22, 33, 14, 25, 36});
  check_values(a - b, {-9, -18, -27, -6, -15, -24});
  check_values(b - a, {9, 18, 27, 6, 15, 24});
  check_values(a * b, {10, 40, 90, 40, 100, 180});
  check_values(a / b, {0.1, 0.1, 0.1, 0.4, 0.25, 0.2});
  CHECK((a + b).shape() == Shape{2, 3});
}

TEST_CASE("binary ops broadcast [2,1] with [1,3] to [2,3]") {
  Tensor a = Tensor::of({1, 2}, {2, 1}), b = Tensor::of({10, 20, 30}, {1, 3});
  Tensor s = a + b;
  CHECK(s.shape() == Shape{2, 3});
  check_values(s, {11, 21, 31, 12, 22, 32});
  check_values(b - a, {9, 19, 29, 8, 18, 28});
  check_values(a * b, {10, 20, 30, 20, 40, 60});
  check_values(a / b, {0.1, 0.05, 1.0 / 30, 0.2, 0.1, 2.0 / 30});
}

TEST_CASE("binary ops broadcast with scalars (0-d tensors and doubles)") {
  Tensor a = Tensor::of({1, 2, 4}, {3});
  Tensor two = Tensor::full({}, 2);
  check_values(a + two, {3, 4, 6});
  check_values(two - a, {1, 0, -2});
  check_values(a * two, {2, 4, 8});
  check_values(two / a, {2, 1, 0.5});
  check_values(a + 1.0, {2, 3, 5});
  check_values(1.0 - a, {0, -1, -3});
  check_values(a - 1.0, {0, 1, 3});
  check_values(3.0 * a, {3, 6, 12});
  check_values(a * 3.0, {3, 6, 12});
  check_values(a / 4.0, {0.25, 0.5, 1});
  check_values(4.0 / a, {4, 2, 1});
  check_values(2.0 + a, {3, 4, 6});
  CHECK((a * two).shape() == Shape{3});
  // Shapes whose every dim is 1 broadcast with a scalar as well.
  check_values(Tensor::of({5}) * 2.0, {10});
  check_values(Tensor::of({5}, {1, 1}) + two, {7});
  CHECK((Tensor::of({5}, {1, 1}) + two).shape() == Shape{1, 1});
  check_values(two * two, {4});
}

TEST_CASE("broadcasting over 3-D and 4-D shapes matches a naive loop") {
  manual_seed(11);
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{2, 3, 4}, {3, 1}}, {{2, 1, 4}, {1, 3, 1}}, {{4}, {2, 3, 4}},   {{2, 3, 1}, {2, 1, 4}},
      {{1, 3, 4}, {2, 1, 1}}, {{2, 2, 3, 2}, {2, 1, 2}}, {{3, 1}, {1}}, {{1, 1, 4}, {2, 3, 1}}};
  for (const auto& [sa, sb] : cases) {
    // copies: clang 14 cannot capture a structured binding
    const std::string shape_a = to_string(sa), shape_b = to_string(sb);
    CAPTURE(shape_a);
    CAPTURE(shape_b);
    Tensor a = Tensor::randn(sa), b = Tensor::rand(sb, 0.5, 2);
    check_same(a + b, naive_broadcast(a, b, [](float x, float y) { return x + y; }));
    check_same(a - b, naive_broadcast(a, b, [](float x, float y) { return x - y; }));
    check_same(b * a, naive_broadcast(b, a, [](float x, float y) { return x * y; }));
    check_same(a / b, naive_broadcast(a, b, [](float x, float y) { return x / y; }));
  }
}

TEST_CASE("scalar_like makes a 0-d tensor of a float dtype") {
  Tensor h = scalar_like(2.5, Tensor::zeros({3}, kFloat16));
  CHECK(h.dim() == 0);
  CHECK(h.dtype() == kFloat16);
  CHECK(h.item() == 2.5);
  Tensor f = scalar_like(-1, Tensor::zeros({2}, kInt64));  // integers get float32
  CHECK(f.dtype() == kFloat32);
  CHECK(f.item() == -1);
}

TEST_CASE("broadcast_shape combines shapes right-aligned") {
  CHECK(broadcast_shape({2, 3}, {3}, "t") == Shape{2, 3});
  CHECK(broadcast_shape({2, 1}, {1, 3}, "t") == Shape{2, 3});
  CHECK(broadcast_shape({}, {4, 5}, "t") == Shape{4, 5});
  CHECK(broadcast_shape({5, 1, 2}, {4, 1}, "t") == Shape{5, 4, 2});
}

TEST_CASE("sum_to reduces a broadcast gradient back to the input shape") {
  Tensor g = Tensor::of({1, 2, 3, 4, 5, 6}, {2, 3});
  check_values(sum_to(g, {3}), {5, 7, 9});
  check_values(sum_to(g, {2, 1}), {6, 15});
  check_values(sum_to(g, {1, 3}), {5, 7, 9});
  CHECK(sum_to(g, {1, 3}).shape() == Shape{1, 3});
  Tensor all = sum_to(g, {});
  CHECK(all.dim() == 0);
  CHECK(all.item() == doctest::Approx(21.0).epsilon(1e-6));
  CHECK(sum_to(g, {2, 3}).same(g));
}

TEST_CASE("gradients of the binary ops, with and without broadcasting") {
  manual_seed(21);
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{2, 3}, {2, 3}}, {{2, 3}, {3}}, {{2, 1}, {1, 3}}, {{3}, {}}, {{}, {2, 2}}, {{2, 1, 3}, {2, 1}}};
  for (const auto& [sa, sb] : cases) {
    // copies: clang 14 cannot capture a structured binding
    const std::string shape_a = to_string(sa), shape_b = to_string(sb);
    CAPTURE(shape_a);
    CAPTURE(shape_b);
    Tensor a = Tensor::randn(sa), b = Tensor::randn(sb);
    Tensor bpos = Tensor::rand(sb, 0.5, 2);  // away from 0 for div
    CHECK_GRADCHECK([](const Inputs& in) { return add(in[0], in[1]); }, {a, b});
    CHECK_GRADCHECK([](const Inputs& in) { return sub(in[0], in[1]); }, {a, b});
    CHECK_GRADCHECK([](const Inputs& in) { return mul(in[0], in[1]); }, {a, b});
    CHECK_GRADCHECK([](const Inputs& in) { return div(in[0], in[1]); }, {a, bpos});
  }
  // The double overloads and the same tensor on both sides.
  Tensor x = Tensor::rand({2, 3}, 0.5, 2);
  CHECK_GRADCHECK([](const Inputs& in) { return 2.0 / in[0] - in[0] * 3.0 + 1.0; }, {x});
  CHECK_GRADCHECK([](const Inputs& in) { return div(in[0], in[0] + 1.0); }, {x});
}

TEST_CASE("unary ops forward (hand-computed)") {
  Tensor x = Tensor::of({-2, -0.5, 0, 1, 3});
  check_values(neg(x), {2, 0.5, 0, -1, -3});
  check_values(-x, {2, 0.5, 0, -1, -3});
  check_values(exp(x), {0.1353352832366127, 0.6065306597126334, 1, 2.718281828459045,
                        20.085536923187668});
  check_values(relu(x), {0, 0, 0, 1, 3});
  check_values(sigmoid(x), {0.11920292202211755, 0.3775406687981454, 0.5, 0.7310585786300049,
                            0.9525741268224334});
  check_values(tanh(x), {-0.9640275800758169, -0.46211715726000974, 0, 0.7615941559557649,
                         0.9950547536867305});
  Tensor p = Tensor::of({0.25, 1, 4, 9});
  check_values(log(p), {-1.3862943611198906, 0, 1.3862943611198906, 2.1972245773362196});
  check_values(sqrt(p), {0.5, 1, 2, 3});
  check_values(pow(p, 2), {0.0625, 1, 16, 81});
  check_values(pow(p, 0.5), {0.5, 1, 2, 3});
  check_values(pow(p, -1), {4, 1, 0.25, 1.0 / 9});
  check_values(pow(x, 3), {-8, -0.125, 0, 1, 27});
  // The Tensor member spellings route to the same ops.
  check_values(p.sqrt(), {0.5, 1, 2, 3});
  check_values(p.pow(2), {0.0625, 1, 16, 81});
  check_values(x.relu(), {0, 0, 0, 1, 3});
  check_values(x.exp().log(), {-2, -0.5, 0, 1, 3}, 1e-5);
  check_values(x.tanh(), {-0.9640275800758169, -0.46211715726000974, 0, 0.7615941559557649,
                          0.9950547536867305});
  check_values(x.sigmoid(), {0.11920292202211755, 0.3775406687981454, 0.5, 0.7310585786300049,
                             0.9525741268224334});
}

TEST_CASE("sigmoid and exp saturate without NaN") {
  Tensor x = Tensor::of({-100, 100});
  check_values(sigmoid(x), {0, 1});
  check_values(tanh(x), {-1, 1});
  CHECK(std::isinf(exp(Tensor::of({100})).item()));
  check_values(exp(Tensor::of({-200})), {0});
}

TEST_CASE("gradients of the unary ops") {
  manual_seed(22);
  Tensor x = Tensor::randn({2, 3});
  Tensor pos = Tensor::rand({2, 3}, 0.5, 2);
  Tensor away = Tensor::of({-1.5, -0.7, -0.2, 0.3, 0.8, 2.0}, {2, 3});  // no kink in reach
  CHECK_GRADCHECK([](const Inputs& in) { return neg(in[0]); }, {x});
  CHECK_GRADCHECK([](const Inputs& in) { return exp(in[0]); }, {x});
  CHECK_GRADCHECK([](const Inputs& in) { return log(in[0]); }, {pos});
  CHECK_GRADCHECK([](const Inputs& in) { return pow(in[0], 2); }, {x});
  CHECK_GRADCHECK([](const Inputs& in) { return pow(in[0], 3); }, {x});
  CHECK_GRADCHECK([](const Inputs& in) { return pow(in[0], -1.5); }, {pos});
  CHECK_GRADCHECK([](const Inputs& in) { return sqrt(in[0]); }, {pos});
  CHECK_GRADCHECK([](const Inputs& in) { return relu(in[0]); }, {away});
  CHECK_GRADCHECK([](const Inputs& in) { return sigmoid(in[0]); }, {x});
  CHECK_GRADCHECK([](const Inputs& in) { return tanh(in[0]); }, {x});
  // A small composite: tanh(x) * sigmoid(x) + exp(-x^2).
  CHECK_GRADCHECK(
      [](const Inputs& in) { return tanh(in[0]) * sigmoid(in[0]) + exp(neg(pow(in[0], 2))); },
      {x});
}

TEST_CASE("relu passes the gradient only where the input is positive") {
  Tensor x = Tensor::of({-1, 2, -3, 4}).requires_grad_();
  relu(x).sum().backward();
  check_values(x.grad(), {0, 1, 0, 1});
}

TEST_CASE("relu keeps NaN, as IEEE and PyTorch do, and passes it no gradient") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor x = Tensor::from_vector(std::vector<float>{nan, -1, 2, 0}).requires_grad_();
  Tensor y = relu(x);
  std::vector<float> v = y.to_vector<float>();
  CHECK(std::isnan(v[0]));
  CHECK(v[1] == 0.f);
  CHECK(v[2] == 2.f);
  CHECK(v[3] == 0.f);
  y.sum().backward();
  check_values(x.grad(), {0, 0, 1, 0});
}

TEST_CASE("dropout zeroes about p of the elements, scales the rest and keeps the mean") {
  manual_seed(5);
  const double p = 0.3;
  const int64_t n = 20000;
  Tensor x = Tensor::full({n}, 2.0);
  Tensor y = dropout(x, p);
  std::vector<float> v = y.to_vector<float>();
  int64_t zeros = 0, badly_scaled = 0;
  double sum = 0;
  for (float e : v) {
    if (e == 0) ++zeros;
    else badly_scaled += std::abs(e - 2.0 / (1 - p)) > 1e-5;
    sum += e;
  }
  CHECK(badly_scaled == 0);
  // The zero fraction has std sqrt(p (1-p) / n) ~ 0.0032; allow 5 of them.
  CHECK(std::abs(static_cast<double>(zeros) / n - p) < 0.016);
  // Each element is 0 or 2.857 (std 1.31), so the mean has std 0.0093.
  CHECK(std::abs(sum / n - 2.0) < 0.05);

  // The same seed gives the same mask; p = 0 is the identity.
  manual_seed(9);
  Tensor m1 = dropout(Tensor::ones({64}), 0.5);
  manual_seed(9);
  Tensor m2 = dropout(Tensor::ones({64}), 0.5);
  CHECK(m1.to_vector<float>() == m2.to_vector<float>());
  check_values(dropout(Tensor::of({1, -2, 3}), 0.0), {1, -2, 3});
}

TEST_CASE("the dropout gradient is the mask that was applied") {
  manual_seed(6);
  Tensor x = Tensor::rand({4, 8}, 1, 2).requires_grad_();
  Tensor y = dropout(x, 0.5);
  y.sum().backward();
  std::vector<float> xv = x.to_vector<float>(), yv = y.to_vector<float>();
  std::vector<float> g = x.grad().to_vector<float>();
  int64_t dropped = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    // y = x * m with m in {0, 2}: the gradient equals y / x.
    float mask = yv[i] / xv[i];
    CHECK(g[i] == doctest::Approx(mask).epsilon(1e-6));
    CHECK((g[i] == 0.f || g[i] == doctest::Approx(2.0).epsilon(1e-6)));
    dropped += g[i] == 0.f;
  }
  CHECK(dropped > 0);
  CHECK(dropped < 32);
  // Reseeding inside f fixes the mask, so finite differences see the same one.
  CHECK_GRADCHECK(
      [](const Inputs& in) {
        manual_seed(77);
        return dropout(in[0], 0.25);
      },
      {Tensor::randn({3, 4})});
}

// ---- math (issue 22): new unary maps, clamp, minimum/maximum, comparisons ----

TEST_CASE("abs, erf, expm1, log1p, rsqrt, sin, cos forward (hand-computed)") {
  Tensor x = Tensor::of({-2, 0, 0.5});
  check_values(abs(x), {2, 0, 0.5});
  check_values(erf(x), {std::erf(-2.0), 0, std::erf(0.5)});
  check_values(sin(x), {std::sin(-2.0), 0, std::sin(0.5)});
  check_values(cos(x), {std::cos(-2.0), 1, std::cos(0.5)});
  check_values(rsqrt(Tensor::of({4, 0.25})), {0.5, 2});
  // accurate near zero, where exp(x) - 1 and log(1 + x) in float32 lose every digit
  check_values(expm1(Tensor::of({1e-7f, -2})), {1e-7 + 5e-15, std::expm1(-2.0)});
  check_values(log1p(Tensor::of({1e-7f, 1})), {1e-7 - 5e-15, std::log(2.0)});
  check_values(abs(Tensor::of({-1, 2}).to(kFloat16)), {1, 2});  // float16 through float32
}

TEST_CASE("gradients of abs, erf, expm1, log1p, rsqrt, sin, cos") {
  manual_seed(31);
  Tensor x = Tensor::randn({2, 3}), pos = Tensor::rand({2, 3}, 0.5, 2);
  Tensor away = Tensor::of({-1.5, -0.7, -0.2, 0.3, 0.8, 2.0}, {2, 3});
  CHECK_GRADCHECK([](const Inputs& in) { return abs(in[0]); }, {away});
  CHECK_GRADCHECK([](const Inputs& in) { return erf(in[0]); }, {x});
  CHECK_GRADCHECK([](const Inputs& in) { return expm1(in[0]); }, {x});
  CHECK_GRADCHECK([](const Inputs& in) { return log1p(in[0]); }, {pos});
  CHECK_GRADCHECK([](const Inputs& in) { return rsqrt(in[0]); }, {pos});
  CHECK_GRADCHECK([](const Inputs& in) { return sin(in[0]); }, {x});
  CHECK_GRADCHECK([](const Inputs& in) { return cos(in[0]); }, {x});
  // abs at 0 passes no gradient (sign(0) = 0, PyTorch's choice)
  Tensor z = Tensor::of({0, -3}).requires_grad_();
  abs(z).sum().backward();
  check_values(z.grad(), {0, -1});
}

TEST_CASE("clamp: values, NaN, gradient 1 at the bounds and 0 outside") {
  Tensor x = Tensor::of({-3, -1, 0, 1, 2, NAN}).requires_grad_();
  Tensor y = clamp(x, -1.0, 1.0);
  std::vector<float> v = y.to_float_vector();
  CHECK(std::vector<float>(v.begin(), v.end() - 1) == std::vector<float>{-1, -1, 0, 1, 1});
  CHECK(std::isnan(v[5]));
  y.sum().backward();
  std::vector<float> g = x.grad().to_float_vector();
  CHECK(std::vector<float>(g.begin(), g.end() - 1) == std::vector<float>{0, 1, 1, 1, 0});
  check_values(clamp(Tensor::of({-3, 5}), std::nullopt, 2.0), {-3, 2});
  check_values(clamp(Tensor::of({-3, 5}), 0.0, std::nullopt), {0, 5});
  check_values(clamp(Tensor::of({-3, 5}), 2.0, 1.0), {1, 1});  // min > max: max, as PyTorch
  CHECK_ERROR(clamp(Tensor::of({1}), std::nullopt, std::nullopt),
              "clamp: at least one of min and max");
  CHECK_ERROR(clamp(Tensor::of_ints({1, 2}), 0.0, 1.0), "clamp: expected float tensors, got int64");
}

TEST_CASE("maximum and minimum: broadcast, NaN wins, ties split the gradient") {
  Tensor a = Tensor::of({1, 5, 2, NAN}).requires_grad_(),
         b = Tensor::of({3, 5, 1, 0}).requires_grad_();
  Tensor hi = maximum(a, b), lo = minimum(a, b);
  std::vector<float> h = hi.to_float_vector(), l = lo.to_float_vector();
  CHECK(h[0] == 3);
  CHECK(h[1] == 5);
  CHECK(h[2] == 2);
  CHECK(std::isnan(h[3]));
  CHECK(l[0] == 1);
  CHECK(l[2] == 1);
  CHECK(std::isnan(l[3]));
  hi.sum().backward();
  check_values(a.grad(), {0, 0.5, 1, 1});  // NaN: all of it to both sides (PyTorch)
  check_values(b.grad(), {1, 0.5, 0, 1});
  check_values(maximum(Tensor::of({1, 4}, {2, 1}), Tensor::of({2, 3, 5})), {2, 3, 5, 4, 4, 5});
  manual_seed(32);
  Tensor x = Tensor::randn({2, 3}), y = Tensor::randn({3});
  CHECK_GRADCHECK([](const Inputs& in) { return maximum(in[0], in[1]); }, {x, y});
  CHECK_GRADCHECK([](const Inputs& in) { return minimum(in[0], in[1]); }, {x, y});
  CHECK_ERROR(maximum(Tensor::zeros({2, 3}), Tensor::zeros({4})),
              "maximum: shapes [2, 3] and [4] cannot broadcast");
}

TEST_CASE("comparisons on every dtype give float 1/0, broadcast, no gradient") {
  Tensor a = Tensor::of({1, 2, 3}), b = Tensor::of({2, 2, 2});
  check_values(eq(a, b), {0, 1, 0});
  check_values(ne(a, b), {1, 0, 1});
  check_values(lt(a, b), {1, 0, 0});
  check_values(le(a, b), {1, 1, 0});
  check_values(gt(a, b), {0, 0, 1});
  check_values(ge(a, b), {0, 1, 1});
  CHECK(eq(a, b).dtype() == kFloat32);
  CHECK_FALSE(gt(a.requires_grad_(), b).requires_grad());
  // int64 ids above 2^24 that one float32 cannot tell apart
  const int64_t big = int64_t{1} << 24;
  Tensor ids = Tensor::of_ints({big, big + 1, (int64_t{1} << 40) + 1}),
         other = Tensor::of_ints({big + 1});
  check_values(eq(ids, other), {0, 1, 0});
  check_values(lt(ids, other), {1, 0, 0});
  check_values(gt(ids, static_cast<double>(big)), {0, 1, 1});
  check_values(eq(Tensor::of_ints({3, 4}, {2}, kInt32), Tensor::of_ints({4}, {1}, kInt64)), {0, 1});
  check_values(lt(Tensor::of({1.5, 2}).to(kFloat16), Tensor::of({2})),
               {1, 0});  // float16 meets float32
  check_values(le(Tensor::of_ints({1, 2}), 1.5),
               {1, 0});  // an integer against a fraction: as float
  check_values(lt(Tensor::of_ints({5, -7}, {2}, kInt32), 3e9), {1, 1});  // beyond int32: as int64
  check_values(eq(Tensor::of({NAN, 1}), Tensor::of({NAN, 1})), {0, 1});
  check_values(ge(Tensor::of({1, 5}, {2, 1}), Tensor::of({0, 2, 6})), {1, 0, 0, 1, 1, 0});
  CHECK_ERROR(lt(Tensor::zeros({2}), Tensor::zeros({3})),
              "lt: shapes [2] and [3] cannot broadcast");
}
