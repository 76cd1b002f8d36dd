// Implementation of comm/wire_bytes.h.
#include "comm/wire_bytes.h"

#include "comm/process_group.h"

namespace zt::comm {

// gloo's allgather and allgatherv are rings: at step i rank r forwards chunk
// (r - i) to r+1, for i = 0..n-2, so it sends every chunk but (r+1)'s and
// receives every chunk but its own.
WireBytes AllGatherWireBytes(const std::vector<int64_t>& chunk_bytes, int rank) {
  const int n = static_cast<int>(chunk_bytes.size());
  WireBytes w;
  if (n <= 1) return w;
  int64_t total = 0;
  for (int64_t b : chunk_bytes) total += b;
  w.sent = total - chunk_bytes[(rank + 1) % n];
  w.received = total - chunk_bytes[rank];
  return w;
}

// gloo's broadcast is a binomial tree over virtual ranks v = (rank - root)
// mod n: in round i, ranks v < 2^i send to v + 2^i (when it exists).
WireBytes BroadcastWireBytes(int world, int rank, int root, int64_t bytes) {
  WireBytes w;
  if (world <= 1) return w;
  const int v = (rank - root + world) % world;
  for (int64_t step = 1; step < world; step <<= 1) {
    if (v < step && v + step < world) w.sent += bytes;
  }
  if (v != 0) w.received = bytes;
  return w;
}

WireBytes ReduceScatterWireBytes(int64_t numel, int world, int rank, size_t elem_size) {
  WireBytes w;
  if (world <= 1) return w;
  const std::vector<int64_t> shard = ShardBytes(numel, world, elem_size);
  for (int r = 0; r < world; ++r) {
    if (r != rank) w.sent += shard[r];
  }
  w.received = (world - 1) * shard[rank];
  return w;
}

WireBytes AllToAllWireBytes(int world, int64_t block_bytes) {
  return WireBytes{(world - 1) * block_bytes, (world - 1) * block_bytes};
}

std::vector<int64_t> ShardBytes(int64_t numel, int world, size_t elem_size) {
  std::vector<int64_t> bytes(world);
  for (int r = 0; r < world; ++r) {
    bytes[r] = (ShardEnd(numel, world, r) - ShardBegin(numel, world, r)) * static_cast<int64_t>(elem_size);
  }
  return bytes;
}

}  // namespace zt::comm
