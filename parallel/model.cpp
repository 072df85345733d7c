#include "parallel/model.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iomanip>

#include "framework/ops.h"
#include "parallel/data_parallel.h"
#include "parallel/init.h"
#include "parallel/timeline.h"

namespace minidl {
namespace {

// Correct predictions in a batch: argmax of logits [B, C] against labels [B].
int64_t count_correct(const Tensor& logits, const Tensor& labels) {
  if (!logits.defined() || logits.dim() != 2) return 0;
  Tensor pred = argmax(logits.detach());
  Tensor lab = labels.to(kInt64);
  const int64_t *p = pred.data<int64_t>(), *l = lab.data<int64_t>();
  int64_t n = 0;
  for (int64_t i = 0; i < pred.numel(); ++i) n += p[i] == l[i];
  return n;
}

}  // namespace

Model::Model(nn::Cell& network, nn::Cell& loss_fn, optim::Optimizer& optimizer, ModelOptions options)
    : network_(network), loss_fn_(loss_fn), optimizer_(optimizer), options_(std::move(options)),
      train_network_(&network) {
  for (const auto& m : options_.metrics)
    MINIDL_CHECK(m == "accuracy" || m == "loss", "Model: unknown metric '", m,
                 "' (expected \"accuracy\" or \"loss\")");
  if (options_.parallel == ParallelMode::DataParallel && !dynamic_cast<parallel::DataParallel*>(&network)) {
    MINIDL_CHECK(parallel::is_initialized(), "Model: ParallelMode::DataParallel needs parallel::init() first");
    MINIDL_CHECK(!dynamic_cast<TrainStep*>(&network), "Model: ParallelMode::DataParallel cannot wrap ",
                 network.type_name(), " from outside (it runs its own backward); build it around a "
                 "DataParallel instead, e.g. GradAccumulation(DataParallel(net), m), and shard the data");
    wrapper_ = std::make_shared<parallel::DataParallel>(
        network, parallel::DataParallelOptions{.bucket_bytes = options_.bucket_bytes});
    train_network_ = wrapper_.get();
  }
}

Model::~Model() = default;

int64_t Model::train(int64_t epochs, const data::BatchDataset& dataset,
                     std::vector<CallbackRef> callbacks, TrainOptions options) {
  MINIDL_CHECK(epochs >= 0, "Model::train: expected epochs >= 0, got ", epochs);
  const bool distributed = parallel::is_initialized() && parallel::world_size() > 1;
  const int rank = distributed ? parallel::rank() : 0, world = distributed ? parallel::world_size() : 1;
  const data::BatchDataset ds =
      wrapper_ && dataset.dataset().num_shards() == 1
          ? dataset.dataset().shard(rank, world).batch(dataset.batch_size(), dataset.drop_remainder())
          : dataset;
  const int64_t steps_per_epoch = ds.num_batches();
  if (distributed)  // what the ranks must agree on, or they wait for each other forever
    parallel::world().check_same(
        "Model::train",
        {{"batch size", cat(ds.batch_size())}, {"steps per epoch", cat(steps_per_epoch)},
         {"epochs", cat(epochs)}, {"max_steps", cat(options.max_steps)},
         {"stop_on_nonfinite_loss", cat(options.stop_on_nonfinite_loss)},
         {"optimizer", cat(optimizer_.name(), " lr ", std::setprecision(17), optimizer_.lr())}});
  TrainBegin begin{epochs, steps_per_epoch, ds.batch_size(), rank, world, &network_};
  for (auto& cb : callbacks) {
    cb->rank_ = begin.rank;
    cb->network_ = &network_;
    cb->on_train_begin(begin);
  }
  int64_t global_step = 0;
  using clock = std::chrono::steady_clock;
  for (int64_t epoch = 1; epoch <= epochs; ++epoch) {
    train_network_->train();
    EpochEnd summary{epoch, 0, 0, 0, 0};
    auto epoch_start = clock::now();
    int64_t step = 0;
    for (auto& batch : ds.epoch(epoch - 1)) {
      if (options.max_steps >= 0 && global_step >= options.max_steps) break;
      auto t0 = clock::now();
      parallel::Timeline::set_step(global_step + 1);
      parallel::TimelineScope step_scope("step", "step");  // the events: parallel/timeline.h
      optimizer_.zero_grad();
      Tensor loss, logits;
      if (auto* own = dynamic_cast<TrainStep*>(train_network_)) {
        parallel::TimelineScope scope("forward and backward", "compute");
        StepOutput out = own->forward_backward(batch.data, batch.labels, loss_fn_);
        loss = out.loss;
        logits = out.logits;
      } else {
        {
          parallel::TimelineScope scope("forward", "compute");
          logits = (*train_network_)(batch.data);
          loss = loss_fn_(logits, batch.labels);
        }
        parallel::TimelineScope scope("backward", "compute");
        loss.backward();
      }
      {
        parallel::TimelineScope scope("optimizer step", "compute");
        optimizer_.step();
      }
      // [loss, correct, samples], summed over ranks when distributed
      double figures[3] = {loss.item(), static_cast<double>(count_correct(logits, batch.labels)),
                           static_cast<double>(batch.data.size(0))};
      if (distributed) {
        parallel::TimelineScope scope("reduce metrics", "communication");  // waits for every rank
        parallel::world().allreduce(figures, 3);
      }
      StepEnd s;
      s.epoch = epoch;
      s.step = ++step;
      s.global_step = ++global_step;
      s.steps_per_epoch = steps_per_epoch;
      s.samples = static_cast<int64_t>(figures[2]);
      s.loss = figures[0] / world;
      s.accuracy = figures[1] / std::max(1.0, figures[2]);
      s.seconds = std::chrono::duration<double>(clock::now() - t0).count();
      MINIDL_CHECK(std::isfinite(s.loss) || !options.stop_on_nonfinite_loss,
                   "Model::train: the loss is ", s.loss, " at step ", s.global_step, " (epoch ",
                   epoch, ", step ", step, " of ", steps_per_epoch,
                   "); stopping. A learning rate too high, or NaN/inf in the data? "
                   "(TrainOptions::stop_on_nonfinite_loss = false trains on)");
      summary.steps = step;
      summary.samples += s.samples;
      summary.mean_loss += (s.loss - summary.mean_loss) / step;
      for (auto& cb : callbacks) cb->on_step_end(s);
    }
    summary.seconds = std::chrono::duration<double>(clock::now() - epoch_start).count();
    if (step > 0)
      for (auto& cb : callbacks) cb->on_epoch_end(summary);
    if (options.max_steps >= 0 && global_step >= options.max_steps) break;
  }
  parallel::Timeline::set_step(0);
  for (auto& cb : callbacks) cb->on_train_end();
  return global_step;
}

std::map<std::string, double> Model::eval(const data::BatchDataset& dataset) {
  NoGradGuard no_grad;
  network_.eval();
  double loss_sum = 0;
  int64_t correct = 0, total = 0;
  for (auto& batch : dataset.epoch(0)) {
    Tensor logits = network_(batch.data);
    const int64_t n = batch.data.size(0);
    loss_sum += loss_fn_(logits, batch.labels).item() * n;
    correct += count_correct(logits, batch.labels);
    total += n;
  }
  network_.train();
  MINIDL_CHECK(total > 0, "Model::eval: the dataset is empty");
  return {{"accuracy", static_cast<double>(correct) / total}, {"loss", loss_sum / total}};
}

}  // namespace minidl
