// Model: the train/eval driver (MindSpore's Model).
//
//   Model model(net, loss, opt, {.metrics = {"accuracy"}});
//   model.train(/*epochs=*/10, train, {LossMonitor(100), ProgressBar()});
//   auto m = model.eval(test);  // m["accuracy"], m["loss"]
//
//   Model evaluator(net, loss);  // no optimizer: eval() only, e.g. of a loaded checkpoint
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
#include "optim/lr_scheduler.h"
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
  // A schedule of the Model's optimizer, stepped after every optimizer step or
  // after every epoch, as its interval() says (optim/lr_scheduler.h).
  optim::LRScheduler* scheduler = nullptr;
  // Evaluated with eval() at every epoch's end (collective, like eval()); the
  // figures reach the callbacks in EpochEnd::valid (HistoryWriter plots them).
  const data::BatchDataset* valid_dataset = nullptr;
  // Throw minidl::Error naming the step when the loss (the mean over ranks, so
  // every rank stops at the same step) is NaN or infinite; false trains on.
  bool stop_on_nonfinite_loss = true;
};

class Model {
 public:
  Model(nn::Cell& network, nn::Cell& loss_fn, optim::Optimizer& optimizer, ModelOptions options = {});
  // Without an optimizer: eval() only; train() throws minidl::Error.
  Model(nn::Cell& network, nn::Cell& loss_fn, ModelOptions options = {});
  ~Model();

  // Trains for `epochs` passes over `dataset`; returns the steps taken.
  // Throws minidl::Error when the Model has no optimizer, or options.scheduler
  // drives another optimizer.
  int64_t train(int64_t epochs, const data::BatchDataset& dataset,
                std::vector<CallbackRef> callbacks = {}, TrainOptions options = {});
  // Mean loss and accuracy over the whole dataset, in eval mode, without
  // gradients. Whenever the set is split over ranks, each rank evaluates its
  // shard and the loss sums, correct counts and sample counts are summed over
  // ranks, so every rank gets the figures of the whole set, as one rank would:
  // under DataParallel a set not sharded yet is sharded by rank, and a sharded
  // set (shard(rank(), world_size()), the only sharding accepted with more than
  // one shard) leaves out the repeats that pad the shards to equal length.
  // Collective then: every rank must call it. An unsharded set outside
  // DataParallel is evaluated whole on every rank.
  std::map<std::string, double> eval(const data::BatchDataset& dataset);

  // The cell a step calls: the network, or its DataParallel wrapper.
  nn::Cell& network() { return *train_network_; }

 private:
  nn::Cell& network_;
  nn::Cell& loss_fn_;
  optim::Optimizer* optimizer_;  // null: eval only
  ModelOptions options_;
  std::shared_ptr<nn::Cell> wrapper_;  // DataParallel, when asked for
  nn::Cell* train_network_;
};

}  // namespace minidl
