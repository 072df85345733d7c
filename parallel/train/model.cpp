#include "parallel/train/model.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <stdexcept>
#include <utility>

#include "framework/ops.h"
#include "framework/random.h"
#include "framework/safetensors.h"
#include "framework/threads.h"
#include "parallel/data_parallel.h"
#include "parallel/grad_accumulation.h"
#include "parallel/init.h"
#include "parallel/timeline.h"
#include "parallel/train/graphed_step.h"

namespace minidl {
namespace {

// A batch's loss and correct predictions (argmax of logits [B, C] against
// labels [B]; 0 for other shapes), counted on the logits' device and read
// with one copy to the host.
struct Figures {
  double loss, correct;
};
Figures batch_figures(const Tensor& loss, const Tensor& logits, const Tensor& labels) {
  NoGradGuard no_grad;
  Tensor l = loss.detach().to(kFloat32).reshape({1});
  if (!logits.defined() || logits.dim() != 2 || labels.numel() != logits.size(0))
    return {l.item(), 0};
  Tensor pred = argmax(logits.detach()).to(kFloat32);
  Tensor hits = sum(eq(pred, labels.to(logits.device()).to(kFloat32).reshape(pred.shape())));
  const std::vector<float> both = concat({l, hits.reshape({1})}).to_vector<float>();
  return {both[0], both[1]};
}

// Where the network's parameters live (the CPU for a network without any):
// batches go there.
Device device_of(nn::Cell& network) {
  std::vector<Tensor> params = network.parameters();
  return params.empty() ? Device::CPU : params.front().device();
}

// What every rank must agree on before training, as named facts (compared by
// Communicator::check_same): the schedule of steps, which samples each rank
// sees (the data set's size before sharding, its shuffle seed, its per-batch
// transforms), the optimizer and every hyperparameter, the LR schedule and
// the parameters' dtypes.
parallel::Communicator::Facts agreement(nn::Cell& network, const optim::Optimizer& optimizer,
                                        const data::BatchDataset& ds, int64_t steps_per_epoch,
                                        int64_t epochs, const TrainPosition& pos,
                                        const TrainOptions& options) {
  const std::optional<uint64_t> seed = ds.dataset().shuffle_seed();
  parallel::Communicator::Facts facts = {
      {"batch size", cat(ds.batch_size())}, {"steps per epoch", cat(steps_per_epoch)},
      {"epochs", cat(epochs)}, {"max_steps", cat(options.max_steps)},
      {"start", cat("epoch ", pos.epoch, " step ", pos.step, " global step ", pos.global_step)},
      {"stop_on_nonfinite_loss", cat(options.stop_on_nonfinite_loss)},
      {"samples before sharding", cat(ds.dataset().data().size(0))},
      {"shuffle seed", seed ? cat(*seed) : "none (file order)"},
      {"per-batch transforms (augment)", cat(ds.dataset().augments().size())},
      {"optimizer", optimizer.name()}};
  for (const auto& [name, value] : optimizer.hyperparameters())
    facts.emplace_back(cat(optimizer.name(), " ", name), value);
  const optim::LRScheduler* scheduler = options.scheduler;
  facts.emplace_back("LR schedule", scheduler ? scheduler->name() : "none");
  if (scheduler)
    for (const auto& [name, value] : scheduler->settings())
      facts.emplace_back(cat(scheduler->name(), " ", name), value);
  for (const auto& [name, p] : network.named_parameters())
    facts.emplace_back(cat("parameter ", name, " of dtype"), dtype_name(p.dtype()));
  return facts;
}

// What fixes the data order a training position indexes.
std::map<std::string, std::string> data_order(const data::BatchDataset& ds, int world) {
  const data::Dataset& d = ds.dataset();
  const std::optional<uint64_t> seed = d.shuffle_seed();
  return {{"samples", cat(d.data().size(0))},
          {"batch size", cat(ds.batch_size())},
          {"steps per epoch", cat(ds.num_batches())},
          {"shuffle seed", seed ? cat(*seed) : "none (file order)"},
          {"ranks", cat(world)}};
}

// Throws minidl::Error naming the entry ("<prefix><name>") and the element
// unless every value of every floating-point tensor is finite.
void check_finite(const TensorDict& tensors, const std::string& prefix) {
  for (const auto& [name, t] : tensors) {
    if (!is_floating(t.dtype())) continue;
    const std::vector<float> values = t.to_float_vector();
    for (size_t j = 0; j < values.size(); ++j)
      MINIDL_CHECK(std::isfinite(values[j]), "'", prefix, name, "' ", t.shape(), " element ", j,
                   " is ", values[j], ", expected a finite number");
  }
}

// The checkpoint's "epoch", "step" and "global_step", each from 0 to 2^53
// (optim::Optimizer::kMaxSteps: no real run's count is larger, and counting
// on from it cannot overflow), with step <= global_step.
TrainPosition position_in(const StateDict& state) {
  TrainPosition pos;
  for (auto [key, value] : {std::pair{"epoch", &pos.epoch}, std::pair{"step", &pos.step},
                            std::pair{"global_step", &pos.global_step}}) {
    *value = state.get_int(key, "checkpoint");
    MINIDL_CHECK(*value >= 0 && *value <= optim::Optimizer::kMaxSteps, "'", key, "' is ", *value,
                 ", expected 0 to 2^53");
  }
  MINIDL_CHECK(pos.step <= pos.global_step, "'step' is ", pos.step, " but 'global_step' ",
               pos.global_step, ", expected step <= global_step (the steps of the epoch in "
               "progress are counted in both)");
  return pos;
}

constexpr const char* kCheckpointFormat = "minidl.checkpoint";  // its value: the format's version

}  // namespace

Model::Model(nn::Cell& network, nn::Cell& loss_fn, optim::Optimizer& optimizer, ModelOptions options)
    : Model(network, loss_fn, std::move(options)) {
  optimizer_ = &optimizer;
  if (options_.train_step)
    step_ = options_.train_step;
  else if (options_.cuda_graph)
    step_ = std::make_shared<parallel::GraphedStep>(network, loss_fn, optimizer);
  else if (auto* accumulation = dynamic_cast<parallel::GradAccumulation*>(&network))
    step_ = std::make_shared<parallel::GradAccumulationStep>(*accumulation, loss_fn, optimizer);
  else
    step_ = std::make_shared<EagerStep>(*train_network_, loss_fn, optimizer);
}

Model::Model(nn::Cell& network, nn::Cell& loss_fn, ModelOptions options)
    : network_(network), loss_fn_(loss_fn), optimizer_(nullptr), options_(std::move(options)),
      train_network_(&network) {
  for (const auto& m : options_.metrics)
    MINIDL_CHECK(m == "accuracy" || m == "loss", "Model: unknown metric '", m,
                 "' (expected \"accuracy\" or \"loss\")");
  const bool accumulates = dynamic_cast<parallel::GradAccumulation*>(&network);
  const bool data_parallel = dynamic_cast<parallel::DataParallel*>(&network);
  MINIDL_CHECK(!options_.cuda_graph || !options_.train_step, "Model: cuda_graph makes the Model's "
               "own step (a parallel::GraphedStep), but ModelOptions::train_step gives one too; "
               "pass one or the other");
  MINIDL_CHECK(!options_.cuda_graph || (options_.parallel == ParallelMode::StandAlone &&
                                         !accumulates && !data_parallel),
               "Model: cuda_graph captures a plain network's step in StandAlone mode; ",
               network.type_name(), accumulates ? " runs its own backward" : " is data-parallel",
               ", which is not supported yet");
  if (options_.parallel == ParallelMode::DataParallel && !data_parallel) {
    MINIDL_CHECK(parallel::is_initialized(), "Model: ParallelMode::DataParallel needs parallel::init() first");
    MINIDL_CHECK(!accumulates, "Model: ParallelMode::DataParallel cannot wrap ",
                 network.type_name(), " from outside (it runs its own backward); build it around a "
                 "DataParallel instead, e.g. GradAccumulation(DataParallel(net), m), and shard the data");
    MINIDL_CHECK(!options_.train_step, "Model: ParallelMode::DataParallel would wrap ",
                 network.type_name(), " in a DataParallel that ModelOptions::train_step, made "
                 "without it, never calls; make the step with a parallel::DataParallel network, "
                 "give Model that network, and shard the data");
    wrapper_ = std::make_shared<parallel::DataParallel>(
        network, parallel::DataParallelOptions{.bucket_bytes = options_.bucket_bytes});
    train_network_ = wrapper_.get();
  }
}

Model::~Model() = default;

int64_t Model::train(int64_t epochs, const data::BatchDataset& dataset,
                     std::vector<CallbackRef> callbacks, TrainOptions options) {
  MINIDL_CHECK(epochs >= 0, "Model::train: expected epochs >= 0, got ", epochs);
  MINIDL_CHECK(optimizer_, "Model::train: this Model has no optimizer (Model(network, loss_fn) "
               "only evaluates); build it as Model(network, loss_fn, optimizer) to train");
  optim::LRScheduler* scheduler = options.scheduler;
  MINIDL_CHECK(!scheduler || &scheduler->optimizer() == optimizer_, "Model::train: the scheduler "
               "drives another ", scheduler->optimizer().name(), " than the Model's ",
               optimizer_->name(), "; build it on the optimizer the Model was given");
  const bool distributed = parallel::is_initialized() && parallel::world_size() > 1;
  const int rank = distributed ? parallel::rank() : 0, world = distributed ? parallel::world_size() : 1;
  const data::BatchDataset ds =
      wrapper_ && dataset.dataset().num_shards() == 1
          ? dataset.dataset().shard(rank, world).batch(dataset.batch_size(), dataset.drop_remainder())
          : dataset;
  const int64_t steps_per_epoch = ds.num_batches();
  TrainPosition pos = options.start.value_or(position_);
  // Checked once the ranks agree, so that every rank throws alike.
  if (distributed)  // what the ranks must agree on, or they wait for each other forever
    parallel::world().check_same(
        "Model::train", agreement(network_, *optimizer_, ds, steps_per_epoch, epochs, pos, options));
  data_order_ = data_order(ds, world);
  for (const auto& [what, saved] : std::exchange(resumed_order_, {})) {
    const auto now = data_order_.find(what);
    MINIDL_CHECK(now != data_order_.end() && now->second == saved, "Model::train: the checkpoint "
                 "was saved training with ", what, " ", saved, ", this run has ",
                 now == data_order_.end() ? "none" : now->second, "; its position would index "
                 "another data order (resume with the same data, batch size, shuffle seed and ranks; the "
                 "examples' --init takes a checkpoint's weights alone, to go on otherwise)");
  }
  MINIDL_CHECK(pos.epoch >= 0 && pos.step >= 0 && pos.step <= steps_per_epoch &&
                   pos.global_step >= pos.step,
               "Model::train: cannot start at epoch ", pos.epoch, " step ", pos.step,
               " (global step ", pos.global_step, ") with ", steps_per_epoch,
               " steps per epoch (expected 0 <= step <= steps per epoch <= global step)");
  const TrainBegin begin{pos.epoch + epochs, steps_per_epoch, ds.batch_size(), rank, world,
                         &network_, this};
  CallbackList run_callbacks(std::move(callbacks));
  run_callbacks.train_begin(begin);
  scheduler_ = scheduler;
  int64_t taken = 0;  // steps in this call
  const Device device = device_of(network_);
  using clock = std::chrono::steady_clock;
  for (int64_t e = 0; e < epochs; ++e) {
    const int64_t epoch = pos.epoch + 1;  // callbacks count from 1
    train_network_->train();
    EpochEnd summary{epoch, 0, 0, 0, 0, {}};
    auto epoch_start = clock::now();
    int64_t run = 0;  // steps of this epoch in this call
    // Gathered into host memory pinned for the device, so these copies are
    // queued without the host waiting (and release each pinned block in
    // stream order once the copy has read it). Each batch goes up one step
    // ahead, before the step in flight is read back: on CUDA its copy runs on
    // a stream of its own and overlaps that step's compute.
    auto more = [&](int64_t steps) { return options.max_steps < 0 || steps < options.max_steps; };
    auto up = [&](data::Batch b) {
      b.data = b.data.to(device);
      b.labels = b.labels.to(device);
      return b;
    };
    data::Epoch batches = ds.pin_memory(device).epoch(pos.epoch, pos.step);
    auto it = batches.begin();
    std::optional<data::Batch> ahead;
    if (it != batches.end() && more(taken)) ahead = up(std::move(*it));
    while (ahead) {
      data::Batch batch = std::move(*ahead);
      ahead.reset();
      auto t0 = clock::now();
      parallel::Timeline::set_step(pos.global_step + 1);
      parallel::TimelineScope step_scope("step", "step");  // the events: parallel/timeline.h
      const double lr = optimizer_->lr();
      const StepOutput out = (*step_)(batch.data, batch.labels);
      MINIDL_CHECK(out.loss.defined(), "Model::train: the TrainStep returned no loss at step ",
                   pos.global_step + 1, " (expected StepOutput::loss, a scalar)");
      if (scheduler && scheduler->interval() == optim::Interval::Step) scheduler->step();
      if (++it != batches.end() && more(taken + 1)) ahead = up(std::move(*it));
      // [loss, correct, samples], summed over ranks when distributed
      const Figures f = batch_figures(out.loss, out.logits, batch.labels);
      double figures[3] = {f.loss, f.correct, static_cast<double>(batch.data.size(0))};
      if (distributed) {
        parallel::TimelineScope scope("reduce metrics", "communication");  // waits for every rank
        parallel::world().allreduce(figures, 3);
      }
      ++pos.step, ++pos.global_step, ++taken, ++run;
      position_ = pos;
      StepEnd s;
      s.epoch = epoch;
      s.step = pos.step;
      s.global_step = pos.global_step;
      s.steps_per_epoch = steps_per_epoch;
      s.samples = static_cast<int64_t>(figures[2]);
      s.loss = figures[0] / world;
      s.accuracy = figures[1] / std::max(1.0, figures[2]);
      s.seconds = std::chrono::duration<double>(clock::now() - t0).count();
      s.lr = lr;
      MINIDL_CHECK(std::isfinite(s.loss) || !options.stop_on_nonfinite_loss,
                   "Model::train: the loss is ", s.loss, " at step ", s.global_step, " (epoch ",
                   epoch, ", step ", s.step, " of ", steps_per_epoch,
                   "); stopping. A learning rate too high, or NaN/inf in the data? "
                   "(TrainOptions::stop_on_nonfinite_loss = false trains on)");
      summary.samples += s.samples;
      summary.mean_loss += (s.loss - summary.mean_loss) / run;
      run_callbacks.step_end(s);
    }
    summary.steps = pos.step;
    summary.seconds = std::chrono::duration<double>(clock::now() - epoch_start).count();
    // An epoch is complete when all its steps are taken (max_steps may stop it
    // early); only then does an epoch schedule step and the position move on.
    const bool complete = steps_per_epoch > 0 && pos.step == steps_per_epoch;
    if (complete) {
      if (scheduler && scheduler->interval() == optim::Interval::Epoch) scheduler->step();
      pos = {pos.epoch + 1, 0, pos.global_step};
      position_ = pos;
    }
    if ((run > 0 || complete) && options.valid_dataset) summary.valid = eval(*options.valid_dataset);
    if (run > 0 || complete)
      run_callbacks.epoch_end(summary);
    if (!complete) break;
    if (options.max_steps >= 0 && taken >= options.max_steps) break;
  }
  parallel::Timeline::set_step(0);
  run_callbacks.train_end();
  return taken;
}

void Model::save_checkpoint(const std::string& path) const {
  MINIDL_CHECK(optimizer_, "Model::save_checkpoint: this Model has no optimizer (nothing to resume); "
               "save the network's weights with network.save(path)");
  StateDict state;
  state.values[kCheckpointFormat] = "1";
  state.put("model", StateDict{network_.state_dict(), {}});
  state.put("optimizer", optimizer_->state_dict());
  if (scheduler_) state.put("scheduler", scheduler_->state_dict());
  state.set_int("epoch", position_.epoch);
  state.set_int("step", position_.step);
  state.set_int("global_step", position_.global_step);
  state.values["rng"] = default_generator().state();
  for (const auto& [what, value] : data_order_) state.values["data." + what] = value;
  save_safetensors(path, state.tensors, state.values);
}

const TrainPosition& Model::load_checkpoint(const std::string& path,
                                            optim::LRScheduler* scheduler) {
  MINIDL_CHECK(optimizer_, "Model::load_checkpoint: this Model has no optimizer to restore; load "
               "the network's weights with network.load(path)");
  StateDict state;
  state.tensors = load_safetensors(path, &state.values);
  const std::string what = cat("Model::load_checkpoint: ", path);
  MINIDL_CHECK(state.values.count(kCheckpointFormat), what, " is not a training checkpoint (no '",
               kCheckpointFormat, "' in its metadata; Model::save_checkpoint writes them). For "
               "weights only, load it with network.load(path) (--init)");
  try {
    const StateDict sched = state.take("scheduler");
    MINIDL_CHECK(sched.values.empty() == !scheduler, "the checkpoint ",
                 sched.values.empty() ? "has no" : "holds a", " learning-rate schedule's state but ",
                 scheduler ? "a scheduler was" : "no scheduler was", " given to restore");
    const TrainPosition pos = position_in(state);
    const TensorDict weights = state.take("model").tensors;
    check_finite(weights, "model.");
    network_.load_state_dict(weights);
    optimizer_->load_state_dict(state.take("optimizer"));
    if (scheduler) scheduler->load_state_dict(sched);
    default_generator().set_state(state.get("rng", "checkpoint"));
    position_ = pos;
    resumed_order_ = state.take("data").values;
  } catch (const Error& e) {
    throw Error(cat(what, ": ", e.what()));
  } catch (const std::invalid_argument& e) {  // a setter's check, should one slip through
    throw Error(cat(what, ": ", e.what()));
  }
  return position_;
}

std::map<std::string, double> Model::eval(const data::BatchDataset& dataset) {
  const bool distributed = parallel::is_initialized() && parallel::world_size() > 1;
  const int world = distributed ? parallel::world_size() : 1;
  const data::BatchDataset ds =
      options_.parallel == ParallelMode::DataParallel && dataset.dataset().num_shards() == 1
          ? dataset.dataset().shard(distributed ? parallel::rank() : 0, world)
                .batch(dataset.batch_size(), dataset.drop_remainder())
          : dataset;
  const data::Dataset& d = ds.dataset();
  const int64_t shards = d.num_shards();
  MINIDL_CHECK(shards == 1 || shards == world, "Model::eval: the dataset has ", shards,
               " shards but the world has ", world, " rank(s); shard it as shard(parallel::rank(), "
               "parallel::world_size()) or not at all");
  // Shard r holds positions r, r + S, ... of the epoch's order padded to a
  // multiple of S; positions from N on repeat the start (data/dataset.h).
  const int64_t n = d.data().size(0);
  const int64_t real = shards == 1 ? n : std::max<int64_t>(0, n - d.shard_id() + shards - 1) / shards;
  NoGradGuard no_grad;
  network_.eval();
  const Device device = device_of(network_);
  double figures[3] = {0, 0, 0};  // [loss sum, correct, samples]
  for (auto& batch : ds.pin_memory(device).epoch(0)) {
    const int64_t keep = std::min<int64_t>(batch.data.size(0), real - int64_t(figures[2]));
    if (keep <= 0) break;
    adapt_threads();  // no backward pass here to do it (framework/threads.h)
    Tensor x = batch.data.slice(0, keep).to(device), y = batch.labels.slice(0, keep).to(device);
    Tensor logits = network_(x);
    const Figures f = batch_figures(loss_fn_(logits, y), logits, y);
    figures[0] += f.loss * keep;
    figures[1] += f.correct;
    figures[2] += keep;
  }
  network_.train();
  if (shards > 1) parallel::world().allreduce(figures, 3);
  MINIDL_CHECK(figures[2] > 0, "Model::eval: the dataset is empty");
  return {{"accuracy", figures[1] / figures[2]}, {"loss", figures[0] / figures[2]}};
}

}  // namespace minidl
