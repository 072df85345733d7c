// DistributedGradReducer: makes every rank's gradients the mean (or sum) of
// all ranks' gradients, as MindSpore's nn.DistributedGradReducer does.
//
//   parallel::init();
//   parallel::DistributedGradReducer reducer(net.trainable_params());  // mean over the world
//   loss.backward();
//   reducer.reduce_grads();     // PyTorch style: each parameter's .grad() now holds the mean
//   opt.step();
// or, MindSpore style, on an explicit list of gradients:
//   std::vector<Tensor> mean_grads = reducer(grads);
//
// For gradients g[0..P) (same order and shapes as the parameters), each call:
// 1. casts every gradient to float32 (float16 ones too, so the sum neither
//    overflows nor rounds at float16 precision) into fused buckets: parameters
//    are taken in order and a bucket is closed before it would exceed
//    bucket_bytes of float32 data (a larger tensor gets a bucket alone;
//    bucket_bytes == 0 gives one bucket per tensor);
// 2. starts one non-blocking allreduce-sum per bucket on `group`, then waits
//    for each;
// 3. when mean, divides by degree in float32 (x / float(degree));
// 4. casts each result back to its gradient's dtype into a new tensor.
// The reducer keeps one float32 buffer as large as all parameters together.
// The inputs are never modified. An undefined gradient counts as zeros (all
// ranks must keep the same bucket layout) and gets a defined result.
// With one rank and nothing to divide (sum, or degree 1) the gradients
// themselves are returned: the same tensors, bit for bit.
//
// Errors: degree <= 0 throws std::invalid_argument naming the value; a wrong
// number of gradients, or a gradient whose shape differs from its
// parameter's, throws minidl::Error naming the index and both shapes.
// Every rank of `group` must call reduce the same number of times (it is a
// collective); a rank outside `group` gets a minidl::Error.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "framework/tensor.h"
#include "parallel/communicator.h"

namespace minidl::parallel {

inline constexpr size_t kDefaultBucketBytes = size_t{25} << 20;  // 25 MiB, PyTorch's bucket_cap_mb

struct GradReducerOptions {
  bool mean = true;
  std::optional<int> degree = std::nullopt;  // unset: the group's size
  size_t bucket_bytes = kDefaultBucketBytes;
  std::shared_ptr<Communicator> group = nullptr;  // null: the world (parallel::world_ptr())
};

class DistributedGradReducer {
 public:
  // Needs parallel::init() first when group is null.
  explicit DistributedGradReducer(std::vector<Tensor> parameters, bool mean = true,
                                  std::optional<int> degree = std::nullopt,
                                  size_t bucket_bytes = kDefaultBucketBytes,
                                  std::shared_ptr<Communicator> group = nullptr);
  DistributedGradReducer(std::vector<Tensor> parameters, const GradReducerOptions& options);

  // Returns the reduced gradients (new tensors; see above).
  std::vector<Tensor> reduce(const std::vector<Tensor>& grads);
  std::vector<Tensor> operator()(const std::vector<Tensor>& grads) { return reduce(grads); }
  // reduce() on every parameter's .grad(), writing each result back with set_grad.
  void reduce_grads();

  bool mean() const { return mean_; }
  int degree() const { return degree_; }
  size_t bucket_bytes() const { return bucket_bytes_; }
  // Parameter indices of each bucket, in order (what one allreduce carries).
  const std::vector<std::vector<size_t>>& buckets() const { return buckets_; }
  Communicator& group() const { return *group_; }

 private:
  std::vector<Tensor> params_;
  bool mean_;
  int degree_;
  size_t bucket_bytes_;
  std::shared_ptr<Communicator> group_;
  std::vector<std::vector<size_t>> buckets_;
  std::vector<size_t> offset_;  // element offset of each parameter in flat_
  std::vector<float> flat_;     // every gradient as float32, bucket after bucket
};

// Buckets of parameter indices, in order, each at most bucket_bytes of float32
// (a larger tensor alone; 0: one tensor per bucket).
std::vector<std::vector<size_t>> plan_buckets(const std::vector<Tensor>& tensors,
                                              size_t bucket_bytes);

}  // namespace minidl::parallel
