// Losses: hand-computed values for every reduction, stability, gradient checks
// and errors; the fused cross_entropy op against the unfused composition.
#include <doctest/doctest.h>
#include <minidl/minidl.h>

#include <cmath>

#include "check_close.h"
#include "gradcheck.h"

using namespace minidl;
using testing::check_close;
using testing::gradcheck;

namespace {

// logits [[1, 2, 3], [1, 1, 1]], labels [2, 0]:
//   l0 = log(e^1 + e^2 + e^3) - 3 = log(1 + e^-1 + e^-2) = 0.4076059644
//   l1 = log(3 e^1) - 1 = log 3                          = 1.0986122887
const double kL0 = std::log(1 + std::exp(-1.0) + std::exp(-2.0)), kL1 = std::log(3.0);
Tensor logits_2x3() { return Tensor::of({1, 2, 3, 1, 1, 1}, {2, 3}); }

}  // namespace

TEST_CASE("reduction strings and enum") {
  CHECK(nn::MSELoss().reduction() == nn::Reduction::Mean);
  CHECK(nn::MSELoss("sum").reduction() == nn::Reduction::Sum);
  CHECK(nn::MSELoss(nn::Reduction::None).reduction() == nn::Reduction::None);
  CHECK(std::string(nn::reduction_name(nn::Reduction::Sum)) == "sum");
  CHECK_THROWS_WITH_AS(
      nn::MSELoss("average"),
      doctest::Contains("unknown reduction 'average' (expected \"none\", \"mean\" or \"sum\")"),
      Error);
  CHECK_THROWS_AS(nn::CrossEntropyLoss("Mean"), Error);
}

TEST_CASE("MSELoss by hand for none, mean and sum") {
  Tensor pred = Tensor::of({1, 2, 3}), target = Tensor::of({1, 0, 0});
  // squared errors [0, 4, 9]: mean 13/3, sum 13
  check_close(nn::MSELoss("none")(pred, target), {0, 4, 9});
  check_close(nn::MSELoss("mean")(pred, target), {13.0 / 3});
  check_close(nn::MSELoss("sum")(pred, target), {13});
  CHECK(nn::MSELoss()(pred, target).shape() == Shape{});
  // d mean / d pred = 2 (pred - target) / 3 = [0, 4/3, 2]
  Tensor p = pred.clone().requires_grad_();
  nn::MSELoss()(p, target).backward();
  check_close(p.grad(), {0, 4.0 / 3, 2});
  // the target's gradient is the prediction's negated, each reduction
  Tensor q = pred.clone().requires_grad_(), t = target.clone().requires_grad_();
  mse_loss(q, t, "sum").backward();
  check_close(q.grad(), {0, 4, 6});
  check_close(t.grad(), {0, -4, -6});
  CHECK_THROWS_WITH_AS(
      mse_loss(pred, Tensor::of({1, 2})),
      doctest::Contains("mse_loss: input [3] and target [2] must have the same shape"), Error);
  for (const char* r : {"none", "mean", "sum"}) {
    INFO(r);
    nn::MSELoss loss{r};
    Tensor a = Tensor::randn({3, 4}), b = Tensor::randn({3, 4});
    CHECK_GRADCHECK_RESULT(
        gradcheck([&](const std::vector<Tensor>& in) { return loss(in[0], in[1]); }, {a, b}));
  }
  CHECK_THROWS_WITH_AS(nn::MSELoss()(Tensor::zeros({2, 3}), Tensor::zeros({3, 2})),
                       doctest::Contains("MSELoss: prediction [2, 3] and target [3, 2]"), Error);
  CHECK_THROWS_AS(nn::MSELoss()(Tensor::zeros({2})), Error);  // losses take two inputs
}

