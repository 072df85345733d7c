#include "parallel/train/history.h"

#include <fstream>

#include "framework/error.h"
#include "framework/output_file.h"
#include "parallel/train/svg_plot.h"
#include "parallel/communicator.h"
#include "parallel/init.h"

namespace minidl {

HistoryWriter::HistoryWriter(std::string csv_path, std::string svg_path)
    : csv_(std::move(csv_path)), svg_(std::move(svg_path)) {}

void HistoryWriter::on_train_begin(const TrainBegin& b) {
  std::string error;  // rank 0's, told to every rank so that all stop here
  if (rank_ == 0) {
    try {
      if (!csv_.empty()) check_writable(csv_, "HistoryWriter");
      if (!svg_.empty()) check_writable(svg_, "HistoryWriter");
    } catch (const Error& e) {
      error = e.what();
    }
  }
  if (b.world_size > 1) error = parallel::world().broadcast(error, 0);
  MINIDL_CHECK(error.empty(), error);
}

void HistoryWriter::on_step_end(const StepEnd& s) {
  rows_.push_back({s.global_step, s.epoch, s.loss, s.accuracy});
}

void HistoryWriter::on_epoch_end(const EpochEnd& e) {
  if (!e.valid.empty() && !rows_.empty())
    tests_.push_back({rows_.back().step, e.epoch, e.valid.at("loss"), e.valid.at("accuracy")});
}

void HistoryWriter::on_train_end() {
  if (rank_ != 0) return;
  if (!csv_.empty()) write_csv();
  if (!svg_.empty()) write_svg();
}

void HistoryWriter::write_csv() const {
  std::ofstream f(csv_);
  MINIDL_CHECK(f, "HistoryWriter: cannot write ", csv_);
  f << "step,epoch,loss,accuracy\n";
  for (const Row& r : rows_)
    f << r.step << ',' << r.epoch << ',' << shortest_decimal(r.loss) << ',' << r.accuracy << '\n';
}

void HistoryWriter::write_svg() const {
  Series loss{.title = "loss", .y_label = "loss", .line_label = "train (per step)",
              .points_label = "test (epoch end)"};
  Series acc{.title = "accuracy", .y_label = "accuracy", .line_label = "train batch (per step)",
             .points_label = "test (epoch end)", .y_min = 0, .y_max = 1};
  for (size_t i = 0; i < rows_.size(); ++i) {
    const Row& r = rows_[i];
    loss.x.push_back(r.step);
    loss.y.push_back(r.loss);
    acc.x.push_back(r.step);
    acc.y.push_back(r.accuracy);
    if (i == 0 || r.epoch != rows_[i - 1].epoch) loss.epoch_starts.push_back(r.step - 0.5);
  }
  acc.epoch_starts = loss.epoch_starts;
  for (const Row& t : tests_) {
    loss.points_x.push_back(t.step);
    loss.points_y.push_back(t.loss);
    acc.points_x.push_back(t.step);
    acc.points_y.push_back(t.accuracy);
  }
  write_svg_plot(svg_, "training history", {loss, acc});
}

}  // namespace minidl
