// Reductions: sum, mean and max over any set of dims, with and without
// keepdim, their gradients, and argmax.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "helpers.h"

using namespace minidl;
using minidl::testing::check_values;
using minidl::testing::distinct;
using Inputs = std::vector<Tensor>;

TEST_CASE("sum, mean and max of a [2,3] matrix (hand-computed)") {
  Tensor x = Tensor::of({1, 5, 3, 4, 2, 6}, {2, 3});
  Tensor s = sum(x);
  CHECK(s.dim() == 0);
  CHECK(s.item() == doctest::Approx(21.0).epsilon(1e-6));
  check_values(sum(x, {0}), {5, 7, 9});
  check_values(sum(x, {1}), {9, 12});
  check_values(sum(x, {-1}), {9, 12});
  CHECK(sum(x, {1}).shape() == Shape{2});
  CHECK(sum(x, {1}, true).shape() == Shape{2, 1});
  CHECK(sum(x, {0}, true).shape() == Shape{1, 3});
  CHECK(sum(x, {}, true).shape() == Shape{1, 1});
  CHECK(sum(x, {0, 1}).shape() == Shape{});

  CHECK(mean(x).item() == doctest::Approx(3.5).epsilon(1e-6));
  check_values(mean(x, {0}), {2.5, 3.5, 4.5});
  check_values(mean(x, {1}, true), {3, 4});
  CHECK(mean(x, {1}, true).shape() == Shape{2, 1});

  CHECK(max(x).item() == doctest::Approx(6.0).epsilon(1e-6));
  check_values(max(x, {0}), {4, 5, 6});
  check_values(max(x, {1}), {5, 6});
  CHECK(max(x, {0}, true).shape() == Shape{1, 3});

  // Member spellings.
  CHECK(x.sum().item() == doctest::Approx(21.0).epsilon(1e-6));
  check_values(x.mean({1}), {3, 4});
  check_values(x.max({-2}, true), {4, 5, 6});
}

TEST_CASE("reductions over several dims of a [2,3,4] tensor (hand-computed)") {
  Tensor x = Tensor::arange(24).reshape({2, 3, 4});  // x[i,j,k] = 12i + 4j + k
  check_values(sum(x, {0, 2}), {60, 92, 124});
  CHECK(sum(x, {0, 2}, true).shape() == Shape{1, 3, 1});
  check_values(sum(x, {2, 0}, true), {60, 92, 124});  // order does not matter
  check_values(sum(x, {0, 1}), {60, 66, 72, 78});
  check_values(sum(x, {-1}), {6, 22, 38, 54, 70, 86});
  check_values(sum(x, {1, 2}), {66, 210});
  check_values(mean(x, {0, 2}), {7.5, 11.5, 15.5});
  check_values(mean(x, {-2}), {4, 5, 6, 7, 16, 17, 18, 19});
  check_values(max(x, {0, 2}), {15, 19, 23});
  check_values(max(x, {1}), {8, 9, 10, 11, 20, 21, 22, 23});
  CHECK(max(x, {1}, true).shape() == Shape{2, 1, 4});
  check_values(max(x, {0, 1, 2}, true), {23});
  CHECK(max(x, {0, 1, 2}, true).shape() == Shape{1, 1, 1});
}

TEST_CASE("max handles negative values and a single element") {
  check_values(max(Tensor::of({-5, -2, -9})), {-2});
  check_values(max(Tensor::of({-3}, {1, 1}), {1}), {-3});
  check_values(max(Tensor::of({-1, -7, -4, -8}, {2, 2}), {1}), {-1, -4});
}

TEST_CASE("reductions of a 0-d tensor over dim 0 or -1 return it") {
  Tensor s = Tensor::full({}, 2.5);
  CHECK(sum(s, {0}).item() == doctest::Approx(2.5).epsilon(1e-6));
  CHECK(sum(s, {0}).dim() == 0);
  CHECK(mean(s, {-1}, true).item() == doctest::Approx(2.5).epsilon(1e-6));
  CHECK(max(s, {0}).item() == doctest::Approx(2.5).epsilon(1e-6));
  CHECK(sum(s).item() == doctest::Approx(2.5).epsilon(1e-6));
  Tensor x = Tensor::full({}, 3).requires_grad_();
  (mean(x, {0}) * 4.0).backward();
  check_values(x.grad(), {4});
}

