// Optimizer: the base of SGD, Momentum, Adam and AdamW.
//
// An optimizer holds a flat list of float32 parameters (e.g.
// net.trainable_params()). step() updates, in place and outside autograd,
// every parameter that has a gradient and skips the others, through the
// device's update kernel (one call per step for all parameters on a device);
// per-parameter state (momentum buffers, Adam moments, step counts) is kept
// in vectors beside the parameter list and created, on the parameter's
// device, on its first update.
// Hyperparameters are validated in the constructors: a bad value throws
// std::invalid_argument naming the optimizer, the hyperparameter and the value.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "framework/backend/kernels.h"
#include "framework/safetensors.h"
#include "framework/tensor.h"

namespace minidl::optim {

// Named settings as text, e.g. {{"lr", "0.1"}, {"nesterov", "true"}}: what
// every rank must agree on (Model::train compares them across ranks).
using Settings = std::vector<std::pair<std::string, std::string>>;
// A double as the shortest text that reads back to the same bits, in %g style
// ("0.1", "0.0001", "1e-08").
std::string exact_text(double v);

class Optimizer {
 public:
  // Throws std::invalid_argument for lr < 0 (or NaN), minidl::Error for an
  // empty parameter list (most often a Cell that never registered its layers),
  // or an undefined, non-float32 or repeated parameter.
  Optimizer(std::vector<Tensor> params, double lr, const char* name);
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // One update of every parameter that has a gradient.
  void step();
  // Drops every parameter's gradient (PyTorch's set_to_none); with false,
  // fills the gradients that exist with zeros in place instead, keeping their
  // memory (what a CUDA graph's captured step needs, framework/cuda_graph.h).
  void zero_grad(bool set_to_none = true);

  double lr() const { return lr_; }
  void set_lr(double lr);  // validated like the constructor's
  const std::vector<Tensor>& parameters() const { return params_; }
  // The per-parameter state tensors step() updates in place (Momentum's
  // buffers, Adam's moments; undefined before a parameter's first update):
  // a captured step (parallel/train/graphed_step.h) checks they are still its own.
  virtual std::vector<Tensor> state_tensors() const { return {}; }
  const char* name() const { return name_; }
  // Every hyperparameter that shapes step(), exactly: "lr", then the
  // subclass's (SGD: weight_decay; Momentum: momentum, nesterov, dampening,
  // weight_decay; Adam, AdamW: beta1, beta2, eps, weight_decay).
  virtual Settings hyperparameters() const;

  // What step() carries from one call to the next, for an exact resume: values
  // "name" and "lr", tensor "steps" (int64 [P], each parameter's updates) and
  // the subclass's per-parameter state, "<state>.<i>" float32 [numel of
  // parameter i] on the CPU, present once parameter i has been updated
  // (Momentum: "momentum_buffer.<i>"; Adam: "exp_avg.<i>", "exp_avg_sq.<i>").
  // CPU tensors share storage with the optimizer's state.
  StateDict state_dict() const;
  // Restores a state_dict() into an optimizer of the same kind over parameters
  // of the same sizes, state tensors onto their parameters' devices. The whole
  // state is checked before any of it is taken, so that a resume is exact or
  // refused: "lr" finite and >= 0; every step count from 0 to kMaxSteps; a
  // parameter with a count > 0 has each state tensor its rule keeps (none for
  // Momentum with momentum 0), one with count 0 has none; each state tensor
  // float32 [numel of its parameter] with finite values (Adam's exp_avg_sq
  // also >= 0); no other entries. Throws minidl::Error naming the entry, what
  // was expected and what was got; the optimizer is then unchanged.
  void load_state_dict(const StateDict& state);

  // The largest step count a state may hold: 2^53, beyond which a count is no
  // real run's and Adam's bias correction (computed in double) loses it.
  static constexpr int64_t kMaxSteps = int64_t{1} << 53;

 protected:
  // Updates the parameters listed in `ready` (indices into parameters(), each
  // with a float32 gradient of its size on its device; steps_ already counts
  // this update).
  virtual void update(const std::vector<size_t>& ready) = 0;
  // Runs `rule` over the `ready` parameters, one kernel call per device;
  // m and v hold per-parameter state tensors (zeros [n] from the first update).
  void apply(UpdateRule rule, const UpdateArgs& args, const std::vector<size_t>& ready,
             std::vector<Tensor>* m = nullptr, std::vector<Tensor>* v = nullptr);
  // Throws std::invalid_argument "<name>: invalid <what> <value> (expected <rule>)" unless ok.
  void check(bool ok, const char* what, double value, const char* rule) const;
  // One per-parameter state vector, saved as "<key>.<i>" (absent where
  // undefined). `required`: the rule creates it at a parameter's first update,
  // so a parameter with updates must have it. `nonnegative`: its values are >= 0.
  struct StateSlot {
    const char* key;
    std::vector<Tensor>* state;
    bool required = true;
    bool nonnegative = false;
  };
  // The subclass's state vectors (Momentum's buffers, Adam's moments), which
  // state_dict() saves and load_state_dict() checks and restores.
  virtual std::vector<StateSlot> state_slots() { return {}; }

  std::vector<Tensor> params_;
  std::vector<int64_t> steps_;  // updates of each parameter so far
  double lr_;

 private:
  const char* name_;
};

}  // namespace minidl::optim
