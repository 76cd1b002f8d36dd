// SVG line and bar charts: layout, scales, ticks, legend.
#include "monitor/svg_chart.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace zt::monitor {
namespace {

// Tableau 10: distinct and colour-blind friendly; series past ten reuse
// them dashed.
constexpr const char* kColors[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
                                   "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};
constexpr int kNumColors = 10;
constexpr double kCharWidth = 6.6;  // rough width of a 11px sans-serif character

std::string Color(size_t i) { return kColors[i % kNumColors]; }
std::string Dash(size_t i) { return i < kNumColors ? "" : " stroke-dasharray=\"6 3\""; }
std::string Num(double v) { return absl::StrFormat("%.1f", v); }

bool Usable(double v, bool log) { return std::isfinite(v) && (!log || v > 0); }

// A linear or log mapping from data to pixels.
struct Scale {
  double lo = 0, hi = 1;  // data range (for log: of log10 values)
  double p0 = 0, p1 = 1;  // pixel range (p1 may be < p0 for the y axis)
  bool log = false;
  double operator()(double v) const {
    const double t = log ? std::log10(v) : v;
    return p0 + (t - lo) / (hi - lo) * (p1 - p0);
  }
};

struct Range {
  double lo = std::numeric_limits<double>::infinity();
  double hi = -std::numeric_limits<double>::infinity();
  void Add(double v) {
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  bool empty() const { return lo > hi; }
};

// Ticks and a scale for one axis from the data range.
struct Axis {
  std::vector<double> ticks;
  double step = 1;
  Scale scale;
};

Axis MakeAxis(Range r, bool log, double p0, double p1, int max_ticks) {
  Axis a;
  a.scale.p0 = p0;
  a.scale.p1 = p1;
  a.scale.log = log;
  if (log) {
    if (r.empty()) r = Range{1, 10};
    a.ticks = LogTicks(r.lo, r.hi, max_ticks);
    a.scale.lo = std::log10(a.ticks.front());
    a.scale.hi = std::log10(a.ticks.back());
    a.step = a.ticks.front();
  } else {
    if (r.empty()) r = Range{0, 1};
    a.ticks = NiceTicks(r.lo, r.hi, max_ticks);
    a.scale.lo = a.ticks.front();
    a.scale.hi = a.ticks.back();
    a.step = a.ticks.size() > 1 ? a.ticks[1] - a.ticks[0] : 1;
  }
  return a;
}

// The frame every chart shares: background, title, plot area, axes labels.
struct Frame {
  double left = 72, right = 16, top = 16, bottom = 52;
};

std::string Header(const ChartOptions& o) {
  return absl::StrFormat(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
      "font-family=\"sans-serif\" font-size=\"11\">\n"
      "<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"white\"/>\n",
      o.width, o.height, o.width, o.height, o.width, o.height);
}

std::string Titles(const ChartOptions& o, double x0, double y0, double x1, double y1) {
  std::string s;
  if (!o.title.empty()) {
    absl::StrAppend(&s, "<text x=\"", Num(o.width / 2.0),
                    "\" y=\"20\" text-anchor=\"middle\" font-size=\"14\" "
                    "font-weight=\"bold\">",
                    XmlEscape(o.title), "</text>\n");
  }
  if (!o.x_label.empty()) {
    absl::StrAppend(&s, "<text x=\"", Num((x0 + x1) / 2), "\" y=\"", Num(o.height - 8.0), "\" text-anchor=\"middle\">",
                    XmlEscape(o.x_label), "</text>\n");
  }
  if (!o.y_label.empty()) {
    const double cy = (y0 + y1) / 2;
    absl::StrAppend(&s, "<text x=\"14\" y=\"", Num(cy), "\" text-anchor=\"middle\" transform=\"rotate(-90 14 ", Num(cy),
                    ")\">", XmlEscape(o.y_label), "</text>\n");
  }
  return s;
}

// Horizontal gridlines and labels for the y axis.
std::string YGrid(const Axis& y, double x0, double x1) {
  std::string s;
  for (double t : y.ticks) {
    const double py = y.scale(t);
    absl::StrAppend(&s, "<line x1=\"", Num(x0), "\" y1=\"", Num(py), "\" x2=\"", Num(x1), "\" y2=\"", Num(py),
                    "\" stroke=\"#e0e0e0\"/>\n");
    absl::StrAppend(&s, "<text x=\"", Num(x0 - 6), "\" y=\"", Num(py + 4), "\" text-anchor=\"end\">",
                    XmlEscape(FormatTick(t, y.scale.log ? t : y.step)), "</text>\n");
  }
  return s;
}

std::string AxesLines(double x0, double y0, double x1, double y1) {
  return absl::StrCat("<polyline points=\"", Num(x0), ",", Num(y0), " ", Num(x0), ",", Num(y1), " ", Num(x1), ",",
                      Num(y1), "\" fill=\"none\" stroke=\"#333\"/>\n");
}

// Legend box in the top-right corner of the plot area.
std::string Legend(const std::vector<Series>& series, double x1, double y0, bool bars) {
  if (series.empty() || (series.size() == 1 && series[0].name.empty())) return "";
  size_t longest = 0;
  for (const Series& s : series) longest = std::max(longest, s.name.size());
  const double w = 34 + kCharWidth * static_cast<double>(longest);
  const double h = 8 + 16.0 * static_cast<double>(series.size());
  const double lx = x1 - w - 8, ly = y0 + 8;
  std::string s = absl::StrCat("<g class=\"legend\">\n<rect x=\"", Num(lx), "\" y=\"", Num(ly), "\" width=\"", Num(w),
                               "\" height=\"", Num(h), "\" fill=\"white\" fill-opacity=\"0.85\" stroke=\"#ccc\"/>\n");
  for (size_t i = 0; i < series.size(); ++i) {
    const double cy = ly + 12 + 16.0 * static_cast<double>(i);
    if (bars) {
      absl::StrAppend(&s, "<rect x=\"", Num(lx + 6), "\" y=\"", Num(cy - 5), "\" width=\"18\" height=\"10\" fill=\"",
                      Color(i), "\"/>\n");
    } else {
      absl::StrAppend(&s, "<line x1=\"", Num(lx + 6), "\" y1=\"", Num(cy), "\" x2=\"", Num(lx + 24), "\" y2=\"",
                      Num(cy), "\" stroke=\"", Color(i), "\" stroke-width=\"2\"", Dash(i), "/>\n");
    }
    absl::StrAppend(&s, "<text x=\"", Num(lx + 28), "\" y=\"", Num(cy + 4), "\">", XmlEscape(series[i].name),
                    "</text>\n");
  }
  return s + "</g>\n";
}

std::string NoData(double x0, double y0, double x1, double y1) {
  return absl::StrCat("<text x=\"", Num((x0 + x1) / 2), "\" y=\"", Num((y0 + y1) / 2),
                      "\" text-anchor=\"middle\" fill=\"#888\">no data</text>\n");
}

double NiceStep(double raw) {
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  const double f = raw / mag;
  const double nice = f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10;
  return nice * mag;
}

}  // namespace

std::string XmlEscape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::vector<double> NiceTicks(double lo, double hi, int max_ticks) {
  if (!std::isfinite(lo) || !std::isfinite(hi)) return {0, 1};
  if (lo > hi) std::swap(lo, hi);
  if (hi - lo <= std::max(std::fabs(lo), std::fabs(hi)) * 1e-12) {
    // Constant data: widen around it (by 10% of its size, or 1 around zero).
    const double pad = lo == 0 ? 1 : std::fabs(lo) * 0.1;
    lo -= pad;
    hi += pad;
  }
  max_ticks = std::max(max_ticks, 2);
  const double step = NiceStep((hi - lo) / (max_ticks - 1));
  const double first = std::floor(lo / step + 1e-9);
  const double last = std::ceil(hi / step - 1e-9);
  std::vector<double> ticks;
  for (double k = first; k <= last + 0.5; k += 1) ticks.push_back(k * step == 0 ? 0.0 : k * step);  // no "-0"
  return ticks;
}

std::vector<double> LogTicks(double lo, double hi, int max_ticks) {
  if (!(lo > 0) || !(hi > 0) || !std::isfinite(lo) || !std::isfinite(hi)) return {1, 10};
  if (lo > hi) std::swap(lo, hi);
  int e0 = static_cast<int>(std::floor(std::log10(lo) + 1e-9));
  int e1 = static_cast<int>(std::ceil(std::log10(hi) - 1e-9));
  if (e1 <= e0) e1 = e0 + 1;
  const int every = std::max(1, (e1 - e0 + max_ticks - 2) / std::max(1, max_ticks - 1));
  e1 = e0 + ((e1 - e0 + every - 1) / every) * every;
  std::vector<double> ticks;
  for (int e = e0; e <= e1; e += every) ticks.push_back(std::pow(10.0, e));
  return ticks;
}

std::string FormatTick(double value, double step) {
  if (value == 0) return "0";
  const double a = std::fabs(value);
  if (a >= 1e4) {
    static const char* const kSuffix[] = {"k", "M", "G", "T", "P"};
    int u = 0;
    double v = value / 1e3;
    while (u < 4 && std::fabs(v) >= 1e3) {
      v /= 1e3;
      ++u;
    }
    std::string s = absl::StrFormat("%.2f", v);  // trim trailing zeros
    while (s.back() == '0') s.pop_back();
    if (s.back() == '.') s.pop_back();
    return s + kSuffix[u];
  }
  if (a < 1e-3) return absl::StrFormat("%.3g", value);
  step = std::fabs(step);
  const int decimals = step > 0 && step < 1 ? static_cast<int>(std::ceil(-std::log10(step) - 1e-9)) : 0;
  std::string s = absl::StrFormat("%.*f", std::min(decimals + 1, 6), value);
  // One extra digit covers steps like 0.25; drop it when it is zero.
  if (s.find('.') != std::string::npos) {
    while (s.back() == '0') s.pop_back();
    if (s.back() == '.') s.pop_back();
  }
  return s;
}

std::string LineChartSvg(const std::vector<Series>& series, const ChartOptions& o) {
  Frame f;
  if (!o.title.empty()) f.top = 32;
  const double x0 = f.left, y0 = f.top, x1 = std::max(x0 + 10, o.width - f.right),
               y1 = std::max(y0 + 10, o.height - f.bottom);
  Range xr, yr;
  size_t points = 0;
  for (const Series& s : series) {
    const size_t n = std::min(s.x.size(), s.y.size());
    for (size_t i = 0; i < n; ++i) {
      if (!Usable(s.x[i], false) || !Usable(s.y[i], o.log_y)) continue;
      xr.Add(s.x[i]);
      yr.Add(s.y[i]);
      ++points;
    }
  }
  if (o.y_from_zero && !o.log_y && points > 0) yr.Add(0.0);
  const Axis xa = MakeAxis(xr, false, x0, x1, std::max(2, static_cast<int>((x1 - x0) / 80)));
  const Axis ya = MakeAxis(yr, o.log_y, y1, y0, std::max(2, static_cast<int>((y1 - y0) / 50)));

  std::string svg = Header(o);
  absl::StrAppend(&svg, Titles(o, x0, y0, x1, y1), YGrid(ya, x0, x1));
  for (double t : xa.ticks) {
    const double px = xa.scale(t);
    absl::StrAppend(&svg, "<line x1=\"", Num(px), "\" y1=\"", Num(y0), "\" x2=\"", Num(px), "\" y2=\"", Num(y1),
                    "\" stroke=\"#f0f0f0\"/>\n");
    absl::StrAppend(&svg, "<text x=\"", Num(px), "\" y=\"", Num(y1 + 16), "\" text-anchor=\"middle\">",
                    XmlEscape(FormatTick(t, xa.step)), "</text>\n");
  }
  absl::StrAppend(&svg, AxesLines(x0, y0, x1, y1));
  if (points == 0) absl::StrAppend(&svg, NoData(x0, y0, x1, y1));

  for (size_t si = 0; si < series.size(); ++si) {
    const Series& s = series[si];
    const size_t n = std::min(s.x.size(), s.y.size());
    // Runs of usable points become polylines; a lone point becomes a dot.
    std::vector<std::pair<double, double>> run;
    auto flush = [&]() {
      if (run.size() > 1) {
        std::string pts;
        for (const auto& [px, py] : run) absl::StrAppend(&pts, pts.empty() ? "" : " ", Num(px), ",", Num(py));
        absl::StrAppend(&svg, "<polyline points=\"", pts, "\" fill=\"none\" stroke=\"", Color(si), "\" stroke-width=\"",
                        s.faint ? "1\" stroke-opacity=\"0.35\"" : "1.5\"", Dash(si), "/>\n");
      }
      if (run.size() == 1 || s.markers) {
        for (const auto& [px, py] : run) {
          absl::StrAppend(&svg, "<circle cx=\"", Num(px), "\" cy=\"", Num(py), "\" r=\"3\" fill=\"", Color(si),
                          "\"/>\n");
        }
      }
      run.clear();
    };
    for (size_t i = 0; i < n; ++i) {
      if (!Usable(s.x[i], false) || !Usable(s.y[i], o.log_y)) {
        flush();
        continue;
      }
      run.emplace_back(xa.scale(s.x[i]), ya.scale(s.y[i]));
    }
    flush();
  }
  absl::StrAppend(&svg, Legend(series, x1, y0, /*bars=*/false), "</svg>\n");
  return svg;
}

std::string BarChartSvg(const std::vector<std::string>& categories, const std::vector<Series>& series,
                        const ChartOptions& o) {
  Frame f;
  if (!o.title.empty()) f.top = 32;
  size_t longest_cat = 0;
  for (const std::string& c : categories) longest_cat = std::max(longest_cat, c.size());
  const double plot_w = o.width - f.left - f.right;
  const double group_w = categories.empty() ? plot_w : plot_w / static_cast<double>(categories.size());
  const bool rotate = kCharWidth * static_cast<double>(longest_cat) > group_w - 4;
  if (rotate) f.bottom += std::min(80.0, kCharWidth * static_cast<double>(longest_cat) * 0.5);
  const double x0 = f.left, y0 = f.top, x1 = std::max(x0 + 10, o.width - f.right),
               y1 = std::max(y0 + 10, o.height - f.bottom);

  Range yr;
  size_t bars = 0;
  for (const Series& s : series) {
    for (size_t i = 0; i < std::min(s.y.size(), categories.size()); ++i) {
      if (!Usable(s.y[i], o.log_y)) continue;
      yr.Add(s.y[i]);
      ++bars;
    }
  }
  if (!o.log_y && !yr.empty()) {  // bars grow from zero
    yr.Add(0);
  }
  const Axis ya = MakeAxis(yr, o.log_y, y1, y0, std::max(2, static_cast<int>((y1 - y0) / 50)));
  const double base = o.log_y ? y1 : ya.scale(0);

  std::string svg = Header(o);
  absl::StrAppend(&svg, Titles(o, x0, y0, x1, y1), YGrid(ya, x0, x1));
  if (bars == 0) absl::StrAppend(&svg, NoData(x0, y0, x1, y1));
  const double gw = categories.empty() ? 0 : (x1 - x0) / static_cast<double>(categories.size());
  const double bw = series.empty() ? 0 : gw * 0.8 / static_cast<double>(series.size());
  for (size_t c = 0; c < categories.size(); ++c) {
    const double gx = x0 + gw * static_cast<double>(c);
    for (size_t si = 0; si < series.size(); ++si) {
      if (c >= series[si].y.size() || !Usable(series[si].y[c], o.log_y)) continue;
      const double py = ya.scale(series[si].y[c]);
      const double top = std::min(py, base), h = std::fabs(base - py);
      absl::StrAppend(&svg, "<rect x=\"", Num(gx + gw * 0.1 + bw * static_cast<double>(si)), "\" y=\"", Num(top),
                      "\" width=\"", Num(std::max(bw - 1, 1.0)), "\" height=\"", Num(h), "\" fill=\"", Color(si),
                      "\"><title>", XmlEscape(series[si].name), " ", XmlEscape(categories[c]), ": ",
                      absl::StrFormat("%g", series[si].y[c]), "</title></rect>\n");
    }
    const double cx = gx + gw / 2;
    if (rotate) {
      absl::StrAppend(&svg, "<text x=\"", Num(cx), "\" y=\"", Num(y1 + 14),
                      "\" text-anchor=\"end\" transform=\"rotate(-35 ", Num(cx), " ", Num(y1 + 14), ")\">",
                      XmlEscape(categories[c]), "</text>\n");
    } else {
      absl::StrAppend(&svg, "<text x=\"", Num(cx), "\" y=\"", Num(y1 + 16), "\" text-anchor=\"middle\">",
                      XmlEscape(categories[c]), "</text>\n");
    }
  }
  absl::StrAppend(&svg, AxesLines(x0, y0, x1, y1), Legend(series, x1, y0, /*bars=*/true), "</svg>\n");
  return svg;
}

}  // namespace zt::monitor
