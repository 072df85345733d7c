#include "parallel/train/svg_plot.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "framework/error.h"

namespace minidl {
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
