// What the stage-3 parameter coordinator (zero/param_coordinator.h) reports:
// gathered bytes, prefetches, departures from the recorded unit order and
// parameter swapping. A header of its own, with no LibTorch, so that the
// engine's public API (Engine::stage3_stats) can return it.
#pragma once

#include <cstdint>

#include "offload/swap_stats.h"

namespace zt::zero {

struct CoordinatorStats {
  int64_t gathered_bytes = 0;           // full (non-persistent) chunk bytes allocated now
  int64_t peak_gathered_bytes = 0;      // most at once since the last ResetPeak()
  int64_t gathers = 0;                  // chunk all-gathers issued
  int64_t prefetched_units = 0;         // unit gathers issued ahead of use
  int64_t trace_mismatches = 0;         // requests that departed from the trace
  int64_t cached_bytes = 0;             // freed gather buffers kept for reuse (zero/storage.h)
  int64_t swapped_shard_bytes = 0;      // parameter shards living on NVMe (not in memory)
  int64_t swapped_shards = 0;           // ... and how many
  int64_t kept_shard_bytes = 0;         // with NVMe offload: shards below aio.block_size, kept in memory
  int64_t swap_buffer_bytes = 0;        // the parameter swap pool
  int64_t late_persistent_gathers = 0;  // persistent chunks all-gathered again after the update at gather
  int64_t secondary_bytes = 0;          // hpZ: secondary shards held (allocated once, kept)
  int64_t secondary_gathers = 0;        // hpZ: gathers served from the secondary shards
  int64_t quantized_gathers = 0;        // qwZ: gathers that sent int8 records
  int64_t exact_regathers = 0;          // qwZ: chunks gathered again exactly for GatheredParameters
  int64_t frozen_record_bytes = 0;      // qwZ: frozen chunks' records kept (zero_quantized_nontrainable_weights)
  offload::ParamSwapStats swap;         // zeros without parameter offload
};

}  // namespace zt::zero
