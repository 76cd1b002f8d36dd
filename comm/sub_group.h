// Which ranks form the usual sub-groups of a job, and the checks every
// backend's ProcessGroup::NewSubGroup applies to a rank list.
//
// Layout assumed: the ranks of one host are contiguous, host n holding world
// ranks n * L .. n * L + L - 1 with L = LOCAL_WORLD_SIZE (how zt launch and
// torchrun number them, and MPI's default by-slot placement). Then
//   node-local: the L ranks of this host (shard inside a node: HSDP, MiCS);
//   cross-node: the ranks with this LOCAL_RANK on every host (replicate across).
//
//   auto local = world->NewSubGroup(comm::NodeLocalRanks(env).value());
#pragma once

#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "launch/rank_env.h"

namespace zt::comm {

// InvalidArgument unless `ranks` is non-empty, ascending, without repeats and
// inside [0, group_size); the message names the list and the group size.
absl::Status CheckSubGroupRanks(const std::vector<int>& ranks, int group_size);

// This host's world ranks. InvalidArgument when the world is not a whole
// number of hosts of LOCAL_WORLD_SIZE ranks, or this rank's LOCAL_RANK does
// not match the contiguous layout above.
absl::StatusOr<std::vector<int>> NodeLocalRanks(const RankEnv& env);
// The world ranks with this rank's LOCAL_RANK, one per host (same checks).
absl::StatusOr<std::vector<int>> CrossNodeRanks(const RankEnv& env);

}  // namespace zt::comm
