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
// 1. puts the gradients into fused buckets as float32 (float16 ones too, so
//    the sum neither overflows nor rounds at float16 precision): parameters
//    are taken in order and a bucket is closed before it would exceed
//    bucket_bytes of float32 data (a larger tensor gets a bucket alone;
//    bucket_bytes == 0 gives one bucket per tensor);
// 2. allreduce-sums each bucket on `group` in place, in bucket order: one
//    allreduce per bucket. Buckets under 64 KiB cost latency rather than
//    bandwidth: they are started non-blocking and finished after the last
//    one, so their latencies overlap;
// 3. when mean, divides by degree in float32 (x / float(degree)). The same
//    numbers come cheaper (barring results outside float32's normal range):
//    on two ranks with degree 2 MPI takes the mean inside the reduction
//    (ReduceOp::Avg: (a + b) / 2, no pass of its own); for another
//    power-of-two degree every gradient is multiplied by 1 / degree before
//    the sum (exact), in the copy into the bucket where there is one;
// 4. casts each result back to its gradient's dtype.
// reduce() returns new tensors (float32 ones are views into a new buffer per
// bucket) and never modifies its inputs. reduce_grads() leaves each float32
// result in .grad() as a view into the reducer's bucket buffer (see
// grad_bucket.h: PyTorch's gradient_as_bucket_view), so a later call finds
// the gradients already in place and copies nothing; it never writes into a
// gradient anyone else holds. Either way p.grad() then holds the result.
// An undefined gradient counts as zeros (all ranks must keep the same bucket
// layout) and gets a defined result.
// With one rank and nothing to divide (sum, or degree 1) the gradients
// themselves are returned (and left in place): the same tensors, bit for bit.
// Devices: the buckets live on the parameters' device (all on one), each
// gradient on its parameter's. A CUDA bucket goes through the communicator's
// device side (NCCL) where there is one, else through pinned host memory
// (Communicator::on_device); either way the numbers are those the CPU gives
// for the same inputs (the device's float32 kernels permitting).
//
// Errors: degree <= 0 throws std::invalid_argument naming the value; a wrong
// number of gradients, or a gradient whose shape differs from its
// parameter's, throws minidl::Error naming the index and both shapes (a
// gradient on another device than its parameter: both devices).
// Every rank of `group` must call reduce the same number of times (it is a
// collective); a rank outside `group` gets a minidl::Error.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "framework/tensor.h"
#include "parallel/communicator.h"
#include "parallel/grad_bucket.h"

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
  // Reduces every parameter's .grad(), leaving each result in .grad() (a view
  // into the bucket buffer for float32; see above).
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
  std::vector<GradBucket> grad_buckets_;  // their buffers, for reduce_grads()

  // Validates grads; false when there is nothing to do (one rank, nothing to divide).
  bool check(const std::vector<Tensor>& grads) const;
  // The multiplier before the allreduce, its op and the divisor after it (see 3. above).
  MeanSplit split() const;
  // Allreduces buffers[b] (numel[b] floats) for every bucket, calling done(b)
  // after each has its sum.
  void allreduce_buckets(const std::vector<Tensor>& buffers,
                         const std::function<void(size_t)>& done);
};

// Buckets of parameter indices, in order, each at most bucket_bytes of float32
// (a larger tensor alone; 0: one tensor per bucket).
std::vector<std::vector<size_t>> plan_buckets(const std::vector<Tensor>& tensors,
                                              size_t bucket_bytes);

}  // namespace minidl::parallel
