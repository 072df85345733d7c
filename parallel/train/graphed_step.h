// GraphedStep: one whole training step (zero the gradients in place,
// loss_fn(network(data), labels), backward, optimizer step) captured as a
// CUDA graph and replayed (framework/cuda_graph.h): a TrainStep (train_step.h),
// the one Model makes with ModelOptions::cuda_graph, or for a loop a user
// drives by hand. Recorded as "step (CUDA graph)" on the timeline.
//
//   parallel::GraphedStep step(net, loss_fn, optimizer);   // parameters on CUDA
//   for (auto& batch : train.pin_memory(Device::CUDA).epoch(e)) {
//     StepOutput out = step(batch.data, batch.labels);    // out.loss on the GPU
//   }
//
// The first `warmup` calls run eagerly (they create the gradients and the
// optimizer's state). The next call whose batch has the shape of the call
// before captures the step for that shape and replays it; later calls of
// that shape copy the batch into the graph's input tensors, feed the
// optimizer its learning rate and step counts (set_lr and schedules work)
// and replay. A batch of another shape (the last of an epoch) runs eagerly,
// as does a call after the parameters, gradients or optimizer state were
// replaced (zero_grad() with set_to_none, net.to(), load_state_dict): the
// next call captures anew.
// Every call leaves the same bits as eager steps would (tests/framework/
// test_graph.cpp), on a GPU wherever the kernels are deterministic: index_add
// (Embedding's backward) adds with atomics there, eager or captured. The outputs are the graph's tensors, overwritten
// by the next call: clone what you keep.
// Throws minidl::Error when the parameters are not on a device that can
// capture graphs, or when the step cannot be captured (dropout in training
// mode, a host read inside the network: framework/cuda_graph.h says what).
#pragma once
#include <cstdint>
#include <vector>

#include "framework/cuda_graph.h"
#include "nn/cell.h"
#include "optim/optimizer.h"
#include "parallel/train/train_step.h"

namespace minidl::parallel {

class GraphedStep : public TrainStep {
 public:
  GraphedStep(nn::Cell& network, nn::Cell& loss_fn, optim::Optimizer& optimizer, int warmup = 1);
  // data, labels on the CPU (pinned best) or the GPU
  StepOutput operator()(const Tensor& data, const Tensor& labels) override;
  int64_t replays() const { return replays_; }  // calls that replayed the graph (the capture's included)
  // The kernel launches of one step, all in the one graph launch (0 before
  // the capture): what an eager step launches one by one.
  int64_t kernels_per_step() const { return graph_.kernel_launches(); }

 private:
  StepOutput eager(const Tensor& data, const Tensor& labels);
  void capture(const Tensor& data, const Tensor& labels);

  nn::Cell& network_;
  nn::Cell& loss_fn_;
  optim::Optimizer& optimizer_;
  int warmup_;
  int64_t calls_ = 0, replays_ = 0;
  Device device_;
  std::vector<const void*> memory() const;  // of the parameters, gradients, optimizer state
  std::vector<const void*> captured_memory_, eager_memory_;
  Shape last_data_, last_labels_;  // the last eager call's batch shapes
  StepOutput last_;  // its outputs (their shapes size the graph's); none after a replay
  cuda::Graph graph_;
  Tensor data_, labels_;  // the graph's inputs, and its outputs below
  StepOutput out_;
};

}  // namespace minidl::parallel
