#include "optim/lr_scheduler.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <stdexcept>

namespace minidl::optim {

LRScheduler::LRScheduler(Optimizer& optimizer, SchedulerOptions options, const char* name)
    : optimizer_(optimizer), options_(options), name_(name) {
  if (options.warmup < 0)
    throw std::invalid_argument(cat(name, ": invalid warmup ", options.warmup, " (expected >= 0)"));
  if (!(options.warmup_start > 0 && options.warmup_start <= 1))
    throw std::invalid_argument(
        cat(name, ": invalid warmup_start ", options.warmup_start, " (expected 0 < warmup_start <= 1)"));
  for (const Optimizer::Group& g : optimizer.param_groups()) base_lrs_.push_back(g.options.lr);
}

void LRScheduler::apply() {
  const auto& groups = optimizer_.param_groups();
  while (base_lrs_.size() < groups.size()) base_lrs_.push_back(groups[base_lrs_.size()].options.lr);
  for (size_t g = 0; g < groups.size(); ++g) optimizer_.set_lr(g, lr(epoch_, g));
}

Settings LRScheduler::settings() const {
  Settings s = {{"interval", options_.interval == Interval::Epoch ? "epoch" : "step"},
                {"warmup", std::to_string(options_.warmup)},
                {"warmup_start", exact_text(options_.warmup_start)},
                {"base_lr", exact_text(base_lrs_[0])}};
  for (size_t g = 1; g < base_lrs_.size(); ++g)
    s.emplace_back(cat("group ", g, " base_lr"), exact_text(base_lrs_[g]));
  s.emplace_back("last_epoch", std::to_string(epoch_));
  return s;
}

void LRScheduler::step() {
  ++epoch_;
  apply();
}

StateDict LRScheduler::state_dict() const {
  StateDict s;
  s.set_int("last_epoch", epoch_);
  s.set_double("base_lr", base_lrs_[0]);
  for (size_t g = 1; g < base_lrs_.size(); ++g) s.set_double(cat("base_lr.", g), base_lrs_[g]);
  return s;
}

void LRScheduler::load_state_dict(const StateDict& s) {
  const int64_t epoch = s.get_int("last_epoch", "LRScheduler::load_state_dict");
  MINIDL_CHECK(epoch >= 0 && epoch <= Optimizer::kMaxSteps, "LRScheduler::load_state_dict: "
               "'last_epoch' is ", epoch, ", expected 0 to 2^53");
  const size_t groups = optimizer_.param_groups().size();
  MINIDL_CHECK(!s.values.count(cat("base_lr.", groups)), "LRScheduler::load_state_dict: the "
               "state holds 'base_lr.", groups, "', but the optimizer has ", groups,
               " parameter group(s) (expected base_lr to base_lr.", groups - 1, ")");
  std::vector<double> base_lrs;
  for (size_t g = 0; g < groups; ++g) {
    const std::string key = g == 0 ? "base_lr" : cat("base_lr.", g);
    const double base_lr = s.get_double(key, "LRScheduler::load_state_dict");
    MINIDL_CHECK(std::isfinite(base_lr) && base_lr >= 0, "LRScheduler::load_state_dict: '", key,
                 "' is ", s.values.at(key), ", expected a finite number >= 0");
    base_lrs.push_back(base_lr);
  }
  base_lrs_ = base_lrs;
  epoch_ = epoch;
  apply();
}

double LRScheduler::lr(int64_t t, size_t group) const {
  const int64_t w = options_.warmup;
  const double base_lr = group < base_lrs_.size() ? base_lrs_[group]
                                                  : optimizer_.param_groups().at(group).options.lr;
  if (t >= w) return lr_at(base_lr, t - w);
  return base_lr * (options_.warmup_start + (1 - options_.warmup_start) * double(t) / double(w));
}

StepLR::StepLR(Optimizer& optimizer, int64_t step_size, double gamma, SchedulerOptions options)
    : LRScheduler(optimizer, options, "StepLR"), step_size_(step_size), gamma_(gamma) {
  if (step_size < 1)
    throw std::invalid_argument(cat("StepLR: invalid step_size ", step_size, " (expected >= 1)"));
  if (!(gamma > 0))
    throw std::invalid_argument(cat("StepLR: invalid gamma ", gamma, " (expected > 0)"));
  apply();
}

Settings StepLR::settings() const {
  Settings s = LRScheduler::settings();
  s.emplace_back("step_size", std::to_string(step_size_));
  s.emplace_back("gamma", exact_text(gamma_));
  return s;
}

double StepLR::lr_at(double base_lr, int64_t epoch) const {
  return base_lr * std::pow(gamma_, double(epoch / step_size_));
}

CosineAnnealingLR::CosineAnnealingLR(Optimizer& optimizer, int64_t T_max, double eta_min,
                                     SchedulerOptions options)
    : LRScheduler(optimizer, options, "CosineAnnealingLR"), t_max_(T_max), eta_min_(eta_min) {
  if (T_max < 1)
    throw std::invalid_argument(
        cat("CosineAnnealingLR: invalid T_max ", T_max, " (expected >= 1)"));
  if (!(eta_min >= 0))
    throw std::invalid_argument(
        cat("CosineAnnealingLR: invalid eta_min ", eta_min, " (expected >= 0)"));
  apply();
}

Settings CosineAnnealingLR::settings() const {
  Settings s = LRScheduler::settings();
  s.emplace_back("T_max", std::to_string(t_max_));
  s.emplace_back("eta_min", exact_text(eta_min_));
  return s;
}

double CosineAnnealingLR::lr_at(double base_lr, int64_t epoch) const {
  return eta_min_ + (base_lr - eta_min_) *
                        (1 + std::cos(std::numbers::pi * double(epoch) / double(t_max_))) / 2;
}

LinearLR::LinearLR(Optimizer& optimizer, double start_factor, double end_factor,
                   int64_t total_iters, SchedulerOptions options)
    : LRScheduler(optimizer, options, "LinearLR"),
      start_factor_(start_factor),
      end_factor_(end_factor),
      total_iters_(total_iters) {
  if (!(start_factor > 0 && start_factor <= 1))
    throw std::invalid_argument(
        cat("LinearLR: invalid start_factor ", start_factor, " (expected in (0, 1])"));
  if (!(end_factor >= 0 && end_factor <= 1))
    throw std::invalid_argument(
        cat("LinearLR: invalid end_factor ", end_factor, " (expected in [0, 1])"));
  if (total_iters < 1)
    throw std::invalid_argument(
        cat("LinearLR: invalid total_iters ", total_iters, " (expected >= 1)"));
  apply();
}

Settings LinearLR::settings() const {
  Settings s = LRScheduler::settings();
  s.emplace_back("start_factor", exact_text(start_factor_));
  s.emplace_back("end_factor", exact_text(end_factor_));
  s.emplace_back("total_iters", std::to_string(total_iters_));
  return s;
}

double LinearLR::lr_at(double base_lr, int64_t epoch) const {
  const double t = static_cast<double>(std::min(epoch, total_iters_));
  return base_lr * (start_factor_ + (end_factor_ - start_factor_) * t / total_iters_);
}

}  // namespace minidl::optim