TEST_CASE("sum of an empty tensor is zero") {
  Tensor e = Tensor::zeros({0, 3});
  CHECK(sum(e).item() == 0);
  check_values(sum(e, {0}), {0, 0, 0});
}

TEST_CASE("gradients of sum, mean and max over dims, with and without keepdim") {
  manual_seed(31);
  Tensor x = Tensor::randn({2, 3, 4});
  Tensor d = distinct({2, 3, 4});  // no ties within the gradcheck step
  const std::vector<std::vector<int64_t>> dim_sets = {{},     {0},    {1},    {-1},
                                                      {0, 2}, {0, 1}, {1, 2}, {0, 1, 2}};
  for (bool keep : {false, true}) {
    CAPTURE(keep);
    for (const std::vector<int64_t>& dims : dim_sets) {
      CAPTURE(dims.size());
      CHECK_GRADCHECK([&](const Inputs& in) { return sum(in[0], dims, keep); }, {x});
      CHECK_GRADCHECK([&](const Inputs& in) { return mean(in[0], dims, keep); }, {x});
      CHECK_GRADCHECK([&](const Inputs& in) { return max(in[0], dims, keep); }, {d});
    }
  }
}

TEST_CASE("the max gradient goes to the maximum and splits evenly between ties") {
  Tensor x = Tensor::of({3, 1, 3, 2, 2, 2, 0, 5, 1}, {3, 3}).requires_grad_();
  Tensor m = max(x, {1});
  check_values(m, {3, 2, 5});
  m.sum().backward();
  check_values(x.grad(), {0.5, 0, 0.5, 1.0 / 3, 1.0 / 3, 1.0 / 3, 0, 1, 0});

  Tensor y = Tensor::of({1, 4, 2, 4}, {2, 2}).requires_grad_();
  (max(y) * 6.0).backward();
  check_values(y.grad(), {0, 3, 0, 3});
}

// max's backward kernel (dims side by side, or none) against the ops it
// replaced: eq, sum of the ties, div and mul, bit for bit. Values in {0, 1, 2}
// tie often; a NaN row has no maximum equal to it (0 * (g / 0) is NaN), and
// negative gradients make -0 where x is not the maximum.
TEST_CASE("max's one-pass gradient equals mask * (g / ties), bit for bit") {
  manual_seed(11);
  std::vector<float> v = Tensor::rand({3, 4, 5, 6}).to_float_vector();
  for (float& e : v) e = std::floor(e * 3.f);
  for (int64_t i = 0; i < 6; ++i) v[(1 * 20 + 7) * 6 + i] = i == 2 ? std::nanf("") : 1.f;
  Tensor x = Tensor::from_vector(v, {3, 4, 5, 6});
  const std::vector<std::vector<int64_t>> cases = {{1}, {3}, {0}, {1, 2}, {0, 1, 2, 3}, {}, {0, 2}};
  for (const auto& dims : cases) {
    CAPTURE(dims.size());
    CAPTURE(dims.empty() ? -1 : dims.front());
    Tensor xg = x.detach().requires_grad_();
    Tensor m = max(xg, dims, true);
    Tensor g = Tensor::randn(m.shape());
    m.backward(g);
    Tensor mask = eq(x, max(x, dims, true));
    Tensor want = mul(mask, div(g, sum(mask, dims, true)));
    const auto got_v = xg.grad().to_float_vector(), want_v = want.to_float_vector();
    REQUIRE(got_v.size() == want_v.size());
    int differ = 0;
    for (size_t i = 0; i < got_v.size(); ++i)
      differ += std::memcmp(&got_v[i], &want_v[i], sizeof(float)) != 0;
    CHECK(differ == 0);
  }
}

