#include "optim/rmsprop.h"

namespace minidl::optim {

RMSprop::RMSprop(std::vector<Tensor> params, double lr, RMSpropOptions o)
    : RMSprop({ParamGroup{std::move(params)}},
              {.lr = lr, .weight_decay = o.weight_decay, .momentum = o.momentum, .eps = o.eps,
               .alpha = o.alpha, .centered = o.centered, .maximize = o.maximize}) {}

RMSprop::RMSprop(std::vector<ParamGroup> groups, GroupOptions defaults)
    : Optimizer("RMSprop", {"alpha", "eps", "weight_decay", "momentum", "centered"}) {
  init(std::move(groups), {.lr = 1e-2, .eps = 1e-8, .alpha = 0.99}, defaults);
}

void RMSprop::check_options(const UpdateArgs& a) const {
  check(a.alpha >= 0, "alpha", a.alpha, "alpha >= 0");
  check(a.eps >= 0, "eps", a.eps, "eps >= 0");
  check(a.weight_decay >= 0, "weight_decay", a.weight_decay, "weight_decay >= 0");
  check(a.momentum >= 0, "momentum", a.momentum, "momentum >= 0");
}

// See the header for the rule.
void RMSprop::update(const UpdateArgs& args, const std::vector<size_t>& ready) {
  apply(UpdateRule::RMSprop, args, ready, args.momentum > 0 ? &buffers_ : nullptr, &square_avg_,
        args.centered ? &grad_avg_ : nullptr);
}

std::vector<Optimizer::StateSlot> RMSprop::state_slots() {
  return {{.key = "square_avg", .state = &square_avg_, .nonnegative = true},
          {.key = "momentum_buffer",
           .state = &buffers_,
           .required = [](const UpdateArgs& a) { return a.momentum > 0; }},
          {.key = "grad_avg", .state = &grad_avg_, .required = [](const UpdateArgs& a) {
             return a.centered;
           }}};
}

}  // namespace minidl::optim
