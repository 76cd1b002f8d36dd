// Implementation of offload/host_memory.h.
#include "offload/host_memory.h"

#include "absl/strings/str_format.h"
#include "util/strings.h"
#include "util/system_info.h"

namespace zt::offload {

absl::Status CheckPoolFits(uint64_t bytes, const std::string& what, const std::string& fix) {
  const int64_t available = AvailableMemoryBytes();
  if (available < 0 || bytes <= static_cast<uint64_t>(available)) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrFormat("%s would take %s of host memory but %s is available; %s", what,
                                                      HumanBytes(static_cast<double>(bytes)),
                                                      HumanBytes(static_cast<double>(available)), fix));
}

}  // namespace zt::offload
