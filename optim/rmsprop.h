// RMSprop, with torch.optim.RMSprop's update rule.
#pragma once
#include "optim/optimizer.h"

namespace minidl::optim {

struct RMSpropOptions {
  double alpha = 0.99;  // the square average's smoothing
  double eps = 1e-8;
  double weight_decay = 0;  // L2: added to the gradient
  double momentum = 0;
  bool centered = false;  // divide by the gradient's estimated variance instead
  bool maximize = false;  // ascend: the gradient negated
};

// Per parameter (square_avg, grad_avg and buf start at zero):
//   g = -g                                                     (maximize)
//   g = g + weight_decay * p
//   square_avg = alpha * square_avg + (1 - alpha) * g^2
//   grad_avg = alpha * grad_avg + (1 - alpha) * g              (centered)
//   avg = sqrt(square_avg - grad_avg^2) + eps                  (centered)
//   avg = sqrt(square_avg) + eps                               (otherwise)
//   buf = momentum * buf + g / avg; p -= lr * buf              (momentum > 0)
//   p -= lr * g / avg                                          (otherwise)
// Throws std::invalid_argument for lr < 0, alpha < 0, eps < 0, weight_decay < 0
// or momentum < 0 (PyTorch's checks).
class RMSprop : public Optimizer {
 public:
  RMSprop(std::vector<Tensor> params, double lr = 1e-2, RMSpropOptions options = {});
  // Parameter groups (options: lr, alpha, eps, weight_decay, momentum,
  // centered, maximize; unset: the defaults above).
  RMSprop(std::vector<ParamGroup> groups, GroupOptions defaults);
  // Parameter i's state (undefined before its first update; the buffer only
  // with momentum > 0, the gradient average only when centered).
  const Tensor& square_avg(size_t i) const { return square_avg_.at(i); }
  const Tensor& momentum_buffer(size_t i) const { return buffers_.at(i); }
  const Tensor& grad_avg(size_t i) const { return grad_avg_.at(i); }

 protected:
  void update(const UpdateArgs& args, const std::vector<size_t>& ready) override;
  void check_options(const UpdateArgs& args) const override;
  // "square_avg.<i>" (>= 0) once a parameter is updated, "momentum_buffer.<i>"
  // with momentum > 0, "grad_avg.<i>" when centered
  std::vector<StateSlot> state_slots() override;

 private:
  std::vector<Tensor> square_avg_, buffers_, grad_avg_;  // beside params_
};

}  // namespace minidl::optim