TEST_CASE("CrossEntropyLoss equals a hand computation on a 2x3 example") {
  Tensor labels = Tensor::of_ints({2, 0});
  check_close(nn::CrossEntropyLoss("none")(logits_2x3(), labels), {kL0, kL1});
  check_close(nn::CrossEntropyLoss()(logits_2x3(), labels), {(kL0 + kL1) / 2});  // 0.7531091266
  check_close(nn::CrossEntropyLoss("sum")(logits_2x3(), labels), {kL0 + kL1});   // 1.5062182531
  // int32 labels give the same values
  check_close(nn::CrossEntropyLoss()(logits_2x3(), Tensor::of_ints({2, 0}, {}, kInt32)),
              {(kL0 + kL1) / 2});

  // d mean / d logits = (softmax - onehot) / N:
  //   row 0: softmax = [e^-2, e^-1, 1] / (1 + e^-1 + e^-2) = [.0900306, .2447285, .6652410]
  //   row 1: softmax = [1/3, 1/3, 1/3]
  const double z = 1 + std::exp(-1.0) + std::exp(-2.0);
  Tensor x = logits_2x3().requires_grad_();
  nn::CrossEntropyLoss()(x, labels).backward();
  check_close(x.grad(), {std::exp(-2.0) / z / 2, std::exp(-1.0) / z / 2, (1 / z - 1) / 2,
                         (1.0 / 3 - 1) / 2, 1.0 / 6, 1.0 / 6});
}

TEST_CASE("CrossEntropyLoss with one-hot and probability targets") {
  Tensor onehot = Tensor::of({0, 0, 1, 1, 0, 0}, {2, 3});
  check_close(nn::CrossEntropyLoss("none")(logits_2x3(), onehot), {kL0, kL1});
  check_close(nn::CrossEntropyLoss()(logits_2x3(), onehot), {(kL0 + kL1) / 2});
  // probabilities: l_i = lse_i - sum_c t_ic x_ic
  //   row 0: (3 + kL0) - (0.2*1 + 0.3*2 + 0.5*3) = 3.4076059644 - 2.3 = 1.1076059644
  //   row 1: (1 + kL1) - (0.5*1 + 0.5*1 + 0*1)   = log 3                = 1.0986122887
  Tensor probs = Tensor::of({0.2f, 0.3f, 0.5f, 0.5f, 0.5f, 0.f}, {2, 3});
  check_close(nn::CrossEntropyLoss("none")(logits_2x3(), probs), {3 + kL0 - 2.3, kL1});
  check_close(nn::CrossEntropyLoss("sum")(logits_2x3(), probs), {3 + kL0 - 2.3 + kL1});
  CHECK_GRADCHECK_RESULT(gradcheck(
      [&](const std::vector<Tensor>& in) { return nn::CrossEntropyLoss("none")(in[0], probs); },
      {Tensor::randn({2, 3})}));
}

TEST_CASE("CrossEntropyLoss is stable for logits of 1e4") {
  // row 0: [1e4, 0, -1e4], label 0 -> log(1 + e^-1e4 + e^-2e4) = 0
  // row 1: [1e4, 1e4, 0], label 2  -> 1e4 + log 2 - 0 = 10000.6931
  Tensor x = Tensor::of({1e4f, 0.f, -1e4f, 1e4f, 1e4f, 0.f}, {2, 3}).requires_grad_();
  Tensor labels = Tensor::of_ints({0, 2});
  Tensor none = nn::CrossEntropyLoss("none")(x, labels);
  check_close(none, {0, 1e4 + std::log(2.0)}, 2e-3);
  Tensor mean = nn::CrossEntropyLoss()(x, labels);
  CHECK(std::isfinite(mean.item()));
  CHECK(mean.item() == doctest::Approx((1e4 + std::log(2.0)) / 2).epsilon(1e-6));
  mean.backward();
  // grad row 0: (softmax - onehot) / 2 = [0, 0, 0]; row 1: [1/4, 1/4, -1/2]
  check_close(x.grad(), {0, 0, 0, 0.25, 0.25, -0.5});
  Tensor onehot = Tensor::of({1, 0, 0, 0, 0, 1}, {2, 3});
  check_close(nn::CrossEntropyLoss("none")(x, onehot), {0, 1e4 + std::log(2.0)}, 2e-3);
}

