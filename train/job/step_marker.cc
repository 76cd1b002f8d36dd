// Implementation of train/job/step_marker.h.
#include "train/job/step_marker.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"

namespace zt::train {
namespace {

// "step " + 20 digits + "\n": every record has the same length, so an
// overwrite never leaves the tail of a longer one behind.
constexpr size_t kRecordBytes = 26;

std::string MarkerPath(const std::string& output_dir) { return absl::StrCat(output_dir, "/", kStepMarkerName); }

}  // namespace

absl::StatusOr<StepMarker> StepMarker::Open(const std::string& output_dir, bool truncate) {
  const std::string path = MarkerPath(output_dir);
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | (truncate ? O_TRUNC : 0), 0644));
  if (!fd.valid()) {
    return absl::PermissionDeniedError(absl::StrCat("cannot open ", path, ": ", std::strerror(errno)));
  }
  return StepMarker(std::move(fd), path);
}

absl::Status StepMarker::Record(int64_t step) {
  const std::string line = absl::StrFormat("step %020d\n", step);
  if (line.size() != kRecordBytes) return absl::InternalError(absl::StrCat("step ", step, " does not fit ", path_));
  const ssize_t n = ::pwrite(fd_.get(), line.data(), line.size(), 0);
  if (n != static_cast<ssize_t>(line.size())) {
    return absl::DataLossError(
        absl::StrCat("writing ", path_, ": ", n < 0 ? std::strerror(errno) : "short write", " (is the disk full?)"));
  }
  return absl::OkStatus();
}

std::optional<int64_t> ReadLastStep(const std::string& output_dir) {
  std::ifstream in(MarkerPath(output_dir));
  std::string line;
  if (!in || !std::getline(in, line) || line.size() + 1 != kRecordBytes) return std::nullopt;
  absl::string_view digits = line;
  int64_t step = 0;
  if (!absl::ConsumePrefix(&digits, "step ") || !absl::SimpleAtoi(digits, &step) || step < 0) return std::nullopt;
  return step;
}

}  // namespace zt::train
