// DataParallel: one model replicated on every rank, each rank training on its
// own shard of the batch, gradients averaged over ranks before every update
// (Paddle's DataParallel, PyTorch's DistributedDataParallel).
//
//   parallel::init();
//   Net net;
//   parallel::DataParallel dp(net);              // checks the replicas, copies rank 0's weights
//   optim::Momentum opt(dp.trainable_params(), /*lr=*/0.01, /*momentum=*/0.9);
//   Tensor loss = loss_fn(dp(x_shard), y_shard);  // x_shard: this rank's rows of the batch
//   loss.backward();                               // automatic style: grads are now the mean
//   opt.step();
//   opt.zero_grad();
//
// Construction (a collective over `group`: every member constructs together)
// 1. Registers `module` as the child "module" (parameters "module.fc1.weight", ...).
// 2. Checks that every rank holds the same parameters: names, shapes, dtypes
//    and requires_grad, in the same order. On a mismatch EVERY rank throws the
//    same minidl::Error naming the first rank that differs from rank 0 and its
//    first differing parameter, e.g.
//      "DataParallel: rank 1 has parameter fc1.weight [10, 5] where rank 0 has
//       fc1.weight [10, 4] (parameter 0); ranks that differ from rank 0: 1"
//    (all ranks take the same collective path, so it never hangs).
//    Then checks that every rank has the same bucket_bytes (the bucket layout),
//    the same way ("DataParallel: rank 1 has bucket_bytes 65536 where rank 0
//    has 26214400; ...").
// 3. Broadcasts rank 0's parameter values (in buckets of about bucket_bytes)
//    so every replica starts identical; then checks that every rank has the
//    same buffers (names, shapes, dtypes: "DataParallel: rank 1 has buffers
//    [...] where rank 0 has [...]") and broadcasts rank 0's buffers too (e.g.
//    BatchNorm's running statistics; PyTorch's broadcast_buffers, done once:
//    SyncBatchNorm keeps them equal afterwards, BatchNorm2d lets them drift
//    apart with each rank's own batches).
//
// Gradients are reduced for the module's trainable parameters (those that
// require grad at construction), in buckets: the parameters are taken in
// REVERSE registration order (backward produces the last layers' gradients
// first) and a bucket is closed before it would exceed bucket_bytes of
// float32 (a larger tensor gets a bucket alone; 0: one tensor per bucket).
// Two styles, never both in one iteration:
//
// Automatic (the default, when scale_loss() was not called):
//   - each parameter's grad-ready hook marks it ready when backward has
//     finished its gradient; when every parameter of bucket b is ready (and
//     buckets 0..b-1 have started: buckets start in index order, the same on
//     every rank), its gradients are put into the bucket's float32 buffer and
//     a non-blocking allreduce-sum starts WHILE backward still runs (the last
//     bucket, with no later gradient to overlap with, runs blocking: Open
//     MPI's blocking allreduce is the faster call);
//   - at the end of backward, buckets not yet started are started (a missing
//     gradient counts as zeros), all are waited for and divided by the number
//     of ranks in float32 (the same numbers come cheaper where they can: on
//     two ranks MPI takes the mean inside the reduction, ReduceOp::Avg; on
//     another power of two each gradient is multiplied by 1 / ranks before the
//     sum);
//   - each float32 .grad() is then a view into its bucket's buffer (see
//     grad_bucket.h): the next reduction finds it there and copies nothing; a
//     float16 one gets the result cast back.
//   After loss.backward() every rank's gradients are the mean over ranks; with
//   mean losses on equal shards that is the full-batch gradient.
//   The hooks sit on the parameters, so any backward that reaches them
//   reduces, whether or not the forward went through the wrapper; a backward
//   that reaches none of them does nothing.
//
// Explicit (Paddle's reference example):
//   loss = dp.scale_loss(loss);       // loss / nranks; marks this iteration explicit
//   loss.backward();                  // no communication
//   dp.apply_collective_grads();      // bucketed allreduce-SUM: the sum of loss/nranks
//                                     // gradients is the mean
//
// no_sync(): while the returned guard lives, backward does not communicate and
// gradients accumulate locally; the next automatic backward outside the guard
// reduces the accumulated gradients (gradient accumulation with one
// communication per update).
//
// With one rank nothing communicates: the automatic style leaves gradients
// unchanged, scale_loss returns the loss itself.
//
// Errors (minidl::Error):
//   - the replica check above;
//   - this process is not a member of `group` (from new_group);
//   - apply_collective_grads() without scale_loss() in this iteration (after
//     an automatic backward it would reduce the gradients twice).
// Rules (collectives, so breaking them hangs or mismatches like raw MPI):
//   every rank runs the same number of backward passes through the module,
//   inside or outside no_sync() alike, and uses the same style. One
//   DataParallel per module at a time. If an exception escapes backward, the
//   next forward() through the wrapper abandons that iteration's reduction.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "nn/cell.h"
#include "parallel/communicator.h"
#include "parallel/grad_reducer.h"

