// Flatten and Dropout.
#pragma once
#include "nn/cell.h"

namespace minidl::nn {

// x [N, d1, d2, ...] -> [N, d1*d2*...] (dims from start_dim on are merged;
// shares storage).
class Flatten : public Cell {
 public:
  explicit Flatten(int64_t start_dim = 1) : start_dim_(start_dim) {}
  using Cell::forward;
  Tensor forward(const Tensor& x) override;

 private:
  int64_t start_dim_;
};

// Training mode: zeroes each element with probability p and scales the rest
// by 1 / (1 - p) (draws from the global generator). Evaluation mode, or p = 0:
// the identity. p outside [0, 1) throws minidl::Error.
class Dropout : public Cell {
 public:
  explicit Dropout(double p = 0.5);
  using Cell::forward;
  Tensor forward(const Tensor& x) override;  // x [...] -> [...]
  double p() const { return p_; }

 private:
  double p_;
};

}  // namespace minidl::nn
