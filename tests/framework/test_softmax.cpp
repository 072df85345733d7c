// softmax and log_softmax: hand-computed values, stability for large logits,
// any dim, and gradient checks.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>

#include "helpers.h"

using namespace minidl;
using minidl::testing::check_values;
using Inputs = std::vector<Tensor>;

// softmax([1, 2, 3]) = e^x / (e + e^2 + e^3) = e^x / 30.19287485057736
TEST_CASE("softmax and log_softmax of [1, 2, 3] (hand-computed)") {
  Tensor x = Tensor::of({1, 2, 3});
  check_values(softmax(x), {0.09003057317038046, 0.24472847105479767, 0.6652409557748219});
  // log_softmax = x - log(sum e^x) = x - 3.40760596444438
  check_values(log_softmax(x), {-2.40760596444438, -1.40760596444438, -0.40760596444438});
  // Shifting the logits changes nothing.
  check_values(softmax(x + 100.0), {0.09003057317038046, 0.24472847105479767, 0.6652409557748219});
}

TEST_CASE("softmax rows sum to one, along the last dim or dim 0") {
  Tensor x = Tensor::of({0, 0, 1, 2, 3, 4}, {2, 3});
  Tensor y = softmax(x);  // dim -1
  CHECK(y.shape() == Shape{2, 3});
  // Row 0: [1, 1, e] / (2 + e); row 1: the [1, 2, 3] case.
  const double e = std::exp(1.0);
  check_values(y, {1 / (2 + e), 1 / (2 + e), e / (2 + e), 0.09003057317038046,
                   0.24472847105479767, 0.6652409557748219});
  check_values(sum(y, {1}), {1, 1});

  Tensor z = softmax(x, 0);  // columns: [0, 2], [0, 3], [1, 4] -> each a 2-way softmax
  const double s2 = 1 / (1 + std::exp(2.0)), s3 = 1 / (1 + std::exp(3.0));
  check_values(z, {s2, s3, s3, 1 - s2, 1 - s3, 1 - s3});
  check_values(sum(z, {0}), {1, 1, 1});

  // A middle dim of a 3-D tensor.
  Tensor w = Tensor::of({0, 1, 1, 0, 0, 0, 0, 0}, {2, 2, 2});
  Tensor sw = softmax(w, 1);
  const double a = 1 / (1 + e);  // softmax([0, 1]) = [a, 1 - a]
  check_values(sw, {a, 1 - a, 1 - a, a, 0.5, 0.5, 0.5, 0.5});
  const double la = std::log(a), lb = std::log(1 - a), lh = std::log(0.5);
  check_values(log_softmax(w, 1), {la, lb, lb, la, lh, lh, lh, lh});
}

TEST_CASE("log_softmax is finite and correct for logits of 1e4") {
  Tensor x = Tensor::of({1e4, 0, -1e4});
  Tensor y = log_softmax(x);
  for (float v : y.to_vector<float>()) CHECK(std::isfinite(v));
  check_values(y, {0, -1e4, -2e4});
  check_values(softmax(x), {1, 0, 0});

  Tensor tie = log_softmax(Tensor::of({1e4, 1e4}));
  check_values(tie, {-std::log(2.0), -std::log(2.0)});
  check_values(softmax(Tensor::of({-1e4, -1e4, -1e4, -1e4})), {0.25, 0.25, 0.25, 0.25});

  // The gradient is finite too: softmax(x) - one_hot for sum(-y[0]).
  Tensor xg = Tensor::of({1e4, 0, -1e4}).requires_grad_();
  (-log_softmax(xg)).slice(0, 1).sum().backward();
  check_values(xg.grad(), {0, 0, 0}, 1e-6);
  Tensor xh = Tensor::of({1e4, 1e4}).requires_grad_();
  (-log_softmax(xh)).slice(0, 1).sum().backward();
  check_values(xh.grad(), {-0.5, 0.5});
}

TEST_CASE("gradients of softmax and log_softmax") {
  manual_seed(51);
  Tensor x = Tensor::randn({3, 4});
  CHECK_GRADCHECK([](const Inputs& in) { return softmax(in[0]); }, {x});
  CHECK_GRADCHECK([](const Inputs& in) { return softmax(in[0], 0); }, {x});
  CHECK_GRADCHECK([](const Inputs& in) { return log_softmax(in[0]); }, {x});
  CHECK_GRADCHECK([](const Inputs& in) { return log_softmax(in[0], 0); }, {x});
  Tensor y = Tensor::randn({2, 3, 2});
  CHECK_GRADCHECK([](const Inputs& in) { return softmax(in[0], 1); }, {y});
  CHECK_GRADCHECK([](const Inputs& in) { return log_softmax(in[0], 1); }, {y});
}

