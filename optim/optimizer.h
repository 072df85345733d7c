// Optimizer: the base of SGD, Momentum, Adam and AdamW.
//
// An optimizer holds a flat list of float32 parameters (e.g.
// net.trainable_params()). step() updates, in place and outside autograd,
// every parameter that has a gradient and skips the others; per-parameter
// state (momentum buffers, Adam moments and step counts) is kept in vectors
// beside the parameter list and created on a parameter's first update.
// Hyperparameters are validated in the constructors: a bad value throws
// std::invalid_argument naming the optimizer, the hyperparameter and the value.
#pragma once
#include <functional>
#include <string>
#include <vector>

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
  // Updates parameter i: p [n] (its data) from g [n] (its gradient).
  virtual void update(size_t i, float* p, const float* g, int64_t n) = 0;
  // Throws std::invalid_argument "<name>: invalid <what> <value> (expected <rule>)" unless ok.
  void check(bool ok, const char* what, double value, const char* rule) const;

  std::vector<Tensor> params_;
  double lr_;

 private:
  const char* name_;
};

// For the updates: calls f(begin, end) over [0, n), one chunk per OpenMP
// thread when n is over 64k elements (they are memory-bound), else f(0, n).
// The loop inside f stays a plain SIMD loop: `omp parallel for simd` over an
// update compiled to scalar code.
void for_chunks(int64_t n, const std::function<void(int64_t, int64_t)>& f);

}  // namespace minidl::optim
