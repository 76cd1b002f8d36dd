#include "benchmarks/report/charts.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "monitor/svg_chart.h"

namespace zt::bench {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

bool Matches(const ResultRow& row, const std::vector<std::pair<std::string, std::string>>& match) {
  for (const auto& [k, v] : match) {
    if (row.Get(k) != v) return false;
  }
  return true;
}

// The zero_stages runs in the order the benchmark knows them; others after.
int RunOrder(const std::string& run) {
  static const char* const kOrder[] = {"torch", "0", "1", "2", "3", "3-no-prefetch", "3-reuse"};
  for (int i = 0; i < 7; ++i) {
    if (run == kOrder[i]) return i;
  }
  return 100;
}

// The zero_stages runs and world sizes in a log, and the median of a key
// for one (run, world).
class ZeroStagesRows {
 public:
  explicit ZeroStagesRows(const BenchLog& log) : log_(log) {
    for (const ResultRow& r : log.rows) {
      if (r.Get("impl") != "zt" && r.Get("impl") != "torch") continue;
      int w = 0;
      if (absl::SimpleAtoi(r.Get("world"), &w)) worlds_.insert(w);
      const std::string run = r.Get("stage");
      if (std::find(runs_.begin(), runs_.end(), run) == runs_.end()) runs_.push_back(run);
    }
    std::stable_sort(runs_.begin(), runs_.end(),
                     [](const std::string& a, const std::string& b) { return RunOrder(a) < RunOrder(b); });
    for (const std::string& run : runs_) {
      if (run == "0" || run == "1" || run == "2" || run == "3") stages_.push_back(run);
    }
  }

  const std::set<int>& worlds() const { return worlds_; }
  const std::vector<std::string>& runs() const { return runs_; }      // in RunOrder
  const std::vector<std::string>& stages() const { return stages_; }  // the runs "0".."3"

  double Median(const std::string& run, int world, const char* key) const {
    // "torch" rows (plain LibTorch) carry impl=torch; the stage name alone tells them apart.
    return MedianOf(log_.rows, {{"stage", run}, {"world", absl::StrCat(world)}}, key);
  }

 private:
  const BenchLog& log_;
  std::set<int> worlds_;
  std::vector<std::string> runs_;
  std::vector<std::string> stages_;
};

// Memory by stage at the largest world: measured model states, the formula, the peak.
Chart MemoryChart(const ZeroStagesRows& rows) {
  const int top = *rows.worlds().rbegin();
  monitor::Series states{"model states (engine)", {}, {}}, formula{"ZeRO formula", {}, {}},
      peak{"peak allocated", {}, {}};
  std::vector<std::string> categories;
  for (const std::string& s : rows.stages()) {
    categories.push_back(absl::StrCat("stage ", s));
    states.y.push_back(rows.Median(s, top, "model_state_mib"));
    formula.y.push_back(rows.Median(s, top, "formula_mib"));
    peak.y.push_back(rows.Median(s, top, "peak_mib"));
  }
  monitor::ChartOptions o;
  o.title = absl::StrCat("Memory per rank by ZeRO stage, world ", top);
  o.x_label = "stage";
  o.y_label = "MiB per rank";
  return {"zero_stages-memory.svg", monitor::BarChartSvg(categories, {states, formula, peak}, o)};
}

// Step time relative to stage 0 of the same world, one series per world.
Chart StepChart(const ZeroStagesRows& rows) {
  std::vector<monitor::Series> series;
  for (int w : rows.worlds()) {
    monitor::Series s{absl::StrCat("world ", w), {}, {}};
    const double base = rows.Median("0", w, "step_ms");
    for (const std::string& run : rows.runs()) s.y.push_back(rows.Median(run, w, "step_ms") / base);
    series.push_back(std::move(s));
  }
  std::vector<std::string> categories;
  for (const std::string& run : rows.runs()) categories.push_back(run == "torch" ? "plain LibTorch" : run);
  monitor::ChartOptions o;
  o.title = "Step time relative to stage 0 (same world, same global batch)";
  o.x_label = "run";
  o.y_label = "step time / stage 0";
  return {"zero_stages-step.svg", monitor::BarChartSvg(categories, series, o)};
}

// Scaling at a fixed global batch: step time and peak memory per rank by world.
std::vector<Chart> ScalingCharts(const ZeroStagesRows& rows) {
  std::vector<monitor::Series> time, memory;
  for (const std::string& run : rows.stages()) {
    monitor::Series t{absl::StrCat("stage ", run), {}, {}}, m{absl::StrCat("stage ", run), {}, {}};
    for (int w : rows.worlds()) {
      t.x.push_back(w);
      t.y.push_back(rows.Median(run, w, "step_ms"));
      m.x.push_back(w);
      m.y.push_back(rows.Median(run, w, "peak_mib"));
    }
    time.push_back(std::move(t));
    memory.push_back(std::move(m));
  }
  monitor::ChartOptions o;
  o.title = "Scaling: step time by world size (fixed global batch)";
  o.x_label = "ranks";
  o.y_label = "ms per step";
  std::vector<Chart> charts;
  charts.push_back({"zero_stages-scaling-time.svg", monitor::LineChartSvg(time, o)});
  o.title = "Scaling: peak allocated memory per rank by world size";
  o.y_label = "MiB per rank";
  charts.push_back({"zero_stages-scaling-memory.svg", monitor::LineChartSvg(memory, o)});
  return charts;
}

std::vector<Chart> ZeroStagesCharts(const BenchLog& log) {
  const ZeroStagesRows rows(log);
  if (rows.worlds().empty()) return {};
  std::vector<Chart> charts;
  if (!rows.stages().empty()) charts.push_back(MemoryChart(rows));
  charts.push_back(StepChart(rows));
  if (rows.worlds().size() > 1) {
    for (Chart& c : ScalingCharts(rows)) charts.push_back(std::move(c));
  }
  return charts;
}

}  // namespace

double MedianOf(const std::vector<ResultRow>& rows, const std::vector<std::pair<std::string, std::string>>& match,
                absl::string_view key) {
  std::vector<double> v;
  for (const ResultRow& r : rows) {
    double x = 0;
    if (Matches(r, match) && r.GetNumber(key, &x)) v.push_back(x);
  }
  if (v.empty()) return kNaN;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

std::vector<Chart> ChartsFor(absl::string_view benchmark, const BenchLog& log) {
  if (benchmark == "zero_stages") return ZeroStagesCharts(log);
  return {};
}

}  // namespace zt::bench
