// SGD and Momentum (heavy-ball or Nesterov), with PyTorch's update rules.
#pragma once
#include "optim/optimizer.h"

namespace minidl::optim {

// p -= lr * (g + weight_decay * p)
// Throws std::invalid_argument for lr < 0 or weight_decay < 0.
class SGD : public Optimizer {
 public:
  SGD(std::vector<Tensor> params, double lr, double weight_decay = 0);
  double weight_decay() const { return weight_decay_; }
  Settings hyperparameters() const override;

 protected:
  void update(const std::vector<size_t>& ready) override;

 private:
  double weight_decay_;
};

struct MomentumOptions {
  bool nesterov = false;
  double weight_decay = 0;  // L2: added to the gradient
  double dampening = 0;
};

// torch.optim.SGD with momentum:
//   d = g + weight_decay * p
//   buf = d on a parameter's first update, else momentum * buf + (1 - dampening) * d
//   d = nesterov ? d + momentum * buf : buf
//   p -= lr * d
// momentum = 0 is plain SGD (no buffer). Throws std::invalid_argument for
// lr < 0, momentum < 0, weight_decay < 0, dampening outside [0, 1], and
// nesterov without momentum > 0 and dampening 0.
class Momentum : public Optimizer {
 public:
  Momentum(std::vector<Tensor> params, double lr, double momentum, MomentumOptions options = {});
  double momentum() const { return momentum_; }
  const MomentumOptions& options() const { return opt_; }
  Settings hyperparameters() const override;
  // Parameter i's momentum buffer (undefined before its first update).
  const Tensor& momentum_buffer(size_t i) const { return buffers_.at(i); }
  std::vector<Tensor> state_tensors() const override { return buffers_; }

 protected:
  void update(const std::vector<size_t>& ready) override;
  // "momentum_buffer.<i>", required once a parameter is updated unless momentum is 0
  std::vector<StateSlot> state_slots() override;

 private:
  double momentum_;
  MomentumOptions opt_;
  std::vector<Tensor> buffers_;  // beside params_
};

}  // namespace minidl::optim
