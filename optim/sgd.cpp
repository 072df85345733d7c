#include "optim/sgd.h"

#include <stdexcept>

namespace minidl::optim {

namespace {

// The group constructors' defaults: lr has none (PyTorch's SGDOptions(lr)).
GroupOptions with_lr(GroupOptions defaults, const char* name) {
  if (!defaults.lr)
    throw std::invalid_argument(cat(name, ": the defaults set no lr (expected e.g. {.lr = 0.1})"));
  return defaults;
}

}  // namespace

SGD::SGD(std::vector<Tensor> params, double lr, double weight_decay)
    : SGD({ParamGroup{std::move(params)}}, GroupOptions{.lr = lr, .weight_decay = weight_decay}) {}

SGD::SGD(std::vector<ParamGroup> groups, GroupOptions defaults)
    : Optimizer("SGD", {"weight_decay"}) {
  init(std::move(groups), {}, with_lr(defaults, "SGD"));
}

void SGD::check_options(const UpdateArgs& a) const {
  check(a.weight_decay >= 0, "weight_decay", a.weight_decay, "weight_decay >= 0");
}

// p -= lr * (g + wd * p)
void SGD::update(const UpdateArgs& args, const std::vector<size_t>& ready) {
  apply(UpdateRule::SGD, args, ready);
}

Momentum::Momentum(std::vector<Tensor> params, double lr, double momentum, MomentumOptions opt)
    : Momentum({ParamGroup{std::move(params)}},
               GroupOptions{.lr = lr, .weight_decay = opt.weight_decay, .momentum = momentum,
                            .dampening = opt.dampening, .nesterov = opt.nesterov,
                            .maximize = opt.maximize}) {}

Momentum::Momentum(std::vector<ParamGroup> groups, GroupOptions defaults)
    : Optimizer("Momentum", {"momentum", "nesterov", "dampening", "weight_decay"}) {
  init(std::move(groups), {}, with_lr(defaults, "Momentum"));
}

void Momentum::check_options(const UpdateArgs& a) const {
  check(a.momentum >= 0, "momentum", a.momentum, "momentum >= 0");
  check(a.weight_decay >= 0, "weight_decay", a.weight_decay, "weight_decay >= 0");
  check(a.dampening >= 0 && a.dampening <= 1, "dampening", a.dampening, "0 <= dampening <= 1");
  if (a.nesterov)
    check(a.momentum > 0 && a.dampening == 0, "momentum", a.momentum,
          "nesterov needs momentum > 0 and dampening 0");
}

MomentumOptions Momentum::options() const {
  const UpdateArgs& a = param_groups()[0].options;
  return {.nesterov = a.nesterov, .weight_decay = a.weight_decay, .dampening = a.dampening,
          .maximize = a.maximize};
}

// See the header for the rule; momentum 0 is plain SGD with no buffer.
void Momentum::update(const UpdateArgs& args, const std::vector<size_t>& ready) {
  if (args.momentum == 0) return apply(UpdateRule::SGD, args, ready);
  apply(UpdateRule::Momentum, args, ready, &buffers_);
}

std::vector<Optimizer::StateSlot> Momentum::state_slots() {
  return {{.key = "momentum_buffer",
           .state = &buffers_,
           .required = [](const UpdateArgs& a) { return a.momentum > 0; }}};
}

}  // namespace minidl::optim