TEST_CASE("cross-entropy from log_softmax and gather has gradient softmax - one_hot") {
  Tensor x = Tensor::of({1, 2, 3, 0, 0, 0}, {2, 3}).requires_grad_();
  Tensor labels = Tensor::of_ints({2, 0});
  Tensor loss = -mean(gather(log_softmax(x), labels));
  // (-log 0.66524 - log(1/3)) / 2
  CHECK(loss.item() == doctest::Approx((0.40760596444438 + std::log(3.0)) / 2).epsilon(1e-6));
  loss.backward();
  check_values(x.grad(), {0.09003057317038046 / 2, 0.24472847105479767 / 2,
                          (0.6652409557748219 - 1) / 2, (1.0 / 3 - 1) / 2, 1.0 / 6, 1.0 / 6});
}

TEST_CASE("cross_entropy: the fused mean of -log_softmax at the labels") {
  Tensor x = Tensor::of({1, 2, 3, 0, 0, 0}, {2, 3}).requires_grad_();
  Tensor loss = cross_entropy(x, Tensor::of_ints({2, 0}));
  CHECK(loss.dim() == 0);
  CHECK(loss.item() == doctest::Approx((0.40760596444438 + std::log(3.0)) / 2).epsilon(1e-6));
  loss.backward();
  check_values(x.grad(), {0.09003057317038046 / 2, 0.24472847105479767 / 2,
                          (0.6652409557748219 - 1) / 2, (1.0 / 3 - 1) / 2, 1.0 / 6, 1.0 / 6});

  // Logits of 1e4: row 0 is certain (loss 0), row 1 is wrong by 2e4.
  Tensor big = Tensor::of({1e4, 0, 1e4, -1e4}, {2, 2});
  CHECK(cross_entropy(big, Tensor::of_ints({0, 1}, {}, kInt32)).item() ==
        doctest::Approx(1e4).epsilon(1e-6));

  manual_seed(52);
  Tensor labels = Tensor::of_ints({3, 0, 1});
  CHECK_GRADCHECK([labels](const Inputs& in) { return cross_entropy(in[0], labels); },
                  {Tensor::randn({3, 4})});
  CHECK_ERROR(cross_entropy(Tensor::zeros({2, 3}), Tensor::of_ints({0, 3})), "label 3 at row 1");
}

// d/dx sum(g * softmax(x)) against float64, on rows where one probability is
// close to 1: the error relative to the largest gradient element stays within
// 1e-6 (measured 1.3e-7 and 2.4e-7; PyTorch's float32 is 2e-6 off on such
// rows; y*g - y*sum(y*g) in float32 was 2.4e-5 off).
TEST_CASE("softmax's gradient on nearly saturated rows is accurate to float32 rounding") {
  struct Row {
    double scale;
    std::vector<double> x, g;
  };
  const std::vector<Row> rows{
      // largest probability 0.99935
      {5, {0, 0.5, -0.3, 0.2, 0.9, -0.8, 2.4}, {0.3, -1.2, 0.7, 0.1, -0.4, 0.9, 0.25}},
      {30, {0, 0.205}, {1.0, -0.5}},  // 0.9979 / 0.0021
  };
  for (const Row& r : rows) {
    {
      const double scale = r.scale;
      const int64_t n = static_cast<int64_t>(r.x.size());
      std::vector<float> xs, gs;
      for (int64_t i = 0; i < n; ++i) {
        xs.push_back(static_cast<float>(scale * r.x[i]));
        gs.push_back(static_cast<float>(r.g[i]));
      }
      // float64 reference from the float32 inputs: gx = y * (g - sum(g * y))
      double m = *std::max_element(xs.begin(), xs.end()), s = 0, dot = 0, largest = 0;
      std::vector<double> y(n), want(n);
      for (int64_t i = 0; i < n; ++i) s += std::exp(double(xs[i]) - m);
      for (int64_t i = 0; i < n; ++i) dot += gs[i] * (y[i] = std::exp(double(xs[i]) - m) / s);
      for (int64_t i = 0; i < n; ++i) largest = std::max(largest, std::abs(want[i] = y[i] * (gs[i] - dot)));
      Tensor x = Tensor::from_vector(xs).requires_grad_();
      softmax(x).backward(Tensor::from_vector(gs));
      std::vector<float> got = x.grad().to_vector<float>();
      double worst = 0;
      for (int64_t i = 0; i < n; ++i) worst = std::max(worst, std::abs(got[i] - want[i]) / largest);
      INFO("scale " << scale << ", " << n << " values, largest probability "
                    << *std::max_element(y.begin(), y.end()) << ": error " << worst);
      CHECK(worst < 1e-6);
    }
  }
}

