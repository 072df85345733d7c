// Model.train's safeguards: it stops on a NaN or infinite loss, naming the
// step (with data parallel every rank sees the same mean loss and stops at the
// same step), and HistoryWriter's paths are checked before the first step.
#include <doctest/doctest.h>
#include <minidl/minidl.h>

#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

using namespace minidl;

namespace {

// 32 samples of 4 features, labels 0..3; sample `nan_at` holds a NaN.
data::Dataset with_nan_at(int64_t nan_at) {
  std::vector<float> x(32 * 4);
  std::vector<int64_t> y(32);
  for (int64_t i = 0; i < 32; ++i) {
    for (int64_t j = 0; j < 4; ++j) x[i * 4 + j] = static_cast<float>((i * 7 + j * 3) % 11) / 11;
    y[i] = i % 4;
  }
  x[nan_at * 4 + 2] = std::numeric_limits<float>::quiet_NaN();
  return data::Dataset(Tensor::from_vector(x, {32, 4}), Tensor::from_vector(y, {32}));
}

struct Net : nn::Cell {
  nn::Dense fc{4, 4};
  Net() { register_cell("fc", fc); }
  Tensor forward(const Tensor& x) override { return fc(x); }
};

struct StepCounter : Callback {
  int64_t count = 0;
  void on_step_end(const StepEnd&) override { ++count; }
};

}  // namespace

TEST_CASE("Model.train stops at the step whose loss is NaN, on every rank alike") {
  const int world = parallel::world_size();
  REQUIRE(8 % world == 0);
  // Global steps of 8 samples (8 / world per rank, Model shards by rank):
  // sample 20 is in step 3 of 4, on one rank only.
  manual_seed(1);
  Net net;
  nn::CrossEntropyLoss loss;
  optim::SGD opt(net.trainable_params(), 0.1);
  Model model(net, loss, opt, {.parallel = ParallelMode::DataParallel});
  std::string err;
  try {
    model.train(2, with_nan_at(20).batch(8 / world));
  } catch (const Error& e) {
    err = e.what();
  }
  CHECK(err.find("Model::train: the loss is ") == 0);
  CHECK(err.find("nan at step 3 (epoch 1, step 3 of 4); stopping.") != std::string::npos);
  if (err.find("step 3 (") == std::string::npos) MESSAGE(err);
  // Every rank stopped: the job can still communicate.
  double stopped = err.empty() ? 0 : 1;
  parallel::world().allreduce(&stopped, 1);
  CHECK(stopped == world);
}

TEST_CASE("Model.train with stop_on_nonfinite_loss = false trains on through NaN") {
  const int world = parallel::world_size();
  manual_seed(1);
  Net net;
  nn::CrossEntropyLoss loss;
  optim::SGD opt(net.trainable_params(), 0.1);
  Model model(net, loss, opt, {.parallel = ParallelMode::DataParallel});
  CHECK(model.train(2, with_nan_at(20).batch(8 / world), {}, {.stop_on_nonfinite_loss = false}) ==
        8);
  CHECK(std::isnan(net.fc.weight.to_float_vector()[0]));  // what the check saves a run from
}

TEST_CASE("HistoryWriter's unwritable path fails before the first step") {
  const int world = parallel::world_size();
  manual_seed(1);
  Net net;
  nn::CrossEntropyLoss loss;
  optim::SGD opt(net.trainable_params(), 0.1);
  Model model(net, loss, opt, {.parallel = ParallelMode::DataParallel});
  const std::string csv = "/nonexistent_minidl_dir/h.csv";
  auto steps = std::make_shared<StepCounter>();
  std::string err;
  try {
    model.train(1, with_nan_at(20).batch(8 / world), {steps, HistoryWriter(csv, "")});
  } catch (const Error& e) {
    err = e.what();
  }
  // Every rank stops with rank 0's error, before any step.
  CHECK(err == "HistoryWriter: cannot write '" + csv +
                   "': creating a file in '/nonexistent_minidl_dir' failed: No such file or "
                   "directory");
  CHECK(steps->count == 0);
}
