// Which stage-3 parameter shards go to the NVMe swap file
// (zero_optimization.offload_param.device "nvme").
//
// DeepSpeed's rule (its parameter swapper's swappable_tensor): a partition
// is swapped when it is at least the smallest worthwhile I/O, its aio block
// size; smaller partitions stay in host memory, where reading them back
// costs more than they save. DeepSpeed 0.14 reads offload_param.max_in_cpu
// and only logs it, and so does zerotorch: at its usual 1e9 it must not turn
// parameter offload off. (DeepSpeed also never goes below 1 MiB; zerotorch
// takes aio.block_size as given, whose default is that 1 MiB, so a smaller
// block size moves smaller shards too.)
//
// The engine (zero/param_coordinator.cc) and the memory estimate
// (estimate/memory_estimate.cc) both decide with this function.
#pragma once

#include <cstdint>

namespace zt::plan {

inline bool ParamShardGoesToSwap(int64_t shard_bytes, int64_t aio_block_size) {
  return shard_bytes > 0 && shard_bytes >= aio_block_size;
}

}  // namespace zt::plan
