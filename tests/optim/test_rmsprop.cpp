// RMSprop against hand arithmetic (PyTorch's rule, optim/rmsprop.h): from
// p = [1, -2] with g = [0.5, 1] then [-1, 2]; its state in state_dict, and
// its constructor's checks.
#include <doctest/doctest.h>
#include <minidl/minidl.h>

#include <cmath>
#include <stdexcept>

#include "check_close.h"

using namespace minidl;
using testing::check_close;

namespace {

const std::vector<std::vector<double>> kGrads{{0.5, 1}, {-1, 2}};

// Two steps of RMSprop over p = [1, -2] in double, the rule written out.
std::vector<double> by_hand(double lr, optim::RMSpropOptions o) {
  std::vector<double> p{1, -2}, sq(2, 0), ga(2, 0), buf(2, 0);
  for (const auto& grad : kGrads)
    for (int j = 0; j < 2; ++j) {
      const double g = grad[j] + o.weight_decay * p[j];
      sq[j] = o.alpha * sq[j] + (1 - o.alpha) * g * g;
      ga[j] = o.alpha * ga[j] + (1 - o.alpha) * g;
      const double avg = std::sqrt(o.centered ? sq[j] - ga[j] * ga[j] : sq[j]) + o.eps;
      buf[j] = o.momentum * buf[j] + g / avg;
      p[j] -= lr * (o.momentum > 0 ? buf[j] : g / avg);
    }
  return p;
}

std::vector<double> run(double lr, optim::RMSpropOptions o) {
  Tensor p = Tensor::of({1, -2}).requires_grad_();
  optim::RMSprop opt({p}, lr, o);
  for (const auto& g : kGrads) {
    p.set_grad(Tensor::of({static_cast<float>(g[0]), static_cast<float>(g[1])}));
    opt.step();
  }
  const std::vector<float> v = p.to_float_vector();
  return {v[0], v[1]};
}

}  // namespace

TEST_CASE("RMSprop: the first step is p -= lr * g / (|g| sqrt(1 - alpha) + eps)") {
  // sq = 0.01 g^2 = [0.0025, 0.01], sqrt = [0.05, 0.1]; g / that = [10, 10]
  Tensor p = Tensor::of({1, -2}).requires_grad_();
  optim::RMSprop opt({p});  // lr 0.01, alpha 0.99, eps 1e-8
  p.set_grad(Tensor::of({0.5, 1}));
  opt.step();
  check_close(p, {0.9, -2.1});
  check_close(opt.square_avg(0), {0.0025, 0.01});
  CHECK(!opt.momentum_buffer(0).defined());
  CHECK(!opt.grad_avg(0).defined());
  CHECK(opt.hyperparameters() == optim::Settings{{"lr", "0.01"}, {"alpha", "0.99"},
                                                 {"eps", "1e-08"}, {"weight_decay", "0"},
                                                 {"momentum", "0"}, {"centered", "false"},
                                                 {"maximize", "false"}});
}

TEST_CASE("RMSprop: two steps, plain, centered, with momentum and weight decay") {
  for (const optim::RMSpropOptions o :
       {optim::RMSpropOptions{}, optim::RMSpropOptions{.alpha = 0.9, .centered = true},
        optim::RMSpropOptions{.momentum = 0.9},
        optim::RMSpropOptions{.alpha = 0.8, .eps = 1e-3, .weight_decay = 0.1, .momentum = 0.5,
                              .centered = true}}) {
    CAPTURE(o.alpha);
    CAPTURE(o.momentum);
    const std::vector<double> want = by_hand(0.05, o), got = run(0.05, o);
    for (int j = 0; j < 2; ++j) CHECK(got[j] == doctest::Approx(want[j]).epsilon(1e-6));
  }
}

TEST_CASE("RMSprop's state: square_avg, momentum_buffer with momentum, grad_avg when centered") {
  Tensor p = Tensor::of({1, -2}).requires_grad_();
  optim::RMSprop opt({p}, 0.01, {.momentum = 0.9, .centered = true});
  p.set_grad(Tensor::of({0.5, 1}));
  opt.step();
  const StateDict s = opt.state_dict();
  for (const char* key : {"steps", "square_avg.0", "momentum_buffer.0", "grad_avg.0"})
    CHECK(s.tensors.contains(key));
  check_close(s.tensors.at("grad_avg.0"), {0.005, 0.01});
  Tensor q = Tensor::of({1, -2}).requires_grad_();
  optim::RMSprop other({q}, 0.01, {.momentum = 0.9, .centered = true});
  // `s` with entry `name` left out, or replaced by `value`
  auto edited = [&](const std::string& name, const Tensor& value) {
    StateDict out{{}, s.values};
    for (const auto& [key, t] : s.tensors)
      if (key != name) out.tensors.insert(key, t.clone());
    if (value.defined()) out.tensors.insert(name, value);
    return out;
  };
  const StateDict missing = edited("grad_avg.0", Tensor());
  CHECK_THROWS_WITH_AS(other.load_state_dict(missing),
                       "RMSprop::load_state_dict: 'grad_avg.0' is missing, but parameter 0 [2] "
                       "has taken 1 step(s) (expected its grad_avg, float32 [2])",
                       Error);
  const StateDict negative = edited("square_avg.0", Tensor::of({-1, 0}));
  CHECK_THROWS_WITH_AS(other.load_state_dict(negative),
                       "RMSprop::load_state_dict: 'square_avg.0' element 0 is -1, expected a "
                       "finite number >= 0",
                       Error);
  other.load_state_dict(s);
  p.set_grad(Tensor::of({-1, 2}));
  q.set_grad(Tensor::of({-1, 2}));
  q.copy_(p);
  opt.step();
  other.step();
  CHECK(p.to_float_vector() == q.to_float_vector());
}

TEST_CASE("RMSprop rejects bad hyperparameters, naming the value") {
  auto params = [] { return std::vector<Tensor>{Tensor::of({1}).requires_grad_()}; };
  CHECK_THROWS_WITH_AS(optim::RMSprop(params(), 0.01, {.alpha = -0.1}),
                       "RMSprop: invalid alpha -0.1 (expected alpha >= 0)", std::invalid_argument);
  CHECK_THROWS_WITH_AS(optim::RMSprop(params(), 0.01, {.eps = -1}),
                       "RMSprop: invalid eps -1 (expected eps >= 0)", std::invalid_argument);
  CHECK_THROWS_WITH_AS(optim::RMSprop(params(), 0.01, {.momentum = -1}),
                       "RMSprop: invalid momentum -1 (expected momentum >= 0)",
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(optim::RMSprop(params(), -1), "RMSprop: invalid learning rate -1 "
                       "(expected lr >= 0)", std::invalid_argument);
  CHECK_THROWS_WITH_AS(optim::RMSprop({}), doctest::Contains("RMSprop: got an empty parameter list"),
                       Error);
}
