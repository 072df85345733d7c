#include "nn/loss.h"

#include <limits>

#include "framework/ops.h"

namespace minidl::nn {

ReductionArg::ReductionArg(const std::string& name) {
  if (name == "none")
    value = Reduction::None;
  else if (name == "mean")
    value = Reduction::Mean;
  else if (name == "sum")
    value = Reduction::Sum;
  else
    throw Error(
        cat("loss: unknown reduction '", name, "' (expected \"none\", \"mean\" or \"sum\")"));
}

const char* reduction_name(Reduction r) {
  switch (r) {
    case Reduction::None:
      return "none";
    case Reduction::Mean:
      return "mean";
    case Reduction::Sum:
      return "sum";
  }
  return "?";
}

Tensor Loss::reduce(const Tensor& v) const {
  switch (reduction_) {
    case Reduction::None:
      return v;
    case Reduction::Mean:
      return mean(v);
    case Reduction::Sum:
      return sum(v);
  }
  return v;
}

// prediction [...], target [...] -> reduce((prediction - target)^2)
Tensor MSELoss::forward(const Tensor& pred, const Tensor& target) {
  MINIDL_CHECK(pred.shape() == target.shape(), "MSELoss: prediction ", pred.shape(), " and target ",
               target.shape(), " must have the same shape");
  const Tensor t = target.dtype() == pred.dtype() ? target : cast(target, pred.dtype());
  if (pred.dtype() == kFloat32) return mse_loss(pred, t, reduction_name(reduction()));
  return reduce(pow(sub(pred, t), 2.0));  // float16: by ops
}

CrossEntropyLoss::CrossEntropyLoss(const CrossEntropyLossOptions& o)
    : Loss(o.reduction),
      has_options_(true),
      ignore_index_(o.ignore_index),
      label_smoothing_(o.label_smoothing) {
  MINIDL_CHECK(o.label_smoothing >= 0 && o.label_smoothing <= 1,
               "CrossEntropyLoss: label_smoothing must lie in [0, 1], got ", o.label_smoothing);
  if (o.weight.defined()) weight_ = register_buffer("weight", o.weight);
}

// logits [N, C, d...], labels [N, d...] int or [N, C, d...] float -> [N, d...] or scalar
Tensor CrossEntropyLoss::forward(const Tensor& logits, const Tensor& labels) {
  if (has_options_) {
    MINIDL_CHECK(!is_floating(labels.dtype()),
                 "CrossEntropyLoss: with options, expected int32 "
                 "or int64 labels, got ",
                 dtype_name(labels.dtype()), " ", labels.shape());
    return cross_entropy(logits, labels, weight_, ignore_index_, reduction_name(reduction()),
                         label_smoothing_);
  }
  MINIDL_CHECK(logits.dim() >= 2,
               "CrossEntropyLoss: expected logits [N, C] or [N, C, d1, ...], got ", logits.shape());
  Shape positions{logits.size(0)};  // a label's shape [N, d...]
  for (int64_t d = 2; d < logits.dim(); ++d) positions.push_back(logits.size(d));
  if (!is_floating(labels.dtype())) {
    MINIDL_CHECK(labels.shape() == positions, "CrossEntropyLoss: logits ", logits.shape(),
                 " and labels ", labels.shape(), ": expected labels ", positions);
    if (reduction() == Reduction::Mean) return cross_entropy(logits, labels);
    if (reduction() == Reduction::Sum)
      return mul(cross_entropy(logits, labels), scalar_like(labels.numel(), logits));
    if (logits.dim() == 2) return neg(gather(log_softmax(logits, 1), labels));
    // no label ignored: every negative one is out of range
    return cross_entropy(logits, labels, {}, std::numeric_limits<int64_t>::min(), "none");
  }
  MINIDL_CHECK(labels.shape() == logits.shape(), "CrossEntropyLoss: logits ", logits.shape(),
               " and float targets ", labels.shape(),
               ": expected targets [N, C, d...] (one-hot or "
               "probabilities) of the same shape, or int labels ",
               positions);
  Tensor t = labels.dtype() == logits.dtype() ? labels : cast(labels, logits.dtype());
  return reduce(neg(sum(mul(t, log_softmax(logits, 1)), {1})));
}

Tensor SoftmaxCrossEntropyWithLogits::forward(const Tensor& logits, const Tensor& labels) {
  MINIDL_CHECK(sparse_ != is_floating(labels.dtype()),
               "SoftmaxCrossEntropyWithLogits(sparse=", sparse_ ? "true" : "false", "): expected ",
               sparse_ ? "int32/int64 labels [N]" : "float labels [N, C]", ", got ",
               dtype_name(labels.dtype()), " ", labels.shape());
  return CrossEntropyLoss::forward(logits, labels);
}

// ---- math (issue 22) ----
BCELoss::BCELoss(Tensor weight, ReductionArg reduction) : Loss(reduction) {
  if (weight.defined()) weight_ = register_buffer("weight", weight);
}
Tensor BCELoss::forward(const Tensor& p, const Tensor& target) {
  return binary_cross_entropy(p, target, weight_, reduction_name(reduction()));
}

BCEWithLogitsLoss::BCEWithLogitsLoss(Tensor weight, ReductionArg reduction, Tensor pos_weight)
    : Loss(reduction) {
  if (weight.defined()) weight_ = register_buffer("weight", weight);
  if (pos_weight.defined()) pos_weight_ = register_buffer("pos_weight", pos_weight);
}
Tensor BCEWithLogitsLoss::forward(const Tensor& logits, const Tensor& target) {
  return binary_cross_entropy_with_logits(logits, target, weight_, pos_weight_,
                                          reduction_name(reduction()));
}

NLLLoss::NLLLoss(Tensor weight, int64_t ignore_index, ReductionArg reduction)
    : Loss(reduction), ignore_index_(ignore_index) {
  if (weight.defined()) weight_ = register_buffer("weight", weight);
}
Tensor NLLLoss::forward(const Tensor& logp, const Tensor& target) {
  return nll_loss(logp, target, weight_, ignore_index_, reduction_name(reduction()));
}

Tensor L1Loss::forward(const Tensor& x, const Tensor& y) {
  return l1_loss(x, y, reduction_name(reduction()));
}
Tensor SmoothL1Loss::forward(const Tensor& x, const Tensor& y) {
  return smooth_l1_loss(x, y, reduction_name(reduction()), beta_);
}
Tensor HuberLoss::forward(const Tensor& x, const Tensor& y) {
  return huber_loss(x, y, reduction_name(reduction()), delta_);
}

// batchmean is not a Reduction: the base keeps Mean and mode_ the name
KLDivLoss::KLDivLoss(const std::string& reduction, bool log_target)
    : Loss(reduction == "batchmean" ? ReductionArg(Reduction::Mean) : ReductionArg(reduction)),
      mode_(reduction),
      log_target_(log_target) {}
Tensor KLDivLoss::forward(const Tensor& input, const Tensor& target) {
  return kl_div(input, target, mode_, log_target_);
}

}  // namespace minidl::nn
