// ReplicaCheck and parallel::check_replicas under mpirun -np 2 and 4, and alone.
//
// Identical replicas pass; a parameter changed on some ranks gives every rank
// the same error, naming the parameter and those ranks.
#include <doctest/doctest.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "framework/ops.h"
#include "framework/random.h"
#include "nn/dense.h"
#include "nn/loss.h"
#include "optim/sgd.h"
#include "parallel/data_parallel.h"
#include "parallel/init.h"
#include "parallel/train/callbacks.h"
#include "parallel/train/model.h"

using namespace minidl;

namespace {
int R() { return parallel::rank(); }
int N() { return parallel::world_size(); }

// x [B, IN] -> relu(fc1) [B, 8] -> fc2 [B, 3]
struct Mlp : nn::Cell {
  nn::Dense fc1, fc2{8, 3};
  explicit Mlp(int64_t in = 6) : fc1(in, 8) { register_cells({{"fc1", fc1}, {"fc2", fc2}}); }
  Tensor forward(const Tensor& x) override { return fc2(relu(fc1(x))); }
};

// At global step `at`, adds `delta(rank)` to fc2.bias[1] (nothing where it is 0).
class Perturb : public Callback {
 public:
  Perturb(int64_t at, std::function<double(int)> delta) : at_(at), delta_(std::move(delta)) {}
  void on_step_end(const StepEnd& s) override {
    if (s.global_step != at_ || delta_(rank_) == 0) return;
    Tensor bias = dynamic_cast<Mlp&>(*network_).fc2.bias;
    bias.set({1}, bias.at({1}) + delta_(rank_));
  }

 private:
  int64_t at_;
  std::function<double(int)> delta_;
};

// 4 samples per rank per step, 3 classes, Model in data-parallel mode.
struct Run {
  Mlp net;
  nn::CrossEntropyLoss loss;
  std::unique_ptr<optim::SGD> opt;
  std::unique_ptr<Model> model;
  data::BatchDataset train;
  Run() : train(make_data()) {
    opt = std::make_unique<optim::SGD>(net.trainable_params(), /*lr=*/0.1);
    model = std::make_unique<Model>(net, loss, *opt,
                                    ModelOptions{.parallel = ParallelMode::DataParallel});
  }
  static data::BatchDataset make_data() {
    manual_seed(5);
    return data::Dataset(Tensor::randn({16 * N(), 6}), Tensor::randint(0, 3, {16 * N()})).batch(4);
  }
};
}  // namespace

TEST_CASE("identical replicas pass every check") {
  manual_seed(R());  // different initial weights: DataParallel broadcasts rank 0's
  Run run;
  auto check = std::make_shared<ReplicaCheck>(2);
  CHECK(run.model->train(/*epochs=*/1, run.train, {check}, {.max_steps = 4}) == 4);
  CHECK(check->checks() == (N() > 1 ? 2 : 0));  // steps 2 and 4; nothing to compare alone
  CHECK_NOTHROW(parallel::check_replicas(run.net, parallel::world(), "the end"));
}

TEST_CASE("a parameter changed on rank 1: every rank throws naming it and rank 1") {
  if (N() == 1) return;
  manual_seed(1);
  Run run;
  std::string message;
  try {
    run.model->train(1, run.train,
                     {Perturb(/*at=*/3, [](int r) { return r == 1 ? 0.5 : 0.0; }), ReplicaCheck(1)},
                     {.max_steps = 4});
    FAIL("no error");
  } catch (const Error& e) {
    message = e.what();
  }
  MESSAGE(message);
  CHECK(message.find("ReplicaCheck: the replicas diverged by step 3 (epoch 1 step 3): parameter "
                     "fc2.bias [3] differs from rank 0's on rank 1 (max |difference| 0.5); 1 of 4 "
                     "parameters differ.") == 0);
  // Every rank got the same message.
  std::vector<uint64_t> lengths(N());
  uint64_t n = message.size();
  parallel::world().allgather(&n, lengths.data(), sizeof n);
  for (int r = 0; r < N(); ++r) CHECK(lengths[r] == n);
  std::vector<char> all(n * N());
  parallel::world().allgather(message.data(), all.data(), n);
  for (int r = 0; r < N(); ++r) CHECK(std::string(all.data() + r * n, n) == message);
}

TEST_CASE("check_replicas names every rank that differs at the first differing parameter") {
  if (N() < 4) return;
  manual_seed(2);
  Mlp net;
  parallel::DataParallel dp(net);  // identical replicas
  CHECK_NOTHROW(parallel::check_replicas(net, parallel::world(), "the start"));
  // fc1.bias on rank 3, fc2.weight on ranks 1 and 3: fc1.bias comes first
  const double saved = net.fc1.bias.at({0});
  if (R() == 3) net.fc1.bias.set({0}, saved - 0.25);
  if (R() == 1 || R() == 3) net.fc2.weight.set({0, 0}, net.fc2.weight.at({0, 0}) + 1.0);
  CHECK_THROWS_WITH_AS(parallel::check_replicas(net, parallel::world(), "step 9"),
                       doctest::Contains("diverged by step 9: parameter fc1.bias [8] differs from "
                                         "rank 0's on rank 3 (max |difference| 0.25); 2 of 4 "
                                         "parameters differ"),
                       Error);
  net.fc1.bias.set({0}, saved);
  CHECK_THROWS_WITH_AS(parallel::check_replicas(net, parallel::world(), "step 10"),
                       doctest::Contains("parameter fc2.weight [3, 8] differs from rank 0's on "
                                         "ranks 1 (max |difference| 1), 3 (max |difference| 1); "
                                         "1 of 4"),
                       Error);
}

TEST_CASE("different models: an error, not a hang") {
  if (N() == 1) return;
  Mlp net;
  if (R() == N() - 1) net.register_cell("extra", std::make_shared<nn::Dense>(3, 3));
  const std::string expected =
      "rank " + std::to_string(N() - 1) + " has a different number of parameters than rank 0 (4)";
  CHECK_THROWS_WITH_AS(parallel::check_replicas(net, parallel::world(), "step 1"),
                       doctest::Contains(expected.c_str()), Error);
  manual_seed(3);
  Mlp other(R() == 1 ? 5 : 6);  // the same count; fc1.weight [8, 5] on rank 1
  CHECK_THROWS_WITH_AS(parallel::check_replicas(other, parallel::world(), "step 2"),
                       doctest::Contains("parameter fc1.weight [8, 6] differs from rank 0's on "
                                         "rank 1 (a different shape or dtype)"),
                       Error);
}

TEST_CASE("ReplicaCheck needs an interval of at least one step") {
  CHECK_THROWS_WITH_AS(ReplicaCheck(0), doctest::Contains("expected a step interval >= 1, got 0"),
                       Error);
}
