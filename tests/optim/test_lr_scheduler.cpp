// Learning-rate schedules: values at several epochs from PyTorch's formulas.
#include <doctest/doctest.h>
#include <minidl/minidl.h>

#include <cmath>
#include <map>
#include <stdexcept>

using namespace minidl;

TEST_CASE("StepLR multiplies by gamma every step_size epochs") {
  Tensor p = Tensor::zeros({1}).requires_grad_();
  optim::SGD sgd({p}, 0.1);
  optim::StepLR sched(sgd, /*step_size=*/3, /*gamma=*/0.5);
  // epochs 0-2: 0.1; 3-5: 0.05; 6-8: 0.025; 9: 0.0125
  const std::vector<double> want{0.1, 0.1, 0.1, 0.05, 0.05, 0.05, 0.025, 0.025, 0.025, 0.0125};
  for (size_t epoch = 0; epoch < want.size(); ++epoch) {
    INFO("epoch " << epoch);
    CHECK(sched.last_epoch() == int64_t(epoch));
    CHECK(sgd.lr() == doctest::Approx(want[epoch]).epsilon(1e-12));
    CHECK(sched.get_last_lr() == sgd.lr());
    sched.step();
  }
  CHECK(sched.base_lr() == 0.1);
  CHECK_THROWS_AS(optim::StepLR(sgd, 0), std::invalid_argument);
  CHECK_THROWS_WITH_AS(optim::StepLR(sgd, 2, -0.5), "StepLR: invalid gamma -0.5 (expected > 0)",
                       std::invalid_argument);
}

TEST_CASE("CosineAnnealingLR follows eta_min + (base - eta_min) (1 + cos(pi t / T)) / 2") {
  Tensor p = Tensor::zeros({1}).requires_grad_();
  optim::Momentum opt({p}, 0.1, 0.9);
  optim::CosineAnnealingLR sched(opt, /*T_max=*/10, /*eta_min=*/0.001);
  // t = 0: 0.1; t = 2: 0.001 + 0.099 (1 + cos 0.2pi) / 2 = 0.001 + 0.099 * 0.9045085 = 0.0905463
  // t = 5: 0.001 + 0.099 / 2 = 0.0505; t = 10: eta_min 0.001;
  // t = 15: back up to 0.0505; t = 20: back to 0.1 (the cosine continues)
  std::map<int, double> want{{0, 0.1},    {2, 0.0905463}, {5, 0.0505},
                             {10, 0.001}, {15, 0.0505},   {20, 0.1}};
  for (int t = 0; t <= 20; ++t) {
    if (want.count(t)) {
      INFO("epoch " << t);
      CHECK(opt.lr() == doctest::Approx(want[t]).epsilon(1e-6));
    }
    sched.step();
  }
  CHECK_THROWS_AS(optim::CosineAnnealingLR(opt, 0), std::invalid_argument);
  CHECK_THROWS_AS(optim::CosineAnnealingLR(opt, 5, -1), std::invalid_argument);
}

TEST_CASE("a schedule's rate is what the optimizer steps with") {
  Tensor p = Tensor::of({1}).requires_grad_();
  optim::SGD sgd({p}, 1.0);
  optim::StepLR sched(sgd, 1, 0.5);
  for (int epoch = 0; epoch < 3; ++epoch) {  // steps of 1, 0.5, 0.25 with g = 1
    p.set_grad(Tensor::of({1}));
    sgd.step();
    sched.step();
  }
  CHECK(p.item() == doctest::Approx(1 - 1.75));
}

