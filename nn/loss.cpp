#include "nn/loss.h"

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
  Tensor d = sub(pred, target.dtype() == pred.dtype() ? target : cast(target, pred.dtype()));
  return reduce(mul(d, d));
}

// logits [N, C], labels [N] int or [N, C] float -> [N] or scalar
Tensor CrossEntropyLoss::forward(const Tensor& logits, const Tensor& labels) {
  MINIDL_CHECK(logits.dim() == 2, "CrossEntropyLoss: expected logits [N, C], got ", logits.shape());
  const int64_t n = logits.size(0);
  if (!is_floating(labels.dtype())) {
    MINIDL_CHECK(labels.shape() == Shape{n}, "CrossEntropyLoss: logits ", logits.shape(),
                 " and labels ", labels.shape(), ": expected labels [", n, "]");
    if (reduction() == Reduction::Mean) return cross_entropy(logits, labels);
    if (reduction() == Reduction::Sum)
      return mul(cross_entropy(logits, labels), scalar_like(n, logits));
    return neg(gather(log_softmax(logits, 1), labels));
  }
  MINIDL_CHECK(labels.shape() == logits.shape(), "CrossEntropyLoss: logits ", logits.shape(),
               " and float targets ", labels.shape(),
               ": expected targets [N, C] (one-hot or "
               "probabilities) of the same shape, or int labels [N]");
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

}  // namespace minidl::nn
