// SGD and Momentum (heavy-ball or Nesterov), with PyTorch's update rules.
#pragma once
#include "optim/optimizer.h"

namespace minidl::optim {

// p -= lr * (g + weight_decay * p)
// With maximize (every optimizer's option, GroupOptions): g is -g throughout,
// as PyTorch's maximize, so that the parameters ascend.
// Throws std::invalid_argument for lr < 0 or weight_decay < 0.
class SGD : public Optimizer {
 public:
  SGD(std::vector<Tensor> params, double lr, double weight_decay = 0);
  // Parameter groups; `defaults` must set lr (options: lr, weight_decay, maximize).
  SGD(std::vector<ParamGroup> groups, GroupOptions defaults);
  double weight_decay() const { return param_groups()[0].options.weight_decay; }

 protected:
  void update(const UpdateArgs& args, const std::vector<size_t>& ready) override;
  void check_options(const UpdateArgs& args) const override;
  std::vector<StateSlot> state_slots() override { return {}; }
};

struct MomentumOptions {
  bool nesterov = false;
  double weight_decay = 0;  // L2: added to the gradient
  double dampening = 0;
  bool maximize = false;  // ascend: the gradient negated
};

// torch.optim.SGD with momentum:
//   d = g + weight_decay * p                  (g = -g first with maximize)
//   buf = d on a parameter's first update, else momentum * buf + (1 - dampening) * d
//   d = nesterov ? d + momentum * buf : buf
//   p -= lr * d
// momentum = 0 is plain SGD (no buffer). Throws std::invalid_argument for
// lr < 0, momentum < 0, weight_decay < 0, dampening outside [0, 1], and
// nesterov without momentum > 0 and dampening 0.
class Momentum : public Optimizer {
 public:
  Momentum(std::vector<Tensor> params, double lr, double momentum, MomentumOptions options = {});
  // Parameter groups; `defaults` must set lr (options: lr, momentum (default
  // 0), nesterov, dampening, weight_decay, maximize).
  Momentum(std::vector<ParamGroup> groups, GroupOptions defaults);
  double momentum() const { return param_groups()[0].options.momentum; }
  // The first group's nesterov, weight_decay, dampening and maximize.
  MomentumOptions options() const;
  // Parameter i's momentum buffer (undefined before its first update).
  const Tensor& momentum_buffer(size_t i) const { return buffers_.at(i); }

 protected:
  void update(const UpdateArgs& args, const std::vector<size_t>& ready) override;
  void check_options(const UpdateArgs& args) const override;
  // "momentum_buffer.<i>", required once a parameter is updated unless its momentum is 0
  std::vector<StateSlot> state_slots() override;

 private:
  std::vector<Tensor> buffers_;  // beside params_
};

}  // namespace minidl::optim
