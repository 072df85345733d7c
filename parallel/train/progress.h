// The printing callbacks (MindSpore's names and output formats). They print
// on rank 0 only; in data-parallel training the loss they see is the mean
// over ranks.
#pragma once
#include <chrono>
#include <cstdint>

#include "parallel/train/callback.h"

namespace minidl {

// Every n steps prints exactly `epoch: E step: S, loss is L`, L in the
// shortest decimal form that reads back as the same double (Python's repr),
// e.g. `epoch: 1 step: 100, loss is 7.793933868408203`.
class LossMonitor : public Callback {
 public:
  explicit LossMonitor(int64_t every = 1);
  void on_step_end(const StepEnd& s) override;

 private:
  int64_t every_;
};

// At each epoch's end: `epoch time: T ms, per step time: S ms, samples/s: N`.
class TimeMonitor : public Callback {
 public:
  void on_epoch_end(const EpochEnd& e) override;
};

// A live bar on a terminal (steps, loss, samples/s, ETA), redrawn in place;
// when stdout is not a terminal, a plain line every tenth of an epoch.
class ProgressBar : public Callback {
 public:
  ProgressBar();
  void on_train_begin(const TrainBegin& b) override;
  void on_step_end(const StepEnd& s) override;
  void on_epoch_end(const EpochEnd& e) override;

 private:
  bool tty_;
  int64_t epochs_ = 0, samples_ = 0;
  std::chrono::steady_clock::time_point epoch_start_;
  double seconds_ = 0;
};

}  // namespace minidl
