// Model.train's safeguards: it stops on a NaN or infinite loss, naming the
// step (with data parallel every rank sees the same mean loss and stops at the
// same step), and HistoryWriter's paths are checked before the first step.
#include <doctest/doctest.h>
#include <minidl/minidl.h>

#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <span>
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
using MakeOptimizer = std::function<std::unique_ptr<optim::Optimizer>(std::vector<Tensor>)>;
using MakeSchedule = std::function<std::unique_ptr<optim::LRScheduler>(optim::Optimizer&)>;

MakeOptimizer sgd(double lr, double weight_decay = 0) {
  return [=](std::vector<Tensor> p) { return std::make_unique<optim::SGD>(p, lr, weight_decay); };
}
MakeOptimizer momentum(double m, optim::MomentumOptions o = {}) {
  return [=](std::vector<Tensor> p) { return std::make_unique<optim::Momentum>(p, 0.1, m, o); };
}
MakeOptimizer adam(double beta1, double beta2, double eps, double wd) {
  return [=](std::vector<Tensor> p) {
    return std::make_unique<optim::Adam>(p, 0.001, beta1, beta2, eps, wd);
  };
}
MakeOptimizer adamw(double wd) {
  return [=](std::vector<Tensor> p) {
    return std::make_unique<optim::AdamW>(p, 0.001, 0.9, 0.999, 1e-8, wd);
  };
}

struct Setup {
  int64_t batch = 4;
  size_t bucket_bytes = 1024;
  MakeOptimizer optimizer = sgd(0.1);
  MakeSchedule schedule = nullptr;  // none when empty
  DType extra = kFloat32;           // dtype of a frozen parameter "scale"
  ParallelMode mode = ParallelMode::DataParallel;
};

struct ScaledNet : Net {
  Tensor scale;
  explicit ScaledNet(DType dtype) {
    scale = register_parameter("scale", Tensor::ones({1}).to(dtype));
    scale.requires_grad_(false);
  }
};

