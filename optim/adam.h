// Adam and AdamW, with torch.optim.Adam / AdamW's update rules (amsgrad off).
#pragma once
#include "optim/optimizer.h"

namespace minidl::optim {

// Per parameter, at its t-th update (t counts that parameter's updates):
//   g = -g                                     (maximize: ascend)
//   g = g + weight_decay * p                   (Adam: L2 added to the gradient)
//   p = p * (1 - lr * weight_decay)            (AdamW instead: decoupled decay)
//   m = beta1 * m + (1 - beta1) * g            (m, v start at zero)
//   v = beta2 * v + (1 - beta2) * g^2
//   p -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
// Throws std::invalid_argument for lr < 0, betas outside [0, 1), eps <= 0,
// weight_decay < 0.
class Adam : public Optimizer {
 public:
  Adam(std::vector<Tensor> params, double lr = 1e-3, double beta1 = 0.9, double beta2 = 0.999,
       double eps = 1e-8, double weight_decay = 0);
  // Parameter groups (options: lr, betas, eps, weight_decay, maximize;
  // unset: the defaults above, maximize false).
  Adam(std::vector<ParamGroup> groups, GroupOptions defaults);
  double weight_decay() const { return param_groups()[0].options.weight_decay; }
  // Parameter i's state: first and second moments (undefined before its
  // first update) and its number of updates.
  const Tensor& exp_avg(size_t i) const { return m_.at(i); }
  const Tensor& exp_avg_sq(size_t i) const { return v_.at(i); }
  int64_t step_count(size_t i) const { return steps_.at(i); }

 protected:
  Adam(std::vector<ParamGroup> groups, GroupOptions defaults, double weight_decay, bool decoupled,
       const char* name);
  void update(const UpdateArgs& args, const std::vector<size_t>& ready) override;
  void check_options(const UpdateArgs& args) const override;
  // "exp_avg.<i>" and "exp_avg_sq.<i>" (>= 0), both required once a parameter is updated
  std::vector<StateSlot> state_slots() override;

 private:
  std::vector<Tensor> m_, v_;  // beside params_
};

// Adam with decoupled weight decay (Loshchilov & Hutter), PyTorch's default
// weight_decay of 1e-2.
class AdamW : public Adam {
 public:
  AdamW(std::vector<Tensor> params, double lr = 1e-3, double beta1 = 0.9, double beta2 = 0.999,
        double eps = 1e-8, double weight_decay = 1e-2)
      : AdamW({ParamGroup{std::move(params)}},
              {.lr = lr, .weight_decay = weight_decay, .betas = std::pair{beta1, beta2}, .eps = eps}) {}
  AdamW(std::vector<ParamGroup> groups, GroupOptions defaults)
      : Adam(std::move(groups), defaults, /*weight_decay=*/1e-2, true, "AdamW") {}
};

}  // namespace minidl::optim
