// The examples' shared flag set (examples/common.h): a flag a program cannot
// honour is refused naming both; --lr-scaling and --warmup's lr schedule
// (Goyal et al. 2017), its values and the callback that applies it.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "common.h"

using namespace minidl;

namespace {

// Parses `args` (after the program name) with the shared flags of a program
// that honours `honours`.
example::Flags parsed(const std::vector<std::string>& args, uint64_t honours) {
  if (!parallel::is_initialized()) parallel::init();  // a world of one
  example::Flags f;
  CLI::App app{"test"};
  example::add_flags(app, f, "prog", honours);
  std::vector<std::string> words = {"prog"};
  words.insert(words.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(w.data());
  example::parse(app, static_cast<int>(argv.size()), argv.data(), f);
  return f;
}

}  // namespace

TEST_CASE("a shared flag the program does not honour is an error naming the flag and the program") {
  const uint64_t honours = example::kAllFlags & ~(example::kHistory | example::kNoShuffle);
  CHECK_THROWS_WITH_AS(parsed({"--history", "h"}, honours),
                       doctest::Contains("--history: prog cannot honour this flag"), Error);
  CHECK_THROWS_WITH_AS(parsed({"--batch", "8", "--no-shuffle"}, honours),
                       doctest::Contains("--no-shuffle: prog cannot honour this flag"), Error);
  // Honoured flags, and refused ones left out, parse.
  const example::Flags f = parsed({"--batch", "8", "--warmup", "5", "--lr-scaling", "linear"}, honours);
  CHECK(f.batch == 8);
  CHECK(f.warmup == 5);
  CHECK(f.lr_scaling == "linear");
  CHECK_NOTHROW(parsed({}, 0));  // a program that honours none still parses no flags
  CHECK_THROWS_WITH_AS(parsed({"--device", "cpu"}, 0),
                       doctest::Contains("--device: prog cannot honour this flag"), Error);
}

TEST_CASE("every shared flag has its bit") {
  for (size_t bit = 0; bit < std::size(example::kSharedFlagNames); ++bit) {
    const std::string& name = example::kSharedFlagNames[bit];
    const uint64_t all_but = example::kAllFlags & ~(uint64_t{1} << bit);
    std::vector<std::string> args = {name};
    if (name != "--no-shuffle" && name != "--detect-anomaly" && name != "--cuda-graph")
      args.push_back(name == "--dataset"      ? "mnist"
                     : name == "--optimizer"  ? "sgd"
                     : name == "--parallel"   ? "none"
                     : name == "--device"     ? "cpu"
                     : name == "--augment"    ? "shift:1"
                     : name == "--lr-scaling" ? "none"
                                              : "1");
    INFO(name);
    CHECK_THROWS_WITH_AS(parsed(args, all_but), doctest::Contains((name + ": prog cannot honour").c_str()),
                         Error);
    CHECK_NOTHROW(parsed(args, example::kAllFlags));
  }
}

TEST_CASE("--lr-scaling linear and --warmup: Goyal et al.'s schedule, from the one-rank lr") {
  // lr 0.1 on 4 ranks, linear: the target is 0.4, warmed up over 4 updates
  // from 0.1 (update 1) by 0.075 a step; update 5 and later use 0.4.
  const example::LrSchedule linear{.lr = 0.1, .ranks = 4, .linear = true, .warmup = 4};
  const std::vector<double> want = {0.1, 0.175, 0.25, 0.325, 0.4, 0.4};
  for (int64_t t = 1; t <= 6; ++t) CHECK(linear.at(t) == doctest::Approx(want[t - 1]).epsilon(1e-15));
  CHECK(linear.at(1) == 0.1);  // exactly the one-rank lr
  CHECK(linear.at(5) == 0.4);
  CHECK(linear.at(1'000'000) == 0.4);
  CHECK(linear.active());
  // No warm-up: the scaled lr from the first update.
  const example::LrSchedule scaled{.lr = 0.1, .ranks = 2, .linear = true, .warmup = 0};
  CHECK(scaled.at(1) == 0.2);
  // --lr-scaling none with a warm-up: from lr / ranks to --lr.
  const example::LrSchedule none{.lr = 0.1, .ranks = 2, .linear = false, .warmup = 2};
  CHECK(none.at(1) == 0.05);
  CHECK(none.at(2) == doctest::Approx(0.075).epsilon(1e-15));
  CHECK(none.at(3) == 0.1);
  // One rank: nothing to scale or to warm up from.
  const example::LrSchedule one{.lr = 0.1, .ranks = 1, .linear = true, .warmup = 10};
  for (int64_t t = 1; t <= 12; ++t) CHECK(one.at(t) == 0.1);
  CHECK_FALSE(one.active());
  CHECK_FALSE(example::LrSchedule{.lr = 0.1, .ranks = 4}.active());
}

TEST_CASE("LrWarmup sets the optimizer's lr before each update, also after a resume") {
  Tensor w = Tensor::zeros({2}).requires_grad_();
  optim::SGD opt({w}, 0.1);
  const example::LrSchedule s{.lr = 0.1, .ranks = 4, .linear = true, .warmup = 4};
  CallbackList list({example::LrWarmup(opt, s)});
  list.train_begin({.epochs = 1, .steps_per_epoch = 6});
  CHECK(opt.lr() == s.at(1));
  for (int64_t t = 1; t <= 6; ++t) {
    list.step_end({.epoch = 1, .step = t, .global_step = t, .steps_per_epoch = 6});
    CHECK(opt.lr() == s.at(t + 1));  // the next update's
  }
  CHECK(opt.lr() == 0.4);
  CallbackList resumed({example::LrWarmup(opt, s, /*next=*/3)});
  resumed.train_begin({.epochs = 1, .steps_per_epoch = 6});
  CHECK(opt.lr() == s.at(3));
}
