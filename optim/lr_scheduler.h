// Learning-rate schedules, stepped once per epoch, with PyTorch's formulas.
//
//   optim::Momentum opt(net.trainable_params(), /*lr=*/0.1, /*momentum=*/0.9);
//   optim::StepLR sched(opt, /*step_size=*/30, /*gamma=*/0.1);
//   for (int epoch = 0; epoch < 90; ++epoch) { train_one_epoch(); sched.step(); }
//
// The constructor records the optimizer's lr as base_lr and sets epoch 0's
// rate; step() advances the epoch and writes lr(epoch) into the optimizer.
#pragma once
#include "optim/optimizer.h"

namespace minidl::optim {

class LRScheduler {
 public:
  explicit LRScheduler(Optimizer& optimizer);
  virtual ~LRScheduler() = default;
  void step();  // epoch += 1; optimizer.set_lr(lr_at(epoch))
  int64_t last_epoch() const { return epoch_; }
  double base_lr() const { return base_lr_; }
  double get_last_lr() const { return optimizer_.lr(); }
  virtual double lr_at(int64_t epoch) const = 0;

 protected:
  void apply() { optimizer_.set_lr(lr_at(epoch_)); }  // derived constructors call it
  Optimizer& optimizer_;
  double base_lr_;

 private:
  int64_t epoch_ = 0;
};

// lr = base_lr * gamma^floor(epoch / step_size).
// Throws std::invalid_argument for step_size < 1 or gamma <= 0.
class StepLR : public LRScheduler {
 public:
  StepLR(Optimizer& optimizer, int64_t step_size, double gamma = 0.1);
  double lr_at(int64_t epoch) const override;

 private:
  int64_t step_size_;
  double gamma_;
};

// lr = eta_min + (base_lr - eta_min) * (1 + cos(pi * epoch / T_max)) / 2
// (the closed form; it continues as a cosine after T_max, like PyTorch's).
// Throws std::invalid_argument for T_max < 1 or eta_min < 0.
class CosineAnnealingLR : public LRScheduler {
 public:
  CosineAnnealingLR(Optimizer& optimizer, int64_t T_max, double eta_min = 0);
  double lr_at(int64_t epoch) const override;

 private:
  int64_t t_max_;
  double eta_min_;
};

}  // namespace minidl::optim