TEST_CASE("CrossEntropyLoss gradients match finite differences for every reduction") {
  manual_seed(21);
  Tensor x = Tensor::randn({4, 5}, 0, 2);
  Tensor labels = Tensor::of_ints({0, 4, 2, 2});
  for (const char* r : {"none", "mean", "sum"}) {
    INFO(r);
    nn::CrossEntropyLoss loss{r};
    CHECK_GRADCHECK_RESULT(
        gradcheck([&](const std::vector<Tensor>& in) { return loss(in[0], labels); }, {x}));
  }
}

TEST_CASE("fused cross_entropy equals the log_softmax + gather composition") {
  manual_seed(22);
  Tensor x = Tensor::randn({16, 10}, 0, 3);
  Tensor labels = Tensor::randint(0, 10, {16});
  Tensor a = x.clone().detach().requires_grad_(), b = x.clone().detach().requires_grad_();
  Tensor fused = cross_entropy(a, labels);
  Tensor composed = mean(neg(gather(log_softmax(b, 1), labels)));
  CHECK(fused.item() == doctest::Approx(composed.item()).epsilon(1e-6));
  fused.backward();
  composed.backward();
  auto ga = a.grad().to_float_vector(), gb = b.grad().to_float_vector();
  double max_diff = 0;
  for (size_t i = 0; i < ga.size(); ++i)
    max_diff = std::max(max_diff, double(std::abs(ga[i] - gb[i])));
  INFO("max gradient difference " << max_diff);
  CHECK(max_diff < 1e-6);
  // without grad mode it builds no graph
  {
    NoGradGuard ng;
    CHECK(!cross_entropy(a, labels).requires_grad());
  }
}

TEST_CASE("CrossEntropyLoss errors name the shapes and the bad label") {
  nn::CrossEntropyLoss ce;
  CHECK_THROWS_WITH_AS(ce(Tensor::zeros({3}), Tensor::of_ints({0})),
                       doctest::Contains("expected logits [N, C] or [N, C, d1, ...], got [3]"),
                       Error);
  CHECK_THROWS_WITH_AS(ce(Tensor::zeros({2, 3}), Tensor::of_ints({0, 1, 2})),
                       doctest::Contains("logits [2, 3] and labels [3]: expected labels [2]"),
                       Error);
  CHECK_THROWS_WITH_AS(ce(Tensor::zeros({2, 3}), Tensor::of_ints({0, 3})),
                       doctest::Contains("label 3 at row 1 out of range [0, 3)"), Error);
  CHECK_THROWS_WITH_AS(
      nn::CrossEntropyLoss("none")(Tensor::zeros({2, 3}), Tensor::of_ints({-1, 0})),
      doctest::Contains("label -1 at row 0"), Error);
  CHECK_THROWS_WITH_AS(ce(Tensor::zeros({2, 3}), Tensor::zeros({2, 4})),
                       doctest::Contains("float targets [2, 4]"), Error);
}

// nn::CrossEntropyLoss without options on [N, C, d] logits, as PyTorch's: the
// [N * d, C] rows' losses, each reduction; one-hot float targets alike.
TEST_CASE("CrossEntropyLoss on [N, C, d] logits equals its rows") {
  manual_seed(44);
  Tensor x = Tensor::randn({2, 3, 4}) * 2.0, l = Tensor::randint(0, 3, {2, 4});
  Tensor rows = contiguous(transpose(x, 1, 2)).reshape({8, 3}), flat = l.reshape({8});
  const std::vector<float> got = nn::CrossEntropyLoss("none")(rows, flat).to_vector<float>();
  const std::vector<double> each(got.begin(), got.end());
  check_close(nn::CrossEntropyLoss("none")(x, l).reshape({8}), each, 1e-6);
  double total = 0;
  for (double v : each) total += v;
  check_close(nn::CrossEntropyLoss()(x, l), {float(total / 8)}, 1e-6);
  check_close(nn::CrossEntropyLoss("sum")(x, l), {float(total)}, 1e-5);
  Tensor one_hot =  // [2, 3, 4]
      contiguous(transpose(cast(minidl::one_hot(flat, 3), kFloat32).reshape({2, 4, 3}), 1, 2));
  check_close(nn::CrossEntropyLoss()(x, one_hot), {float(total / 8)}, 1e-6);
  CHECK_THROWS_WITH_AS(
      nn::CrossEntropyLoss("none")(x, Tensor::full({2, 4}, -1, kInt64)),
      doctest::Contains("cross_entropy: target -1 at position 0 out of range [0, 3)"), Error);
  CHECK_THROWS_WITH_AS(
      nn::CrossEntropyLoss()(x, Tensor::zeros({2, 3}, kInt64)),
      doctest::Contains("logits [2, 3, 4] and labels [2, 3]: expected labels [2, 4]"), Error);
}

