// TrainStep: one training step on a batch (Keras's Model.train_step), made
// with what it needs (network, loss function, optimizer) and called by
// Model::train once per batch:
//
//   StepOutput out = step(batch.data, batch.labels);  // gradients zeroed, forward,
//                                                      // loss, backward, optimizer update
//
// Model picks its step once, when it is built (parallel/train/model.h):
// ModelOptions::train_step when given, else a GraphedStep with cuda_graph, a
// parallel::GradAccumulationStep for a GradAccumulation network, an EagerStep
// otherwise. A user's step overrides Model's (Keras's train_step):
//
//   struct MyStep : TrainStep {  // EagerStep, with room to change the gradients
//     nn::Cell& net; nn::Cell& loss_fn; optim::Optimizer& opt;
//     MyStep(nn::Cell& n, nn::Cell& l, optim::Optimizer& o) : net(n), loss_fn(l), opt(o) {}
//     StepOutput operator()(const Tensor& x, const Tensor& y) override {
//       opt.zero_grad();
//       Tensor logits = net(x), loss = loss_fn(logits, y);
//       loss.backward();
//       opt.step();
//       return {loss.detach(), logits.detach()};
//     }
//   };
//   Model model(net, loss_fn, opt, {.train_step = std::make_shared<MyStep>(net, loss_fn, opt)});
#pragma once
#include "framework/tensor.h"
#include "nn/cell.h"
#include "optim/optimizer.h"

namespace minidl {

struct StepOutput {
  Tensor loss;    // the scalar the step reports (detached)
  Tensor logits;  // [B, C] for the whole batch (detached), for accuracy; may be undefined
};

class TrainStep {
 public:
  virtual ~TrainStep() = default;
  // data [B, ...], labels [B, ...] (on the network's device when Model calls):
  // zeroes the gradients, computes the batch's gradients and updates the
  // parameters. Returns the batch's loss and logits.
  virtual StepOutput operator()(const Tensor& data, const Tensor& labels) = 0;
};

// The plain step: optimizer.zero_grad(), logits = network(data),
// loss = loss_fn(logits, labels), loss.backward(), optimizer.step(). A
// DataParallel network averages the gradients over ranks during backward.
// Records "forward", "backward" and "optimizer step" on the timeline.
class EagerStep : public TrainStep {
 public:
  EagerStep(nn::Cell& network, nn::Cell& loss_fn, optim::Optimizer& optimizer);
  StepOutput operator()(const Tensor& data, const Tensor& labels) override;

 private:
  nn::Cell& network_;
  nn::Cell& loss_fn_;
  optim::Optimizer& optimizer_;
};

}  // namespace minidl