TEST_CASE("the mean gradient is 1/count everywhere") {
  Tensor x = Tensor::zeros({2, 4}).requires_grad_();
  mean(x, {1}).sum().backward();
  check_values(x.grad(), {0.25, 0.25, 0.25, 0.25, 0.25, 0.25, 0.25, 0.25});
}

TEST_CASE("argmax returns the index of the largest value along the last dim") {
  Tensor x = Tensor::of({1, 5, 3, 4, 2, 6, -1, -3, -2}, {3, 3});
  Tensor a = argmax(x);
  CHECK(a.dtype() == kInt64);
  CHECK(a.shape() == Shape{3});
  CHECK(a.to_vector<int64_t>() == std::vector<int64_t>{1, 2, 0});
  CHECK(argmax(Tensor::of({0, 2, 1, 2})).item() == 1);  // the first of ties
  CHECK(argmax(Tensor::of({1, 9, 3}).to(kFloat16)).item() == 1);
}

// ---- math (issue 22): min, argmin, argmax along a dim, var, std, logsumexp, norm ----

TEST_CASE("min, argmin and argmax along a dim (hand-computed)") {
  Tensor x = Tensor::of({1, 5, 3, 4, 2, 6}, {2, 3});
  check_values(min(x), {1});
  check_values(min(x, {1}), {1, 2});
  check_values(min(x, {0}, true), {1, 2, 3});
  CHECK(min(x, {0}, true).shape() == Shape{1, 3});
  CHECK(argmin(x).to_vector<int64_t>() == std::vector<int64_t>{0, 1});
  CHECK(argmin(x, 0).to_vector<int64_t>() == std::vector<int64_t>{0, 1, 0});
  CHECK(argmax(x, 0, true).shape() == Shape{1, 3});
  CHECK(argmax(x, 0).to_vector<int64_t>() == std::vector<int64_t>{1, 0, 1});
  Tensor cube = distinct({2, 3, 4});  // argmax along the middle dim against a loop
  std::vector<float> v = cube.to_float_vector();
  std::vector<int64_t> got = argmax(cube, 1).to_vector<int64_t>();
  for (int i = 0; i < 2; ++i)
    for (int k = 0; k < 4; ++k) {
      int best = 0;
      for (int j = 1; j < 3; ++j)
        if (v[i * 12 + j * 4 + k] > v[i * 12 + best * 4 + k]) best = j;
      CHECK(got[i * 4 + k] == best);
    }
  // ties: the first smallest index; the gradient of min splits between ties
  Tensor t = Tensor::of({2, 1, 1, 3}).requires_grad_();
  CHECK(argmin(t.detach(), 0).item() == 1);
  min(t).backward();
  check_values(t.grad(), {0, 0.5, 0.5, 0});
  CHECK_GRADCHECK([](const Inputs& in) { return min(in[0], {0, 2}); }, {distinct({3, 2, 4})});
  CHECK_ERROR(argmin(x, 2), "argmin");
  CHECK_ERROR(min(Tensor::zeros({0})), "min: empty tensor");
}

TEST_CASE("var and std, unbiased and not, over dims (hand-computed)") {
  Tensor x = Tensor::of({1, 2, 3, 4, 6, 8}, {2, 3});
  check_values(var(x, {1}), {1, 4});  // sum of squares 2 and 8 over n - 1 = 2
  check_values(var(x, {1}, false), {2 / 3.0, 8 / 3.0});
  check_values(minidl::std(x, {1}), {1, 2});
  check_values(var(x), {(1 + 4 + 9 + 16 + 36 + 64 - 24 * 24 / 6.0) / 5});
  CHECK(var(x, {0}, true, true).shape() == Shape{1, 3});
  // two passes: no cancellation with a large offset
  check_values(var(Tensor::of({10000, 10001, 10002}), {0}), {1}, 1e-6);
  CHECK(std::isnan(var(Tensor::of({3}), {0}).item()));  // n - 1 = 0, as PyTorch
  CHECK_GRADCHECK([](const Inputs& in) { return var(in[0], {1}); }, {distinct({2, 4})});
  CHECK_GRADCHECK([](const Inputs& in) { return minidl::std(in[0], {0}, false); },
                  {distinct({3, 2}, 0.2)});
  CHECK_ERROR(var(Tensor::of_ints({1, 2})), "var: expected a float tensor, got int64");
}

