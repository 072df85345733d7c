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
#include <vector>

#include "framework/backend/kernels.h"
#include "framework/tensor.h"

namespace minidl::optim {

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
  // Drops every parameter's gradient (PyTorch's set_to_none).
  void zero_grad();

  double lr() const { return lr_; }
  void set_lr(double lr);  // validated like the constructor's
  const std::vector<Tensor>& parameters() const { return params_; }
  const char* name() const { return name_; }

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

  std::vector<Tensor> params_;
  std::vector<int64_t> steps_;  // updates of each parameter so far
  double lr_;

 private:
  const char* name_;
};

}  // namespace minidl::optim
