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
// 2. allreduce-sums each bucket on `group`, in bucket order; a bucket of more
//    than 1 MiB goes in consecutive 1 MiB pieces (one allreduce each, so each
//    piece is still in cache when it is unpacked). Pieces of 64 KiB and more
//    use the blocking allreduce; smaller ones, whose cost is latency, are
//    started non-blocking and finished after the last piece, so their
//    latencies overlap. The pieces depend on the shapes only: the same on
//    every rank;
// 3. when mean, divides by degree in float32 (x / float(degree); for a
//    power-of-two degree computed as x * (1 / degree), the same number);
// 4. casts each result back to its gradient's dtype.
// reduce() returns new tensors and never modifies its inputs. reduce_grads()
// writes each result over the parameter's .grad() itself when nothing else can
// see that gradient (the parameter holds the only handle to it and the only
// reference to its storage, as after backward), and otherwise replaces it
// with a new tensor (set_grad); either way p.grad() then holds the result.
// An undefined gradient counts as zeros (all ranks must keep the same bucket
// layout) and gets a defined result.
// With one rank and nothing to divide (sum, or degree 1) the gradients
// themselves are returned (and left in place): the same tensors, bit for bit.
// Cost besides the allreduce: a bucket of several tensors is packed into
// float32 buffers the reducer keeps (allocated at first use: one 1 MiB piece,
// plus room for all pieces under 64 KiB) and unpacked with the division and
// the cast in the same pass; a bucket of one float32 tensor is reduced where
// its result lies (the new tensor, or in reduce_grads the gradient itself),
// so only the division touches it again.
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
  // Reduces every parameter's .grad(), leaving each result in .grad() (in place
  // when the gradient is private to its parameter, else with set_grad).
  void reduce_grads();

  bool mean() const { return mean_; }
  int degree() const { return degree_; }
  size_t bucket_bytes() const { return bucket_bytes_; }
  // Parameter indices of each bucket, in order (what one allreduce carries, or
  // one run of 1 MiB pieces for a bucket larger than that).
  const std::vector<std::vector<size_t>>& buckets() const { return buckets_; }
  Communicator& group() const { return *group_; }

 private:
  std::vector<Tensor> params_;
  bool mean_;
  int degree_;
  size_t bucket_bytes_;
  std::shared_ptr<Communicator> group_;
  std::vector<std::vector<size_t>> buckets_;
  std::vector<size_t> offset_;  // element offset of each parameter in its bucket
  std::vector<float> flat_;     // one piece of a bucket as float32; allocated at first use
  size_t small_elements_ = 0;   // all pieces under 64 KiB together
  std::vector<float> small_;    // those pieces as float32, side by side (all in flight at once)

  // Validates grads; false when there is nothing to do (one rank, nothing to divide).
  bool check(const std::vector<Tensor>& grads) const;
  // The reduced gradients: grads[i] itself, overwritten, where in_place[i]; else new.
  std::vector<Tensor> run(const std::vector<Tensor>& grads, const std::vector<char>& in_place);
};

// Buckets of parameter indices, in order, each at most bucket_bytes of float32
// (a larger tensor alone; 0: one tensor per bucket).
std::vector<std::vector<size_t>> plan_buckets(const std::vector<Tensor>& tensors,
                                              size_t bucket_bytes);

// Shared with DataParallel, which packs and unpacks buckets the same way.
namespace detail {
// True when param's gradient may be overwritten in place: it is defined, on
// the CPU, param holds the only handle to it, and its storage is its own
// (owned, not shared with another tensor or view).
bool grad_is_private(const Tensor& param);
// dst[0, n) = elements [begin, begin + n) of g as float32 (zeros for an
// undefined g; no copy when they are dst already).
void to_float32(const Tensor& g, size_t begin, size_t n, float* dst);
// Elements [begin, begin + n) of out = src[0, n) / divisor cast to out's dtype,
// in one pass (divisor 1: a plain cast; src may be out's own data).
void from_float32(const float* src, const Tensor& out, size_t begin, size_t n, float divisor);
}  // namespace detail

}  // namespace minidl::parallel
