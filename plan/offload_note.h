// When NVMe offload cannot pay for itself: state kept in swap files is
// held in a pool of host buffers while it is used. Where the pool is at
// least as large as the state on disk (small models, or a sub_group_size
// that puts the whole state in one sub-group), the swap files save no host
// memory at all (the optimizer state then stays in the buffers and moves
// no bytes after the first step; parameter shards are still written back
// after each update): the engine says so once at start-up, and so does
// `zt estimate`, so that nobody believes the memory is saved.
//
// The engine (engine/engine_setup.cc) and the estimate (apps/cmd_estimate.cc)
// both decide with this function.
#pragma once

#include <cstdint>
#include <string>

namespace zt::plan {

// The note for `what` ("optimizer state", "parameter shards") when a pool of
// `pool_bytes` streams `on_disk_bytes` of swap files without saving memory;
// empty when the offload saves host memory (or nothing is offloaded).
std::string NvmeOffloadNote(const std::string& what, int64_t on_disk_bytes, int64_t pool_bytes);

}  // namespace zt::plan
