// SyncBatchNorm: batch normalization over the whole data-parallel batch
// (PyTorch's nn.SyncBatchNorm, MindSpore's nn.SyncBatchNorm).
//
// In training mode each rank's per-channel sum, sum of squares and count are
// summed over the group with one allreduce, so every rank normalizes with the
// mean and biased variance of the global batch:
//   mean = sum_r S1_r / n,  var = sum_r S2_r / n - mean^2,  n = sum_r n_r
// and the running estimates (nn::BatchNorm's update, n values) are the same on
// every rank. Backward flows through the allreduce (allreduce_sum below): each
// rank's statistics gradient is summed over ranks, so rank r's input gradient
// is the gradient of the sum of every rank's loss, as if one process had the
// whole batch. With DataParallel averaging the parameter gradients, N ranks
// with batch B/N then train exactly like one rank with batch B (up to float
// rounding in the sums: tests/parallel/test_sync_batch_norm.cpp).
// Evaluation mode communicates nothing (the running estimates). A group of
// one rank takes the same sums without communicating, so it is the reference
// N ranks are compared with; it differs from nn::BatchNorm2d's fused op
// (shifted sums in double) by float rounding only (E[x^2] - mean^2 in float
// loses digits when |mean| >> std; normalize inputs, as usual). Training mode
// composes autograd ops around these statistics (the fused batch_norm op
// takes its own); evaluation mode is the fused op.
//
// Collective in training mode: every rank of the group calls forward (and
// backward) together, in the same order as its other collectives.
// Input [N, C, *] (any rank >= 2) -> the same shape; parameters and buffers
// are nn::BatchNorm's (weight, bias, running_mean, running_var,
// num_batches_tracked), so a checkpoint loads into a BatchNorm2d and back.
#pragma once
#include <memory>

#include "nn/norm.h"
#include "parallel/communicator.h"

namespace minidl::parallel {

class SyncBatchNorm : public nn::BatchNorm {
 public:
  // group null: the world (parallel::world_ptr(); needs parallel::init()).
  explicit SyncBatchNorm(int64_t num_features, nn::BatchNormOptions options = {},
                         std::shared_ptr<Communicator> group = nullptr);

 protected:
  std::optional<Moments> batch_moments(const Tensor& x, const std::vector<int64_t>& dims) override;

 private:
  std::shared_ptr<Communicator> group_;
};

// x [...] float32 -> [...]: the elementwise sum of every rank's x (a
// collective). Its backward is the same sum of every rank's output gradient,
// since each rank's output depends on each rank's x; so every rank must run
// backward through it too. Works on any device (communicates via the host).
Tensor allreduce_sum(const Tensor& x, std::shared_ptr<Communicator> group);

}  // namespace minidl::parallel