TEST_CASE("linear warm-up, then the schedule counted from the warm-up's end") {
  Tensor p = Tensor::zeros({1}).requires_grad_();
  optim::SGD sgd({p}, 0.1);
  optim::StepLR sched(sgd, /*step_size=*/2, /*gamma=*/0.5, {.warmup = 4, .warmup_start = 0.25});
  // t < 4: 0.1 * (0.25 + 0.75 t / 4) = 0.025, 0.04375, 0.0625, 0.08125;
  // then StepLR at t - 4: 0.1, 0.1, 0.05, 0.05, 0.025
  const std::vector<double> want{0.025, 0.04375, 0.0625, 0.08125, 0.1, 0.1, 0.05, 0.05, 0.025};
  for (size_t t = 0; t < want.size(); ++t) {
    INFO("period " << t);
    CHECK(sgd.lr() == doctest::Approx(want[t]).epsilon(1e-12));
    CHECK(sched.lr(int64_t(t)) == sgd.lr());
    sched.step();
  }
  CHECK(sched.interval() == optim::Interval::Epoch);
  CHECK_THROWS_WITH_AS(optim::CosineAnnealingLR(sgd, 10, 0, {.warmup = -1}),
                       "CosineAnnealingLR: invalid warmup -1 (expected >= 0)", std::invalid_argument);
  CHECK_THROWS_WITH_AS(optim::StepLR(sgd, 2, 0.5, {.warmup = 3, .warmup_start = 0}),
                       "StepLR: invalid warmup_start 0 (expected 0 < warmup_start <= 1)",
                       std::invalid_argument);
}

// PyTorch 1.13's LinearLR, stepped after each optimizer step, gave these
// rates (torch.optim.lr_scheduler.LinearLR, printed before each step):
//   lr 0.1, start 0.25, end 1, total_iters 4: 0.025, 0.04375, 0.0625, 0.08125, 0.1, 0.1, 0.1
//   lr 0.2, start 1, end 0.5, total_iters 3:  0.2, 0.1666667, 0.1333333, 0.1, 0.1
TEST_CASE("LinearLR ramps from start_factor to end_factor over total_iters, then stays") {
  Tensor p = Tensor::zeros({1}).requires_grad_();
  optim::SGD up_opt({p}, 0.1), down_opt({p}, 0.2);
  optim::LinearLR up(up_opt, /*start_factor=*/0.25, /*end_factor=*/1.0, /*total_iters=*/4,
                     {.interval = optim::Interval::Step});
  optim::LinearLR down(down_opt, 1.0, 0.5, 3);
  const std::vector<double> want_up{0.025, 0.04375, 0.0625, 0.08125, 0.1, 0.1, 0.1};
  const std::vector<double> want_down{0.2, 0.1666667, 0.1333333, 0.1, 0.1};
  for (size_t t = 0; t < want_up.size(); ++t) {
    INFO("period " << t);
    CHECK(up_opt.lr() == doctest::Approx(want_up[t]).epsilon(1e-12));
    if (t < want_down.size()) CHECK(down_opt.lr() == doctest::Approx(want_down[t]).epsilon(1e-6));
    up.step();
    down.step();
  }
  CHECK(up.interval() == optim::Interval::Step);
  CHECK_THROWS_WITH_AS(optim::LinearLR(up_opt, 0.0), "LinearLR: invalid start_factor 0 (expected in (0, 1])",
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(optim::LinearLR(up_opt, 0.5, 1.5), "LinearLR: invalid end_factor 1.5 (expected in [0, 1])",
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(optim::LinearLR(up_opt, 0.5, 1.0, 0), "LinearLR: invalid total_iters 0 (expected >= 1)",
                       std::invalid_argument);
}

// A LinearLR resumed from its state_dict goes on with the same rates.
TEST_CASE("LinearLR's state resumes its ramp") {
  Tensor p = Tensor::zeros({1}).requires_grad_();
  optim::SGD a_opt({p}, 0.1), b_opt({p}, 0.1);
  optim::LinearLR a(a_opt, 0.25, 1.0, 4);
  a.step(), a.step();
  optim::LinearLR b(b_opt, 0.25, 1.0, 4);
  b.load_state_dict(a.state_dict());
  CHECK(b.last_epoch() == 2);
  CHECK(b_opt.lr() == a_opt.lr());  // 0.0625
  a.step(), b.step();
  CHECK(b_opt.lr() == a_opt.lr());  // 0.08125
  CHECK(a.settings() == b.settings());
}
