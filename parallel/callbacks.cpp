#include "parallel/callbacks.h"

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "framework/error.h"
#include "framework/output_file.h"
#include "nn/cell.h"
#include "parallel/communicator.h"
#include "parallel/init.h"
#include "parallel/timeline.h"

namespace minidl {
namespace {

// The shortest decimal that reads back as the same double (Python's repr).
std::string shortest(double v) {
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, v);
  std::string s(buf, res.ptr);
  if (std::isfinite(v) && s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

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
  is_printer_ = true;
}

void LossMonitor::on_step_end(const StepEnd& s) {
  if (rank_ != 0 || s.step % every_ != 0) return;
  // On a terminal, first clear a progress bar's line; the bar redraws below.
  std::printf("%sepoch: %lld step: %lld, loss is %s\n", stdout_is_terminal() ? "\r\033[K" : "",
              (long long)s.epoch, (long long)s.step, shortest(s.loss).c_str());
  std::fflush(stdout);
}

TimeMonitor::TimeMonitor() { is_printer_ = true; }

void TimeMonitor::on_epoch_end(const EpochEnd& e) {
  if (rank_ != 0 || e.steps == 0) return;
  std::printf("epoch time: %.3f ms, per step time: %.3f ms, samples/s: %.0f\n", e.seconds * 1e3,
              e.seconds * 1e3 / e.steps, e.samples / std::max(e.seconds, 1e-12));
  std::fflush(stdout);
}

ProgressBar::ProgressBar() : tty_(stdout_is_terminal()) { is_printer_ = true; }

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

ModelCheckpoint::ModelCheckpoint(std::string prefix, int64_t every_steps)
    : prefix_(std::move(prefix)), every_steps_(every_steps) {
  MINIDL_CHECK(every_steps >= 0, "ModelCheckpoint: expected every_steps >= 0, got ", every_steps);
}

void ModelCheckpoint::save(int64_t epoch, int64_t step) {
  if (rank_ != 0 || !network_) return;
  std::string path = cat(prefix_, "-", epoch, "_", step, ".safetensors");
  network_->save(path);  // safetensors I/O writes a temporary file, then renames
  saved_.push_back(path);
}

void ModelCheckpoint::on_step_end(const StepEnd& s) {
  last_step_ = s.step;
  if (every_steps_ > 0 && s.global_step % every_steps_ == 0) save(s.epoch, s.step);
}

void ModelCheckpoint::on_epoch_end(const EpochEnd& e) {
  if (every_steps_ == 0 || last_step_ % every_steps_ != 0) save(e.epoch, e.steps);
}

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

void HistoryWriter::on_train_end() {
  if (rank_ != 0) return;
  if (!csv_.empty()) {
    std::ofstream f(csv_);
    MINIDL_CHECK(f, "HistoryWriter: cannot write ", csv_);
    f << "step,epoch,loss,accuracy\n";
    for (const Row& r : rows_)
      f << r.step << ',' << r.epoch << ',' << shortest(r.loss) << ',' << r.accuracy << '\n';
  }
  if (!svg_.empty()) {
    Series loss{"loss", {}, {}}, acc{"batch accuracy", {}, {}};
    for (const Row& r : rows_) {
      loss.x.push_back(r.step);
      loss.y.push_back(r.loss);
      acc.x.push_back(r.step);
      acc.y.push_back(r.accuracy);
    }
    write_svg_plot(svg_, "training history", {loss, acc});
  }
}

ReplicaCheck::ReplicaCheck(int64_t every) : every_(every) {
  MINIDL_CHECK(every >= 1, "ReplicaCheck: expected a step interval >= 1, got ", every);
}

void ReplicaCheck::on_step_end(const StepEnd& s) {
  if (s.global_step % every_ != 0 || !network_) return;
  if (!parallel::is_initialized() || parallel::world_size() == 1) return;
  ++checks_;
  parallel::TimelineScope scope("replica check", "check");
  parallel::check_replicas(*network_, parallel::world(),
                           cat("step ", s.global_step, " (epoch ", s.epoch, " step ", s.step, ")"));
}

namespace parallel {
namespace {

// A 64-bit hash of n bytes: multiply-rotate over 8-byte words, then a final mix.
uint64_t checksum(const void* data, size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint64_t h = 0x9e3779b97f4a7c15ull ^ n;
  auto mix_in = [&h](uint64_t w) {
    w *= 0x87c37b91114253d5ull;
    h ^= (w << 31) | (w >> 33);
    h = ((h << 27) | (h >> 37)) * 5 + 0x52dce729;
  };
  for (; n >= 8; p += 8, n -= 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    mix_in(w);
  }
  if (n > 0) {
    uint64_t w = 0;
    std::memcpy(&w, p, n);
    mix_in(w);
  }
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  return h ^ (h >> 33);
}

std::string broadcast_string(Communicator& c, std::string text, int root) {
  uint64_t n = text.size();
  c.broadcast(&n, sizeof n, root);
  text.resize(n);
  if (n) c.broadcast(text.data(), n, root);
  return text;
}

std::string rank_list(const std::vector<int>& ranks) {
  std::string s = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
  return s;
}

}  // namespace

void check_replicas(const nn::Cell& network, Communicator& group, const std::string& when) {
  const int size = group.size();
  const TensorDict named = network.named_parameters();
  const auto& params = named.items();
  const char* what = "ReplicaCheck: the replicas diverged by ";

  // The parameter counts first: the hashes' allgather needs equal lengths.
  int64_t count = static_cast<int64_t>(params.size());
  std::vector<int64_t> counts(size);
  group.allgather(&count, counts.data(), sizeof count);
  std::vector<int> differ;
  for (int r = 1; r < size; ++r)
    if (counts[r] != counts[0]) differ.push_back(r);
  if (!differ.empty())
    throw Error(cat(what, when, ": ", rank_list(differ), " ", differ.size() == 1 ? "has" : "have",
                    " a different number of parameters than rank 0 (", counts[0],
                    "); every rank must build the same model"));

  // Each parameter's hash covers its shape and dtype too.
  std::vector<uint64_t> mine;
  for (const auto& [name, p] : params) {
    std::string layout = cat(to_string(p.shape()), dtype_name(p.dtype()));
    mine.push_back(checksum(p.raw_data(), p.nbytes()) ^ checksum(layout.data(), layout.size()));
  }
  std::vector<uint64_t> all(mine.size() * size);
  if (!mine.empty()) group.allgather(mine.data(), all.data(), mine.size() * sizeof(uint64_t));
  size_t first = mine.size(), differing = 0;
  for (size_t i = 0; i < mine.size(); ++i) {
    bool same = true;
    for (int r = 1; r < size; ++r) same = same && all[r * mine.size() + i] == all[i];
    if (!same && first == mine.size()) first = i;
    differing += !same;
  }
  if (first == mine.size()) return;
  for (int r = 1; r < size; ++r)
    if (all[r * mine.size() + first] != all[first]) differ.push_back(r);

  // Rank 0's copy of that parameter, to say by how much the others differ.
  const Tensor& p = params[first].second;
  const std::string described =
      broadcast_string(group, cat(params[first].first, " ", p.shape()), 0);
  const std::string layout = cat(to_string(p.shape()), dtype_name(p.dtype()));
  const bool same_layout = broadcast_string(group, layout, 0) == layout;
  uint64_t nbytes = p.nbytes();
  group.broadcast(&nbytes, sizeof nbytes, 0);
  std::vector<char> theirs(nbytes);
  if (group.rank() == 0) std::memcpy(theirs.data(), p.raw_data(), nbytes);
  if (nbytes) group.broadcast(theirs.data(), nbytes, 0);
  double gap = -1;  // -1: a different shape or dtype
  if (same_layout) {
    Tensor ref = Tensor::from_blob(theirs.data(), p.shape(), p.dtype(), /*copy=*/false);
    std::vector<float> a = p.to_float_vector(), b = ref.to_float_vector();
    gap = 0;
    for (size_t k = 0; k < a.size(); ++k) gap = std::max(gap, std::fabs(double(a[k]) - b[k]));
  }
  std::vector<double> gaps(size);
  group.allgather(&gap, gaps.data(), sizeof gap);

  std::string detail;
  for (int r : differ)
    detail += cat(detail.empty() ? "" : ", ", r, gaps[r] < 0 ? " (a different shape or dtype)"
                                                              : cat(" (max |difference| ", gaps[r], ")"));
  throw Error(cat(what, when, ": parameter ", described, " differs from rank 0's on ",
                  differ.size() == 1 ? "rank " : "ranks ", detail, "; ", differing, " of ",
                  mine.size(), " parameters differ. Replicas drift apart when ranks update "
                  "differently: a gradient left unreduced, a rank-dependent random op, or a "
                  "parameter changed outside training."));
}

}  // namespace parallel

void write_svg_plot(const std::string& path, const std::string& title,
                    const std::vector<Series>& panels) {
  const double W = 640, PH = 220, M = 50;  // width, panel height, margin
  const double H = 40 + panels.size() * (PH + 30);
  std::ofstream f(path);
  MINIDL_CHECK(f, "write_svg_plot: cannot write ", path);
  f << "<svg xmlns='http://www.w3.org/2000/svg' width='" << W << "' height='" << H
    << "' font-family='sans-serif' font-size='12'>\n<rect width='100%' height='100%' fill='white'/>\n"
    << "<text x='" << W / 2 << "' y='20' text-anchor='middle' font-size='15'>" << title << "</text>\n";
  for (size_t p = 0; p < panels.size(); ++p) {
    const Series& s = panels[p];
    const double top = 40 + p * (PH + 30), left = M, width = W - 2 * M, height = PH - 30;
    double x0 = 0, x1 = 1, y0 = 0, y1 = 1;
    if (!s.x.empty()) {
      x0 = *std::min_element(s.x.begin(), s.x.end());
      x1 = *std::max_element(s.x.begin(), s.x.end());
      y0 = *std::min_element(s.y.begin(), s.y.end());
      y1 = *std::max_element(s.y.begin(), s.y.end());
    }
    if (x1 == x0) x1 = x0 + 1;
    if (y1 == y0) y1 = y0 + 1;
    f << "<text x='" << left << "' y='" << top + 12 << "'>" << s.title << "</text>\n"
      << "<rect x='" << left << "' y='" << top + 20 << "' width='" << width << "' height='"
      << height << "' fill='none' stroke='#999'/>\n";
    for (int t = 0; t <= 4; ++t) {  // y ticks
      double v = y0 + (y1 - y0) * t / 4, y = top + 20 + height * (1 - t / 4.0);
      f << "<text x='" << left - 5 << "' y='" << y + 4 << "' text-anchor='end'>" << v << "</text>\n";
    }
    f << "<text x='" << left << "' y='" << top + PH + 4 << "'>" << x0 << "</text>"
      << "<text x='" << left + width << "' y='" << top + PH + 4 << "' text-anchor='end'>" << x1
      << "</text>\n<polyline fill='none' stroke='#1f77b4' stroke-width='1.2' points='";
    for (size_t i = 0; i < s.x.size(); ++i)
      f << left + width * (s.x[i] - x0) / (x1 - x0) << ','
        << top + 20 + height * (1 - (s.y[i] - y0) / (y1 - y0)) << ' ';
    f << "'/>\n";
  }
  f << "</svg>\n";
}

}  // namespace minidl