namespace minidl::parallel {

struct DataParallelOptions {
  size_t bucket_bytes = kDefaultBucketBytes;      // float32 bytes per allreduce
  std::shared_ptr<Communicator> group = nullptr;  // null: the world (parallel::world_ptr())
};

// What the wrapper did, for tests and timelines. The per-backward counts
// describe the latest automatic backward through the module.
struct DataParallelStats {
  int64_t reductions = 0;                // gradient reductions that communicated, in all
  int64_t hooks = 0;                     // grad-ready hooks that fired in the latest backward
  int64_t buckets_started_in_hooks = 0;  // allreduces started from a hook, backward still running
  int64_t buckets_started_at_end = 0;    // allreduces started by the end-of-backward callback
  int64_t hooks_after_first_start = 0;   // hooks fired after the first allreduce had started:
                                         // > 0 means communication overlapped backward
};

class DataParallel : public nn::Cell {
 public:
  // Collective over the group; needs parallel::init() first when group is null.
  explicit DataParallel(nn::Cell& module, DataParallelOptions options = {});
  ~DataParallel() override;

  using nn::Cell::forward;
  Tensor forward(const Tensor& x) override;                   // module(x)
  Tensor forward(const Tensor& a, const Tensor& b) override;  // module(a, b)

  // loss / nranks (autograd flows through it); the loss itself on one rank.
  // Marks the iteration explicit until apply_collective_grads().
  Tensor scale_loss(const Tensor& loss);
  // Allreduce-sums every trainable parameter's gradient (undefined ones count
  // as zeros and get a defined result) and leaves the results in .grad() as
  // above.
  // Throws unless scale_loss() was called since the last apply_collective_grads().
  void apply_collective_grads();

  // While alive, backward does not communicate (see above). Must not outlive
  // the wrapper; guards may nest.
  class NoSyncGuard {
   public:
    ~NoSyncGuard();
    NoSyncGuard(const NoSyncGuard&) = delete;
    NoSyncGuard& operator=(const NoSyncGuard&) = delete;

   private:
    friend class DataParallel;
    explicit NoSyncGuard(DataParallel& dp);
    DataParallel& dp_;
  };
  [[nodiscard]] NoSyncGuard no_sync() { return NoSyncGuard(*this); }

  nn::Cell& module() const { return module_; }
  int nranks() const;
  Communicator& group() const;
  // The module's trainable parameters, in registration order, and the
  // buckets as indices into that list (bucket 0 holds the last parameters).
  const std::vector<Tensor>& reduced_parameters() const;
  const std::vector<std::vector<size_t>>& buckets() const;
  const DataParallelStats& stats() const;

 private:
  struct State;
  nn::Cell& module_;
  std::shared_ptr<State> state_;  // grad-ready hooks hold it weakly
  int end_callback_id_ = 0;
};

}  // namespace minidl::parallel
