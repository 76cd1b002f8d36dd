// File helpers shared by the monitors and the report: create directory
// trees with errors that name the config key to change, own a FILE*. Atomic
// writes are util/file_io.h's.
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

// zt::MakeDirs (mkdir -p) with `config_key` (e.g. "csv_monitor.output_path")
// in the hint: "cannot create /x/y: Permission denied; ...; set
// csv_monitor.output_path to a writable directory".
absl::Status MakeDirs(const std::string& path, const std::string& config_key);

}  // namespace zt::monitor