TEST_CASE("logsumexp is stable for large and infinite inputs") {
  check_values(logsumexp(Tensor::of({1, 2, 3}), {0}),
               {std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0))});
  check_values(logsumexp(Tensor::of({10000, 10000}), {0}), {10000 + std::log(2.0)});
  Tensor inf = logsumexp(Tensor::of({-INFINITY, -INFINITY, INFINITY, 1}, {2, 2}), {1});
  CHECK(inf.to_float_vector() == std::vector<float>{-INFINITY, INFINITY});
  Tensor x = Tensor::of({1, 2, 3}).requires_grad_();
  logsumexp(x, {0}).backward();
  check_values(x.grad(), {0.09003057, 0.24472847, 0.66524096}, 1e-5);  // softmax(x)
  CHECK_GRADCHECK(
      [](const Inputs& in) {
        return logsumexp(in[0], {0, 2}, true);
      },
      {distinct({2, 3, 2})});
}

TEST_CASE("norm with p = 1, 2, inf and 3; zero gradient at zero") {
  Tensor x = Tensor::of({3, -4, 0, 1, 1, 1}, {2, 3});
  check_values(norm(x), {std::sqrt(28.0)});
  check_values(norm(x, 2, {1}), {5, std::sqrt(3.0)});
  check_values(norm(x, 1, {1}), {7, 3});
  check_values(norm(x, INFINITY, {1}), {4, 1});
  check_values(norm(x, 3, {1}), {std::cbrt(91.0), std::cbrt(3.0)});
  CHECK(norm(x, 2, {1}, true).shape() == Shape{2, 1});
  Tensor z = Tensor::zeros({3}).requires_grad_();
  norm(z).backward();
  check_values(z.grad(), {0, 0, 0});
  CHECK_GRADCHECK([](const Inputs& in) { return norm(in[0], 2, {1}); }, {distinct({2, 3}, 0.25)});
  CHECK_GRADCHECK([](const Inputs& in) { return norm(in[0], 3, {0}); }, {distinct({2, 3}, 0.25)});
  CHECK_ERROR(norm(x, 0), "norm: expected p > 0");
}

// Rows of 1000 (16 lanes and a tail of 8) and columns of 37 rows: sums
// equal the double sums up to float32 rounding, maxima exactly; a NaN
// anywhere in a row makes its max NaN, as torch.amax.
TEST_CASE("sum and max along long rows and down columns, with NaN") {
  manual_seed(5);
  const int64_t R = 37, C = 1000;
  Tensor x = Tensor::randn({R, C});
  const std::vector<float> v = x.to_vector<float>();
  std::vector<double> row_sum(R, 0), col_sum(C, 0), row_max(R, -1e30), col_max(C, -1e30);
  std::vector<double> row_abs(R, 0), col_abs(C, 0);  // sums of |x|: the rounding's scale
  for (int64_t r = 0; r < R; ++r)
    for (int64_t c = 0; c < C; ++c) {
      const double e = v[r * C + c];
      row_sum[r] += e, col_sum[c] += e;
      row_abs[r] += std::abs(e), col_abs[c] += std::abs(e);
      row_max[r] = std::max(row_max[r], e), col_max[c] = std::max(col_max[c], e);
    }
  auto as_double = [](const Tensor& t) {
    std::vector<float> f = t.to_vector<float>();
    return std::vector<double>(f.begin(), f.end());
  };
  // float32 sums in any order: within 1e-6 of the sum of |x| (a row's is
  // about 800; leaving out one value moves a sum by about 0.8)
  auto check_sums = [](const std::vector<double>& got, const std::vector<double>& want,
                       const std::vector<double>& scale) {
    REQUIRE(got.size() == want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      CAPTURE(i);
      CHECK(std::abs(got[i] - want[i]) <= 1e-6 * scale[i]);
    }
  };
  check_sums(as_double(sum(x, {1})), row_sum, row_abs);
  check_sums(as_double(sum(x, {0})), col_sum, col_abs);
  CHECK(as_double(max(x, {1})) == row_max);
  CHECK(as_double(max(x, {0})) == col_max);
  for (int64_t at : {0, 5, 999}) {  // the first lane, a middle lane, the tail
    CAPTURE(at);
    std::vector<float> w = v;
    w[3 * C + at] = std::nanf("");
    const std::vector<float> m = max(Tensor::from_vector(w, {R, C}), {1}).to_vector<float>();
    CHECK(std::isnan(m[3]));
    CHECK(m[4] == static_cast<float>(row_max[4]));
  }
}

