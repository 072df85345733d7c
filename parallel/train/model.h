// Model: the train/eval driver (MindSpore's Model).
//
//   Model model(net, loss, opt, {.metrics = {"accuracy"}});
//   model.train(/*epochs=*/10, train, {LossMonitor(100), ProgressBar()});
//   auto m = model.eval(test);  // m["accuracy"], m["loss"]
//
//   Model evaluator(net, loss);  // no optimizer: eval() only, e.g. of a loaded checkpoint
//   Model custom(net, loss, opt, {.train_step = my_step});  // a user's TrainStep per batch
//
// Each batch is one call of the Model's TrainStep (train_step.h), chosen once
// when the Model is made: ModelOptions::train_step when given (Keras's
// overridable train_step), else a parallel::GraphedStep with cuda_graph, a
// parallel::GradAccumulationStep for a GradAccumulation network, an EagerStep
// (zero the gradients, loss = loss_fn(network(data), labels), backward,
// optimizer step) otherwise.
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
#include <optional>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "nn/cell.h"
#include "optim/lr_scheduler.h"
#include "optim/optimizer.h"
#include "parallel/train/callbacks.h"
#include "parallel/train/train_step.h"

namespace minidl {

enum class ParallelMode { StandAlone, DataParallel };

struct ModelOptions {
  std::vector<std::string> metrics = {"accuracy"};  // eval() also always reports "loss"
  ParallelMode parallel = ParallelMode::StandAlone;
  size_t bucket_bytes = size_t{25} << 20;  // DataParallel's fusion buckets (PyTorch's 25 MiB)
  // Capture a training step as a CUDA graph after the first and replay it
  // (parallel::GraphedStep; the same bits as eager steps). Needs the network
  // on CUDA when the Model is made, StandAlone mode, a network that is no
  // GradAccumulation or DataParallel, and no train_step.
  bool cuda_graph = false;
  // The step train() calls per batch, in place of the Model's own: a user's
  // TrainStep, made with its network, loss and optimizer (those the Model is
  // given, so that eval() and checkpoints see what it trains). Not with
  // cuda_graph, nor with ParallelMode::DataParallel around a network that is
  // no DataParallel (the step would not see the wrapper): pass a DataParallel
  // network then, and shard the data.
  std::shared_ptr<TrainStep> train_step = nullptr;
};

// Where training stands; Model::train continues from here.
struct TrainPosition {
  int64_t epoch = 0;  // epochs completed: the epoch in progress, numbered from 0
  // Steps of that epoch taken. Equal to the steps per epoch when only the
  // epoch's end is left (the epoch-interval schedule step, the validation,
  // the callbacks' on_epoch_end): a checkpoint saved at its last step.
  int64_t step = 0;
  int64_t global_step = 0;  // steps taken in all
};

struct TrainOptions {
  int64_t max_steps = -1;  // stop after this many steps in this call (-1: no limit)
  // A schedule of the Model's optimizer, stepped after every optimizer step or
  // after every epoch, as its interval() says (optim/lr_scheduler.h).
  optim::LRScheduler* scheduler = nullptr;
  // Evaluated with eval() at every epoch's end (collective, like eval()); the
  // figures reach the callbacks in EpochEnd::valid (HistoryWriter plots them).
  const data::BatchDataset* valid_dataset = nullptr;
  // Throw minidl::Error naming the step when the loss (the mean over ranks, so
  // every rank stops at the same step) is NaN or infinite; false trains on.
  bool stop_on_nonfinite_loss = true;
  // Where to begin: epoch `start->epoch`'s data order from batch `start->step`
  // on, with the callbacks counting on from there. Unset: where this Model's
  // last train() stopped (a new Model: the beginning), so train() called twice
  // runs the next epoch's data order.
  std::optional<TrainPosition> start = std::nullopt;
};

class Model : public Resumable {
 public:
  Model(nn::Cell& network, nn::Cell& loss_fn, optim::Optimizer& optimizer, ModelOptions options = {});
  // Without an optimizer: eval() only; train() throws minidl::Error.
  Model(nn::Cell& network, nn::Cell& loss_fn, ModelOptions options = {});
  ~Model();
  // Throws minidl::Error for options that do not go together (each message
  // names them): an unknown metric; cuda_graph with DataParallel, a
  // GradAccumulation network or a train_step; ParallelMode::DataParallel
  // around a GradAccumulation network or with a train_step.

