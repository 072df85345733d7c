// GradAccumulation: train on a batch B in micro_size slices, one optimizer
// update per batch (MindSpore's mindspore.parallel.GradAccumulation).
//
//   parallel::GradAccumulation ga(net, /*micro_size=*/4);
//   optim::SGD opt(net.trainable_params(), /*lr=*/0.01);
//   Model model(ga, loss, opt);               // its step: GradAccumulationStep (below)
//   model.train(/*epochs=*/10, train, {LossMonitor(100)});
//
// forward_backward(data [B, ...], labels [B, ...], loss_fn) splits dim 0 into
// micro_size contiguous slices (views, no copy) of sizes differing by at most
// one (B = 10, micro_size = 4: 3, 3, 2, 2) and runs forward, loss and backward
// on each in turn; the gradients accumulate in the parameters' .grad(). A
// batch with fewer samples than micro_size (an epoch's short last batch: 8,000
// samples in batches of 7 end with 6) is taken as B micro batches of one
// sample, as torch.chunk splits it, rather than refused after a whole epoch of
// training; in mean mode its update is still the whole batch's. Only
// one slice's activations are alive at a time, so activation memory is about
// that of a batch of B / micro_size (the gradients are as large as ever, and
// autograd's out-of-place accumulation briefly holds a parameter's old
// gradient, the slice's gradient and their sum).
//
// What the gradients and the reported loss are (GradAccumulationOptions):
//   sum_loss = false (the default): the MEANS over micro batches. Slice i of
//     n_i samples contributes its loss L_i weighted by n_i / B, so the sum is
//     the full-batch loss and its gradient the full-batch gradient: the update
//     equals the update of the plain network on the whole batch, even when B
//     does not divide evenly. This assumes loss_fn averages over the samples
//     of its input (mean reduction, the losses' default). An nn::Loss with
//     Reduction::Sum is recognised and weighted 1 (the sum of sums is the
//     full-batch sum); Reduction::None is rejected.
//   sum_loss = true: MindSpore's parallel wrapper. The loss is L_1 + ... + L_m
//     (each L_i the loss of its slice as loss_fn computes it; a short batch of
//     B < micro_size samples sums its B one-sample losses) and the
//     gradients are that sum's gradient: with a mean loss and an even split,
//     micro_size times the full-batch loss and gradient (as with SGD at
//     micro_size times the learning rate). The tutorial's log
//     (`loss is 7.79...` at step 100 for a 10-class problem) shows this sum.
//
// Data parallelism: when `network` is a DataParallel, the first micro_size - 1
// slices run inside its no_sync() guard, so the ranks communicate once per
// batch (during the last slice's backward), not once per slice; the result is
// the mean over ranks of each rank's accumulated gradient. Compose it in this
// order, GradAccumulation(DataParallel(net)), with each rank's batch its own
// shard (a DataParallel around the GradAccumulation would communicate for
// every slice). Give Model the GradAccumulation in ParallelMode::StandAlone
// and shard the dataset yourself, as examples/mlp_mnist.cpp does (Model
// refuses ParallelMode::DataParallel for a GradAccumulation, since a
// DataParallel around it would communicate for every slice).
//
// forward(x) is network(x) on the whole batch (eval and inference).
// The network is registered as the child "network": this cell's parameter
// names are "network.fc1.weight", ...; save or load the inner network for
// checkpoints keyed like the plain model.
//
// Errors (minidl::Error): micro_size < 1 at construction; at the step, an
// empty batch, labels whose dim 0 differs from the data's, a loss that is not
// a scalar. A batch size below micro_size for every batch is the caller's to
// refuse up front (examples/mlp_mnist.cpp does, for --batch and --micro-size).
#pragma once
#include <cstdint>

#include "nn/cell.h"
#include "optim/optimizer.h"
#include "parallel/train/train_step.h"

namespace minidl::parallel {

class DataParallel;

struct GradAccumulationOptions {
  bool sum_loss = false;  // false: means over micro batches; true: MindSpore's sum (see above)
};

class GradAccumulation : public nn::Cell {
 public:
  GradAccumulation(nn::Cell& network, int64_t micro_size, GradAccumulationOptions options = {});

  using nn::Cell::forward;
  Tensor forward(const Tensor& x) override;                   // network(x)
  Tensor forward(const Tensor& a, const Tensor& b) override;  // network(a, b)

  // Leaves the batch's accumulated gradients in the parameters' .grad() (added
  // to any already there: zero them first, as GradAccumulationStep does). Returns the loss
  // (a detached float32 scalar) and the slices' logits concatenated [B, ...].
  StepOutput forward_backward(const Tensor& data, const Tensor& labels, nn::Cell& loss_fn);

  nn::Cell& network() const { return network_; }
  int64_t micro_size() const { return micro_size_; }
  const GradAccumulationOptions& options() const { return options_; }

 private:
  nn::Cell& network_;
  DataParallel* data_parallel_;  // network_ itself, when it is one
  int64_t micro_size_;
  GradAccumulationOptions options_;
};

// GradAccumulation's TrainStep (parallel/train/train_step.h), the one Model
// makes for a GradAccumulation network: optimizer.zero_grad(),
// network.forward_backward(data, labels, loss_fn) (recorded as "forward and
// backward" on the timeline), one optimizer.step() ("optimizer step").
class GradAccumulationStep : public TrainStep {
 public:
  GradAccumulationStep(GradAccumulation& network, nn::Cell& loss_fn, optim::Optimizer& optimizer);
  StepOutput operator()(const Tensor& data, const Tensor& labels) override;

 private:
  GradAccumulation& network_;
  nn::Cell& loss_fn_;
  optim::Optimizer& optimizer_;
};

}  // namespace minidl::parallel
