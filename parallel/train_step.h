// TrainStep: a network that runs its own forward and backward for a batch.
// Model::train calls forward_backward() instead of computing
// loss_fn(network(data), labels).backward() itself, then steps the optimizer.
// GradAccumulation is one (it splits the batch into micro batches).
#pragma once
#include "framework/tensor.h"
#include "nn/cell.h"

namespace minidl {

struct StepOutput {
  Tensor loss;    // the scalar the step reports (detached)
  Tensor logits;  // [B, C] predictions for the whole batch (detached), for accuracy
};

class TrainStep {
 public:
  virtual ~TrainStep() = default;
  // Leaves the batch's gradients in the parameters' .grad().
  virtual StepOutput forward_backward(const Tensor& data, const Tensor& labels, nn::Cell& loss_fn) = 0;
};

}  // namespace minidl
