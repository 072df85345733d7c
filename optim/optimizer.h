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
  virtual StateDict state_dict() const;
  // Restores a state_dict() into an optimizer of the same kind over parameters
  // of the same sizes, state tensors onto their parameters' devices. Throws
  // minidl::Error naming what differs (kind, parameter count, a tensor's shape
  // or dtype) or is missing; the optimizer is then in an unspecified state.
  virtual void load_state_dict(const StateDict& state);

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
  // state_dict() / load_state_dict() of one per-parameter state vector, as
  // "<key>.<i>" (absent where undefined).
  void save_state(StateDict& out, const std::string& key, const std::vector<Tensor>& state) const;
  void load_state(const StateDict& in, const std::string& key, std::vector<Tensor>& state) const;

  std::vector<Tensor> params_;
  std::vector<int64_t> steps_;  // updates of each parameter so far
  double lr_;

 private:
  const char* name_;
};

}  // namespace minidl::optim