// Model.train's error for one epoch with `setup` on this rank ("" when it trains).
std::string error_of_train(const Setup& setup) {
  manual_seed(1);
  ScaledNet net(setup.extra);
  nn::CrossEntropyLoss loss;
  try {
    auto opt = setup.optimizer(net.trainable_params());
    auto schedule = setup.schedule ? setup.schedule(*opt) : nullptr;
    Model model(net, loss, *opt, {.parallel = setup.mode, .bucket_bytes = setup.bucket_bytes});
    model.train(1, with_nan_at(20).batch(setup.batch), {},
                {.scheduler = schedule.get(), .stop_on_nonfinite_loss = false});
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

const std::string kTail = "; every rank must agree, or they wait for each other forever";
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
    CHECK(err == "test: rank 2 has b x where rank 0 has 2" + kTail);
  else
    CHECK(err.empty());
}

TEST_CASE("Model.train refuses ranks that disagree on batch size or buckets") {
  if (parallel::world_size() == 1) return;  // nothing to disagree with
  const bool one = parallel::rank() == 1;
  CHECK(error_of_train({.batch = one ? 2 : 4}) ==
        "Model::train: rank 1 has batch size 2 where rank 0 has 4" + kTail);
  CHECK(error_of_train({.bucket_bytes = one ? 64u : 1024u}) ==
        "DataParallel: rank 1 has bucket_bytes 64 where rank 0 has 1024" + kTail);
  CHECK(error_of_train({}).empty());  // and agreeing ranks train
}

TEST_CASE("Model.train names the rank and both values of an optimizer setting that differs") {
  if (parallel::world_size() == 1) return;
  const bool one = parallel::rank() == 1;
  const auto on_rank1 = [&](MakeOptimizer mine, MakeOptimizer others) {
    return error_of_train({.optimizer = one ? mine : others});
  };
  const std::string head = "Model::train: rank 1 has ";
  SUBCASE("kind") {
    CHECK(on_rank1(momentum(0.9), sgd(0.1)) ==
          head + "optimizer Momentum where rank 0 has SGD" + kTail);
    CHECK(on_rank1(adamw(0), adam(0.9, 0.999, 1e-8, 0)) ==
          head + "optimizer AdamW where rank 0 has Adam" + kTail);
  }
  SUBCASE("SGD") {
    CHECK(on_rank1(sgd(0.25), sgd(0.1)) == head + "SGD lr 0.25 where rank 0 has 0.1" + kTail);
    CHECK(on_rank1(sgd(0.1, 1e-4), sgd(0.1)) ==
          head + "SGD weight_decay 0.0001 where rank 0 has 0" + kTail);
    CHECK(on_rank1(sgd(0.1, 1e-4), sgd(0.1, 1e-4)).empty());
  }
  SUBCASE("Momentum") {
    CHECK(on_rank1(momentum(0.8), momentum(0.9)) ==
          head + "Momentum momentum 0.8 where rank 0 has 0.9" + kTail);
    CHECK(on_rank1(momentum(0.9, {.nesterov = true}), momentum(0.9)) ==
          head + "Momentum nesterov true where rank 0 has false" + kTail);
    CHECK(on_rank1(momentum(0.9, {.dampening = 0.5}), momentum(0.9)) ==
          head + "Momentum dampening 0.5 where rank 0 has 0" + kTail);
    CHECK(on_rank1(momentum(0.9, {.weight_decay = 5e-4}), momentum(0.9, {.weight_decay = 1e-4})) ==
          head + "Momentum weight_decay 0.0005 where rank 0 has 0.0001" + kTail);
    CHECK(on_rank1(momentum(0.9, {.nesterov = true}), momentum(0.9, {.nesterov = true})).empty());
  }
  SUBCASE("Adam and AdamW") {
    CHECK(on_rank1(adam(0.8, 0.999, 1e-8, 0), adam(0.9, 0.999, 1e-8, 0)) ==
          head + "Adam beta1 0.8 where rank 0 has 0.9" + kTail);
    CHECK(on_rank1(adam(0.9, 0.99, 1e-8, 0), adam(0.9, 0.999, 1e-8, 0)) ==
          head + "Adam beta2 0.99 where rank 0 has 0.999" + kTail);
    CHECK(on_rank1(adam(0.9, 0.999, 1e-6, 0), adam(0.9, 0.999, 1e-8, 0)) ==
          head + "Adam eps 1e-06 where rank 0 has 1e-08" + kTail);
    CHECK(on_rank1(adam(0.9, 0.999, 1e-8, 0.01), adam(0.9, 0.999, 1e-8, 0)) ==
          head + "Adam weight_decay 0.01 where rank 0 has 0" + kTail);
    CHECK(on_rank1(adamw(0.1), adamw(0.01)) ==
          head + "AdamW weight_decay 0.1 where rank 0 has 0.01" + kTail);
    CHECK(on_rank1(adamw(0.01), adamw(0.01)).empty());
  }
}

TEST_CASE("Model.train names the rank and both values of an LR schedule setting that differs") {
  if (parallel::world_size() == 1) return;
  const bool one = parallel::rank() == 1;
  const auto step_lr = [](int64_t size, double gamma,
                          optim::SchedulerOptions o = {}) -> MakeSchedule {
    return
        [=](optim::Optimizer& opt) { return std::make_unique<optim::StepLR>(opt, size, gamma, o); };
  };
  const auto cosine = [](int64_t t_max, double eta_min) -> MakeSchedule {
    return [=](optim::Optimizer& opt) {
      return std::make_unique<optim::CosineAnnealingLR>(opt, t_max, eta_min);
    };
  };
  const auto on_rank1 = [&](MakeSchedule mine, MakeSchedule others) {
    return error_of_train({.schedule = one ? mine : others});
  };
  const std::string head = "Model::train: rank 1 has ";
  CHECK(on_rank1(step_lr(1, 0.5), nullptr) ==
        head + "LR schedule StepLR where rank 0 has none" + kTail);
  CHECK(on_rank1(cosine(5, 0), step_lr(1, 0.5)) ==
        head + "LR schedule CosineAnnealingLR where rank 0 has StepLR" + kTail);
  CHECK(on_rank1(step_lr(2, 0.5), step_lr(1, 0.5)) ==
        head + "StepLR step_size 2 where rank 0 has 1" + kTail);
  CHECK(on_rank1(step_lr(1, 0.25), step_lr(1, 0.5)) ==
        head + "StepLR gamma 0.25 where rank 0 has 0.5" + kTail);
  CHECK(on_rank1(step_lr(1, 0.5, {.interval = optim::Interval::Step}), step_lr(1, 0.5)) ==
        head + "StepLR interval step where rank 0 has epoch" + kTail);
  CHECK(on_rank1(step_lr(1, 0.5, {.warmup = 3}), step_lr(1, 0.5, {.warmup = 2})) ==
        head + "StepLR warmup 3 where rank 0 has 2" + kTail);
  CHECK(on_rank1(cosine(4, 0), cosine(5, 0)) ==
        head + "CosineAnnealingLR T_max 4 where rank 0 has 5" + kTail);
  CHECK(on_rank1(cosine(5, 0.001), cosine(5, 0)) ==
        head + "CosineAnnealingLR eta_min 0.001 where rank 0 has 0" + kTail);
  CHECK(on_rank1(cosine(5, 0.001), cosine(5, 0.001)).empty());
}

TEST_CASE(
    "Model.train and DataParallel name the rank and both dtypes of a parameter that differs") {
  if (parallel::world_size() == 1) return;
  const DType dtype = parallel::rank() == 1 ? kFloat16 : kFloat32;
  // Without DataParallel (the network's own parameters), Model::train checks them.
  CHECK(error_of_train({.extra = dtype, .mode = ParallelMode::StandAlone}) ==
        "Model::train: rank 1 has parameter scale of dtype float16 where rank 0 has float32" +
            kTail);
  // DataParallel checks names, shapes and dtypes at construction.
  CHECK(error_of_train({.extra = dtype}) ==
        "DataParallel: rank 1 has parameter scale [1] float16 (frozen) where rank 0 has scale [1] "
        "(frozen) (parameter 0); ranks that differ from rank 0: 1. Every rank must build the same "
        "model.");
  CHECK(error_of_train({.extra = kFloat16, .mode = ParallelMode::StandAlone}).empty());
}

namespace {
// Model.train's error for one epoch of n samples in batches of 20, shuffled
// with `seed` (none: file order), with `augments` identity transforms.
std::string error_of_data(int64_t n, std::optional<uint64_t> seed, int augments) {
  manual_seed(1);
  Net net;
  nn::CrossEntropyLoss loss;
  optim::SGD opt(net.trainable_params(), /*lr=*/0.1);
  data::Dataset d(Tensor::rand({n, 4}), Tensor::zeros({n}, kInt64));
  if (seed) d = d.shuffle(*seed);
  for (int i = 0; i < augments; ++i)
    d = d.augment([](Tensor batch, int64_t, std::span<const int64_t>) { return batch; });
  try {
    Model model(net, loss, opt, {.parallel = ParallelMode::DataParallel});
    model.train(1, d.batch(20), {}, {.stop_on_nonfinite_loss = false});
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST_CASE("Model.train refuses ranks that would see different samples: size, seed, transforms") {
  if (parallel::world_size() == 1) return;
  const bool one = parallel::rank() == 1;
  const std::string head = "Model::train: rank 1 has ";
  // 33 vs 32 samples: the same steps per epoch (1 batch of 20 per rank), other samples
  CHECK(error_of_data(one ? 33 : 32, 0, 0) ==
        head + "samples before sharding 33 where rank 0 has 32" + kTail);
  CHECK(error_of_data(32, one ? 7 : 0, 0) == head + "shuffle seed 7 where rank 0 has 0" + kTail);
  CHECK(error_of_data(32, one ? std::nullopt : std::optional<uint64_t>(0), 0) ==
        head + "shuffle seed none (file order) where rank 0 has 0" + kTail);
  CHECK(error_of_data(32, 0, one ? 1 : 0) ==
        head + "per-batch transforms (augment) 1 where rank 0 has 0" + kTail);
  CHECK(error_of_data(32, 0, 1).empty());  // and agreeing ranks train
}

