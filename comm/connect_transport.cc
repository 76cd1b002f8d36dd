// Implementation of comm/connect_transport.h.
#include "comm/connect_transport.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "comm/gloo_transport.h"
#include "comm/shm_transport.h"
#include "util/log.h"

namespace zt::comm {

bool OnOneHost(const std::vector<int>& world_ranks, int local_world_size) {
  if (world_ranks.empty() || local_world_size < 1) return false;
  const int host = world_ranks.front() / local_world_size;
  for (int r : world_ranks) {
    if (r / local_world_size != host) return false;
  }
  return true;
}

absl::StatusOr<std::unique_ptr<Transport>> ConnectTransport(const StoreHandle& store, const GroupOptions& options,
                                                            const std::vector<int>& world_ranks) {
  std::vector<int> members = world_ranks;
  if (members.empty()) {
    for (int r = 0; r < store.env.world_size; ++r) members.push_back(r);
  }
  const bool local = OnOneHost(members, store.env.local_world_size);
  const bool ring = options.reduce_scatter_algorithm == ReduceScatterAlgorithm::kRing;
  if (options.backend == BackendChoice::kShm && ring) {
    return absl::InvalidArgumentError(
        "ZT_COMM_BACKEND=shm reduces in rank order (the alltoall algorithm); ZT_REDUCE_SCATTER_ALGO=ring runs on "
        "Gloo only: set ZT_COMM_BACKEND=gloo or drop ZT_REDUCE_SCATTER_ALGO");
  }
  const bool try_shm = options.backend != BackendChoice::kGloo && local && !ring;
  if (try_shm) {
    absl::StatusOr<std::unique_ptr<Transport>> shm = ConnectShmTransport(store, options, members);
    if (shm.ok()) return shm;
    if (options.backend == BackendChoice::kShm) {
      return absl::Status(shm.status().code(),
                          absl::StrCat(shm.status().message(), " (ZT_COMM_BACKEND=shm; auto would use Gloo instead)"));
    }
    ZT_LOG(WARNING) << shm.status().message() << "; ranks [" << absl::StrJoin(members, ", ")
                    << "] use Gloo over TCP instead";
  }
  return ConnectGlooTransport(store, options, world_ranks);
}

}  // namespace zt::comm
