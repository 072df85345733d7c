#include "parallel/train/callback.h"

#include <charconv>
#include <cmath>

namespace minidl {

void CallbackList::train_begin(const TrainBegin& b) {
  for (auto& cb : callbacks_) {
    cb->rank_ = b.rank;
    cb->network_ = b.network;
    cb->model_ = b.model;
    cb->on_train_begin(b);
  }
}

void CallbackList::step_end(const StepEnd& s) {
  for (auto& cb : callbacks_) cb->on_step_end(s);
}

void CallbackList::epoch_end(const EpochEnd& e) {
  for (auto& cb : callbacks_) cb->on_epoch_end(e);
}

void CallbackList::train_end() {
  for (auto& cb : callbacks_) cb->on_train_end();
}

std::string shortest_decimal(double v) {
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, v);
  std::string s(buf, res.ptr);
  if (std::isfinite(v) && s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

}  // namespace minidl