TEST_CASE("SoftmaxCrossEntropyWithLogits follows MindSpore's sparse flag") {
  Tensor labels = Tensor::of_ints({2, 0}), onehot = Tensor::of({0, 0, 1, 1, 0, 0}, {2, 3});
  nn::SoftmaxCrossEntropyWithLogits dense_labels;  // sparse = false, reduction "none"
  CHECK(dense_labels.reduction() == nn::Reduction::None);
  check_close(dense_labels(logits_2x3(), onehot), {kL0, kL1});
  nn::SoftmaxCrossEntropyWithLogits sparse{true, "mean"};
  check_close(sparse(logits_2x3(), labels), {(kL0 + kL1) / 2});
  CHECK_THROWS_WITH_AS(
      sparse(logits_2x3(), onehot),
      doctest::Contains("sparse=true): expected int32/int64 labels [N], got float32 [2, 3]"),
      Error);
  CHECK_THROWS_WITH_AS(
      dense_labels(logits_2x3(), labels),
      doctest::Contains("sparse=false): expected float labels [N, C], got int64 [2]"), Error);
  CHECK_GRADCHECK_RESULT(gradcheck([&](const std::vector<Tensor>& in) { return sparse(in[0], labels); },
                            {Tensor::randn({2, 3})}));
}

// ---- math (issue 22): PyTorch's losses as functions and cells ----
#define CHECK_LOSS_GRADCHECK(...) CHECK_GRADCHECK_RESULT(gradcheck(__VA_ARGS__))

TEST_CASE("binary_cross_entropy by hand; finite loss and gradient at p = 0 and 1") {
  Tensor p = Tensor::of({0.25, 0.5}), t = Tensor::of({1, 0});
  const double l0 = -std::log(0.25), l1 = -std::log(0.5);
  check_close(binary_cross_entropy(p, t, {}, "none"), {float(l0), float(l1)});
  check_close(binary_cross_entropy(p, t), {float((l0 + l1) / 2)});
  check_close(nn::BCELoss(Tensor::of({2, 1}), "sum")(p, t), {float(2 * l0 + l1)});
  Tensor edge = Tensor::of({0, 1, 0, 1}).requires_grad_();
  Tensor loss = binary_cross_entropy(edge, Tensor::of({1, 0, 0, 1}), {}, "sum");
  check_close(loss, {200});  // each log clamped at -100
  loss.backward();
  for (float g : edge.grad().to_float_vector()) CHECK(std::isfinite(g));
  CHECK(edge.grad().to_float_vector()[0] == doctest::Approx(-1e12));
  CHECK_THROWS_WITH_AS(
      binary_cross_entropy(Tensor::of({1.5}), Tensor::of({1})),
      doctest::Contains("binary_cross_entropy: every element of the input [1] must lie in [0, 1]"),
      Error);
  CHECK_THROWS_WITH_AS(
      binary_cross_entropy(p, Tensor::of({1, 0, 1})),
      doctest::Contains("binary_cross_entropy: input [2] and target [3] must have the same shape"),
      Error);
}

