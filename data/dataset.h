// The input pipeline: an in-memory dataset, transformed, shuffled, sharded and
// batched, in the style of PyTorch's DataLoader and MindSpore's datasets:
//
//   auto train = data::MnistDataset(dir, data::Usage::Train)
//                    .map(data::Rescale(1.0 / 255, 0)).map(data::Normalize(0.1307, 0.3081))
//                    .shuffle(/*seed=*/0).shard(rank, world).batch(64);
//   for (int64_t e = 0; e < epochs; ++e)
//     for (auto& batch : train.epoch(e)) step(batch.data, batch.labels);
//
// Random augmentation runs per batch instead, on the prefetch thread:
// .augment(data::RandomShift(/*max_shift=*/2, seed)) before .batch() draws a
// new shift for every sample every epoch.
//
// All N samples live in one tensor data [N, ...] (MNIST: float32 [N, 1, 28, 28],
// 188 MB for 60,000 images) beside labels [N]; map() transforms them all at
// once, and a batch is a gather of rows. Dataset and BatchDataset are cheap
// handles: copies share the tensors, and every call returns a new handle.
//
// Sample order of epoch e (Dataset::indices): the identity, or with shuffle(seed)
// a permutation drawn from minidl::RandomGenerator seeded by (seed, e), so it is the
// same on every machine and differs between epochs. shard(r, S) then works like
// PyTorch's DistributedSampler: the order is padded by repeating its start up to
// a multiple of S, and position i goes to shard i mod S. Every shard therefore
// sees ceil(N / S) samples (all ranks run the same number of steps), and with
// batch B / S per shard, step k's batches of the S shards together hold exactly
// the samples of step k's batch B without sharding.
#pragma once
#include <cstdint>
#include <iterator>
#include <memory>
#include <optional>
#include <vector>

#include "data/transforms.h"
#include "framework/tensor.h"

namespace minidl::data {

struct Batch {
  Tensor data;    // [B, ...], the dataset's data dtype (MNIST: float32 [B, 1, 28, 28])
  Tensor labels;  // [B], the dataset's label dtype (MNIST: int64)
};

class BatchDataset;

class Dataset {
 public:
  // data [N, ...] and labels [N] of any dtypes; held, not copied.
  Dataset(Tensor data, Tensor labels);

  // Applies `transform` to the whole data tensor now; it must keep dim 0 (N).
  // On a temporary (a chain of calls) the built-in transforms work in place.
  Dataset map(const Transform& transform) const&;
  Dataset map(const Transform& transform) &&;
  // A new permutation each epoch, drawn from `seed` and the epoch number.
  Dataset shuffle(uint64_t seed) const;
  // Applies `transform` to every batch as it is gathered (on the prefetch
  // thread when there is one), anew each epoch: random augmentation such as
  // RandomShift, whose draws depend on (epoch, sample index) alone. Several
  // run in the order given, after the maps.
  Dataset augment(BatchTransform transform) const;
  // Keeps shard `shard_id` of `num_shards` (0 <= shard_id < num_shards), e.g.
  // shard(rank, world_size). Throws for arguments out of range.
  Dataset shard(int64_t shard_id, int64_t num_shards) const;
  // Groups each epoch's samples into batches of `batch_size` (> 0); the last
  // one is smaller, or dropped when `drop_remainder`.
  BatchDataset batch(int64_t batch_size, bool drop_remainder = false) const;

  // Samples per epoch in this shard: ceil(N / num_shards).
  int64_t size() const;
  int64_t num_shards() const { return num_shards_; }
  std::optional<uint64_t> shuffle_seed() const { return seed_; }  // none: file order
  int64_t shard_id() const { return shard_id_; }
  // All N samples after the maps, in file order (not shuffled or sharded).
  const Tensor& data() const { return data_; }
  const Tensor& labels() const { return labels_; }
  // The per-batch transforms augment() added, in order.
  const std::vector<BatchTransform>& augments() const { return augments_; }
  // This shard's sample indices (rows of data()) for epoch `epoch`, in order.
  std::vector<int64_t> indices(int64_t epoch) const;

 private:
  Tensor data_, labels_;
  std::optional<uint64_t> seed_;
  int64_t shard_id_ = 0, num_shards_ = 1;
  std::vector<BatchTransform> augments_;
};

// One pass over a BatchDataset, from BatchDataset::epoch(e): a range of
// Batch, iterated once. Unless prefetch is 0, a background thread gathers the
// next batches while the caller computes; a batch the thread has not started
// when the caller wants it, the caller gathers itself (no waiting on a thread
// the OS has not scheduled). Destroying the Epoch (a loop left by break, return
// or an exception) stops and joins that thread.
class Epoch {
  struct State;

 public:
  class Iterator {
   public:
    using iterator_category = std::input_iterator_tag;
    using value_type = Batch;
    using difference_type = std::ptrdiff_t;
    Iterator() = default;
    Batch& operator*() const;
    Batch* operator->() const { return &**this; }
    Iterator& operator++();
    void operator++(int) { ++*this; }
    bool operator==(std::default_sentinel_t) const;

   private:
    friend class Epoch;
    explicit Iterator(State* state) : state_(state) {}
    State* state_ = nullptr;
  };

  Epoch(Epoch&&) noexcept;
  Epoch& operator=(Epoch&&) noexcept;
  ~Epoch();

  // Starts the epoch (and the prefetch thread). Throws when called twice.
  Iterator begin();
  std::default_sentinel_t end() const { return {}; }
  int64_t num_batches() const;

 private:
  friend class BatchDataset;
  explicit Epoch(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

class BatchDataset {
 public:
  BatchDataset(Dataset dataset, int64_t batch_size, bool drop_remainder = false);

  // How many batches the background thread prepares ahead (default 2); 0
  // gathers each batch on the caller's thread when the loop asks for it.
  BatchDataset prefetch(int64_t depth) const;
  // Gathers batches into host memory pinned for `device` (Tensor::empty_pinned:
  // page-locked for CUDA, so batch.data.to(device) queues the copy and returns
  // at once; the CPU, the default, gathers into ordinary tensors). Model::train
  // and Model::eval set it to the network's device.
  BatchDataset pin_memory(Device device) const;
  // The batches of epoch `e` (numbered from 0): `for (auto& b : ds.epoch(e))`;
  // from batch `first` on when given (a resumed epoch: the batches are the same
  // as in a whole pass). Throws unless 0 <= first <= num_batches().
  Epoch epoch(int64_t e, int64_t first = 0) const;

  int64_t num_batches() const;  // per epoch, in this shard
  int64_t size() const;         // samples per epoch in this shard, in batches delivered
  int64_t batch_size() const { return batch_size_; }
  bool drop_remainder() const { return drop_remainder_; }
  int64_t prefetch_depth() const { return prefetch_; }
  Device pinned_for() const { return pin_for_; }
  const Dataset& dataset() const { return dataset_; }

 private:
  Dataset dataset_;
  int64_t batch_size_;
  bool drop_remainder_;
  int64_t prefetch_ = 2;
  Device pin_for_ = Device::CPU;
};

}  // namespace minidl::data