// Rows of every length from 1 to 40 (under one 16-lane block, a block and a
// tail, two blocks and a tail): the max of each row exactly, as the max of
// its values in order; a NaN at any position makes it NaN, and so does a
// NaN in softmax's row.
TEST_CASE("max and softmax along short rows of every length, with NaN at each position") {
  manual_seed(6);
  for (int64_t n = 1; n <= 40; ++n) {
    CAPTURE(n);
    Tensor x = Tensor::randn({3, n});
    const std::vector<float> v = x.to_vector<float>();
    const std::vector<float> m = max(x, {1}).to_vector<float>();
    for (int64_t r = 0; r < 3; ++r)
      CHECK(m[r] == *std::max_element(v.begin() + r * n, v.begin() + (r + 1) * n));
    for (int64_t at = 0; at < n; ++at) {
      CAPTURE(at);
      std::vector<float> w = v;
      w[n + at] = std::nanf("");
      Tensor y = Tensor::from_vector(w, {3, n});
      const std::vector<float> got = max(y, {1}).to_vector<float>();
      CHECK(got[0] == m[0]);
      CHECK(std::isnan(got[1]));
      CHECK(got[2] == m[2]);
      CHECK(std::isnan(softmax(y, 1).to_vector<float>()[n + (at + 1) % n]));
    }
  }
}

// A permuted view is reduced in its memory's order, without a copy: sums
// equal the copy's up to rounding (relative size printed), max exactly, and
// the gradients (expanded back through the permute) exactly.
TEST_CASE("reductions of permuted views equal those of their contiguous copies") {
  manual_seed(81);
  Tensor base = Tensor::randn({3, 20, 5, 7});
  struct Case {
    std::vector<int64_t> perm, dims;
  };
  double worst = 0;
  for (const Case& k :
       {Case{{0, 2, 3, 1}, {-1}}, Case{{0, 2, 3, 1}, {1, 2}}, Case{{3, 1, 0, 2}, {0, 3}},
        Case{{1, 0, 2, 3}, {}}, Case{{0, 1, 3, 2}, {2}}}) {
    CAPTURE(k.perm);
    CAPTURE(k.dims);
    Tensor x = base.detach().requires_grad_();
    Tensor view = x.permute(k.perm), copy = contiguous(view.detach());
    CHECK(!view.is_contiguous());
    for (bool keepdim : {false, true}) {
      const auto got = sum(view, k.dims, keepdim), want = sum(copy, k.dims, keepdim);
      REQUIRE(got.shape() == want.shape());
      const auto g = got.to_float_vector(), w = want.to_float_vector();
      for (size_t i = 0; i < g.size(); ++i)  // relative to the sum's size, at least 1
        worst =
            std::max(worst, std::abs(double(g[i]) - w[i]) / std::max(1.0, std::abs(double(w[i]))));
      CHECK(max(view, k.dims, keepdim).to_float_vector() ==
            max(copy, k.dims, keepdim).to_float_vector());
      CHECK(mean(view, k.dims, keepdim).shape() == want.shape());
    }
    Tensor xc = base.detach().requires_grad_();
    (mean(view, k.dims) * 3.0).sum().backward();
    (mean(contiguous(xc.permute(k.perm)), k.dims) * 3.0).sum().backward();
    CHECK(x.grad().to_float_vector() == xc.grad().to_float_vector());
  }
  MESSAGE("sums of permuted views against their copies: max relative difference ", worst);
  CHECK(worst < 1e-5);
}
