#include "parallel/train/graphed_step.h"

#include "framework/backend/backend.h"
#include "parallel/timeline.h"

namespace minidl::parallel {

GraphedStep::GraphedStep(nn::Cell& network, nn::Cell& loss_fn, optim::Optimizer& optimizer,
                         int warmup)
    : network_(network), loss_fn_(loss_fn), optimizer_(optimizer), warmup_(warmup),
      device_(optimizer.parameters().front().device()) {
  MINIDL_CHECK(warmup >= 1, "GraphedStep: expected warmup >= 1 (the first step makes the "
               "gradients and the optimizer's state), got ", warmup);
  MINIDL_CHECK(device_ != Device::CPU && graph_ops(device_), "GraphedStep: the "
               "parameters are on ", device_name(device_), ", which cannot capture CUDA graphs; "
               "move the network to CUDA first (net.to(Device::CUDA))");
}

StepOutput GraphedStep::eager(const Tensor& data, const Tensor& labels) {
  optimizer_.zero_grad(false);
  Tensor logits = network_(data.to(device_));
  Tensor loss = loss_fn_(logits, labels.to(device_));
  loss.backward();
  optimizer_.step();
  last_data_ = data.shape(), last_labels_ = labels.shape();
  last_ = {loss.detach(), logits.detach()};
  eager_memory_ = memory();
  return last_;
}

std::vector<const void*> GraphedStep::memory() const {
  std::vector<const void*> at;
  for (const Tensor& p : optimizer_.parameters()) {
    const Tensor g = p.grad();
    at.push_back(p.raw_data_ptr());
    at.push_back(g.defined() ? g.raw_data_ptr() : nullptr);
  }
  for (const Tensor& t : optimizer_.state_tensors())
    at.push_back(t.defined() ? t.raw_data_ptr() : nullptr);
  return at;
}

void GraphedStep::capture(const Tensor& data, const Tensor& labels) {
  data_ = Tensor::empty(data.shape(), data.dtype(), device_);
  labels_ = Tensor::empty(labels.shape(), labels.dtype(), device_);
  out_.loss = Tensor::empty(last_.loss.shape(), last_.loss.dtype(), device_);
  out_.logits = Tensor::empty(last_.logits.shape(), last_.logits.dtype(), device_);
  captured_memory_ = memory();
  graph_.capture([&] {
    optimizer_.zero_grad(false);
    Tensor logits = network_(data_);
    Tensor loss = loss_fn_(logits, labels_);
    loss.backward();
    optimizer_.step();
    out_.loss.copy_(loss);
    out_.logits.copy_(logits);
  });
}

StepOutput GraphedStep::operator()(const Tensor& data, const Tensor& labels) {
  TimelineScope scope("step (CUDA graph)", "compute");
  ++calls_;
  if (graph_.captured() && memory() != captured_memory_) graph_.reset();  // the graph's are gone
  if (!graph_.captured() || data.shape() != data_.shape() || labels.shape() != labels_.shape()) {
    // Capture once an eager call of these shapes has made every gradient and
    // state the step touches, and nothing has replaced them since.
    const bool ready = calls_ > warmup_ && !graph_.captured() && last_.loss.defined() &&
                       data.shape() == last_data_ && labels.shape() == last_labels_ &&
                       memory() == eager_memory_;
    if (!ready) return eager(data, labels);
    capture(data, labels);  // recorded, not run: the replay below takes this step
  } else {
    graph_.feed([&] { optimizer_.step(); });
  }
  last_ = {};
  data_.copy_(data);
  labels_.copy_(labels);
  graph_.replay();
  ++replays_;
  return out_;
}

}  // namespace minidl::parallel