// scaled_softmax([[1, 2], [3, 4]] * 0.5, causal): row 0 keeps column 0 alone;
// row 1 is softmax([1.5, 2]) = [1, e^0.5] / (1 + e^0.5)
TEST_CASE("scaled_softmax by hand: the scale, and the causal mask's zeros") {
  Tensor x = Tensor::of({1, 2, 3, 4}, {2, 2});
  check_values(scaled_softmax(x, 0.5, true), {1, 0, 0.3775406687981454, 0.6224593312018546});
  check_values(scaled_softmax(x, 0.5, false),
               {0.3775406687981454, 0.6224593312018546, 0.3775406687981454, 0.6224593312018546});
}

// What attention computed before the fused op: softmax(masked_fill(x * scale,
// triu(ones({L, S}), 1), -inf)). Equal up to rounding, forward and backward
// (the CPU kernel exponentiates with vec::exp, scaled by 1 / sum; measured
// largest differences 6.0e-8 of the largest probability and 1.1e-7 of the
// largest gradient element), with L < S, L > S and past one warp's 32
// columns; masked positions exactly 0 both ways.
TEST_CASE("scaled_softmax equals the composed scale, causal mask and softmax up to rounding") {
  manual_seed(52);
  double worst_y = 0, worst_g = 0;
  for (const Shape& shape : {Shape{2, 3, 5, 7}, Shape{2, 7, 5}, Shape{1, 40, 40}}) {
    for (bool causal : {true, false}) {
      CAPTURE(to_string(shape));
      CAPTURE(causal);
      const int64_t l = shape[shape.size() - 2], s = shape.back();
      const double scale = 1.0 / std::sqrt(8.0 + l);  // not a power of two
      Tensor g = Tensor::randn(shape);
      Tensor x1 = Tensor::randn(shape).requires_grad_(), x2 = x1.detach().requires_grad_();
      Tensor fused = scaled_softmax(x1, scale, causal);
      Tensor composed = x2 * scale;
      if (causal) composed = masked_fill(composed, triu(Tensor::ones({l, s}), 1), -INFINITY);
      composed = softmax(composed, -1);
      (fused * g).sum().backward();
      (composed * g).sum().backward();
      const auto fy = fused.to_vector<float>(), cy = composed.to_vector<float>();
      const auto fg = x1.grad().to_vector<float>(), cg = x2.grad().to_vector<float>();
      double largest_g = 0;
      for (float v : cg) largest_g = std::max(largest_g, double(std::abs(v)));
      for (size_t i = 0; i < fy.size(); ++i) {
        CHECK((cy[i] == 0) == (fy[i] == 0));
        worst_y = std::max(worst_y, double(std::abs(fy[i] - cy[i])));
        worst_g = std::max(worst_g, std::abs(fg[i] - cg[i]) / largest_g);
      }
    }
  }
  MESSAGE("largest differences: ", worst_y, " (probabilities), ", worst_g, " (gradients)");
  CHECK(worst_y <= 5e-7);
  CHECK(worst_g <= 1e-6);
}

TEST_CASE("gradient of scaled_softmax, causal and not") {
  manual_seed(53);
  Tensor x = Tensor::randn({2, 4, 5});
  CHECK_GRADCHECK([](const Inputs& in) { return scaled_softmax(in[0], 0.7, true); }, {x});
  CHECK_GRADCHECK([](const Inputs& in) { return scaled_softmax(in[0], 0.7, false); }, {x});
  CHECK_THROWS_WITH(scaled_softmax(Tensor::randn({4}), 1.0, true),
                    doctest::Contains("expected scores [..., L, S], got [4]"));
}

