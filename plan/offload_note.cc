// Implementation of plan/offload_note.h.
#include "plan/offload_note.h"

#include "absl/strings/str_format.h"
#include "util/strings.h"

namespace zt::plan {

std::string NvmeOffloadNote(const std::string& what, int64_t on_disk_bytes, int64_t pool_bytes) {
  if (on_disk_bytes <= 0 || pool_bytes < on_disk_bytes) return "";
  return absl::StrFormat(
      "NVMe offload of the %s saves no host memory here: its swap buffers (%s) hold all of it (%s on disk), so "
      "the swap files only take disk space; use device \"cpu\" (or no offload) for this model, or a smaller "
      "sub_group_size / buffer_size so the buffers hold less than the state",
      what, HumanBytes(static_cast<double>(pool_bytes)), HumanBytes(static_cast<double>(on_disk_bytes)));
}

}  // namespace zt::plan
