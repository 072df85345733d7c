// Fused losses: forward and backward in one pass each, no intermediate graph.
#include "framework/ops.h"
#include "framework/ops/util.h"

namespace minidl {

// logits [N, C], labels [N] -> scalar mean_i(lse_i - logits[i, labels_i]);
// g_logits[i, c] = g / N * (softmax(logits)[i, c] - [c == labels_i])
Tensor cross_entropy(const Tensor& logits, const Tensor& labels) {
  require_f32("cross_entropy", logits, "logits");
  require_dim("cross_entropy", logits, 2, "logits");
  MINIDL_CHECK(labels.dtype() == kInt64 || labels.dtype() == kInt32,
               "cross_entropy: expected "
               "int32 or int64 labels, got ",
               dtype_name(labels.dtype()), " ", labels.shape());
  const int64_t N = logits.size(0), C = logits.size(1);
  MINIDL_CHECK(N > 0 && C > 0, "cross_entropy: empty logits ", logits.shape());
  MINIDL_CHECK(labels.shape() == Shape{N}, "cross_entropy: logits ", logits.shape(), " and labels ",
               labels.shape(), ": expected labels [", N, "]");
  const Kernels& kern = kernels_for("cross_entropy", logits, {&labels});
  if (labels.device() == Device::CPU) check_labels("cross_entropy", labels, logits, "logits");
  const bool want_grad = needs_grad({&logits});
  Tensor probs = want_grad ? empty_like(logits, logits.shape()) : Tensor();  // for backward
  Tensor out = empty_like(logits, {});
  kern.cross_entropy_forward(N, C, logits.data_ptr<float>(), labels.raw_data_ptr(), labels.dtype(),
                             out.data_ptr<float>(), want_grad ? probs.data_ptr<float>() : nullptr);
  if (!want_grad) return out;
  return record(out, "cross_entropy", {logits}, [probs, labels, N, C](const Tensor& g) {
    // The node runs at most once (backward frees the graph), so the saved
    // probabilities become the gradient in place.
    kernels(g.device()).cross_entropy_backward(N, C, labels.raw_data_ptr(), labels.dtype(),
                                               g.data_ptr<float>(), probs.data_ptr<float>());
    return std::vector<Tensor>{probs};
  });
}

}  // namespace minidl
