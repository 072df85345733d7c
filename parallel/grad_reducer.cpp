#include "parallel/grad_reducer.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "parallel/init.h"

namespace minidl::parallel {

std::vector<std::vector<size_t>> plan_buckets(const std::vector<Tensor>& tensors,
                                              size_t bucket_bytes) {
  std::vector<std::vector<size_t>> buckets;
  size_t bytes = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    size_t b = static_cast<size_t>(tensors[i].numel()) * sizeof(float);
    if (buckets.empty() || bytes + b > bucket_bytes) {
      buckets.emplace_back();
      bytes = 0;
    }
    buckets.back().push_back(i);
    bytes += b;
  }
  return buckets;
}

namespace detail {

bool grad_is_private(const Tensor& param) {
  const std::shared_ptr<TensorImpl>& g = param.impl().grad;
  return g && g.use_count() == 1 && g->device == Device::CPU && g->storage &&
         g->storage.use_count() == 1 && g->storage->owned;
}

void to_float32(const Tensor& g, float* dst, size_t n) {
  if (!g.defined()) {
    std::memset(dst, 0, n * sizeof(float));
    return;
  }
  const void* p = g.raw_data();
  switch (g.dtype()) {
    case kFloat32:
      if (p != dst) std::memcpy(dst, p, n * sizeof(float));
      break;
    case kFloat16:
      for (size_t i = 0; i < n; ++i) dst[i] = half_to_float(static_cast<const Half*>(p)[i]);
      break;
    case kInt32:
      for (size_t i = 0; i < n; ++i) dst[i] = static_cast<float>(static_cast<const int32_t*>(p)[i]);
      break;
    case kInt64:
      for (size_t i = 0; i < n; ++i) dst[i] = static_cast<float>(static_cast<const int64_t*>(p)[i]);
      break;
  }
}

namespace {
// dst[k] = convert(src[k] / divisor), one pass (src may be dst).
template <class T, class Convert>
void store(const float* src, T* dst, size_t n, float divisor, Convert convert) {
  if (divisor == 1.0f)
    for (size_t k = 0; k < n; ++k) dst[k] = convert(src[k]);
  else
    for (size_t k = 0; k < n; ++k) dst[k] = convert(src[k] / divisor);
}
}  // namespace

void from_float32(const float* src, const Tensor& out, float divisor) {
  size_t n = static_cast<size_t>(out.numel());
  void* p = out.raw_data();
  switch (out.dtype()) {
    case kFloat32:
      if (divisor != 1.0f)
        store(src, static_cast<float*>(p), n, divisor, [](float x) { return x; });
      else if (p != src)
        std::memcpy(p, src, n * sizeof(float));
      break;
    case kFloat16:
      store(src, static_cast<Half*>(p), n, divisor, [](float x) { return float_to_half(x); });
      break;
    case kInt32:
      store(src, static_cast<int32_t*>(p), n, divisor,
            [](float x) { return static_cast<int32_t>(x); });
      break;
    case kInt64:
      store(src, static_cast<int64_t*>(p), n, divisor,
            [](float x) { return static_cast<int64_t>(x); });
      break;
  }
}

}  // namespace detail

DistributedGradReducer::DistributedGradReducer(std::vector<Tensor> parameters, bool mean,
                                               std::optional<int> degree, size_t bucket_bytes,
                                               std::shared_ptr<Communicator> group)
    : params_(std::move(parameters)), mean_(mean), bucket_bytes_(bucket_bytes),
      group_(group ? std::move(group) : world_ptr()) {
  if (degree && *degree <= 0)
    throw std::invalid_argument(cat("DistributedGradReducer: degree must be > 0, got ", *degree));
  degree_ = degree ? *degree : group_->size();
  for (size_t i = 0; i < params_.size(); ++i)
    MINIDL_CHECK(params_[i].defined(), "DistributedGradReducer: parameter ", i, " is undefined");
  buckets_ = plan_buckets(params_, bucket_bytes_);
  offset_.resize(params_.size());
  for (const auto& bucket : buckets_) {
    size_t n = 0;
    for (size_t i : bucket) {
      offset_[i] = n;
      n += static_cast<size_t>(params_[i].numel());
    }
    flat_size_ = std::max(flat_size_, n);
  }
}

