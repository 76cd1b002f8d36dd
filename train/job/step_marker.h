// The last step a run reached, kept in <output_dir>/.zt_last_step so that a
// restarted attempt (launch/restarts.h) can say how many steps the failure
// cost: the failed attempt's last step minus the checkpoint's. Rank 0 records
// every step; the record is a fixed-width line rewritten in place (one
// pwrite, no rename: a crash mid-write leaves the previous value or a line
// that fails to parse, never a wrong number read as right).
//
//   ZT_ASSIGN_OR_RETURN(StepMarker marker, StepMarker::Open(output_dir));
//   marker.Record(step);                       // after each step
//   std::optional<int64_t> last = ReadLastStep(output_dir);  // at a restart
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "util/unique_fd.h"

namespace zt::train {

inline constexpr char kStepMarkerName[] = ".zt_last_step";

class StepMarker {
 public:
  // Opens (creating) <output_dir>/.zt_last_step; the directory must exist.
  // `truncate`: empty it (no record until the first Record).
  static absl::StatusOr<StepMarker> Open(const std::string& output_dir, bool truncate = false);

  StepMarker(StepMarker&&) = default;
  StepMarker& operator=(StepMarker&&) = default;

  // Overwrites the record with `step`. An error names the file.
  absl::Status Record(int64_t step);

 private:
  StepMarker(UniqueFd fd, std::string path) : fd_(std::move(fd)), path_(std::move(path)) {}
  UniqueFd fd_;
  std::string path_;
};

// The step the marker in `output_dir` holds; nullopt when there is none or
// its line does not parse.
std::optional<int64_t> ReadLastStep(const std::string& output_dir);

}  // namespace zt::train
