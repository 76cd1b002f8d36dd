// Dependency-free SVG charts for training reports and benchmark plots: line
// charts (one polyline per series) and grouped bar charts, with "nice" axis
// ticks (1/2/5 x 10^k), gridlines, a legend and a colour per series. Static
// SVG only (no script, no external fonts or files), fit for inlining in HTML.
// NaN and infinite points are skipped (a line breaks there; on a log axis,
// so are values <= 0); empty series, one point and constant data draw without
// dividing by zero.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace zt::monitor {

struct Series {
  std::string name;
  std::vector<double> x, y;  // bar charts use y only: y[i] is the value for category i
  bool markers = false;      // line charts: a dot at every point (sparse measurements, e.g. evaluations)
  bool faint = false;        // line charts: drawn light and thin (raw values under a smoothed curve)
};

struct ChartOptions {
  std::string title, x_label, y_label;
  int width = 640;
  int height = 360;
  bool log_y = false;
  bool y_from_zero = false;  // the y axis includes 0 (levels such as memory, where small swings are noise)
};

// A line chart. Series with mismatched x/y lengths use the shorter length.
std::string LineChartSvg(const std::vector<Series>& series, const ChartOptions& options);

// Grouped bars: one group per category, one bar per series in each group.
std::string BarChartSvg(const std::vector<std::string>& categories, const std::vector<Series>& series,
                        const ChartOptions& options);

// Tick values covering [lo, hi]: evenly spaced by a step of 1, 2 or 5 x 10^k,
// the first <= lo and the last >= hi, at most about max_ticks + 1 of them.
// lo == hi is widened; lo > hi is swapped; non-finite input gives {0, 1}.
std::vector<double> NiceTicks(double lo, double hi, int max_ticks = 6);
// Tick values for a log axis over [lo, hi] (both > 0): powers of ten, at
// least two, every k-th decade when there are many.
std::vector<double> LogTicks(double lo, double hi, int max_ticks = 8);
// A tick label: enough decimals for `step` ("0.25"), SI suffix for large
// values ("12k", "1.5M"), scientific for tiny ones ("1e-05").
std::string FormatTick(double value, double step);
// & < > " ' -> entities.
std::string XmlEscape(std::string_view text);

}  // namespace zt::monitor
