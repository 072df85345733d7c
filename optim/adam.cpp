#include "optim/adam.h"

namespace minidl::optim {

Adam::Adam(std::vector<Tensor> params, double lr, double beta1, double beta2, double eps,
           double weight_decay)
    : Adam({ParamGroup{std::move(params)}}, {.lr = lr, .weight_decay = weight_decay,
                                              .betas = std::pair{beta1, beta2}, .eps = eps}) {}

Adam::Adam(std::vector<ParamGroup> groups, GroupOptions defaults)
    : Adam(std::move(groups), defaults, /*weight_decay=*/0, false, "Adam") {}

Adam::Adam(std::vector<ParamGroup> groups, GroupOptions defaults, double weight_decay,
           bool decoupled, const char* name)
    : Optimizer(name, {"beta1", "beta2", "eps", "weight_decay"}) {
  init(std::move(groups),
       {.lr = 1e-3, .weight_decay = weight_decay, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8,
        .decoupled = decoupled},
       defaults);
}

void Adam::check_options(const UpdateArgs& a) const {
  check(a.beta1 >= 0 && a.beta1 < 1, "beta1", a.beta1, "0 <= beta1 < 1");
  check(a.beta2 >= 0 && a.beta2 < 1, "beta2", a.beta2, "0 <= beta2 < 1");
  check(a.eps > 0, "eps", a.eps, "eps > 0");
  check(a.weight_decay >= 0, "weight_decay", a.weight_decay, "weight_decay >= 0");
}

// See the header for the rule.
void Adam::update(const UpdateArgs& args, const std::vector<size_t>& ready) {
  apply(UpdateRule::Adam, args, ready, &m_, &v_);
}

std::vector<Optimizer::StateSlot> Adam::state_slots() {
  return {{.key = "exp_avg", .state = &m_},
          {.key = "exp_avg_sq", .state = &v_, .nonnegative = true}};
}

}  // namespace minidl::optim
