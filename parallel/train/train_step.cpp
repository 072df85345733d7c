#include "parallel/train/train_step.h"

#include "parallel/timeline.h"

namespace minidl {

EagerStep::EagerStep(nn::Cell& network, nn::Cell& loss_fn, optim::Optimizer& optimizer)
    : network_(network), loss_fn_(loss_fn), optimizer_(optimizer) {}

StepOutput EagerStep::operator()(const Tensor& data, const Tensor& labels) {
  optimizer_.zero_grad();
  Tensor logits, loss;
  {
    parallel::TimelineScope scope("forward", "compute");
    logits = network_(data);
    loss = loss_fn_(logits, labels);
  }
  {
    parallel::TimelineScope scope("backward", "compute");
    loss.backward();
  }
  parallel::TimelineScope scope("optimizer step", "compute");
  optimizer_.step();
  return {loss.detach(), logits.detach()};
}

}  // namespace minidl
