// Model's TrainStep (parallel/train/train_step.h): a user's step passed as
// ModelOptions::train_step is the one train() calls, and the step chosen when
// the Model is made is the one every epoch and every train() call uses.
#include <doctest/doctest.h>
#include <minidl/minidl.h>

#include <functional>
#include <memory>
#include <vector>

#include "nets.h"

using namespace minidl;
using testing::Mlp;

namespace {

// Returns loss 0.25 * k at its k-th call and no logits; touches nothing.
struct CountingStep : TrainStep {
  int64_t calls = 0;
  std::vector<int64_t> batch_sizes;
  StepOutput operator()(const Tensor& data, const Tensor& labels) override {
    CHECK(labels.size(0) == data.size(0));
    ++calls;
    batch_sizes.push_back(data.size(0));
    return {Tensor::full({}, 0.25 * static_cast<double>(calls)), Tensor()};
  }
};

// Calls `see` at every step's and every epoch's end.
struct Watch : Callback {
  std::function<void()> see;
  explicit Watch(std::function<void()> f) : see(std::move(f)) {}
  void on_step_end(const StepEnd&) override { see(); }
  void on_epoch_end(const EpochEnd&) override { see(); }
};

data::Dataset toy(int64_t n) {
  manual_seed(11);
  return data::Dataset(Tensor::randn({n, 6}), Tensor::randint(0, 3, {n}));
}

}  // namespace

TEST_CASE("Model calls a user's TrainStep for every batch; the callbacks see its loss") {
  manual_seed(1);
  Mlp net;
  const std::vector<float> before = net.fc1.weight.to_float_vector();
  nn::CrossEntropyLoss loss;
  optim::SGD opt(net.trainable_params(), 0.1);
  auto step = std::make_shared<CountingStep>();
  Model model(net, loss, opt, {.train_step = step});
  CHECK(model.train_step() == step.get());
  auto history = std::make_shared<HistoryWriter>("", "");
  CHECK(model.train(/*epochs=*/2, toy(20).batch(8), {history}) == 6);  // 8, 8, 4 a epoch
  CHECK(step->calls == 6);
  CHECK(step->batch_sizes == std::vector<int64_t>{8, 8, 4, 8, 8, 4});
  REQUIRE(history->rows().size() == 6);
  for (int64_t k = 1; k <= 6; ++k) {
    CAPTURE(k);
    const HistoryWriter::Row& row = history->rows()[k - 1];
    CHECK(row.step == k);
    CHECK(row.loss == 0.25 * k);  // every rank's loss alike: their mean is exact
    CHECK(row.accuracy == 0);     // no logits: no hits
  }
  CHECK(net.fc1.weight.to_float_vector() == before);  // Model ran no step of its own
}

TEST_CASE("Model keeps the step it chose when made, for every epoch and train() call") {
  nn::CrossEntropyLoss loss;
  auto train = toy(12).batch(4);  // 3 steps an epoch
  SUBCASE("a user's step") {
    Mlp net;
    optim::SGD opt(net.trainable_params(), 0.1);
    auto step = std::make_shared<CountingStep>();
    Model model(net, loss, opt, {.train_step = step});
    std::vector<int64_t> seen;  // the step's calls, at each step's and epoch's end
    Watch watch([&] { seen.push_back(step->calls); });
    model.train(2, train, {watch});
    model.train(1, train, {watch});
    CHECK(seen == std::vector<int64_t>{1, 2, 3, 3, 4, 5, 6, 6, 7, 8, 9, 9});
    CHECK(model.train_step() == step.get());
  }
  SUBCASE("Model's own: EagerStep for a network, GradAccumulationStep for a GradAccumulation") {
    Mlp net;
    parallel::GradAccumulation ga(net, /*micro_size=*/2);
    optim::SGD opt(net.trainable_params(), 0.1);
    for (nn::Cell* cell : {static_cast<nn::Cell*>(&net), static_cast<nn::Cell*>(&ga)}) {
      Model model(*cell, loss, opt);
      TrainStep* chosen = model.train_step();
      REQUIRE(chosen != nullptr);
      if (cell == &net)
        CHECK(dynamic_cast<EagerStep*>(chosen) != nullptr);
      else
        CHECK(dynamic_cast<parallel::GradAccumulationStep*>(chosen) != nullptr);
      std::vector<TrainStep*> seen;
      Watch watch([&] { seen.push_back(model.train_step()); });
      model.train(2, train, {watch});
      model.train(1, train, {watch});
      CHECK(seen == std::vector<TrainStep*>(12, chosen));
    }
  }
  SUBCASE("no optimizer: no step") {
    Mlp net;
    CHECK(Model(net, loss).train_step() == nullptr);
  }
}

TEST_CASE("Model refuses a train_step it could not run as asked") {
  Mlp net;
  nn::CrossEntropyLoss loss;
  optim::SGD opt(net.trainable_params(), 0.1);
  auto step = std::make_shared<CountingStep>();
  CHECK_THROWS_WITH_AS(Model(net, loss, opt, {.cuda_graph = true, .train_step = step}),
                       "Model: cuda_graph makes the Model's own step (a parallel::GraphedStep), "
                       "but ModelOptions::train_step gives one too; pass one or the other",
                       Error);
  CHECK_THROWS_WITH_AS(
      Model(net, loss, opt, {.parallel = ParallelMode::DataParallel, .train_step = step}),
      doctest::Contains("in a DataParallel that ModelOptions::train_step, made without it, "
                        "never calls; make the step with a parallel::DataParallel network"),
      Error);
}