TEST_CASE("binary_cross_entropy_with_logits: by hand, pos_weight, finite at |x| = 1e4") {
  Tensor x = Tensor::of({0, 2}), t = Tensor::of({1, 0});
  const double l0 = std::log(2.0), l1 = std::log1p(std::exp(2.0));
  check_close(binary_cross_entropy_with_logits(x, t, {}, {}, "none"), {float(l0), float(l1)});
  // pos_weight scales the positive term: 3 * log(2) for the first
  check_close(nn::BCEWithLogitsLoss({}, "none", Tensor::of({3, 3}))(x, t),
              {float(3 * l0), float(l1)});
  Tensor big = Tensor::of({1e4, -1e4, 1e4, -1e4}).requires_grad_();
  Tensor loss = binary_cross_entropy_with_logits(big, Tensor::of({0, 1, 1, 0}), {}, {}, "sum");
  check_close(loss, {2e4});
  loss.backward();
  check_close(big.grad(), {1, -1, 0, 0});
  CHECK_LOSS_GRADCHECK(
      [](const std::vector<Tensor>& in) {
        return binary_cross_entropy_with_logits(in[0], in[1], {}, Tensor::of({2, 0.5, 1}));
      },
      {Tensor::of({-1.2, 0.4, 2}), Tensor::of({0.2, 0.9, 0.5})});
  CHECK_LOSS_GRADCHECK(
      [](const std::vector<Tensor>& in) { return binary_cross_entropy(in[0], in[1]); },
      {Tensor::of({0.3, 0.6, 0.8}), Tensor::of({0.2, 0.9, 0.5})});
}

TEST_CASE(
    "nll_loss and cross_entropy with weights, ignore_index and label smoothing (hand-computed)") {
  Tensor logits = logits_2x3();  // labels [2, 0]: losses kL0, kL1
  Tensor labels = Tensor::of_ints({2, 0}), w = Tensor::of({2, 1, 3});
  // weighted mean: (3 kL0 + 2 kL1) / (3 + 2)
  check_close(cross_entropy(logits, labels, w), {float((3 * kL0 + 2 * kL1) / 5)});
  check_close(nn::CrossEntropyLoss({.weight = w, .reduction = "none"})(logits, labels),
              {float(3 * kL0), float(2 * kL1)});
  // the second row ignored: the mean is the first row's alone
  check_close(cross_entropy(logits, Tensor::of_ints({2, -100}), {}), {float(kL0)});
  check_close(nll_loss(log_softmax(logits, 1), Tensor::of_ints({2, 7}), w, 7), {float(kL0)});
  // label smoothing 0.3 on the uniform row: every log-probability is -log 3
  check_close(
      cross_entropy(Tensor::of({1, 1, 1}, {1, 3}), Tensor::of_ints({0}), {}, -100, "mean", 0.3),
      {float(std::log(3.0))});
  // one sample: logits [C], a 0-d target
  Tensor one =
      cross_entropy(Tensor::of({1, 2, 3}), Tensor::of_ints({2}).reshape({}), {}, -100, "none");
  CHECK(one.dim() == 0);
  check_close(one, {float(kL0)});
  // [N, C, d] logits equal the [N * d, C] rows
  manual_seed(41);
  Tensor x3 = Tensor::randn({2, 3, 4}), l3 = Tensor::randint(0, 3, {2, 4});
  Tensor rows = transpose(x3, 1, 2).reshape({8, 3});
  check_close(cross_entropy(x3, l3, {}, -100, "sum"),
              {cross_entropy(rows, l3.reshape({8}), {}, -100, "sum").item()});
  CHECK_LOSS_GRADCHECK(
      [](const std::vector<Tensor>& in) {
        return cross_entropy(in[0], Tensor::of_ints({1, -100, 0, 2}, {2, 2}),
                             Tensor::of({1, 2, 0.5}), -100, "mean", 0.2);
      },
      {Tensor::randn({2, 3, 2})});
  CHECK_THROWS_WITH_AS(cross_entropy(logits, Tensor::of_ints({2, 3}), {}),
                       doctest::Contains("3 at row 1 out of range [0, 3)"), Error);
  CHECK_THROWS_WITH_AS(
      cross_entropy(logits, Tensor::of_ints({2, 3}), w),
      doctest::Contains("cross_entropy: target 3 at position 1 out of range [0, 3)"), Error);
  CHECK_THROWS_WITH_AS(
      nll_loss(logits, Tensor::of_ints({2, 1, 0})),
      doctest::Contains("nll_loss: input [2, 3] and target [3]: expected target [2]"), Error);
  CHECK_THROWS_WITH_AS(
      nll_loss(logits, labels, Tensor::of({1, 2})),
      doctest::Contains("nll_loss: weight [2] for input [2, 3]: expected weight [3]"), Error);
  CHECK_THROWS_WITH_AS(cross_entropy(logits, labels, {}, -100, "average"),
                       doctest::Contains("cross_entropy: unknown reduction 'average'"), Error);
}

