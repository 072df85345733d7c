#include "parallel/callbacks.h"

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "framework/error.h"
#include "framework/output_file.h"
#include "nn/cell.h"
#include "parallel/communicator.h"
#include "parallel/init.h"
#include "parallel/model.h"
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

ModelCheckpoint::ModelCheckpoint(std::string prefix, int64_t every_steps, bool training_state)
    : prefix_(std::move(prefix)), every_steps_(every_steps), training_state_(training_state) {
  MINIDL_CHECK(every_steps >= 0, "ModelCheckpoint: expected every_steps >= 0, got ", every_steps);
}

void ModelCheckpoint::save(int64_t epoch, int64_t step) {
  if (rank_ != 0 || !network_) return;
  std::string path = cat(prefix_, "-", epoch, "_", step, ".safetensors");
  // safetensors I/O writes a temporary file, then renames
  if (training_state_ && model_)
    model_->save_checkpoint(path);
  else
    network_->save(path);
  saved_.push_back(path);
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
  if (!csv_.empty()) {
    std::ofstream f(csv_);
    MINIDL_CHECK(f, "HistoryWriter: cannot write ", csv_);
    f << "step,epoch,loss,accuracy\n";
    for (const Row& r : rows_)
      f << r.step << ',' << r.epoch << ',' << shortest(r.loss) << ',' << r.accuracy << '\n';
  }
  if (!svg_.empty()) {
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

namespace {

// Round ticks for an axis over [lo, hi]: about `count` steps of 1, 2 or 5
// times a power of ten (at least 1 when `integer`). With `extend` the axis
// grows to the ticks just outside [lo, hi], else the ticks stay inside it.
struct Ticks {
  double lo, hi;      // the axis
  double first, step;
  int count;
  int decimals;       // digits after the point that the step needs
  double at(int k) const { return first + k * step; }
};

Ticks nice_ticks(double lo, double hi, int count, bool integer, bool extend) {
  if (!(hi > lo)) {  // one value (or none): a unit-wide range around it
    lo -= 0.5;
    hi += 0.5;
  }
  const double rough = (hi - lo) / count, power = std::pow(10.0, std::floor(std::log10(rough)));
  const double r = rough / power;
  double step = (r <= 1 ? 1 : r <= 2 ? 2 : r <= 5 ? 5 : 10) * power;
  if (integer) step = std::max(step, 1.0);
  const int decimals = std::max(0, -static_cast<int>(std::floor(std::log10(step) + 1e-9)));
  const double below = std::floor(lo / step + 1e-9) * step, above = std::ceil(hi / step - 1e-9) * step;
  if (extend) {
    lo = below;
    hi = above;
  }
  const double first = below < lo - 1e-9 * step ? below + step : below;
  const double last = above > hi + 1e-9 * step ? above - step : above;
  return {lo, hi, first, step, static_cast<int>(std::lround((last - first) / step)) + 1, decimals};
}

std::string fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, std::abs(v) < 1e-12 ? 0.0 : v);
  return buf;
}

std::string xml_escape(const std::string& text) {
  std::string out;
  for (char c : text) out += c == '<' ? "&lt;" : c == '>' ? "&gt;" : c == '&' ? "&amp;" : std::string(1, c);
  return out;
}

}  // namespace

