// Losses: cells called as loss(prediction, target).
//
// Every loss takes a reduction: Reduction::None (per-sample values),
// Reduction::Mean (the default) or Reduction::Sum, or the same as a string
// "none" / "mean" / "sum"; any other string throws minidl::Error.
#pragma once
#include <string>

#include "nn/cell.h"

namespace minidl::nn {

enum class Reduction { None, Mean, Sum };

// Reduction, or its name; converts implicitly so losses take either.
struct ReductionArg {
  ReductionArg(Reduction r) : value(r) {}
  ReductionArg(const char* name) : ReductionArg(std::string(name)) {}
  ReductionArg(const std::string& name);
  Reduction value;
};
const char* reduction_name(Reduction r);

// Base of the losses: forward(prediction, target); forward(x) throws.
class Loss : public Cell {
 public:
  explicit Loss(ReductionArg reduction) : reduction_(reduction.value) {}
  Reduction reduction() const { return reduction_; }
  using Cell::forward;
  Tensor forward(const Tensor& prediction, const Tensor& target) override = 0;

 protected:
  Tensor reduce(const Tensor& per_element) const;  // none: as is; mean; sum

 private:
  Reduction reduction_;
};

// (prediction - target)^2; prediction and target of the same shape [...].
// none -> [...]; mean, sum -> scalar.
class MSELoss : public Loss {
 public:
  explicit MSELoss(ReductionArg reduction = Reduction::Mean) : Loss(reduction) {}
  Tensor forward(const Tensor& prediction, const Tensor& target) override;
};

// Cross entropy of logits [N, C] against
//   labels [N] int32/int64 in [0, C):   l_i = -log_softmax(logits)[i, labels_i]
//   targets [N, C] float (one-hot or probabilities): l_i = -sum_c t_ic log_softmax(logits)_ic
// computed from the logits with a stable log_softmax (finite for logits of
// 1e4). none -> [N]; mean -> mean over N; sum -> scalar.
// Integer labels with mean or sum use the fused framework op cross_entropy()
// (one pass forward, one pass backward).
// Errors (minidl::Error): logits not 2-D, labels of the wrong shape or dtype,
// a label out of range (names the row).
class CrossEntropyLoss : public Loss {
 public:
  explicit CrossEntropyLoss(ReductionArg reduction = Reduction::Mean) : Loss(reduction) {}
  Tensor forward(const Tensor& logits, const Tensor& labels) override;
};

// MindSpore's SoftmaxCrossEntropyWithLogits(sparse = false, reduction = "none"):
// the same values as CrossEntropyLoss, but labels must be int [N] when sparse
// and float [N, C] (one-hot or probabilities) when not.
class SoftmaxCrossEntropyWithLogits : public CrossEntropyLoss {
 public:
  explicit SoftmaxCrossEntropyWithLogits(bool sparse = false,
                                         ReductionArg reduction = Reduction::None)
      : CrossEntropyLoss(reduction), sparse_(sparse) {}
  // Catches SoftmaxCrossEntropyWithLogits("mean"), which would mean sparse = true.
  explicit SoftmaxCrossEntropyWithLogits(const char*) = delete;
  Tensor forward(const Tensor& logits, const Tensor& labels) override;

 private:
  bool sparse_;
};

}  // namespace minidl::nn
