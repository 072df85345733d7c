// Learning-rate schedules with PyTorch's formulas, stepped once per epoch or
// once per optimizer step, with an optional linear warm-up.
//
//   optim::Momentum opt(net.trainable_params(), /*lr=*/0.1, /*momentum=*/0.9);
//   optim::StepLR sched(opt, /*step_size=*/30, /*gamma=*/0.1);
//   for (int epoch = 0; epoch < 90; ++epoch) { train_one_epoch(); sched.step(); }
//
// or let Model step it: `model.train(90, ds, {}, {.scheduler = &sched})`.
//
// The constructor records each parameter group's lr as its base_lr and sets
// period 0's rates; step() advances the period (an epoch, or a step with
// {.interval = Interval::Step}) and writes each group's lr(period), computed
// from its own base_lr as PyTorch's schedulers do, into the optimizer. A group
// added to the optimizer later starts from its lr then (PyTorch's initial_lr).
//
// The formulas below give a group's rate from its base_lr.
#pragma once
#include "optim/optimizer.h"

namespace minidl::optim {

// What one period of a schedule is; Model::train steps the scheduler after
// every epoch or after every optimizer step accordingly.
enum class Interval { Epoch, Step };

struct SchedulerOptions {
  Interval interval = Interval::Epoch;
  // Linear warm-up over the first `warmup` periods, then the schedule counted
  // from the warm-up's end (PyTorch's LinearLR followed by the schedule in a
  // SequentialLR):
  //   lr(t) = base_lr * (warmup_start + (1 - warmup_start) * t / warmup)  for t < warmup
  //   lr(t) = lr_at(t - warmup)                                             after
  int64_t warmup = 0;
  double warmup_start = 1.0 / 3;  // the first period's factor (LinearLR's start_factor)
};

class LRScheduler {
 public:
  // Throws std::invalid_argument "<name>: invalid ..." for warmup < 0 or
  // warmup_start outside (0, 1].
  explicit LRScheduler(Optimizer& optimizer, SchedulerOptions options = {},
                       const char* name = "LRScheduler");
  virtual ~LRScheduler() = default;
  void step();  // period += 1; each group's lr = lr(period, group)
  int64_t last_epoch() const { return epoch_; }  // periods stepped (PyTorch's name)
  double base_lr() const { return base_lrs_.at(0); }  // the first group's
  const std::vector<double>& base_lrs() const { return base_lrs_; }
  double get_last_lr() const { return optimizer_.lr(); }  // the first group's
  Interval interval() const { return options_.interval; }
  Optimizer& optimizer() const { return optimizer_; }
  const char* name() const { return name_; }
  // Everything that decides the rates, exactly: interval, warmup,
  // warmup_start, base_lr (then "group <g> base_lr" for each later group),
  // last_epoch, then the schedule's own (StepLR: step_size, gamma;
  // CosineAnnealingLR: T_max, eta_min). Model::train compares them across ranks.
  virtual Settings settings() const;
  // For an exact resume: values "last_epoch", "base_lr" (the first group's)
  // and "base_lr.<g>" for each later group. load_state_dict restores them and
  // sets each group's lr to lr(last_epoch, group); throws minidl::Error naming
  // a missing or malformed value, or base_lrs for another number of groups.
  StateDict state_dict() const;
  void load_state_dict(const StateDict& state);
  // The rate of period t for parameter group `group`, warm-up included.
  double lr(int64_t t, size_t group = 0) const;
  // The schedule's own formula at period t (no warm-up) from base_lr.
  virtual double lr_at(double base_lr, int64_t epoch) const = 0;

 protected:
  void apply();  // each group's lr = lr(epoch, group); derived constructors call it
  Optimizer& optimizer_;
  std::vector<double> base_lrs_;  // each group's

 private:
  SchedulerOptions options_;
  int64_t epoch_ = 0;
  const char* name_;
};

// lr = base_lr * gamma^floor(epoch / step_size).
// Throws std::invalid_argument for step_size < 1 or gamma <= 0.
class StepLR : public LRScheduler {
 public:
  StepLR(Optimizer& optimizer, int64_t step_size, double gamma = 0.1, SchedulerOptions options = {});
  double lr_at(double base_lr, int64_t epoch) const override;
  Settings settings() const override;

 private:
  int64_t step_size_;
  double gamma_;
};

// lr = eta_min + (base_lr - eta_min) * (1 + cos(pi * epoch / T_max)) / 2
// (the closed form; it continues as a cosine after T_max, like PyTorch's).
// Throws std::invalid_argument for T_max < 1 or eta_min < 0.
class CosineAnnealingLR : public LRScheduler {
 public:
  CosineAnnealingLR(Optimizer& optimizer, int64_t T_max, double eta_min = 0,
                    SchedulerOptions options = {});
  double lr_at(double base_lr, int64_t epoch) const override;
  Settings settings() const override;

 private:
  int64_t t_max_;
  double eta_min_;
};

// lr = base_lr * (start_factor + (end_factor - start_factor) * min(epoch, total_iters) / total_iters)
// (PyTorch's LinearLR in closed form): a linear ramp over total_iters
// periods, then flat. With {.interval = Interval::Step} and start_factor
// 1/k it is the linear scaling rule's warm-up from the k-times-smaller lr.
// Throws std::invalid_argument for start_factor outside (0, 1], end_factor
// outside [0, 1] or total_iters < 1.
class LinearLR : public LRScheduler {
 public:
  LinearLR(Optimizer& optimizer, double start_factor = 1.0 / 3, double end_factor = 1.0,
           int64_t total_iters = 5, SchedulerOptions options = {});
  double lr_at(double base_lr, int64_t epoch) const override;
  Settings settings() const override;

 private:
  double start_factor_, end_factor_;
  int64_t total_iters_;
};

}  // namespace minidl::optim