void write_svg_plot(const std::string& path, const std::string& title,
                    const std::vector<Series>& panels) {
  auto lo = [](const std::vector<double>& v) { return v.empty() ? 0 : *std::min_element(v.begin(), v.end()); };
  auto hi = [](const std::vector<double>& v) { return v.empty() ? 1 : *std::max_element(v.begin(), v.end()); };
  // Both axes' ticks first: the widest y label sets the left margin (7.2 px a
  // character at 12 px, right of the rotated y title), shared by all panels.
  std::vector<Ticks> xts, yts;
  size_t widest = 1;
  for (const Series& s : panels) {
    std::vector<double> xs = s.x, ys = s.y;
    xs.insert(xs.end(), s.points_x.begin(), s.points_x.end());
    xs.insert(xs.end(), s.epoch_starts.begin(), s.epoch_starts.end());
    ys.insert(ys.end(), s.points_y.begin(), s.points_y.end());
    if (!std::isnan(s.y_min)) ys.push_back(s.y_min);
    if (!std::isnan(s.y_max)) ys.push_back(s.y_max);
    xts.push_back(nice_ticks(lo(xs), hi(xs), 8, /*integer=*/true, /*extend=*/false));
    yts.push_back(nice_ticks(lo(ys), hi(ys), 5, /*integer=*/false, /*extend=*/true));
    for (int k = 0; k < yts.back().count; ++k)
      widest = std::max(widest, fixed(yts.back().at(k), yts.back().decimals).size());
  }
  // Width, margins, panel height (title row, plot, tick labels and x title).
  const double W = 720, L = std::max(64.0, 36 + 7.2 * widest), R = 32, PH = 270;
  const double plot_w = W - L - R, plot_h = PH - 30 - 52, H = 44 + panels.size() * PH;
  const char* halo = "paint-order='stroke' stroke='white' stroke-width='3'";  // readable over lines
  std::ofstream f(path);
  MINIDL_CHECK(f, "write_svg_plot: cannot write ", path);
  f << "<svg xmlns='http://www.w3.org/2000/svg' width='" << W << "' height='" << H
    << "' font-family='sans-serif' font-size='12'>\n<rect width='100%' height='100%' fill='white'/>\n"
    << "<text x='" << W / 2 << "' y='24' text-anchor='middle' font-size='16'>" << xml_escape(title)
    << "</text>\n";
  for (size_t p = 0; p < panels.size(); ++p) {
    const Series& s = panels[p];
    const Ticks &xt = xts[p], &yt = yts[p];
    const double top = 44 + p * PH + 30;  // the plot area's top edge
    auto X = [&](double v) { return L + plot_w * (v - xt.lo) / (xt.hi - xt.lo); };
    auto Y = [&](double v) { return top + plot_h * (1 - (v - yt.lo) / (yt.hi - yt.lo)); };

    f << "<text x='" << L << "' y='" << top - 10 << "' font-size='14' font-weight='bold'>"
      << xml_escape(s.title) << "</text>\n";
    if (!s.points_x.empty())  // legend, right-aligned on the title row
      f << "<text x='" << W - R << "' y='" << top - 10 << "' text-anchor='end'><tspan fill='#1f77b4'>"
        << "&#8212;</tspan> " << xml_escape(s.line_label) << "   <tspan fill='#d62728'>&#9679;</tspan> "
        << xml_escape(s.points_label) << "</text>\n";
    for (int k = 0; k < yt.count; ++k) {
      const double y = Y(yt.at(k));
      f << "<line x1='" << L << "' x2='" << L + plot_w << "' y1='" << y << "' y2='" << y
        << "' stroke='#e5e5e5'/><text x='" << L - 6 << "' y='" << y + 4 << "' text-anchor='end'>"
        << fixed(yt.at(k), yt.decimals) << "</text>\n";
    }
    for (int k = 0; k < xt.count; ++k) {
      const double x = X(xt.at(k));
      f << "<line x1='" << x << "' x2='" << x << "' y1='" << top + plot_h << "' y2='"
        << top + plot_h + 4 << "' stroke='#666'/><text x='" << x << "' y='" << top + plot_h + 18
        << "' text-anchor='middle'>" << fixed(xt.at(k), xt.decimals) << "</text>\n";
    }
    f << "<text x='" << L + plot_w / 2 << "' y='" << top + plot_h + 40 << "' text-anchor='middle'>"
      << xml_escape(s.x_label) << "</text>\n<text x='20' y='" << top + plot_h / 2
      << "' text-anchor='middle' transform='rotate(-90 20 " << top + plot_h / 2 << ")'>"
      << xml_escape(s.y_label) << "</text>\n";
    // Epoch starts: dashed lines (not at the first), each labelled where there
    // is room; the labels go on top of the line, drawn last.
    std::ostringstream labels;
    double label_end = L;
    for (size_t e = 0; e < s.epoch_starts.size(); ++e) {
      const double x = X(s.epoch_starts[e]);
      const std::string label = cat("epoch ", e + 1);
      if (e > 0)
        f << "<line x1='" << x << "' x2='" << x << "' y1='" << top << "' y2='" << top + plot_h
          << "' stroke='#999' stroke-dasharray='4 3'/>\n";
      const double next = e + 1 < s.epoch_starts.size() ? X(s.epoch_starts[e + 1]) : L + plot_w;
      if (x + 4 >= label_end && x + 4 + 6.0 * label.size() < next - 2) {
        labels << "<text x='" << x + 4 << "' y='" << top + 13 << "' font-size='10' fill='#666' "
               << halo << ">" << label << "</text>\n";
        label_end = x + 4 + 6.0 * label.size();
      }
    }
    f << "<rect x='" << L << "' y='" << top << "' width='" << plot_w << "' height='" << plot_h
      << "' fill='none' stroke='#666'/>\n<polyline fill='none' stroke='#1f77b4' stroke-width='1.2' points='";
    for (size_t i = 0; i < s.x.size(); ++i) f << X(s.x[i]) << ',' << Y(s.y[i]) << ' ';
    f << "'/>\n";
    for (size_t i = 0; i < s.points_x.size(); ++i)
      f << "<circle cx='" << X(s.points_x[i]) << "' cy='" << Y(s.points_y[i])
        << "' r='3.5' fill='#d62728'/>\n";
    if (!s.points_x.empty()) {  // the last point's value, kept inside the plot
      const double x = X(s.points_x.back()), y = Y(s.points_y.back());
      const bool left = x > L + plot_w / 2;
      f << "<text x='" << (left ? x - 7 : x + 7) << "' y='" << (y - 8 < top + 14 ? y + 18 : y - 8)
        << "' text-anchor='" << (left ? "end" : "start") << "' fill='#d62728' " << halo << ">"
        << fixed(s.points_y.back(), 4) << "</text>\n";
    }
    f << labels.str();
  }
  f << "</svg>\n";
}

}  // namespace minidl
