// The payload bytes a rank sends and receives in each collective, as the
// group's counters report them. The schedule is Gloo's (its ring all-gather,
// binomial broadcast, and our all-to-all reduce-scatter); the shared-memory
// transport reports the same numbers, so the counters, `zt estimate` and the
// per-link accounting describe a collective's volume the same way on either
// transport (what it would put on a wire between the ranks).
#pragma once

#include <c10/core/ScalarType.h>

#include <cstdint>
#include <vector>

namespace zt::comm {

struct WireBytes {
  int64_t sent = 0;
  int64_t received = 0;
};

// Ring all-gather of chunks of `chunk_bytes[r]` bytes (rank r's shard).
WireBytes AllGatherWireBytes(const std::vector<int64_t>& chunk_bytes, int rank);
// Binomial-tree broadcast of `bytes` from `root`.
WireBytes BroadcastWireBytes(int world, int rank, int root, int64_t bytes);
// All-to-all reduce-scatter of `numel` elements: each peer's slice goes to
// that peer, this rank's slice comes from every peer.
WireBytes ReduceScatterWireBytes(int64_t numel, int world, int rank, size_t elem_size);
// All-to-all of `block_bytes` per rank: (world - 1) blocks each way.
WireBytes AllToAllWireBytes(int world, int64_t block_bytes);
// Shard sizes in bytes of `numel` elements of `elem_size` over `world` ranks.
std::vector<int64_t> ShardBytes(int64_t numel, int world, size_t elem_size);

}  // namespace zt::comm
