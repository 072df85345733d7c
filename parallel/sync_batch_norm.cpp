#include "parallel/sync_batch_norm.h"

#include "framework/autograd.h"
#include "framework/ops.h"
#include "parallel/init.h"

namespace minidl::parallel {

// x [...] -> [...]; backward: g [...] -> the sum of every rank's g
Tensor allreduce_sum(const Tensor& x, std::shared_ptr<Communicator> group) {
  auto sum_over_ranks = [group](const Tensor& t) {
    Tensor host = t.detach().cpu().clone();  // a private contiguous copy on the host
    group->allreduce(host, ReduceOp::Sum);
    return host.to(t.device());
  };
  return record(sum_over_ranks(x), "allreduce_sum", {x}, [sum_over_ranks](const Tensor& g) {
    return std::vector<Tensor>{sum_over_ranks(g)};
  });
}

SyncBatchNorm::SyncBatchNorm(int64_t c, nn::BatchNormOptions options,
                             std::shared_ptr<Communicator> group)
    : nn::BatchNorm("SyncBatchNorm", "[N, C, ...]", /*ranks=*/{}, c, options),
      group_(group ? std::move(group) : world_ptr()) {}

// x [N, C, *] -> mean, var [1, C, 1, ...] over every rank's batch
std::optional<SyncBatchNorm::Moments> SyncBatchNorm::batch_moments(
    const Tensor& x, const std::vector<int64_t>& dims) {
  const int64_t C = num_features;
  // One allreduce of [S1 (C), S2 (C), n (1)]: the count travels as a float,
  // exact up to 2^24 values per channel.
  Tensor local = concat({x.sum(dims), (x * x).sum(dims),
                         Tensor::full({1}, double(x.numel() / C), kFloat32, x.device())});
  Tensor total = allreduce_sum(local, group_);
  const double n = total.slice(2 * C, 2 * C + 1).item();
  Shape per_channel(x.dim(), 1);
  per_channel[1] = C;
  Tensor mean = (total.slice(0, C) / n).reshape(per_channel);
  Tensor var = (total.slice(C, 2 * C) / n).reshape(per_channel) - mean * mean;
  return Moments{mean, var, static_cast<int64_t>(n)};
}

}  // namespace minidl::parallel
