// Training callbacks for Model::train (MindSpore's names and output formats).
//
// A callback sees the training through four events. Pass callbacks by value
// in a braced list, `model.train(10, ds, {LossMonitor(100), ProgressBar()})`,
// or as std::shared_ptr when you want to read one afterwards. In data-parallel
// training the printing callbacks print on rank 0 only; the loss they see is
// the mean over ranks.
#pragma once
#include <chrono>
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

namespace minidl::nn {
class Cell;
}
namespace minidl::parallel {
class Communicator;
}

namespace minidl {

class Model;

struct TrainBegin {
  int64_t epochs = 0;
  int64_t steps_per_epoch = 0;
  int64_t batch_size = 0;  // per rank
  int rank = 0, world_size = 1;
  nn::Cell* network = nullptr;
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
  int64_t steps = 0;
  int64_t samples = 0;
  double seconds = 0;
  double mean_loss = 0;
  // eval() figures ("accuracy", "loss") on TrainOptions::valid_dataset; empty without one
  std::map<std::string, double> valid;
};

class Callback {
 public:
  virtual ~Callback() = default;
  virtual void on_train_begin(const TrainBegin&) {}
  virtual void on_step_end(const StepEnd&) {}
  virtual void on_epoch_end(const EpochEnd&) {}
  virtual void on_train_end() {}

 protected:
  bool is_printer_ = false;  // printing callbacks speak on rank 0 only
  int rank_ = 0;
  nn::Cell* network_ = nullptr;
  Model* model_ = nullptr;  // the Model that trains, set when training begins
  friend class Model;
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
  TimeMonitor();
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

// Saves the network's parameters as `<prefix>-<epoch>_<step>.safetensors`
// (step: within the epoch, from 1) every `every_steps` global steps (counted
// over all epochs, like MindSpore's save_checkpoint_steps; 0: off) and at
// every epoch's end unless that step was just saved. With 10 steps per epoch
// and every_steps 4: -1_4, -1_8, -1_10, -2_2, -2_6, -2_10. The file is written
// to a temporary name and renamed, so a crash never leaves it torn. With
// `training_state`, each file is a whole Model::save_checkpoint (optimizer,
// schedule, position, generator beside the weights), which
// Model::load_checkpoint resumes exactly.
class ModelCheckpoint : public Callback {
 public:
  explicit ModelCheckpoint(std::string prefix, int64_t every_steps = 0, bool training_state = false);
  void on_step_end(const StepEnd& s) override;
  void on_epoch_end(const EpochEnd& e) override;
  const std::vector<std::string>& saved() const { return saved_; }

 private:
  void save(int64_t epoch, int64_t step);
  std::string prefix_;
  int64_t every_steps_;
  bool training_state_;
  int64_t last_global_step_ = 0, saved_global_step_ = 0;
  std::vector<std::string> saved_;
};

// Records loss and batch accuracy per step, and the test figures of each
// epoch's end when Model::train has a TrainOptions::valid_dataset; at the end
// writes the steps as CSV (`step,epoch,loss,accuracy`) and draws a loss panel
// and an accuracy panel (write_svg_plot): the per-step line, the test figures
// as dots, and the epoch boundaries. When training begins, rank 0 checks that
// both paths can be written, and every rank throws its minidl::Error naming
// the path (give it to every rank, as Model's callbacks are), so a bad path
// fails before the training.
class HistoryWriter : public Callback {
 public:
  HistoryWriter(std::string csv_path, std::string svg_path);
  void on_train_begin(const TrainBegin& b) override;
  void on_step_end(const StepEnd& s) override;
  void on_epoch_end(const EpochEnd& e) override;
  void on_train_end() override;

  struct Row {
    int64_t step, epoch;  // global step (an epoch's last one, for tests())
    double loss, accuracy;
  };
  const std::vector<Row>& rows() const { return rows_; }
  const std::vector<Row>& tests() const { return tests_; }  // one per evaluated epoch

 private:
  std::string csv_, svg_;
  std::vector<Row> rows_, tests_;
};

// Every `every` steps (global steps) the ranks check that their replicas of
// the network are still identical: each rank hashes the raw bytes of every
// parameter (64 bits each, in named_parameters() order) and the hashes are
// allgathered over parallel::world(). On a difference every rank throws the
// same minidl::Error naming the step, the first parameter that differs and the
// ranks whose copy differs from rank 0's, e.g.
//   ReplicaCheck: the replicas diverged by step 20 (epoch 1 step 20): parameter
//   fc1.weight [120, 400] differs from rank 0's on rank 1 (max |difference|
//   0.0123); 1 of 10 parameters differ. ...
// Collective: every rank must run the same steps (Model::train does). Does
// nothing with one rank or before parallel::init(). every >= 1.
class ReplicaCheck : public Callback {
 public:
  explicit ReplicaCheck(int64_t every);
  void on_step_end(const StepEnd& s) override;
  int64_t checks() const { return checks_; }  // comparisons made so far

 private:
  int64_t every_;
  int64_t checks_ = 0;
};

namespace parallel {
// The comparison ReplicaCheck makes, for custom training loops: collective
// over `group`; throws as above, `when` ("step 20") going into the message.
void check_replicas(const nn::Cell& network, Communicator& group, const std::string& when);
}  // namespace parallel

// Writes an SVG line plot, one panel per Series stacked top to bottom, 720
// pixels wide: round tick values on both axes, axis titles, dashed lines at
// the epoch starts, and optional points (test figures) with the last one's
// value; every label lies inside the drawing. For HistoryWriter and the
// benchmark plots.
struct Series {
  std::string title;
  std::vector<double> x{}, y{};  // the line
  std::string x_label = "step", y_label{};
  std::string line_label{}, points_label{};  // the legend, drawn when there are points
  std::vector<double> points_x{}, points_y{};
  std::vector<double> epoch_starts{};  // x where epoch 1, 2, ... starts
  double y_min = NAN, y_max = NAN;   // the y range includes these when set (accuracy: 0, 1)
};
void write_svg_plot(const std::string& path, const std::string& title,
                    const std::vector<Series>& panels);

}  // namespace minidl
