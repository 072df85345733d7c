#include "parallel/train/checkpoint.h"

#include <filesystem>

#include "framework/error.h"
#include "nn/cell.h"

namespace minidl {

ModelCheckpoint::ModelCheckpoint(std::string prefix, int64_t every_steps, bool training_state,
                                 int64_t keep_last)
    : prefix_(std::move(prefix)),
      every_steps_(every_steps),
      training_state_(training_state),
      keep_last_(keep_last) {
  MINIDL_CHECK(every_steps >= 0, "ModelCheckpoint: expected every_steps >= 0, got ", every_steps);
  MINIDL_CHECK(keep_last >= 0, "ModelCheckpoint: expected keep_last >= 0 (0: keep all), got ",
               keep_last);
}

void ModelCheckpoint::on_train_begin(const TrainBegin& b) {
  MINIDL_CHECK(!training_state_ || b.model, "ModelCheckpoint(\"", prefix_, "\"): training_state "
               "saves a Model's optimizer and position, but this loop has no Model "
               "(TrainBegin::model is null); in a hand-written loop save the weights "
               "(training_state = false)");
}

void ModelCheckpoint::save(int64_t epoch, int64_t step) {
  if (rank_ != 0 || !network_) return;
  std::string path = cat(prefix_, "-", epoch, "_", step, ".safetensors");
  // safetensors I/O writes a temporary file, then renames
  if (training_state_ && model_)
    model_->save_checkpoint(path);
  else
    network_->save(path);
  std::erase(saved_, path);  // saved again (a second train()): now the newest
  saved_.push_back(path);
  while (keep_last_ > 0 && static_cast<int64_t>(saved_.size()) > keep_last_) {
    std::error_code ec;  // one already gone is no error
    std::filesystem::remove(saved_.front(), ec);
    saved_.erase(saved_.begin());
  }
}

void ModelCheckpoint::on_step_end(const StepEnd& s) {
  last_global_step_ = s.global_step;
  if (every_steps_ > 0 && s.global_step % every_steps_ == 0) {
    save(s.epoch, s.step);
    saved_global_step_ = s.global_step;
  }
}

void ModelCheckpoint::on_epoch_end(const EpochEnd& e) {
  if (saved_global_step_ != last_global_step_) save(e.epoch, e.steps);
  saved_global_step_ = last_global_step_;
}

}  // namespace minidl
