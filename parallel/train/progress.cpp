#include "parallel/train/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <string>

#include "framework/error.h"
#include "parallel/init.h"

namespace minidl {
namespace {

std::string clock_string(double seconds) {
  int64_t s = static_cast<int64_t>(std::max(0.0, seconds) + 0.5);
  char buf[32];
  if (s >= 3600)
    std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", (long long)(s / 3600),
                  (long long)(s / 60 % 60), (long long)(s % 60));
  else
    std::snprintf(buf, sizeof buf, "%lld:%02lld", (long long)(s / 60), (long long)(s % 60));
  return buf;
}

// A terminal we draw on. Under mpirun a rank's stdout is a pseudo-terminal
// even when mpirun's own output goes to a file, so ranks print plain lines.
bool stdout_is_terminal() {
  return isatty(STDOUT_FILENO) == 1 && !parallel::launched_by_mpirun();
}

}  // namespace

LossMonitor::LossMonitor(int64_t every) : every_(every) {
  MINIDL_CHECK(every >= 1, "LossMonitor: expected a step interval >= 1, got ", every);
}

void LossMonitor::on_step_end(const StepEnd& s) {
  if (rank_ != 0 || s.step % every_ != 0) return;
  // On a terminal, first clear a progress bar's line; the bar redraws below.
  std::printf("%sepoch: %lld step: %lld, loss is %s\n", stdout_is_terminal() ? "\r\033[K" : "",
              (long long)s.epoch, (long long)s.step, shortest_decimal(s.loss).c_str());
  std::fflush(stdout);
}

void TimeMonitor::on_epoch_end(const EpochEnd& e) {
  if (rank_ != 0 || e.steps == 0) return;
  std::printf("epoch time: %.3f ms, per step time: %.3f ms, samples/s: %.0f\n", e.seconds * 1e3,
              e.seconds * 1e3 / e.steps, e.samples / std::max(e.seconds, 1e-12));
  std::fflush(stdout);
}

ProgressBar::ProgressBar() : tty_(stdout_is_terminal()) {}

void ProgressBar::on_train_begin(const TrainBegin& b) { epochs_ = b.epochs; }

void ProgressBar::on_step_end(const StepEnd& s) {
  if (rank_ != 0) return;
  if (s.step == 1) {
    samples_ = 0;
    seconds_ = 0;
  }
  samples_ += s.samples;
  seconds_ += s.seconds;
  const double rate = samples_ / std::max(seconds_, 1e-12);
  const double eta = (s.steps_per_epoch - s.step) * seconds_ / s.step;
  if (tty_) {
    const int width = 30;
    int done = static_cast<int>(width * s.step / std::max<int64_t>(s.steps_per_epoch, 1));
    std::string bar(done, '=');
    if (done < width) bar += '>' + std::string(width - done - 1, ' ');
    std::printf("\r\033[Kepoch %lld/%lld [%s] %lld/%lld loss %.4f  %.0f samples/s  ETA %s",
                (long long)s.epoch, (long long)epochs_, bar.c_str(), (long long)s.step,
                (long long)s.steps_per_epoch, s.loss, rate, clock_string(eta).c_str());
    std::fflush(stdout);
    return;
  }
  const int64_t tenth = std::max<int64_t>(1, s.steps_per_epoch / 10);
  if (s.step % tenth == 0 || s.step == s.steps_per_epoch) {
    std::printf("epoch %lld/%lld: step %lld/%lld, loss %.4f, %.0f samples/s, ETA %s\n",
                (long long)s.epoch, (long long)epochs_, (long long)s.step,
                (long long)s.steps_per_epoch, s.loss, rate, clock_string(eta).c_str());
    std::fflush(stdout);
  }
}

void ProgressBar::on_epoch_end(const EpochEnd&) {
  if (rank_ == 0 && tty_) std::printf("\n");
}

}  // namespace minidl
