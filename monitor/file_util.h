// File helpers shared by the monitors and the report: create directory
// trees, own a FILE*, write a small file atomically. Errors name the path,
// the errno text and the config key to change.
#pragma once

#include <cstdio>
#include <memory>
#include <string>

#include "absl/status/status.h"

namespace zt::monitor {

struct FileCloser {
  void operator()(std::FILE* f) const {
    if (f != nullptr) std::fclose(f);
  }
};
using FilePtr = std::unique_ptr<std::FILE, FileCloser>;

// "a/b" + "c" -> "a/b/c"; an empty `dir` gives `name` (relative to the cwd).
std::string JoinPath(const std::string& dir, const std::string& name);

// mkdir -p. `config_key` (e.g. "csv_monitor.output_path") goes into the hint:
// "cannot create /x/y: Permission denied; set csv_monitor.output_path to a
// writable directory".
absl::Status MakeDirs(const std::string& path, const std::string& config_key);

// Writes `contents` to `<path>.tmp.<pid>`, fsyncs it and renames it to `path`,
// so readers see the old file or the whole new one.
absl::Status WriteFileAtomically(const std::string& path, const std::string& contents);

}  // namespace zt::monitor