// Segmentation's shape: a class for each position of [N, C, d...] logits. The
// fused op (softmax over C in columns of up to 256 positions: 300 positions
// take two) against float64 sums, by finite differences, and against the
// composed path (a weight of ones, which takes nll_loss's route).
TEST_CASE("cross_entropy on [N, C, d...] in one fused pass: float64 sums, the composed path") {
  manual_seed(43);
  for (const Shape& shape : {Shape{2, 5, 3, 100}, Shape{3, 4, 7}}) {
    for (DType lt : {kInt32, kInt64}) {
      CAPTURE(shape);
      CAPTURE(dtype_name(lt));
      const int64_t N = shape[0], C = shape[1], P = numel_of(shape) / (N * C);  // P per sample
      Shape at{N};
      for (size_t d = 2; d < shape.size(); ++d) at.push_back(shape[d]);
      Tensor x = (Tensor::randn(shape) * 3.0).requires_grad_(true);
      Tensor labels = Tensor::randint(0, C, at, lt);
      const std::vector<float> v = x.to_vector<float>();
      const std::vector<int64_t> l = labels.to(kInt64).to_vector<int64_t>();
      double total = 0;
      std::vector<double> want_grad(v.size());
      for (int64_t n = 0; n < N; ++n)
        for (int64_t j = 0; j < P; ++j) {
          auto xv = [&](int64_t k) { return double(v[(n * C + k) * P + j]); };
          double m = xv(0), s = 0;
          for (int64_t k = 1; k < C; ++k) m = std::max(m, xv(k));
          for (int64_t k = 0; k < C; ++k) s += std::exp(xv(k) - m);
          const int64_t y = l[n * P + j];
          total += m + std::log(s) - xv(y);
          for (int64_t k = 0; k < C; ++k)
            want_grad[(n * C + k) * P + j] = (std::exp(xv(k) - m) / s - (k == y)) / (N * P);
        }
      Tensor loss = cross_entropy(x, labels);
      CHECK(std::abs(loss.item() - total / (N * P)) <= 1e-6 * total / (N * P));
      loss.backward();
      const std::vector<float> g = x.grad().to_vector<float>();
      double worst = 0;
      for (size_t i = 0; i < g.size(); ++i) worst = std::max(worst, std::abs(g[i] - want_grad[i]));
      INFO("max gradient difference " << worst);
      CHECK(worst <= 1e-6 / (N * P));
      // the options overload without options is the same op: the same bits
      Tensor x2 = x.detach().requires_grad_(true);
      Tensor loss2 = cross_entropy(x2, labels, Tensor{});
      loss2.backward();
      CHECK(loss2.item() == loss.item());
      CHECK(x2.grad().to_vector<float>() == g);
      // the composed path: equal up to rounding
      Tensor x3 = x.detach().requires_grad_(true);
      Tensor loss3 = cross_entropy(x3, labels, Tensor::ones({C}));
      loss3.backward();
      CHECK(std::abs(loss3.item() - loss.item()) <= 1e-6 * loss.item());
      const std::vector<float> g3 = x3.grad().to_vector<float>();
      double apart = 0;
      for (size_t i = 0; i < g.size(); ++i) apart = std::max(apart, double(std::abs(g3[i] - g[i])));
      INFO("composed path's gradients apart by " << apart);
      CHECK(apart <= 1e-6 / (N * P));
    }
  }
  CHECK_LOSS_GRADCHECK(
      [](const std::vector<Tensor>& in) {
        return cross_entropy(in[0], Tensor::of_ints({1, 2, 0, 2, 1, 0}, {2, 3}));
      },
      {Tensor::randn({2, 3, 3})});
  CHECK_THROWS_WITH_AS(
      cross_entropy(Tensor::zeros({2, 3, 2}), Tensor::of_ints({0, 1, 2, 3}, {2, 2})),
      doctest::Contains("cross_entropy: label 3 at flat position 3 out of range "
                        "[0, 3) for logits [2, 3, 2]"),
      Error);
  CHECK_THROWS_WITH_AS(
      cross_entropy(Tensor::zeros({2, 3, 2}), Tensor::of_ints({0, 1, 2, 0, 1, 2}, {2, 3})),
      doctest::Contains(
          "cross_entropy: logits [2, 3, 2] and labels [2, 3]: expected labels [2, 2]"),
      Error);
}

