// Directory creation with the config key in the hint.
#include "monitor/file_util.h"

#include "absl/strings/str_cat.h"
#include "util/file_io.h"

namespace zt::monitor {

absl::Status MakeDirs(const std::string& path, const std::string& config_key) {
  absl::Status made = zt::MakeDirs(path);
  if (made.ok()) return made;
  return absl::Status(made.code(), absl::StrCat(made.message(), "; set ", config_key, " to a writable directory"));
}

}  // namespace zt::monitor
