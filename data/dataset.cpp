#include "data/dataset.h"

#include <condition_variable>
#include <cstring>
#include <exception>
#include <map>
#include <mutex>
#include <numeric>
#include <thread>

#include "framework/random.h"

namespace minidl::data {
namespace {

// rows [B, ...] of src [N, ...] at `index` (row copies; any dtype), into host
// memory pinned for `pin_for`.
Tensor gather_rows(const Tensor& src, const int64_t* index, int64_t count, Device pin_for) {
  Shape shape = src.shape();
  shape[0] = count;
  Tensor out = Tensor::empty_pinned(shape, src.dtype(), pin_for);
  const size_t row = src.size(0) ? src.nbytes() / static_cast<size_t>(src.size(0)) : 0;
  const char* in = static_cast<const char*>(src.raw_data());
  char* o = static_cast<char*>(out.raw_data());
  for (int64_t i = 0; i < count; ++i) std::memcpy(o + i * row, in + index[i] * row, row);
  return out;
}

}  // namespace

// ---- Dataset ----

Dataset::Dataset(Tensor data, Tensor labels) : data_(std::move(data)), labels_(std::move(labels)) {
  MINIDL_CHECK(data_.defined() && labels_.defined(),
               "Dataset: data and labels must be defined tensors");
  data_ = data_.contiguous(), labels_ = labels_.contiguous();  // batches copy whole rows
  MINIDL_CHECK(data_.dim() >= 1 && labels_.dim() == 1 && data_.size(0) == labels_.size(0),
               "Dataset: expected data [N, ...] and labels [N], got data ", data_.shape(),
               " and labels ", labels_.shape());
}

Dataset Dataset::map(const Transform& transform) const& { return Dataset(*this).map(transform); }

Dataset Dataset::map(const Transform& transform) && {
  MINIDL_CHECK(transform, "Dataset::map: empty transform");
  const Shape before = data_.shape();
  Tensor out = transform(std::move(data_));
  MINIDL_CHECK(out.defined() && out.dim() >= 1 && out.size(0) == before[0],
               "Dataset::map: the transform turned data ", before, " into ",
               out.defined() ? to_string(out.shape()) : "an undefined tensor",
               "; it must keep dim 0 (the ", before[0], " samples)");
  data_ = std::move(out);
  return std::move(*this);
}

Dataset Dataset::shuffle(uint64_t seed) const {
  Dataset d = *this;
  d.seed_ = seed;
  return d;
}

Dataset Dataset::augment(BatchTransform transform) const {
  MINIDL_CHECK(transform, "Dataset::augment: empty transform");
  Dataset d = *this;
  d.augments_.push_back(std::move(transform));
  return d;
}

Dataset Dataset::shard(int64_t shard_id, int64_t num_shards) const {
  MINIDL_CHECK(num_shards >= 1, "Dataset::shard: num_shards must be at least 1, got ", num_shards);
  MINIDL_CHECK(shard_id >= 0 && shard_id < num_shards, "Dataset::shard: shard_id ", shard_id,
               " is out of range for num_shards ", num_shards, " (expected 0 <= shard_id < ",
               num_shards, ")");
  Dataset d = *this;
  d.shard_id_ = shard_id;
  d.num_shards_ = num_shards;
  return d;
}

BatchDataset Dataset::batch(int64_t batch_size, bool drop_remainder) const {
  return BatchDataset(*this, batch_size, drop_remainder);
}

int64_t Dataset::size() const { return (data_.size(0) + num_shards_ - 1) / num_shards_; }

std::vector<int64_t> Dataset::indices(int64_t epoch) const {
  const int64_t n = data_.size(0);
  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  if (seed_) {
    RandomGenerator gen(splitmix64(splitmix64(*seed_) ^ static_cast<uint64_t>(epoch)));
    for (int64_t i = n - 1; i > 0; --i) std::swap(order[i], order[gen.randint(0, i + 1)]);
  }
  if (num_shards_ == 1) return order;
  // DistributedSampler: pad by wrapping around, then take every num_shards-th.
  std::vector<int64_t> mine(size());
  for (int64_t j = 0; j < size(); ++j) mine[j] = order[(shard_id_ + j * num_shards_) % n];
  return mine;
}

// ---- Epoch ----

struct Epoch::State {
  Tensor data, labels;
  std::vector<int64_t> order;
  std::vector<BatchTransform> augments;  // Dataset::augment's, given `epoch`
  int64_t epoch = 0;
  int64_t batch_size = 1, num_batches = 0, depth = 0;
  Device pin_for = Device::CPU;
  bool started = false;
  int64_t pos = 0;  // the step `current` holds; the epoch is over at num_batches
  Batch current;

  // Prefetch: a worker gathers up to `depth` batches beyond those taken. Steps
  // are claimed in order under the lock; when the caller needs a step nobody
  // has claimed yet (the worker was not scheduled in time), it gathers that one
  // itself instead of waiting for the worker.
  std::thread worker;
  std::mutex mu;
  std::condition_variable cv;
  std::map<int64_t, Batch> ready;  // finished batches by step
  int64_t claimed = 0;             // the next step nobody is gathering yet
  int64_t taken = 0;               // steps the caller has taken
  bool stop = false;
  std::exception_ptr error;

  ~State() {
    if (!worker.joinable()) return;
    {
      std::lock_guard<std::mutex> lock(mu);
      stop = true;
    }
    cv.notify_all();
    worker.join();
  }

