// Counters of the parameter swapper (offload/param_swapper.h), in a header of
// their own so that statistics reach the engine's public API without the
// swapper's I/O types.
#pragma once

#include <cstdint>

namespace zt::offload {

struct ParamSwapStats {
  uint64_t reads = 0, read_bytes = 0;  // slot reads issued
  uint64_t writes = 0, write_bytes = 0;
  uint64_t hits = 0;        // Acquire found the slot resident or in flight
  uint64_t read_ahead = 0;  // reads started by TryReadAhead
  uint64_t evictions = 0;
  double wait_seconds = 0;  // time Acquire/Flush blocked on I/O
};

}  // namespace zt::offload
