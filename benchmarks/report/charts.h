// SVG charts drawn from a benchmark's rows (docs/benchmarks.md embeds them).
// A benchmark without charts gets none; rows the chart needs but lacks are
// skipped, never invented.
#pragma once

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "benchmarks/results.h"

namespace zt::bench {

struct Chart {
  std::string file;  // e.g. "zero_stages-memory.svg"
  std::string svg;
};

// zero_stages (rows of impl=zt with run, world, step_ms, peak_mib,
// model_state_mib, formula_mib; medians over rounds):
//   -memory:  per-rank model states vs the ZeRO formula and the peak, by stage, at the largest world;
//   -step:    step time of each run relative to stage 0, one bar per world;
//   -scaling: step time and peak memory per rank from world 1 to the largest.
std::vector<Chart> ChartsFor(absl::string_view benchmark, const BenchLog& log);

// The median of `key` over the rows for which every (k, v) of `match` holds;
// NaN when no row has it.
double MedianOf(const std::vector<ResultRow>& rows, const std::vector<std::pair<std::string, std::string>>& match,
                absl::string_view key);

}  // namespace zt::bench