  // Trains `epochs` epochs over `dataset` from the start position (an epoch in
  // progress counts as one); returns the steps taken. An epoch-interval
  // schedule steps at the end of each completed epoch; on_epoch_end also comes
  // when max_steps stops an epoch early. Throws minidl::Error when the Model
  // has no optimizer, options.scheduler drives another optimizer, or the start
  // position does not fit the dataset's steps per epoch.
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

  // Where training stands: after the last step taken, or as load_checkpoint set it.
  const TrainPosition& position() const { return position_; }

  // Saves everything train() needs to continue bit for bit, in one safetensors
  // file (written atomically): the network's state_dict as "model.<name>", the
  // optimizer's state (optim/optimizer.h) as "optimizer.<name>" with its values
  // likewise in the metadata, the schedule's state ("scheduler.<key>") when
  // the running or last train() has one (it must still exist), the position ("epoch", "step",
  // "global_step") and the default generator's state ("rng"). The data order
  // needs nothing more: it is a function of the shuffle seed and the epoch.
  // Writes from the calling rank only; the state is the same on every rank,
  // so rank 0 saves (ModelCheckpoint does so).
  void save_checkpoint(const std::string& path) const override;
  // The file also keeps what fixed the data order (samples, batch size, steps
  // per epoch, shuffle seed, ranks); the next train() after load_checkpoint
  // throws minidl::Error naming any of these that differs, since the saved
  // position would index another order.
  // Restores a save_checkpoint() file into this Model's network, optimizer
  // (same kind and parameter sizes), `scheduler` (which the file must hold
  // when given, and must not otherwise) and the default generator, and sets
  // position(): train() then continues where the saved run stood. Every rank
  // reads the file itself. The whole state is checked, so that a resume is
  // exact or refused: the position's counts from 0 to 2^53 (step <=
  // global_step), every value of the weights finite, the optimizer's state
  // whole and consistent (optim::Optimizer::load_state_dict), the schedule's
  // period and base lr in range. Throws minidl::Error naming the file, the
  // entry and what was expected and got (not a training checkpoint, another
  // optimizer, a missing or misshapen tensor, a count out of range, NaN).
  const TrainPosition& load_checkpoint(const std::string& path,
                                       optim::LRScheduler* scheduler = nullptr);

  // The optimizer train() steps (null without one): after load_checkpoint it
  // holds the checkpoint's lr, as torch.optim's load_state_dict does.
  optim::Optimizer* optimizer() const { return optimizer_; }
  // The cell a step calls: the network, or its DataParallel wrapper.
  nn::Cell& network() { return *train_network_; }
  // The step train() calls for every batch, chosen when the Model was made
  // (null without an optimizer).
  TrainStep* train_step() const { return step_.get(); }

 private:
  nn::Cell& network_;
  nn::Cell& loss_fn_;
  optim::Optimizer* optimizer_;  // null: eval only
  optim::LRScheduler* scheduler_ = nullptr;  // the running or last train()'s
  TrainPosition position_;
  ModelOptions options_;
  std::shared_ptr<nn::Cell> wrapper_;  // DataParallel, when asked for
  nn::Cell* train_network_;
  std::shared_ptr<TrainStep> step_;  // made or given at construction
  // What fixes the data order a position indexes (samples, batch size, steps
  // per epoch, shuffle seed, ranks): the last train()'s, which checkpoints
  // keep, and a loaded checkpoint's, which the next train() must match.
  std::map<std::string, std::string> data_order_, resumed_order_;
};

}  // namespace minidl
