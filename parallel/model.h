// Model: the train/eval driver (MindSpore's Model).
//
//   Model model(net, loss, opt, {.metrics = {"accuracy"}});
//   model.train(/*epochs=*/10, train, {LossMonitor(100), ProgressBar()});
//   auto m = model.eval(test);  // m["accuracy"], m["loss"]
//
// One step: zero the gradients, loss = loss_fn(network(data), labels),
// backward, optimizer step. A network that is a TrainStep (GradAccumulation)
// runs its own forward and backward instead.
// With {.parallel = ParallelMode::DataParallel} the network is wrapped in
// DataParallel (parameters broadcast from rank 0, gradients averaged over
// ranks during backward), and a training set that is not sharded yet is
// sharded by rank (`.shard(rank(), world_size())`). Whenever the world has
// more than one rank, the loss callbacks see is the mean over ranks, and the
// printing callbacks speak on rank 0 only. parallel::init() must come first.
// On more than one rank, train() first checks that every rank has the same
// batch size, steps per epoch, epochs, TrainOptions, optimizer and learning
// rate, and throws minidl::Error on every rank naming the rank and both values
// otherwise (Communicator::check_same). Collectives that still wait longer
// than MINIDL_TIMEOUT seconds end the job (parallel/backend/timeout.h).
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "nn/cell.h"
#include "optim/optimizer.h"
#include "parallel/callbacks.h"
#include "parallel/train_step.h"

namespace minidl {

enum class ParallelMode { StandAlone, DataParallel };

struct ModelOptions {
  std::vector<std::string> metrics = {"accuracy"};  // eval() also always reports "loss"
  ParallelMode parallel = ParallelMode::StandAlone;
  size_t bucket_bytes = size_t{25} << 20;  // DataParallel's fusion buckets (PyTorch's 25 MiB)
};

struct TrainOptions {
  int64_t max_steps = -1;  // stop after this many steps in all (-1: no limit)
  // Throw minidl::Error naming the step when the loss (the mean over ranks, so
  // every rank stops at the same step) is NaN or infinite; false trains on.
  bool stop_on_nonfinite_loss = true;
};

class Model {
 public:
  Model(nn::Cell& network, nn::Cell& loss_fn, optim::Optimizer& optimizer, ModelOptions options = {});
  ~Model();

  // Trains for `epochs` passes over `dataset`; returns the steps taken.
  int64_t train(int64_t epochs, const data::BatchDataset& dataset,
                std::vector<CallbackRef> callbacks = {}, TrainOptions options = {});
  // Mean loss and accuracy over the whole dataset (summed over ranks when
  // data parallel), in eval mode, without gradients.
  std::map<std::string, double> eval(const data::BatchDataset& dataset);

  // The cell a step calls: the network, or its DataParallel wrapper.
  nn::Cell& network() { return *train_network_; }

 private:
  nn::Cell& network_;
  nn::Cell& loss_fn_;
  optim::Optimizer& optimizer_;
  ModelOptions options_;
  std::shared_ptr<nn::Cell> wrapper_;  // DataParallel, when asked for
  nn::Cell* train_network_;
};

}  // namespace minidl
