// ModelCheckpoint: the network's weights (or a whole training checkpoint)
// saved during training.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "parallel/train/callback.h"

namespace minidl {

// Saves the network's parameters as `<prefix>-<epoch>_<step>.safetensors`
// (step: within the epoch, from 1) every `every_steps` global steps (counted
// over all epochs, like MindSpore's save_checkpoint_steps; 0: off) and at
// every epoch's end unless that step was just saved. With 10 steps per epoch
// and every_steps 4: -1_4, -1_8, -1_10, -2_2, -2_6, -2_10. The file is written
// to a temporary name and renamed, so a crash never leaves it torn. Rank 0
// writes. With `training_state`, each file is a whole Model::save_checkpoint
// (optimizer, schedule, position, generator beside the weights), which
// Model::load_checkpoint resumes exactly; that needs the driver's save function
// (TrainBegin::model, a Resumable: Model::train gives itself), and train_begin
// throws minidl::Error in a loop without one. With `keep_last` N > 0 (like
// MindSpore's keep_checkpoint_max), only the N newest files this callback
// saved are kept: each save past the N-th removes the oldest, after the new
// file is complete. Files of earlier runs (before a resume) are left alone.
class ModelCheckpoint : public Callback {
 public:
  explicit ModelCheckpoint(std::string prefix, int64_t every_steps = 0, bool training_state = false,
                           int64_t keep_last = 0);
  void on_train_begin(const TrainBegin& b) override;
  void on_step_end(const StepEnd& s) override;
  void on_epoch_end(const EpochEnd& e) override;
  // The files saved and still kept, oldest first.
  const std::vector<std::string>& saved() const { return saved_; }

 private:
  void save(int64_t epoch, int64_t step);
  std::string prefix_;
  int64_t every_steps_;
  bool training_state_;
  int64_t keep_last_;
  int64_t last_global_step_ = 0, saved_global_step_ = 0;
  std::vector<std::string> saved_;
};

}  // namespace minidl
