// The host-memory check every swap buffer pool passes before it allocates:
// offload must never take the RAM it exists to save (a DeepSpeed complaint:
// its pinned swap buffers could exhaust host memory).
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"

namespace zt::offload {

// OK when `bytes` fit in the memory the kernel reports available
// (MemAvailable); else ResourceExhausted naming `what`, both sizes and `fix`
// (the config keys to change). OK when the kernel does not say.
absl::Status CheckPoolFits(uint64_t bytes, const std::string& what, const std::string& fix);

}  // namespace zt::offload
