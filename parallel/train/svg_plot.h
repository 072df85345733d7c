// An SVG line plot for training curves and benchmark figures (HistoryWriter
// draws with it); nothing here knows about training.
#pragma once
#include <cmath>
#include <string>
#include <vector>

namespace minidl {

// One panel: a line, optional points (test figures) and epoch boundaries.
struct Series {
  std::string title;
  std::vector<double> x{}, y{};  // the line
  std::string x_label = "step", y_label{};
  std::string line_label{}, points_label{};  // the legend, drawn when there are points
  std::vector<double> points_x{}, points_y{};
  std::vector<double> epoch_starts{};  // x where epoch 1, 2, ... starts
  double y_min = NAN, y_max = NAN;   // the y range includes these when set (accuracy: 0, 1)
};

// Writes the panels stacked top to bottom, 720 pixels wide: round tick values
// on both axes, axis titles, dashed lines at the epoch starts, and the points
// with the last one's value; every label lies inside the drawing. Throws
// minidl::Error naming `path` when it cannot be written.
void write_svg_plot(const std::string& path, const std::string& title,
                    const std::vector<Series>& panels);

}  // namespace minidl
