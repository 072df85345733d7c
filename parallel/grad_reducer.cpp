#include "parallel/grad_reducer.h"

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
  size_t total = 0;
  for (const Tensor& p : params_) {
    offset_.push_back(total);
    total += static_cast<size_t>(p.numel());
  }
  flat_.resize(total);
}

DistributedGradReducer::DistributedGradReducer(std::vector<Tensor> parameters,
                                               const GradReducerOptions& o)
    : DistributedGradReducer(std::move(parameters), o.mean, o.degree, o.bucket_bytes, o.group) {}

// dst[0, n) = g as float32 (zeros for an undefined g).
static void to_float32(const Tensor& g, float* dst, size_t n) {
  if (!g.defined()) {
    std::memset(dst, 0, n * sizeof(float));
    return;
  }
  const void* p = g.raw_data();
  switch (g.dtype()) {
    case kFloat32: std::memcpy(dst, p, n * sizeof(float)); break;
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

// out = src[0, numel) cast to out's dtype.
static void from_float32(const float* src, const Tensor& out) {
  size_t n = static_cast<size_t>(out.numel());
  void* p = out.raw_data();
  switch (out.dtype()) {
    case kFloat32: std::memcpy(p, src, n * sizeof(float)); break;
    case kFloat16:
      for (size_t i = 0; i < n; ++i) static_cast<Half*>(p)[i] = float_to_half(src[i]);
      break;
    case kInt32:
      for (size_t i = 0; i < n; ++i) static_cast<int32_t*>(p)[i] = static_cast<int32_t>(src[i]);
      break;
    case kInt64:
      for (size_t i = 0; i < n; ++i) static_cast<int64_t*>(p)[i] = static_cast<int64_t>(src[i]);
      break;
  }
}

std::vector<Tensor> DistributedGradReducer::reduce(const std::vector<Tensor>& grads) {
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
  if (group_->size() == 1 && (!mean_ || degree_ == 1)) return grads;

  // Pack and start every bucket before waiting for any.
  std::vector<std::unique_ptr<Work>> works;
  for (const auto& bucket : buckets_) {
    size_t begin = offset_[bucket.front()], count = 0;
    for (size_t i : bucket) {
      size_t n = static_cast<size_t>(params_[i].numel());
      to_float32(grads[i], flat_.data() + offset_[i], n);
      count += n;
    }
    works.push_back(group_->allreduce_async(flat_.data() + begin, count, ElemType::Float32,
                                            ReduceOp::Sum));
  }

  std::vector<Tensor> out(grads.size());
  const float d = static_cast<float>(degree_);
  for (size_t b = 0; b < buckets_.size(); ++b) {
    works[b]->wait();
    for (size_t i : buckets_[b]) {
      float* x = flat_.data() + offset_[i];
      size_t n = static_cast<size_t>(params_[i].numel());
      if (mean_)
        for (size_t k = 0; k < n; ++k) x[k] /= d;
      DType dtype = grads[i].defined() ? grads[i].dtype() : params_[i].dtype();
      out[i] = Tensor::empty(params_[i].shape(), dtype);
      from_float32(x, out[i]);
    }
  }
  return out;
}

void DistributedGradReducer::reduce_grads() {
  std::vector<Tensor> grads;
  grads.reserve(params_.size());
  for (const Tensor& p : params_) grads.push_back(p.grad());
  std::vector<Tensor> reduced = reduce(grads);
  for (size_t i = 0; i < params_.size(); ++i)
    if (!reduced[i].same(grads[i])) params_[i].set_grad(reduced[i]);
}

}  // namespace minidl::parallel