  Batch make(int64_t step) const {
    const int64_t start = step * batch_size;
    const int64_t count = std::min<int64_t>(batch_size, static_cast<int64_t>(order.size()) - start);
    // data is pinned once: after the transforms, when there are some (each returns a new tensor)
    const Device data_pin = augments.empty() ? pin_for : Device::CPU;
    Batch b{gather_rows(data, order.data() + start, count, data_pin),
            gather_rows(labels, order.data() + start, count, pin_for)};
    const std::span<const int64_t> index(order.data() + start, static_cast<size_t>(count));
    for (const BatchTransform& augment : augments) {
      const Shape before = b.data.shape();
      b.data = augment(std::move(b.data), epoch, index);
      MINIDL_CHECK(b.data.defined() && b.data.dim() >= 1 && b.data.size(0) == count,
                   "Dataset::augment: the transform turned batch ", before, " into ",
                   b.data.defined() ? to_string(b.data.shape()) : "an undefined tensor",
                   "; it must keep dim 0 (the ", count, " samples)");
    }
    if (pin_for != Device::CPU && !b.data.is_pinned()) {
      Tensor pinned = Tensor::empty_pinned(b.data.shape(), b.data.dtype(), pin_for);
      pinned.copy_(b.data);
      b.data = pinned;
    }
    return b;
  }

  void produce() {
    try {
      for (;;) {
        int64_t step;
        {
          std::unique_lock<std::mutex> lock(mu);
          cv.wait(lock, [&] { return stop || claimed >= num_batches || claimed < taken + depth; });
          if (stop || claimed >= num_batches) return;
          step = claimed++;
        }
        Batch b = make(step);
        std::lock_guard<std::mutex> lock(mu);
        ready.emplace(step, std::move(b));
        cv.notify_all();
      }
    } catch (...) {
      std::lock_guard<std::mutex> lock(mu);
      error = std::current_exception();
      cv.notify_all();
    }
  }

  // Puts batch `pos` into `current`.
  void take() {
    if (depth == 0) {
      current = make(pos);
      return;
    }
    std::unique_lock<std::mutex> lock(mu);
    taken = pos + 1;
    if (claimed == pos) {  // not started: gather it here
      ++claimed;
      lock.unlock();
      cv.notify_all();
      current = make(pos);
      return;
    }
    cv.wait(lock, [&] { return ready.count(pos) || error; });
    auto it = ready.find(pos);
    if (it == ready.end()) std::rethrow_exception(error);
    current = std::move(it->second);
    ready.erase(it);
    lock.unlock();
    cv.notify_all();
  }
};

Epoch::Epoch(std::unique_ptr<State> state) : state_(std::move(state)) {}
Epoch::Epoch(Epoch&&) noexcept = default;
Epoch& Epoch::operator=(Epoch&&) noexcept = default;
Epoch::~Epoch() = default;

int64_t Epoch::num_batches() const { return state_->num_batches; }

Epoch::Iterator Epoch::begin() {
  MINIDL_CHECK(state_ && !state_->started,
               "Epoch: an epoch can be iterated only once; call epoch(e) again for a new pass");
  state_->started = true;
  if (state_->pos < state_->num_batches) {
    if (state_->depth > 0) state_->worker = std::thread([s = state_.get()] { s->produce(); });
    state_->take();
  }
  return Iterator(state_.get());
}

Batch& Epoch::Iterator::operator*() const { return state_->current; }

Epoch::Iterator& Epoch::Iterator::operator++() {
  if (++state_->pos < state_->num_batches) state_->take();
  return *this;
}

bool Epoch::Iterator::operator==(std::default_sentinel_t) const {
  return !state_ || state_->pos >= state_->num_batches;
}

// ---- BatchDataset ----

BatchDataset::BatchDataset(Dataset dataset, int64_t batch_size, bool drop_remainder)
    : dataset_(std::move(dataset)), batch_size_(batch_size), drop_remainder_(drop_remainder) {
  MINIDL_CHECK(batch_size >= 1, "Dataset::batch: batch_size must be at least 1, got ", batch_size);
}

BatchDataset BatchDataset::prefetch(int64_t depth) const {
  MINIDL_CHECK(depth >= 0, "BatchDataset::prefetch: depth must be >= 0, got ", depth);
  BatchDataset b = *this;
  b.prefetch_ = depth;
  return b;
}

BatchDataset BatchDataset::pin_memory(Device device) const {
  BatchDataset b = *this;
  b.pin_for_ = device;
  return b;
}

int64_t BatchDataset::num_batches() const {
  const int64_t n = dataset_.size();
  return n / batch_size_ + (!drop_remainder_ && n % batch_size_ != 0);  // no n + batch_size_ to overflow
}

int64_t BatchDataset::size() const {
  return drop_remainder_ ? num_batches() * batch_size_ : dataset_.size();
}

Epoch BatchDataset::epoch(int64_t e, int64_t first) const {
  MINIDL_CHECK(first >= 0 && first <= num_batches(), "BatchDataset::epoch: first batch ", first,
               " is outside 0..", num_batches(), " (the batches per epoch)");
  auto s = std::make_unique<Epoch::State>();
  s->data = dataset_.data();
  s->labels = dataset_.labels();
  s->order = dataset_.indices(e);
  s->augments = dataset_.augments();
  s->epoch = e;
  s->batch_size = batch_size_;
  s->num_batches = num_batches();
  s->depth = prefetch_;
  s->pin_for = pin_for_;
  s->pos = s->claimed = s->taken = first;
  return Epoch(std::move(s));
}

}  // namespace minidl::data
