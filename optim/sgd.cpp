#include "optim/sgd.h"

namespace minidl::optim {

SGD::SGD(std::vector<Tensor> params, double lr, double weight_decay)
    : Optimizer(std::move(params), lr, "SGD"), weight_decay_(weight_decay) {
  check(weight_decay >= 0, "weight_decay", weight_decay, "weight_decay >= 0");
}

Settings SGD::hyperparameters() const {
  Settings s = Optimizer::hyperparameters();
  s.emplace_back("weight_decay", exact_text(weight_decay_));
  return s;
}

// p -= lr * (g + wd * p)
void SGD::update(const std::vector<size_t>& ready) {
  apply(UpdateRule::SGD, {.lr = lr_, .weight_decay = weight_decay_}, ready);
}

Momentum::Momentum(std::vector<Tensor> params, double lr, double momentum, MomentumOptions opt)
    : Optimizer(std::move(params), lr, "Momentum"),
      momentum_(momentum),
      opt_(opt),
      buffers_(params_.size()) {
  check(momentum >= 0, "momentum", momentum, "momentum >= 0");
  check(opt.weight_decay >= 0, "weight_decay", opt.weight_decay, "weight_decay >= 0");
  check(opt.dampening >= 0 && opt.dampening <= 1, "dampening", opt.dampening,
        "0 <= dampening <= 1");
  if (opt.nesterov)
    check(momentum > 0 && opt.dampening == 0, "momentum", momentum,
          "nesterov needs momentum > 0 and dampening 0");
}

Settings Momentum::hyperparameters() const {
  Settings s = Optimizer::hyperparameters();
  s.emplace_back("momentum", exact_text(momentum_));
  s.emplace_back("nesterov", opt_.nesterov ? "true" : "false");
  s.emplace_back("dampening", exact_text(opt_.dampening));
  s.emplace_back("weight_decay", exact_text(opt_.weight_decay));
  return s;
}

// See the header for the rule; momentum 0 is plain SGD with no buffer.
void Momentum::update(const std::vector<size_t>& ready) {
  const UpdateArgs args{.lr = lr_, .weight_decay = opt_.weight_decay, .momentum = momentum_,
                        .dampening = opt_.dampening, .nesterov = opt_.nesterov};
  if (momentum_ == 0) return apply(UpdateRule::SGD, args, ready);
  apply(UpdateRule::Momentum, args, ready, &buffers_);
}

std::vector<Optimizer::StateSlot> Momentum::state_slots() {
  return {{.key = "momentum_buffer", .state = &buffers_, .required = momentum_ > 0}};
}

}  // namespace minidl::optim
