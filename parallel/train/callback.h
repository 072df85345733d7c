// The callback interface: the four events a training loop reports, the
// Callback base class, and CallbackList, which drives callbacks from any loop
// (Model::train, or one written by hand). The callbacks themselves: progress.h
// (printing), checkpoint.h, history.h (CSV and SVG), replica_check.h;
// parallel/train/callbacks.h includes them all.
//
// A hand-written loop fills the events itself (examples/mnist_train_loop.cpp):
//
//   CallbackList callbacks({LossMonitor(100), ModelCheckpoint("ckpt/net")});
//   callbacks.train_begin({.epochs = 2, .steps_per_epoch = batches.num_batches(),
//                          .batch_size = 64, .rank = parallel::rank(),
//                          .world_size = parallel::world_size(), .network = &net});
//   ... after each optimizer step:
//   callbacks.step_end({.epoch = e, .step = s, .global_step = g, .steps_per_epoch = n,
//                       .samples = 64, .loss = mean_loss_over_ranks});
//   ... at each epoch's end:
//   callbacks.epoch_end({.epoch = e, .steps = n});
//   callbacks.train_end();
//
// Every rank runs the same calls (HistoryWriter's and ReplicaCheck's are
// collective); the printing and writing callbacks act on rank 0 only.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

namespace minidl::nn {
class Cell;
}

namespace minidl {

// What a callback may ask of the driver that trains (Model is one): a whole
// training checkpoint, written to `path`, that the driver resumes exactly
// (Model::save_checkpoint). ModelCheckpoint with training_state uses it.
class Resumable {
 public:
  virtual void save_checkpoint(const std::string& path) const = 0;

 protected:
  ~Resumable() = default;
};

struct TrainBegin {
  int64_t epochs = 0;
  int64_t steps_per_epoch = 0;
  int64_t batch_size = 0;  // per rank
  int rank = 0, world_size = 1;
  nn::Cell* network = nullptr;  // what ModelCheckpoint saves and ReplicaCheck compares
  // The Model that trains, as ModelCheckpoint(training_state) needs it; null
  // in a hand-written loop (which may give a Resumable of its own).
  const Resumable* model = nullptr;
};

struct StepEnd {
  int64_t epoch = 0;        // from 1
  int64_t step = 0;         // from 1, within the epoch
  int64_t global_step = 0;  // from 1
  int64_t steps_per_epoch = 0;
  int64_t samples = 0;      // in this step, over all ranks
  double loss = 0;          // this step's loss (mean over ranks)
  double accuracy = 0;      // this step's batch accuracy (over all ranks)
  double seconds = 0;       // wall time of the step
  double lr = 0;            // the learning rate this step's update used
};

struct EpochEnd {
  int64_t epoch = 0;
  int64_t steps = 0;  // steps of this epoch taken (its last step's StepEnd::step)
  int64_t samples = 0;
  double seconds = 0;
  double mean_loss = 0;
  // eval() figures ("accuracy", "loss") on TrainOptions::valid_dataset; empty without one
  std::map<std::string, double> valid{};
};

class Callback {
 public:
  virtual ~Callback() = default;
  virtual void on_train_begin(const TrainBegin&) {}
  virtual void on_step_end(const StepEnd&) {}
  virtual void on_epoch_end(const EpochEnd&) {}
  virtual void on_train_end() {}

 protected:
  // Set from TrainBegin by CallbackList::train_begin, before on_train_begin.
  int rank_ = 0;  // the printing and writing callbacks act on rank 0 only
  nn::Cell* network_ = nullptr;
  const Resumable* model_ = nullptr;
  friend class CallbackList;
};

// Holds any callback: built from a value (copied) or a shared_ptr (shared).
class CallbackRef {
 public:
  template <class C, class = std::enable_if_t<std::is_base_of_v<Callback, std::decay_t<C>>>>
  CallbackRef(C&& c) : ptr_(std::make_shared<std::decay_t<C>>(std::forward<C>(c))) {}
  template <class C, class = std::enable_if_t<std::is_base_of_v<Callback, C>>>
  CallbackRef(std::shared_ptr<C> c) : ptr_(std::move(c)) {}
  Callback* operator->() const { return ptr_.get(); }

 private:
  std::shared_ptr<Callback> ptr_;
};

// Calls each event on every callback, in the list's order. train_begin first
// gives each callback the rank, network and Model of `b`.
class CallbackList {
 public:
  CallbackList(std::vector<CallbackRef> callbacks = {}) : callbacks_(std::move(callbacks)) {}
  void train_begin(const TrainBegin& b);
  void step_end(const StepEnd& s);
  void epoch_end(const EpochEnd& e);
  void train_end();

 private:
  std::vector<CallbackRef> callbacks_;
};

// The shortest decimal form of v that reads back as the same double (Python's
// repr, "7.793933868408203", "2.0"): how LossMonitor and HistoryWriter write losses.
std::string shortest_decimal(double v);

}  // namespace minidl
