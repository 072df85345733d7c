#include "nn/norm.h"

#include <algorithm>

#include "framework/ops.h"

namespace minidl::nn {

BatchNorm::BatchNorm(const char* name, const char* expected, std::vector<int64_t> ranks,
                     int64_t c, BatchNormOptions o)
    : num_features(c),
      eps(o.eps),
      momentum(o.momentum),
      name_(name),
      expected_(expected),
      ranks_(std::move(ranks)) {
  MINIDL_CHECK(c > 0 && o.eps > 0 && o.momentum >= 0 && o.momentum <= 1, name_,
               ": expected num_features > 0, eps > 0 and 0 <= momentum <= 1, got ", c, ", ",
               o.eps, ", ", o.momentum);
  if (o.affine) {
    weight = register_parameter("weight", Tensor::ones({c}));
    bias = register_parameter("bias", Tensor::zeros({c}));
  }
  running_mean = register_buffer("running_mean", Tensor::zeros({c}));
  running_var = register_buffer("running_var", Tensor::ones({c}));
  num_batches_tracked = register_buffer("num_batches_tracked", Tensor::zeros({}, kInt64));
}

void BatchNorm::check_input(const Tensor& x) const {
  const bool rank_ok = ranks_.empty()
                           ? x.dim() >= 2
                           : std::find(ranks_.begin(), ranks_.end(), x.dim()) != ranks_.end();
  MINIDL_CHECK(rank_ok && x.size(1) == num_features, name_, "(", num_features,
               "): expected input ", expected_, " with C = ", num_features, ", got ", x.shape());
}

// The fused op takes training mode's statistics itself.
std::optional<BatchNorm::Moments> BatchNorm::batch_moments(const Tensor&,
                                                           const std::vector<int64_t>&) {
  return std::nullopt;
}

// x [N, C, *] -> [N, C, *]
Tensor BatchNorm::forward(const Tensor& x) {
  check_input(x);
  std::vector<int64_t> dims{0};
  for (int64_t d = 2; d < x.dim(); ++d) dims.push_back(d);
  std::optional<Moments> m;
  if (is_training()) {
    m = batch_moments(x, dims);
    MINIDL_CHECK((m ? m->count : x.numel() / num_features) > 1, name_, "(", num_features,
                 "): training needs more than one value per channel, got input ", x.shape());
    NoGradGuard no_grad;
    num_batches_tracked.increment_();  // on its device: no host read
  }
  if (!m)
    return batch_norm(x, weight, bias, running_mean, running_var, is_training(), momentum, eps);
  // A subclass's statistics (SyncBatchNorm): composed ops, the running estimates updated here
  Shape per_channel(x.dim(), 1);  // [1, C, 1, ...]
  per_channel[1] = num_features;
  {
    NoGradGuard no_grad;
    const double unbias = double(m->count) / double(m->count - 1);
    running_mean.copy_(running_mean * (1 - momentum) + m->mean.reshape({num_features}) * momentum);
    running_var.copy_(running_var * (1 - momentum) +
                      m->var.reshape({num_features}) * (momentum * unbias));
  }
  Tensor y = (x - m->mean) / (m->var + eps).sqrt();
  if (weight.defined()) y = y * weight.reshape(per_channel) + bias.reshape(per_channel);
  return y;
}

}  // namespace minidl::nn
