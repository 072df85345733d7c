#include "optim/lr_scheduler.h"

#include <cmath>
#include <numbers>
#include <stdexcept>

namespace minidl::optim {

LRScheduler::LRScheduler(Optimizer& optimizer) : optimizer_(optimizer), base_lr_(optimizer.lr()) {}

void LRScheduler::step() {
  ++epoch_;
  apply();
}

StepLR::StepLR(Optimizer& optimizer, int64_t step_size, double gamma)
    : LRScheduler(optimizer), step_size_(step_size), gamma_(gamma) {
  if (step_size < 1)
    throw std::invalid_argument(cat("StepLR: invalid step_size ", step_size, " (expected >= 1)"));
  if (!(gamma > 0))
    throw std::invalid_argument(cat("StepLR: invalid gamma ", gamma, " (expected > 0)"));
  apply();
}

double StepLR::lr_at(int64_t epoch) const {
  return base_lr_ * std::pow(gamma_, double(epoch / step_size_));
}

CosineAnnealingLR::CosineAnnealingLR(Optimizer& optimizer, int64_t T_max, double eta_min)
    : LRScheduler(optimizer), t_max_(T_max), eta_min_(eta_min) {
  if (T_max < 1)
    throw std::invalid_argument(
        cat("CosineAnnealingLR: invalid T_max ", T_max, " (expected >= 1)"));
  if (!(eta_min >= 0))
    throw std::invalid_argument(
        cat("CosineAnnealingLR: invalid eta_min ", eta_min, " (expected >= 0)"));
  apply();
}

double CosineAnnealingLR::lr_at(int64_t epoch) const {
  return eta_min_ + (base_lr_ - eta_min_) *
                        (1 + std::cos(std::numbers::pi * double(epoch) / double(t_max_))) / 2;
}

}  // namespace minidl::optim
