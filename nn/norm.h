// Batch normalization: BatchNorm1d and BatchNorm2d (parallel::SyncBatchNorm
// builds on the same base).
//
// Per channel c, with the mean and biased variance taken over every dim but
// the channel dim 1 (N for [N, C]; N, L for [N, C, L]; N, H, W for [N, C, H, W]):
//   y = (x - mean_c) / sqrt(var_c + eps) * weight_c + bias_c
// Training mode uses the batch's mean and biased variance, and updates the
// running estimates as PyTorch does:
//   running_mean = (1 - momentum) running_mean + momentum mean
//   running_var  = (1 - momentum) running_var  + momentum var * n / (n - 1)
// (n values per channel: the running variance is the unbiased one), and
// num_batches_tracked += 1 (in int64 on the tensors' device, without a host
// read). Evaluation mode normalizes with the running estimates. Parameters:
// weight [C] (ones), bias [C] (zeros), absent without affine. Buffers:
// running_mean [C] (zeros), running_var [C] (ones),
// num_batches_tracked [] int64: PyTorch's state_dict names, so checkpoints
// load in both. The forward is the fused batch_norm op (framework/ops.h: one
// pass for the statistics, one for the output, two for the backward); a
// subclass that takes the training statistics itself (SyncBatchNorm) composes
// autograd ops around them instead. There is no hand-written backward. A
// wrong input rank or channel count throws minidl::Error naming the expected
// and the got shape; so does training on one value per channel.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "nn/cell.h"

namespace minidl::nn {

struct BatchNormOptions {
  double eps = 1e-5;
  double momentum = 0.1;
  bool affine = true;  // learnable weight and bias
};

class BatchNorm : public Cell {
 public:
  using Cell::forward;
  Tensor forward(const Tensor& x) override;

  const int64_t num_features;
  const double eps, momentum;
  Tensor weight, bias;  // undefined without affine
  Tensor running_mean, running_var, num_batches_tracked;

 protected:
  // name and expected ("BatchNorm2d", "[N, C, H, W]") for errors; ranks:
  // the input ranks accepted ({4}; empty: any rank >= 2).
  BatchNorm(const char* name, const char* expected, std::vector<int64_t> ranks,
            int64_t num_features, BatchNormOptions options);

  // The batch's per-channel mean and biased variance, each [1, C, 1, ...]
  // (x's rank), and the number of values per channel they were taken over.
  struct Moments {
    Tensor mean, var;
    int64_t count;
  };
  // Training mode's statistics of x over its dims `dims`, or nullopt (this
  // default): the fused batch_norm op takes them itself. SyncBatchNorm
  // overrides it to take them over every rank; forward then normalizes with
  // them by composed ops (gradients flow through them).
  virtual std::optional<Moments> batch_moments(const Tensor& x, const std::vector<int64_t>& dims);

 private:
  void check_input(const Tensor& x) const;
  std::string name_, expected_;
  std::vector<int64_t> ranks_;
};

// x [N, C] or [N, C, L] -> the same shape.
class BatchNorm1d : public BatchNorm {
 public:
  explicit BatchNorm1d(int64_t num_features, BatchNormOptions options = {})
      : BatchNorm("BatchNorm1d", "[N, C] or [N, C, L]", {2, 3}, num_features, options) {}
};

// x [N, C, H, W] -> [N, C, H, W].
class BatchNorm2d : public BatchNorm {
 public:
  explicit BatchNorm2d(int64_t num_features, BatchNormOptions options = {})
      : BatchNorm("BatchNorm2d", "[N, C, H, W]", {4}, num_features, options) {}
};

}  // namespace minidl::nn