DistributedGradReducer::DistributedGradReducer(std::vector<Tensor> parameters,
                                               const GradReducerOptions& o)
    : DistributedGradReducer(std::move(parameters), o.mean, o.degree, o.bucket_bytes, o.group) {}

bool DistributedGradReducer::check(const std::vector<Tensor>& grads) const {
  MINIDL_CHECK(grads.size() == params_.size(), "DistributedGradReducer: got ", grads.size(),
               " gradients for ", params_.size(), " parameters");
  for (size_t i = 0; i < grads.size(); ++i) {
    if (!grads[i].defined()) continue;
    MINIDL_CHECK(grads[i].shape() == params_[i].shape(), "DistributedGradReducer: gradient ", i,
                 " has shape ", grads[i].shape(), " but parameter ", i, " has shape ",
                 params_[i].shape());
    MINIDL_CHECK(grads[i].device() == Device::CPU, "DistributedGradReducer: gradient ", i,
                 " is not on the CPU");
  }
  MINIDL_CHECK(group_->rank() >= 0, "DistributedGradReducer: this process is not a member of "
               "the reducer's group (from new_group); only its members may reduce");
  return !(group_->size() == 1 && (!mean_ || degree_ == 1));
}

std::vector<Tensor> DistributedGradReducer::run(const std::vector<Tensor>& grads,
                                                const std::vector<char>& in_place) {
  const float divisor = mean_ ? static_cast<float>(degree_) : 1.0f;
  std::vector<Tensor> out(grads.size());
  for (size_t i = 0; i < grads.size(); ++i)
    out[i] = in_place[i] ? grads[i]
                         : Tensor::empty(params_[i].shape(),
                                         grads[i].defined() ? grads[i].dtype() : params_[i].dtype());
  for (const auto& bucket : buckets_) {
    const size_t first = bucket.front();
    if (bucket.size() == 1 && out[first].dtype() == kFloat32) {
      // A float32 result is its own bucket buffer: no packing, no unpacking.
      float* x = out[first].data<float>();
      const size_t n = static_cast<size_t>(out[first].numel());
      detail::to_float32(grads[first], x, n);
      group_->allreduce(x, n, ElemType::Float32, ReduceOp::Sum);
      detail::from_float32(x, out[first], divisor);
      continue;
    }
    if (flat_.empty()) flat_.resize(flat_size_);
    size_t count = 0;
    for (size_t i : bucket) {
      const size_t n = static_cast<size_t>(params_[i].numel());
      detail::to_float32(grads[i], flat_.data() + offset_[i], n);
      count += n;
    }
    group_->allreduce(flat_.data(), count, ElemType::Float32, ReduceOp::Sum);
    for (size_t i : bucket) detail::from_float32(flat_.data() + offset_[i], out[i], divisor);
  }
  return out;
}

std::vector<Tensor> DistributedGradReducer::reduce(const std::vector<Tensor>& grads) {
  if (!check(grads)) return grads;
  return run(grads, std::vector<char>(grads.size(), 0));
}

void DistributedGradReducer::reduce_grads() {
  std::vector<char> in_place(params_.size());
  for (size_t i = 0; i < params_.size(); ++i) in_place[i] = detail::grad_is_private(params_[i]);
  std::vector<Tensor> grads;
  grads.reserve(params_.size());
  for (const Tensor& p : params_) grads.push_back(p.grad());
  if (!check(grads)) return;
  std::vector<Tensor> reduced = run(grads, in_place);
  for (size_t i = 0; i < params_.size(); ++i)
    if (!reduced[i].same(grads[i])) params_[i].set_grad(reduced[i]);
}

}  // namespace minidl::parallel
