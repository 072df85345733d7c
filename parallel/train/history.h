// HistoryWriter: the training curve as CSV and as an SVG figure (svg_plot.h).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "parallel/train/callback.h"

namespace minidl {

// Records loss and batch accuracy per step, and the test figures of each
// epoch's end when Model::train has a TrainOptions::valid_dataset (or a
// hand-written loop puts them in EpochEnd::valid); at the end writes the steps
// as CSV (`step,epoch,loss,accuracy`) and draws a loss panel and an accuracy
// panel (write_svg_plot): the per-step line, the test figures as dots, and
// the epoch boundaries. Rank 0 writes. When training begins, rank 0 checks
// that both paths can be written, and every rank throws its minidl::Error
// naming the path (give it to every rank, as Model's callbacks are), so a bad
// path fails before the training. An empty path: that file is not written.
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
  void write_csv() const;
  void write_svg() const;
  std::string csv_, svg_;
  std::vector<Row> rows_, tests_;
};

}  // namespace minidl
