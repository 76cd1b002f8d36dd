// docs/benchmarks.md holds, per benchmark, a block the suite rewrites:
//
//   <!-- bench:NAME:begin -->
//   ...generated: command, machine, tables, summary, charts...
//   <!-- bench:NAME:end -->
//
// Everything outside the blocks (the prose that explains the numbers) is
// left as it is.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "benchmarks/results.h"

namespace zt::bench {

// `doc` with the inside of NAME's block replaced by `content`. An error
// names the marker when the block is missing, repeated or out of order.
absl::StatusOr<std::string> ReplaceBlock(absl::string_view doc, absl::string_view name, absl::string_view content);

// The generated text of one block: the command and when it ran, the machine,
// the benchmark's printed tables (its RESULT lines left out), the summary,
// and an image line per chart (paths relative to the document).
std::string RenderBlock(absl::string_view name, const BenchLog& log, const RunInfo& run, absl::string_view printed,
                        const std::vector<std::string>& chart_paths);

// The "suite" block: one table row per benchmark (its summary and time) and
// the machine; `entries` pairs each name with its collected results.
std::string RenderSuiteBlock(const std::vector<std::pair<std::string, std::pair<BenchLog, RunInfo>>>& entries);

}  // namespace zt::bench