// Rows of 1000 (vectorized, with a tail) and columns down dim 0 of [40, 300]
// (a slab of 256 columns and one of 44) against softmax evaluated in double;
// -inf entries (a mask) give exact zeros, and log_softmax -inf there.
TEST_CASE("softmax of long rows, down dim 0, and with -inf entries") {
  manual_seed(9);
  auto reference = [](const std::vector<float>& v, int64_t outer, int64_t d, int64_t inner) {
    std::vector<double> out(v.size());
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) {
        auto at = [&](int64_t k) { return o * d * inner + k * inner + i; };
        double m = -INFINITY, s = 0;
        for (int64_t k = 0; k < d; ++k) m = std::max(m, double(v[at(k)]));
        for (int64_t k = 0; k < d; ++k) s += std::exp(v[at(k)] - m);
        for (int64_t k = 0; k < d; ++k) out[at(k)] = std::exp(v[at(k)] - m) / s;
      }
    return out;
  };
  Tensor rows = Tensor::randn({3, 1000}) * 4.0;
  check_values(softmax(rows), reference(rows.to_vector<float>(), 3, 1000, 1), 1e-5);
  Tensor cols = Tensor::randn({40, 300}) * 4.0;
  check_values(softmax(cols, 0), reference(cols.to_vector<float>(), 1, 40, 300), 1e-5);
  std::vector<double> log_want = reference(cols.to_vector<float>(), 1, 40, 300);
  for (double& p : log_want) p = std::log(p);
  check_values(log_softmax(cols, 0), log_want, 1e-5);

  std::vector<float> masked = rows.to_vector<float>();
  for (int64_t c = 500; c < 1000; ++c) masked[c] = -INFINITY;  // row 0's second half
  Tensor m = Tensor::from_vector(masked, {3, 1000});
  const std::vector<float> p = softmax(m).to_vector<float>();
  const std::vector<float> lp = log_softmax(m).to_vector<float>();
  for (int64_t c = 500; c < 1000; ++c) {
    CHECK(p[c] == 0.f);
    CHECK(lp[c] == -INFINITY);
  }
  check_values(softmax(m), reference(masked, 3, 1000, 1), 1e-5);
}

// Rows shorter than 8 go through transposed blocks of 256 rows (600 rows:
// two whole blocks and one of 88); longer ones in chunks of eight, the last
// of a row of 10, 17 or 33 overlapping the one before. Values and both
// gradients against float64 formulas; one thread and two give the same bits
// (each row's arithmetic does not depend on its block's thread).
TEST_CASE("softmax and log_softmax of short rows: float64 values and gradients") {
  manual_seed(10);
  const int before = num_threads();
  for (int64_t d : {1, 5, 7, 8, 10, 16, 17, 24, 33}) {
    CAPTURE(d);
    const int64_t rows = 600;
    Tensor x = Tensor::randn({rows, d}) * 3.0, g = Tensor::randn({rows, d});
    const std::vector<float> v = x.to_vector<float>(), gv = g.to_vector<float>();
    std::vector<double> p(v.size()), lp(v.size()), gp(v.size()), glp(v.size());
    for (int64_t r = 0; r < rows; ++r) {
      const float* xr = v.data() + r * d;
      const double m = *std::max_element(xr, xr + d);
      double s = 0, dot = 0, sum_g = 0;
      for (int64_t k = 0; k < d; ++k) s += std::exp(xr[k] - m);
      for (int64_t k = 0; k < d; ++k) {
        p[r * d + k] = std::exp(xr[k] - m) / s;
        lp[r * d + k] = xr[k] - m - std::log(s);
        dot += gv[r * d + k] * p[r * d + k];
        sum_g += gv[r * d + k];
      }
      for (int64_t k = 0; k < d; ++k) {
        gp[r * d + k] = p[r * d + k] * (gv[r * d + k] - dot);
        glp[r * d + k] = gv[r * d + k] - p[r * d + k] * sum_g;
      }
    }
    std::vector<std::vector<float>> runs[2];
    for (int t : {1, 2}) {
      set_num_threads(t);
      Tensor a = x.detach().requires_grad_(true), b = x.detach().requires_grad_(true);
      Tensor y = softmax(a, 1), ly = log_softmax(b, 1);
      y.backward(g);
      ly.backward(g);
      check_values(y, p, 1e-6);
      check_values(ly, lp, 1e-5);
      check_values(a.grad(), gp, 1e-5);
      check_values(b.grad(), glp, 1e-5);
      runs[t - 1] = {y.to_vector<float>(), ly.to_vector<float>(), a.grad().to_vector<float>(),
                     b.grad().to_vector<float>()};
    }
    set_num_threads(before);
    for (int i = 0; i < 4; ++i) CHECK(runs[0][i] == runs[1][i]);
  }
}
