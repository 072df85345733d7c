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
// 1e4). none -> [N]; mean -> mean over N; sum -> scalar. Logits [N, C, d1,
// ...] (a class for each position, as in segmentation) take labels [N, d1,
// ...] or targets of their own shape: the softmax over C, none -> [N, d1,
// ...], mean over all positions.
// Integer labels with mean or sum use the fused framework op cross_entropy()
// (one pass forward, one pass backward).
// Errors (minidl::Error): logits under 2-D, labels of the wrong shape or
// dtype, a label out of range (names its row or position).
//
// With options (PyTorch's CrossEntropyLossOptions), integer labels only:
// logits [N, C] or [N, C, d1, ...], labels [N] or [N, d1, ...]; class weight
// [C], ignore_index (those targets count nothing), label_smoothing in [0, 1],
// as F.cross_entropy (ops.h); mean divides by the weight sum of the targets
// that are not ignored.
struct CrossEntropyLossOptions {
  Tensor weight;  // [C] or undefined
  int64_t ignore_index = -100;
  ReductionArg reduction = Reduction::Mean;
  double label_smoothing = 0;
};
class CrossEntropyLoss : public Loss {
 public:
  explicit CrossEntropyLoss(ReductionArg reduction = Reduction::Mean) : Loss(reduction) {}
  explicit CrossEntropyLoss(const CrossEntropyLossOptions& options);
  Tensor forward(const Tensor& logits, const Tensor& labels) override;

 private:
  bool has_options_ = false;
  Tensor weight_;  // the buffer "weight" when given
  int64_t ignore_index_ = -100;
  double label_smoothing_ = 0;
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

// ---- math (issue 22): PyTorch's losses; the formulas are the functions' in ops.h ----
// A class weight given to a loss is its buffer "weight" (state_dict, to()).

// p [...] probabilities, target [...] -> binary_cross_entropy; weight broadcasts to p
class BCELoss : public Loss {
 public:
  explicit BCELoss(Tensor weight = {}, ReductionArg reduction = Reduction::Mean);
  Tensor forward(const Tensor& p, const Tensor& target) override;

 private:
  Tensor weight_;
};

// logits [...], target [...] -> binary_cross_entropy_with_logits; pos_weight [C]
// broadcasts over the last dim
class BCEWithLogitsLoss : public Loss {
 public:
  explicit BCEWithLogitsLoss(Tensor weight = {}, ReductionArg reduction = Reduction::Mean,
                             Tensor pos_weight = {});
  Tensor forward(const Tensor& logits, const Tensor& target) override;

 private:
  Tensor weight_, pos_weight_;
};

// log-probabilities [N, C] or [N, C, d1, ...], int targets -> nll_loss
class NLLLoss : public Loss {
 public:
  explicit NLLLoss(Tensor weight = {}, int64_t ignore_index = -100,
                   ReductionArg reduction = Reduction::Mean);
  Tensor forward(const Tensor& logp, const Tensor& target) override;

 private:
  Tensor weight_;
  int64_t ignore_index_;
};

// |x - y|
class L1Loss : public Loss {
 public:
  explicit L1Loss(ReductionArg reduction = Reduction::Mean) : Loss(reduction) {}
  Tensor forward(const Tensor& x, const Tensor& y) override;
};

// 0.5 d^2 / beta where |d| < beta, else |d| - 0.5 beta
class SmoothL1Loss : public Loss {
 public:
  explicit SmoothL1Loss(ReductionArg reduction = Reduction::Mean, double beta = 1)
      : Loss(reduction), beta_(beta) {}
  Tensor forward(const Tensor& x, const Tensor& y) override;

 private:
  double beta_;
};

// 0.5 d^2 where |d| < delta, else delta (|d| - 0.5 delta)
class HuberLoss : public Loss {
 public:
  explicit HuberLoss(ReductionArg reduction = Reduction::Mean, double delta = 1)
      : Loss(reduction), delta_(delta) {}
  Tensor forward(const Tensor& x, const Tensor& y) override;

 private:
  double delta_;
};

// input log-probabilities, target probabilities (log-probabilities with
// log_target) -> kl_div. reduction: "none", "mean", "sum" or "batchmean"
// (the sum over the batch size, KL divergence's proper mean).
class KLDivLoss : public Loss {
 public:
  explicit KLDivLoss(const std::string& reduction = "mean", bool log_target = false);
  explicit KLDivLoss(const char* reduction, bool log_target = false)
      : KLDivLoss(std::string(reduction), log_target) {}
  explicit KLDivLoss(Reduction reduction, bool log_target = false)
      : KLDivLoss(std::string(reduction_name(reduction)), log_target) {}
  Tensor forward(const Tensor& input, const Tensor& target) override;

 private:
  std::string mode_;  // the reduction's name, batchmean included
  bool log_target_;
};

}  // namespace minidl::nn
