// Fused losses: forward and backward in one pass each, no intermediate graph.
#include <cmath>

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
  std::vector<int64_t> y(N);
  for (int64_t i = 0; i < N; ++i) {
    y[i] = labels.dtype() == kInt64 ? labels.data<int64_t>()[i] : labels.data<int32_t>()[i];
    MINIDL_CHECK(y[i] >= 0 && y[i] < C, "cross_entropy: label ", y[i], " at row ", i,
                 " out of range [0, ", C, ") for logits ", logits.shape());
  }
  const bool want_grad = needs_grad({&logits});
  Tensor probs = want_grad ? Tensor::empty(logits.shape()) : Tensor();  // softmax, for backward
  const float* px = logits.data<float>();
  float* pp = want_grad ? probs.data<float>() : nullptr;
  double total = 0;
#pragma omp parallel for reduction(+ : total) if (N * C > 65536)
  for (int64_t i = 0; i < N; ++i) {
    const float* row = px + i * C;
    float m = row[0];
    for (int64_t c = 1; c < C; ++c) m = std::max(m, row[c]);
    double s = 0;
    for (int64_t c = 0; c < C; ++c) s += std::exp(static_cast<double>(row[c] - m));
    const double lse = m + std::log(s);
    total += lse - row[y[i]];
    if (pp) {
      const float log_s = static_cast<float>(std::log(s));  // exact for large logits too
      for (int64_t c = 0; c < C; ++c) pp[i * C + c] = std::exp((row[c] - m) - log_s);
    }
  }
  Tensor out = Tensor::full({}, total / N);
  if (!want_grad) return out;
  return record(out, "cross_entropy", {logits}, [probs, y, N, C](const Tensor& g) {
    // The node runs at most once (backward frees the graph), so the saved
    // probabilities become the gradient in place.
    const float scale = static_cast<float>(g.item() / N);
    float* gp = probs.data<float>();
    for (int64_t i = 0; i < N; ++i) {
      for (int64_t c = 0; c < C; ++c) gp[i * C + c] *= scale;
      gp[i * C + y[i]] -= scale;
    }
    return std::vector<Tensor>{probs};
  });
}

}  // namespace minidl
