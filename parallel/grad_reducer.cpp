#include "parallel/grad_reducer.h"

#include <algorithm>
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
    : params_(std::move(parameters)),
      mean_(mean),
      bucket_bytes_(bucket_bytes),
      group_(group ? std::move(group) : world_ptr()) {
  if (degree && *degree <= 0)
    throw std::invalid_argument(cat("DistributedGradReducer: degree must be > 0, got ", *degree));
  degree_ = degree ? *degree : group_->size();
  for (size_t i = 0; i < params_.size(); ++i)
    MINIDL_CHECK(params_[i].defined(), "DistributedGradReducer: parameter ", i, " is undefined");
  buckets_ = plan_buckets(params_, bucket_bytes_);
  for (const auto& bucket : buckets_) {
    std::vector<Tensor> members;
    for (size_t i : bucket) members.push_back(params_[i]);
    grad_buckets_.emplace_back(std::move(members));
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
    MINIDL_CHECK(grads[i].device() == params_[i].device(), "DistributedGradReducer: gradient ", i,
                 " is on ", device_name(grads[i].device()), " but parameter ", i, " is on ",
                 device_name(params_[i].device()));
  }
  MINIDL_CHECK(group_->rank() >= 0,
               "DistributedGradReducer: this process is not a member of "
               "the reducer's group (from new_group); only its members may reduce");
  return !(group_->size() == 1 && (!mean_ || degree_ == 1));
}

MeanSplit DistributedGradReducer::split() const {
  return mean_ ? mean_split(degree_, group_->size()) : MeanSplit{};
}

void DistributedGradReducer::allreduce_buckets(const std::vector<Tensor>& buffers,
                                               const std::function<void(size_t)>& done) {
  constexpr size_t kSmallElements = (size_t{64} << 10) / sizeof(float);
  std::vector<std::pair<size_t, std::unique_ptr<Work>>> in_flight;
  for (size_t b = 0; b < buffers.size(); ++b) {
    const size_t n = grad_buckets_[b].numel();
    if (n < kSmallElements) {
      in_flight.emplace_back(b, group_->allreduce_async(buffers[b], split().op));
    } else {
      group_->allreduce(buffers[b], split().op);
      done(b);
    }
  }
  for (auto& [b, work] : in_flight) {
    work->wait();
    done(b);
  }
}

std::vector<Tensor> DistributedGradReducer::reduce(const std::vector<Tensor>& grads) {
  if (!check(grads)) return grads;
  std::vector<std::vector<Tensor>> inputs(buckets_.size());
  std::vector<Tensor> buffers;
  for (size_t b = 0; b < buckets_.size(); ++b) {
    for (size_t i : buckets_[b]) inputs[b].push_back(grads[i]);
    buffers.push_back(grad_buckets_[b].pack_new(inputs[b], split().scale));
  }
  std::vector<Tensor> out(grads.size());
  allreduce_buckets(buffers, [&](size_t b) {
    std::vector<Tensor> results =
        grad_buckets_[b].unpack_new(buffers[b], inputs[b], split().divisor);
    for (size_t k = 0; k < results.size(); ++k) out[buckets_[b][k]] = std::move(results[k]);
  });
  return out;
}

void DistributedGradReducer::reduce_grads() {
  std::vector<Tensor> grads;
  grads.reserve(params_.size());
  for (const Tensor& p : params_) grads.push_back(p.grad());
  const bool work = check(grads);
  grads.clear();  // the buckets must see each gradient held by its parameter alone
  if (!work) return;
  std::vector<Tensor> buffers;
  for (GradBucket& bucket : grad_buckets_) buffers.push_back(bucket.pack(split().scale));
  allreduce_buckets(buffers, [&](size_t b) { grad_buckets_[b].unpack(split().divisor); });
}

}  // namespace minidl::parallel
