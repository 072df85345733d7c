// Optimizers: two or three steps against hand arithmetic (PyTorch's rules),
// skipping of parameters without a gradient, and constructor validation.
//
// Every hand case starts from p = [1, -2] and feeds the gradients
//   step 1: g = [0.5, 1],  step 2: g = [-1, 2],  step 3: g = [0.25, 0]
// through set_grad(), so the arithmetic in the comments is all there is.
#include <doctest/doctest.h>
#include <minidl/minidl.h>

#include <cmath>
#include <functional>
#include <memory>
#include <stdexcept>

#include "check_close.h"

using namespace minidl;
using testing::check_close;

namespace {

const std::vector<std::vector<float>> kGrads{{0.5f, 1.f}, {-1.f, 2.f}, {0.25f, 0.f}};

Tensor fresh_param() { return Tensor::of({1, -2}).requires_grad_(); }

void step_with(optim::Optimizer& opt, Tensor& p, const std::vector<float>& g) {
  p.set_grad(Tensor::from_vector(g));
  opt.step();
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return std::string("invalid_argument: ") + e.what();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("SGD: p -= lr * g, with and without weight decay") {
  Tensor p = fresh_param();
  optim::SGD sgd({p}, /*lr=*/0.1);
  step_with(sgd, p, kGrads[0]);  // [1 - 0.05, -2 - 0.1]
  check_close(p, {0.95, -2.1});
  step_with(sgd, p, kGrads[1]);  // [0.95 + 0.1, -2.1 - 0.2]
  check_close(p, {1.05, -2.3});

  Tensor q = fresh_param();
  optim::SGD decay({q}, /*lr=*/0.1, /*weight_decay=*/0.1);
  // d = g + 0.1 p = [0.5 + 0.1, 1 - 0.2] = [0.6, 0.8]; p = [1 - 0.06, -2 - 0.08]
  step_with(decay, q, kGrads[0]);
  check_close(q, {0.94, -2.08});
  // d = [-1 + 0.094, 2 - 0.208] = [-0.906, 1.792]; p = [0.94 + 0.0906, -2.08 - 0.1792]
  step_with(decay, q, kGrads[1]);
  check_close(q, {1.0306, -2.2592});
}

TEST_CASE("Momentum: buf = g first, then momentum * buf + g; p -= lr * buf") {
  Tensor p = fresh_param();
  optim::Momentum opt({p}, /*lr=*/0.1, /*momentum=*/0.9);
  step_with(opt, p, kGrads[0]);  // buf = [0.5, 1]; p = [0.95, -2.1]
  check_close(p, {0.95, -2.1});
  check_close(opt.momentum_buffer(0), {0.5, 1});
  // buf = 0.9 [0.5, 1] + [-1, 2] = [-0.55, 2.9]; p = [0.95 + 0.055, -2.1 - 0.29]
  step_with(opt, p, kGrads[1]);
  check_close(p, {1.005, -2.39});
  // buf = 0.9 [-0.55, 2.9] + [0.25, 0] = [-0.245, 2.61]; p = [1.005 + 0.0245, -2.39 - 0.261]
  step_with(opt, p, kGrads[2]);
  check_close(p, {1.0295, -2.651});
  check_close(opt.momentum_buffer(0), {-0.245, 2.61});
}

TEST_CASE("updates over 64k elements (split across threads) follow the same rules") {
  // 100,001 elements, the pair [1, -2] repeated, stepped on 2 threads: every
  // element must land where the two-element run puts its pair.
  const int64_t n = 100001;
  auto repeat = [&](const std::vector<float>& pair) {
    std::vector<float> v(n);
    for (int64_t j = 0; j < n; ++j) v[j] = pair[j % 2];
    return Tensor::from_vector(v).requires_grad_();
  };
  auto run = [&](auto make, int64_t size) {
    Tensor p = size == 2 ? fresh_param() : repeat({1, -2});
    auto opt = make(p);
    for (const auto& g : kGrads) {
      p.set_grad(size == 2 ? Tensor::from_vector(g) : repeat(g).detach());
      opt.step();
    }
    return p.to_float_vector();
  };
  auto momentum = [](Tensor p) { return optim::Momentum({p}, 0.1, 0.9, {.nesterov = true}); };
  auto sgd = [](Tensor p) { return optim::SGD({p}, 0.1, /*weight_decay=*/0.1); };
  auto adam = [](Tensor p) { return optim::AdamW({p}, 0.1); };
  set_num_threads(2);
  std::vector<std::vector<float>> large{run(momentum, n), run(sgd, n), run(adam, n)};
  set_num_threads(1);
  std::vector<std::vector<float>> small{run(momentum, 2), run(sgd, 2), run(adam, 2)};
  for (size_t k = 0; k < large.size(); ++k) {
    double worst = 0;  // largest relative difference from the two-element run
    for (int64_t j = 0; j < n; ++j)
      worst = std::max(worst, std::abs(double(large[k][j]) - small[k][j % 2]) /
                                  std::abs(double(small[k][j % 2])));
    INFO("optimizer " << k << " (Momentum, SGD, AdamW)");
    CHECK(worst <= 1e-6);
  }
}

TEST_CASE("Momentum with Nesterov: p -= lr * (g + momentum * buf)") {
  Tensor p = fresh_param();
  optim::Momentum opt({p}, /*lr=*/0.1, /*momentum=*/0.9, {.nesterov = true});
  // buf = [0.5, 1]; d = [0.5 + 0.45, 1 + 0.9] = [0.95, 1.9]; p = [1 - 0.095, -2 - 0.19]
  step_with(opt, p, kGrads[0]);
  check_close(p, {0.905, -2.19});
  // buf = [-0.55, 2.9]; d = [-1 - 0.495, 2 + 2.61] = [-1.495, 4.61]; p = [0.905 + 0.1495, -2.19 -
  // 0.461]
  step_with(opt, p, kGrads[1]);
  check_close(p, {1.0545, -2.651});
}

TEST_CASE("Momentum with weight decay and with dampening") {
  Tensor p = fresh_param();
  optim::Momentum decay({p}, /*lr=*/0.1, /*momentum=*/0.9, {.weight_decay = 0.1});
  // d = g + 0.1 p = [0.6, 0.8] = buf; p = [0.94, -2.08]
  step_with(decay, p, kGrads[0]);
  check_close(p, {0.94, -2.08});
  // d = [-1 + 0.094, 2 - 0.208] = [-0.906, 1.792]; buf = 0.9 [0.6, 0.8] + d = [-0.366, 2.512]
  // p = [0.94 + 0.0366, -2.08 - 0.2512]
  step_with(decay, p, kGrads[1]);
  check_close(p, {0.9766, -2.3312});

  Tensor q = fresh_param();
  optim::Momentum damp({q}, /*lr=*/0.1, /*momentum=*/0.9, {.dampening = 0.5});
  step_with(damp, q, kGrads[0]);  // the first buffer is g itself, undamped: p = [0.95, -2.1]
  check_close(q, {0.95, -2.1});
  // buf = 0.9 [0.5, 1] + 0.5 [-1, 2] = [-0.05, 1.9]; p = [0.95 + 0.005, -2.1 - 0.19]
  step_with(damp, q, kGrads[1]);
  check_close(q, {0.955, -2.29});

  Tensor r = fresh_param();
  optim::Momentum none({r}, /*lr=*/0.1, /*momentum=*/0);  // momentum 0 is plain SGD
  step_with(none, r, kGrads[0]);
  step_with(none, r, kGrads[1]);
  check_close(r, {1.05, -2.3});
  CHECK(!none.momentum_buffer(0).defined());
}

TEST_CASE("Adam with bias correction, three steps") {
  Tensor p = fresh_param();
  optim::Adam adam({p}, /*lr=*/0.1);
  // t = 1: m = 0.1 g = [0.05, 0.1], v = 0.001 g^2 = [0.00025, 0.001]
  // m^ = m / (1 - 0.9) = [0.5, 1], v^ = v / (1 - 0.999) = [0.25, 1]
  // p -= 0.1 m^ / (sqrt(v^) + 1e-8) = 0.1 [1, 1]  ->  [0.9, -2.1]
  // (without bias correction the step would be 0.1 * 0.05 / 0.0158 = 0.316)
  step_with(adam, p, kGrads[0]);
  check_close(p, {0.9, -2.1});
  check_close(adam.exp_avg(0), {0.05, 0.1}, 1e-7);
  check_close(adam.exp_avg_sq(0), {0.00025, 0.001}, 1e-9);
  CHECK(adam.step_count(0) == 1);
  // t = 2: m = 0.9 [0.05, 0.1] + 0.1 [-1, 2] = [-0.055, 0.29]
  //        v = 0.999 [0.00025, 0.001] + 0.001 [1, 4] = [0.00124975, 0.004999]
  //        m^ = m / 0.19 = [-0.2894737, 1.5263158], v^ = v / 0.001999 = [0.6251876, 2.5007504]
  //        p -= 0.1 m^ / sqrt(v^) = 0.1 [-0.3661035, 0.9651820]  ->  [0.9366104, -2.1965182]
  step_with(adam, p, kGrads[1]);
  check_close(p, {0.9366104, -2.1965182});
  // t = 3: m = 0.9 [-0.055, 0.29] + 0.1 [0.25, 0] = [-0.0245, 0.261]
  //        v = 0.999 v + 0.001 [0.0625, 0] = [0.0013110003, 0.004994001]
  //        m^ = m / 0.271 = [-0.0904059, 0.9630996], v^ = v / 0.002997001 = [0.4374374, 1.6663334]
  //        p -= 0.1 m^ / sqrt(v^) = 0.1 [-0.1366907, 0.7460874]  ->  [0.9502794, -2.2711271]
  step_with(adam, p, kGrads[2]);
  check_close(p, {0.9502794, -2.2711271});
  CHECK(adam.step_count(0) == 3);
}

TEST_CASE("Adam's weight decay is L2 added to the gradient") {
  Tensor p = fresh_param();
  optim::Adam adam({p}, /*lr=*/0.1, 0.9, 0.999, 1e-8, /*weight_decay=*/0.1);
  // t = 1: g' = g + 0.1 p = [0.6, 0.8]; the first step is lr * sign(g') -> [0.9, -2.1]
  step_with(adam, p, kGrads[0]);
  check_close(p, {0.9, -2.1});
  // t = 2: g' = [-1 + 0.09, 2 - 0.21] = [-0.91, 1.79]
  //        m = 0.9 [0.06, 0.08] + 0.1 g' = [-0.037, 0.251]
  //        v = 0.999 [0.00036, 0.00064] + 0.001 [0.8281, 3.2041] = [0.00118774, 0.00384346]
  //        m^ = m / 0.19 = [-0.1947368, 1.3210526], v^ = v / 0.001999 = [0.5941671, 1.9226914]
  //        p -= 0.1 m^ / sqrt(v^) = 0.1 [-0.2526352, 0.9527201]  ->  [0.9252635, -2.1952720]
  step_with(adam, p, kGrads[1]);
  check_close(p, {0.9252635, -2.1952720});
}

TEST_CASE("AdamW decays the weights directly, default weight_decay 1e-2") {
  Tensor p = fresh_param();
  optim::AdamW adamw({p}, /*lr=*/0.1, 0.9, 0.999, 1e-8, /*weight_decay=*/0.1);
  // t = 1: p *= 1 - 0.1 * 0.1 -> [0.99, -1.98]; then the Adam step 0.1 [1, 1] -> [0.89, -2.08]
  step_with(adamw, p, kGrads[0]);
  check_close(p, {0.89, -2.08});
  // t = 2: p *= 0.99 -> [0.8811, -2.0592]; the Adam step is plain Adam's t = 2 step
  //        0.1 [-0.3661035, 0.9651820] -> [0.9177104, -2.1557182]
  step_with(adamw, p, kGrads[1]);
  check_close(p, {0.9177104, -2.1557182});
  CHECK(optim::AdamW({fresh_param()}).weight_decay() == 1e-2);
  CHECK(optim::Adam({fresh_param()}).weight_decay() == 0);
}

TEST_CASE("step() skips parameters without a gradient; their state starts later") {
  Tensor a = fresh_param(), b = fresh_param();
  optim::Adam adam({a, b}, /*lr=*/0.1);
  a.set_grad(Tensor::of({0.5, 1}));
  adam.step();  // b has no gradient
  check_close(a, {0.9, -2.1});
  check_close(b, {1, -2});
  CHECK(adam.step_count(1) == 0);
  CHECK(!adam.exp_avg(1).defined());
  b.set_grad(Tensor::of({-3, 3}));
  a.zero_grad();
  adam.step();  // b's first step (bias-corrected): lr * sign(g)
  check_close(b, {1.1, -2.1});
  check_close(a, {0.9, -2.1});
  CHECK(adam.step_count(0) == 1);
  CHECK(adam.step_count(1) == 1);

  Tensor c = fresh_param(), d = fresh_param();
  optim::Momentum mom({c, d}, 0.1, 0.9);
  c.set_grad(Tensor::of({1, 1}));
  mom.step();
  CHECK(!mom.momentum_buffer(1).defined());
  check_close(d, {1, -2});
  optim::SGD sgd({c, d}, 0.1);
  sgd.step();
  check_close(d, {1, -2});
  sgd.zero_grad();
  CHECK(!c.grad().defined());
}

TEST_CASE("lr() and set_lr() change the step size") {
  Tensor p = fresh_param();
  optim::SGD sgd({p}, 0.1);
  CHECK(sgd.lr() == 0.1);
  sgd.set_lr(0.5);
  CHECK(sgd.lr() == 0.5);
  step_with(sgd, p, kGrads[0]);  // [1 - 0.25, -2 - 0.5]
  check_close(p, {0.75, -2.5});
  CHECK_THROWS_AS(sgd.set_lr(-1), std::invalid_argument);
  CHECK(sgd.lr() == 0.5);
}

TEST_CASE("an SGD step on a real graph is p - lr * dloss/dp") {
  manual_seed(13);
  nn::Dense fc{3, 2};
  nn::MSELoss mse;
  Tensor x = Tensor::randn({4, 3}), y = Tensor::randn({4, 2});
  optim::SGD sgd(fc.trainable_params(), 0.05);
  mse(fc(x), y).backward();
  auto w = fc.weight.to_float_vector(), gw = fc.weight.grad().to_float_vector();
  sgd.step();
  auto w2 = fc.weight.to_float_vector();
  for (size_t i = 0; i < w.size(); ++i) CHECK(w2[i] == doctest::Approx(w[i] - 0.05f * gw[i]));
  CHECK(fc.weight.requires_grad());  // still a trainable leaf
  CHECK(fc.weight.is_leaf());
}

TEST_CASE("constructors reject bad hyperparameters, naming the value") {
  auto params = [] { return std::vector<Tensor>{fresh_param()}; };
  CHECK(error_of([&] { optim::SGD(params(), -0.1); }) ==
        "invalid_argument: SGD: invalid learning rate -0.1 (expected lr >= 0)");
  CHECK(error_of([&] { optim::SGD(params(), 0.1, -1e-4); }) ==
        "invalid_argument: SGD: invalid weight_decay -0.0001 (expected weight_decay >= 0)");
  CHECK(error_of([&] { optim::Momentum(params(), 0.1, -0.5); }) ==
        "invalid_argument: Momentum: invalid momentum -0.5 (expected momentum >= 0)");
  CHECK(error_of([&] {
          optim::Momentum(params(), 0.1, 0, {.nesterov = true});
        }).find("nesterov needs momentum > 0 and dampening 0") != std::string::npos);
  CHECK(error_of([&] {
          optim::Momentum(params(), 0.1, 0.9, {.nesterov = true, .dampening = 0.1});
        }).find("nesterov needs") != std::string::npos);
  CHECK(error_of([&] {
          optim::Momentum(params(), 0.1, 0.9, {.weight_decay = -1});
        }).find("invalid weight_decay -1") != std::string::npos);
  CHECK(error_of([&] {
          optim::Momentum(params(), 0.1, 0.9, {.dampening = 2});
        }).find("invalid dampening 2") != std::string::npos);
  CHECK(error_of([&] { optim::Adam(params(), 0.1, 1.0); }) ==
        "invalid_argument: Adam: invalid beta1 1 (expected 0 <= beta1 < 1)");
  CHECK(error_of([&] { optim::Adam(params(), 0.1, 0.9, -0.1); }) ==
        "invalid_argument: Adam: invalid beta2 -0.1 (expected 0 <= beta2 < 1)");
  CHECK(error_of([&] { optim::Adam(params(), 0.1, 0.9, 0.999, 0); }) ==
        "invalid_argument: Adam: invalid eps 0 (expected eps > 0)");
  CHECK(error_of([&] { optim::AdamW(params(), 0.1, 0.9, 0.999, 1e-8, -0.01); }) ==
        "invalid_argument: AdamW: invalid weight_decay -0.01 (expected weight_decay >= 0)");
  CHECK(error_of([&] {
          optim::Adam(params(), -1e-3);
        }).find("Adam: invalid learning rate -0.001") != std::string::npos);
  CHECK(error_of([&] { optim::SGD(params(), std::nan("")); }).find("invalid learning rate nan") !=
        std::string::npos);
  // parameters: float32, defined, listed once
  CHECK_THROWS_WITH_AS(optim::SGD({Tensor::zeros({2}, kFloat16)}, 0.1),
                       doctest::Contains("SGD: parameter 0 [2] has dtype float16"), Error);
  Tensor p = fresh_param();
  CHECK_THROWS_WITH_AS(optim::Adam({p, p}),
                       doctest::Contains("parameter 1 [2] appears more than once"), Error);
  CHECK_THROWS_WITH_AS(optim::SGD({Tensor()}, 0.1), doctest::Contains("parameter 0 is undefined"),
                       Error);
}

TEST_CASE("an empty parameter list is an error naming the likely cause") {
  struct Unregistered : nn::Cell {  // its layer is a member but never registered
    nn::Dense fc{4, 2};
    Tensor forward(const Tensor& x) override { return fc(x); }
  } net;
  REQUIRE(net.trainable_params().empty());
  const std::string expect =
      ": got an empty parameter list (expected at least one parameter). If it came from "
      "net.trainable_params(), the network registered none: did its constructor call "
      "register_cells({...}) or register_parameter(...)?";
  CHECK_THROWS_WITH_AS(optim::SGD(net.trainable_params(), 0.1), ("SGD" + expect).c_str(), Error);
  CHECK_THROWS_WITH_AS(optim::Momentum({}, 0.1, 0.9), ("Momentum" + expect).c_str(), Error);
  CHECK_THROWS_WITH_AS(optim::Adam({}), ("Adam" + expect).c_str(), Error);
  CHECK_THROWS_WITH_AS(optim::AdamW({}), ("AdamW" + expect).c_str(), Error);
}

namespace {

// `state` with entry `name` replaced by `value` (added when absent; removed
// when value is undefined). New tensors: the originals share the optimizer's
// storage.
StateDict edited(const StateDict& state, const std::string& name, const Tensor& value) {
  StateDict out;
  out.values = state.values;
  for (const auto& [key, t] : state.tensors)
    if (key != name) out.tensors.insert(key, t.clone());
  if (value.defined()) out.tensors.insert(name, value);
  return out;
}

std::string load_error(optim::Optimizer& opt, const StateDict& state) {
  return error_of([&] { opt.load_state_dict(state); });
}

}  // namespace

TEST_CASE("load_state_dict refuses a state inconsistent with itself, naming the entry") {
  // Adam over a [2] and b [3]: one step of a only, so steps = [1, 0] and
  // exp_avg.0, exp_avg_sq.0 exist, exp_avg.1, exp_avg_sq.1 do not.
  Tensor a = fresh_param(), b = Tensor::of({1, 2, 3}).requires_grad_();
  optim::Adam adam({a, b}, /*lr=*/0.1);
  step_with(adam, a, kGrads[0]);
  const StateDict good = adam.state_dict();
  const std::string adam_load = "Adam::load_state_dict: ";

  // a missing moment of an updated parameter is no longer zero-filled
  CHECK(load_error(adam, edited(good, "exp_avg_sq.0", Tensor())) ==
        adam_load + "'exp_avg_sq.0' is missing, but parameter 0 [2] has taken 1 step(s) "
                    "(expected its exp_avg_sq, float32 [2])");
  // step counts: negative, 0 where a state exists, absurd
  CHECK(load_error(adam, edited(good, "steps", Tensor::of_ints({-1, 0}))) ==
        adam_load + "'steps' entry 0 is -1, expected 0 to 2^53 (the updates parameter 0 [2] "
                    "has taken)");
  CHECK(load_error(adam, edited(good, "steps", Tensor::of_ints({0, 0}))) ==
        adam_load + "'exp_avg.0' is present, but parameter 0 [2] has taken 0 steps (expected "
                    "no exp_avg before its first update)");
  CHECK(load_error(adam, edited(good, "steps", Tensor::of_ints({1, INT64_MAX}))) ==
        adam_load + "'steps' entry 1 is 9223372036854775807, expected 0 to 2^53 (the updates "
                    "parameter 1 [3] has taken)");
  // values: finite, and the second moment >= 0
  CHECK(load_error(adam, edited(good, "exp_avg.0", Tensor::of({0.5f, NAN}))) ==
        adam_load + "'exp_avg.0' element 1 is nan, expected a finite number");
  CHECK(load_error(adam, edited(good, "exp_avg_sq.0", Tensor::of({-1, 0}))) ==
        adam_load + "'exp_avg_sq.0' element 0 is -1, expected a finite number >= 0");
  CHECK(load_error(adam, edited(good, "exp_avg.0", Tensor::of({1, 2, 3}))) ==
        adam_load + "'exp_avg.0' is float32 [3], expected float32 [2] for parameter 0 [2]");
  CHECK(load_error(adam, edited(good, "exp_avg.7", Tensor::of({1, 2}))) ==
        adam_load + "unexpected entry 'exp_avg.7' (expected 'steps', 'exp_avg.<i>', "
                    "'exp_avg_sq.<i>' with i < 2)");
  // a bad lr is a minidl::Error too, not the setter's std::invalid_argument
  for (const char* lr : {"nan", "-0.1", "inf"}) {
    StateDict bad = edited(good, "steps", good.tensors.at("steps").clone());
    bad.values["param_groups.0.lr"] = lr;
    CAPTURE(lr);
    CHECK(load_error(adam, bad) ==
          adam_load + "'param_groups.0.lr' is " + lr + ", expected a finite number >= 0");
    CHECK_THROWS_AS(adam.load_state_dict(bad), Error);
  }
  // nothing was taken from the refused states
  CHECK(adam.lr() == 0.1);
  CHECK(adam.step_count(0) == 1);
  CHECK(adam.step_count(1) == 0);
  CHECK(!adam.exp_avg(1).defined());

  // Momentum's buffer likewise; with momentum 0 there is none to miss
  Tensor c = fresh_param();
  optim::Momentum momentum({c}, 0.1, 0.9);
  step_with(momentum, c, kGrads[0]);
  CHECK(load_error(momentum, edited(momentum.state_dict(), "momentum_buffer.0", Tensor())) ==
        "Momentum::load_state_dict: 'momentum_buffer.0' is missing, but parameter 0 [2] has "
        "taken 1 step(s) (expected its momentum_buffer, float32 [2])");
  optim::Momentum plain({c}, 0.1, /*momentum=*/0);
  step_with(plain, c, kGrads[1]);
  optim::Momentum plain_too({fresh_param()}, 0.1, 0);
  CHECK(load_error(plain_too, plain.state_dict()) == "");
}

TEST_CASE("maximize ascends: every rule steps as on the negated gradient") {
  // SGD by hand: p += lr * g - lr * wd * p = [1 + 0.05 - 0.01, -2 + 0.1 + 0.02]
  Tensor p = fresh_param();
  optim::SGD sgd({{{p}}}, {.lr = 0.1, .weight_decay = 0.1, .maximize = true});
  step_with(sgd, p, kGrads[0]);
  check_close(p, {1.04, -1.88});
  // each rule with maximize on g equals the same rule on -g, bit for bit
  using Make = std::function<std::unique_ptr<optim::Optimizer>(Tensor, bool)>;
  const std::vector<std::pair<const char*, Make>> rules = {
      {"Momentum",
       [](Tensor q, bool m) {
         return std::make_unique<optim::Momentum>(
             std::vector<Tensor>{q}, 0.1, 0.9,
             optim::MomentumOptions{.nesterov = true, .weight_decay = 0.1, .maximize = m});
       }},
      {"Adam",
       [](Tensor q, bool m) {
         return std::make_unique<optim::Adam>(
             std::vector<optim::ParamGroup>{{{q}}},
             optim::GroupOptions{.lr = 0.1, .weight_decay = 0.1, .maximize = m});
       }},
      {"AdamW",
       [](Tensor q, bool m) {
         return std::make_unique<optim::AdamW>(std::vector<optim::ParamGroup>{{{q}}},
                                               optim::GroupOptions{.lr = 0.1, .maximize = m});
       }},
      {"RMSprop", [](Tensor q, bool m) {
         return std::make_unique<optim::RMSprop>(
             std::vector<Tensor>{q}, 0.01,
             optim::RMSpropOptions{.weight_decay = 0.1, .momentum = 0.5, .centered = true,
                                   .maximize = m});
       }}};
  for (const auto& rule : rules) {
    const auto& make = rule.second;
    CAPTURE(rule.first);  // (not a structured binding: clang 14 cannot capture one)
    Tensor up = fresh_param(), down = fresh_param();
    auto ascend = make(up, true), descend = make(down, false);
    CHECK(ascend->param_groups()[0].options.maximize);
    for (const std::vector<float>& g : kGrads) {
      step_with(*ascend, up, g);
      step_with(*descend, down, {-g[0], -g[1]});
    }
    CHECK(up.to_float_vector() == down.to_float_vector());
    CHECK(up.to_float_vector() != fresh_param().to_float_vector());
  }
}

TEST_CASE("maximize is saved and resumed with the hyperparameters; older states read false") {
  Tensor p = fresh_param();
  optim::Adam opt({{{p}}}, {.lr = 0.1, .maximize = true});
  step_with(opt, p, kGrads[0]);
  StateDict s = opt.state_dict();
  CHECK(s.values.at("param_groups.0.maximize") == "true");
  CHECK(opt.hyperparameters().back() == std::pair<std::string, std::string>{"maximize", "true"});
  Tensor q = Tensor::of({1, -2}).requires_grad_();
  optim::Adam resumed({q}, 0.1);
  q.copy_(p);
  resumed.load_state_dict(s);
  CHECK(resumed.param_groups()[0].options.maximize);
  step_with(opt, p, kGrads[1]);
  step_with(resumed, q, kGrads[1]);
  CHECK(p.to_float_vector() == q.to_float_vector());
  s.values.erase("param_groups.0.maximize");  // a state saved before maximize existed
  resumed.load_state_dict(s);
  CHECK(!resumed.param_groups()[0].options.maximize);
  s.values["param_groups.0.maximize"] = "1";
  CHECK(error_of([&] { resumed.load_state_dict(s); }) ==
        "Adam::load_state_dict: 'param_groups.0.maximize' is '1', expected true or false");
}
