// The shared-memory transport for the ranks of one host: collectives copy
// through a segment every member maps (comm/shm_segment.h) instead of TCP
// loopback, so a byte costs a memcpy in and one out, with no system call
// unless a rank has to sleep for its peers. One collective at a time (the
// group runs one worker), in the group's order.
//
// Results are bitwise those of the Gloo transport (reductions in rank order
// through comm/reduce_kernels.h, halves accumulated in fp32) and the byte
// counters report the same payload (comm/wire_bytes.h).
#pragma once

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "comm/group_options.h"
#include "comm/rendezvous.h"
#include "comm/transport.h"

namespace zt::comm {

// Collective on the group's ranks (store.env: its rank and size): rank 0
// creates the segment and announces its name and token under
// "<options.store_prefix>/shm" in the store, the others map it, and every
// rank publishes whether it could. Returns the transport when all could;
// otherwise every rank returns the same error, naming each rank that could
// not and why (so all of them fall back, or fail, together). `world_ranks`:
// the members' world ranks, for messages (one per rank of store.env).
absl::StatusOr<std::unique_ptr<Transport>> ConnectShmTransport(const StoreHandle& store, const GroupOptions& options,
                                                               const std::vector<int>& world_ranks);

}  // namespace zt::comm
