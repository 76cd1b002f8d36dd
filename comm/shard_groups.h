// The two sub-groups of hierarchical sharding (DeepSpeed's MiCS,
// mics_shard_size K; FSDP2's HSDP when K is the ranks per host): a shard
// group of K consecutive world ranks, over which parameters, gradients and
// optimizer state are split, and a replica group of the world / K ranks that
// hold the same shard (one per shard group, same place in it), over which
// the reduced gradient shards are all-reduced.
//
// Layout, as DeepSpeed's MiCS builds it: shard group g is world ranks
// g*K .. g*K + K - 1; replica group j is ranks j, j + K, j + 2K, ... With zt
// launch's numbering (host n holds ranks n*L .. n*L + L - 1) and K = L, the
// shard group is the host's ranks (node-local) and the replica group crosses
// hosts (comm/sub_group.h NodeLocalRanks / CrossNodeRanks).
#pragma once

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "comm/process_group.h"

namespace zt::comm {

struct ShardGroups {
  std::shared_ptr<ProcessGroup> shard;    // this rank's K ranks
  std::shared_ptr<ProcessGroup> replica;  // world / K ranks; null when K = world (flat)
};

// World ranks of shard group `g` and of replica group `j` for shard size k.
std::vector<int> ShardGroupRanks(int world, int k, int g);
std::vector<int> ReplicaGroupRanks(int world, int k, int j);

// Collective over `world` (every rank calls it with the same k and
// `replicas`): k = world (or k <= 0) returns {world, null} and creates
// nothing; else the world / k shard groups, then (with `replicas`) the k
// replica groups, each created on every rank in the same order
// (ProcessGroup::NewSubGroup's contract). InvalidArgument, naming `key`, when
// k does not divide the world size.
absl::StatusOr<ShardGroups> MakeShardGroups(const std::shared_ptr<ProcessGroup>& world, int k, const char* key,
                                            bool replicas = true);

}  // namespace zt::comm
