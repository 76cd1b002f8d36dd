// The contract between a benchmark and the suite (scripts/bench.sh): what a
// benchmark prints besides its human-readable tables.
//
//   <SystemInfoLine()>                       first: the machine and BLAS
//   ### world=2 round=1 impl=zt              optional context (scripts write these)
//   RESULT run=3 world=2 step_ms=812.5 ...   one measured row; key=value, no spaces in values
//   SUMMARY: <one line>                      last: the verdict a reader wants
//
// ParseBenchLog turns such text (one or several logs, concatenated) into
// rows; BenchLogJson writes them as JSON. ResultLog is what a benchmark uses
// to print rows and the summary and, with --json, write the same JSON itself.
// LibTorch-free, so the report tool and its tests build without it.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace zt::bench {

// One measured row: key=value pairs in the order they were set. Keys are
// [a-z0-9_]+; whitespace in a string value becomes '_' (a row is one line).
class ResultRow {
 public:
  ResultRow& Set(absl::string_view key, double value);  // printed with %.6g
  ResultRow& Set(absl::string_view key, int64_t value);
  ResultRow& Set(absl::string_view key, int value) { return Set(key, static_cast<int64_t>(value)); }
  ResultRow& Set(absl::string_view key, absl::string_view value);
  ResultRow& Set(absl::string_view key, const char* value) { return Set(key, absl::string_view(value)); }

  // The value of `key`, or "" when the row has none.
  std::string Get(absl::string_view key) const;
  // The value of `key` as a number; false when absent or not a finite number.
  bool GetNumber(absl::string_view key, double* out) const;

  const std::vector<std::pair<std::string, std::string>>& fields() const { return fields_; }
  // "RESULT k=v k=v".
  std::string Line() const;

 private:
  void Put(absl::string_view key, std::string value);
  std::vector<std::pair<std::string, std::string>> fields_;
};

// What one run of a benchmark printed.
struct BenchLog {
  std::string machine;          // the first SystemInfoLine() ("cpu: ...") seen
  std::vector<ResultRow> rows;  // context keys first, then the row's own
  std::string summary;          // the last "SUMMARY: " line, without the prefix
};

// Parses `text`; `source` names it in errors. A malformed RESULT or ### line
// (a field without '=', a bad key) is an error naming the source and line.
absl::StatusOr<BenchLog> ParseBenchLog(absl::string_view text, absl::string_view source);

// Facts about the run that the benchmark itself does not know (set by the suite).
struct RunInfo {
  std::string command;  // what was run
  std::string date;     // UTC
  std::string commit;
  double seconds = 0;  // wall time of the whole benchmark
};

// {"benchmark", "machine", "summary", "run": {...}, "rows": [{k: v}]}; a value
// that reads as a finite number is a JSON number, any other a string.
std::string BenchLogJson(absl::string_view benchmark, const BenchLog& log, const RunInfo& run);
// The inverse of BenchLogJson (numbers come back in %.17g form).
absl::StatusOr<std::pair<BenchLog, RunInfo>> ReadBenchJson(absl::string_view json_text, absl::string_view source);

// For a benchmark program. Rows are printed as RESULT lines when added; Finish
// prints the summary and, when json_path is set, writes the JSON there.
class ResultLog {
 public:
  ResultLog(std::string benchmark, std::string json_path, std::ostream& out);
  void Machine(std::string line) { log_.machine = std::move(line); }
  void Add(const ResultRow& row);
  absl::Status Finish(absl::string_view summary);

 private:
  std::string benchmark_, json_path_;
  std::ostream& out_;
  BenchLog log_;
};

}  // namespace zt::bench
