// Which transport a CPU group's members talk through, and connecting it:
//   * ZT_COMM_BACKEND=gloo (BackendChoice::kGloo): Gloo over TCP.
//   * auto (the default) and shm: shared memory when every member is on this
//     host by the launch layout (comm/sub_group.h: host = world rank /
//     LOCAL_WORLD_SIZE) and the segment maps on all of them; Gloo across
//     hosts. When the segment cannot be mapped, auto logs why and uses Gloo;
//     shm returns the error.
//   * ZT_REDUCE_SCATTER_ALGO=ring is a Gloo algorithm: auto then uses Gloo.
#pragma once

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "comm/group_options.h"
#include "comm/rendezvous.h"
#include "comm/transport.h"

namespace zt::comm {

// Collective on the group's ranks (store.env: its rank and size; its
// local_world_size: the world's). `world_ranks`: the members' world ranks
// (empty: the world itself).
absl::StatusOr<std::unique_ptr<Transport>> ConnectTransport(const StoreHandle& store, const GroupOptions& options,
                                                            const std::vector<int>& world_ranks);

// Whether the layout puts every one of `world_ranks` on one host.
bool OnOneHost(const std::vector<int>& world_ranks, int local_world_size);

}  // namespace zt::comm
