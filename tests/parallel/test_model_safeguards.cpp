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

// What the ranks must agree on is checked once, up front: every rank throws
// the same error naming the first rank that differs and both values.
namespace {
std::string error_of_train(int64_t batch, double lr, size_t bucket_bytes) {
  manual_seed(1);
  Net net;
  nn::CrossEntropyLoss loss;
  optim::SGD opt(net.trainable_params(), lr);
  try {
    Model model(net, loss, opt,
                {.parallel = ParallelMode::DataParallel, .bucket_bytes = bucket_bytes});
    model.train(1, with_nan_at(20).batch(batch), {}, {.stop_on_nonfinite_loss = false});
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST_CASE("Communicator::check_same names the first rank that differs, on every rank") {
  auto& world = parallel::world();
  const int rank = world.rank(), size = world.size();
  world.check_same("test", {{"a", "1"}, {"b", "2"}});  // all agree: no error
  std::string err;
  try {
    world.check_same("test", {{"a", "1"}, {"b", rank >= 2 ? "x" : "2"}});
  } catch (const Error& e) {
    err = e.what();
  }
  if (size > 2)
    CHECK(err == "test: rank 2 has b x where rank 0 has 2; every rank must agree, or they wait "
                 "for each other forever");
  else
    CHECK(err.empty());
}

TEST_CASE("Model.train refuses ranks that disagree on batch size, learning rate or buckets") {
  const int rank = parallel::world_size() > 1 ? parallel::rank() : 0;
  if (parallel::world_size() == 1) return;  // nothing to disagree with
  const std::string tail = "; every rank must agree, or they wait for each other forever";
  CHECK(error_of_train(rank == 1 ? 2 : 4, 0.1, 1024) ==
        "Model::train: rank 1 has batch size 2 where rank 0 has 4" + tail);
  CHECK(error_of_train(4, rank == 1 ? 0.25 : 0.1, 1024) ==
        "Model::train: rank 1 has optimizer SGD lr 0.25 where rank 0 has SGD lr "
        "0.10000000000000001" + tail);
  CHECK(error_of_train(4, 0.1, rank == 1 ? 64 : 1024) ==
        "DataParallel: rank 1 has bucket_bytes 64 where rank 0 has 1024" + tail);
  CHECK(error_of_train(4, 0.1, 1024).empty());  // and agreeing ranks train
}
