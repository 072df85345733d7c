#include "optim/adam.h"

namespace minidl::optim {

Adam::Adam(std::vector<Tensor> params, double lr, double beta1, double beta2, double eps,
           double weight_decay)
    : Adam(std::move(params), lr, beta1, beta2, eps, weight_decay, false, "Adam") {}

Adam::Adam(std::vector<Tensor> params, double lr, double beta1, double beta2, double eps,
           double weight_decay, bool decoupled, const char* name)
    : Optimizer(std::move(params), lr, name),
      beta1_(beta1),
      beta2_(beta2),
      eps_(eps),
      weight_decay_(weight_decay),
      decoupled_(decoupled),
      m_(params_.size()),
      v_(params_.size()) {
  check(beta1 >= 0 && beta1 < 1, "beta1", beta1, "0 <= beta1 < 1");
  check(beta2 >= 0 && beta2 < 1, "beta2", beta2, "0 <= beta2 < 1");
  check(eps > 0, "eps", eps, "eps > 0");
  check(weight_decay >= 0, "weight_decay", weight_decay, "weight_decay >= 0");
}

Settings Adam::hyperparameters() const {
  Settings s = Optimizer::hyperparameters();
  s.emplace_back("beta1", exact_text(beta1_));
  s.emplace_back("beta2", exact_text(beta2_));
  s.emplace_back("eps", exact_text(eps_));
  s.emplace_back("weight_decay", exact_text(weight_decay_));
  return s;
}

// See the header for the rule.
void Adam::update(const std::vector<size_t>& ready) {
  apply(UpdateRule::Adam,
        {.lr = lr_, .weight_decay = weight_decay_, .beta1 = beta1_, .beta2 = beta2_, .eps = eps_,
         .decoupled = decoupled_},
        ready, &m_, &v_);
}

std::vector<Tensor> Adam::state_tensors() const {
  std::vector<Tensor> all = m_;
  all.insert(all.end(), v_.begin(), v_.end());
  return all;
}

std::vector<Optimizer::StateSlot> Adam::state_slots() {
  return {{.key = "exp_avg", .state = &m_},
          {.key = "exp_avg_sq", .state = &v_, .nonnegative = true}};
}

}  // namespace minidl::optim