TEST_CASE("l1, smooth_l1, huber and kl_div by hand, and their cells") {
  Tensor x = Tensor::of({0, 0, 0}), y = Tensor::of({0.5, -2, 1});
  check_close(l1_loss(x, y, "none"), {0.5, 2, 1});
  check_close(nn::L1Loss("sum")(x, y), {3.5});
  // beta 1: 0.5 * 0.25, 2 - 0.5, 1 - 0.5 (|d| = beta is the linear side, equal there)
  check_close(nn::SmoothL1Loss("none")(x, y), {0.125, 1.5, 0.5});
  check_close(smooth_l1_loss(x, y, "none", 0), {0.5, 2, 1});  // beta 0: l1
  // delta 1.5: 0.5 * 0.25, 1.5 * (2 - 0.75), 0.5
  check_close(nn::HuberLoss("none", 1.5)(x, y), {0.125, 1.875, 0.5});
  Tensor logq =
      Tensor::of({std::log(0.5f), std::log(0.5f), std::log(0.25f), std::log(0.75f)}, {2, 2});
  Tensor t = Tensor::of({1, 0, 0.5, 0.5}, {2, 2});
  // row 0: 1 * (0 - log 0.5) + 0 (0 log 0 = 0); row 1: 0.5 (log 0.5 - log 0.25) + 0.5 (log 0.5 -
  // log 0.75)
  const double r0 = std::log(2.0), r1 = 0.5 * std::log(2.0) + 0.5 * std::log(2 / 3.0);
  check_close(nn::KLDivLoss("batchmean")(logq, t), {float((r0 + r1) / 2)});
  check_close(kl_div(logq, t, "sum"), {float(r0 + r1)});
  check_close(kl_div(logq, log(t + 1e-30), "sum", true), {float(r0 + r1)}, 1e-5);
  CHECK_LOSS_GRADCHECK(
      [](const std::vector<Tensor>& in) { return huber_loss(in[0], in[1], "mean", 0.7); },
      {Tensor::of({0.1, 2, -1}), Tensor::of({0.3, 0.2, 1})});
  CHECK_LOSS_GRADCHECK(
      [](const std::vector<Tensor>& in) { return smooth_l1_loss(in[0], in[1], "sum", 0.5); },
      {Tensor::of({0.1, 2, -1}), Tensor::of({0.3, 0.2, 1})});
  CHECK_THROWS_WITH_AS(
      l1_loss(x, Tensor::of({1, 2})),
      doctest::Contains("l1_loss: input [3] and target [2] must have the same shape"), Error);
  CHECK_THROWS_WITH_AS(nn::KLDivLoss("average"), doctest::Contains("unknown reduction 'average'"),
                       Error);
}
