// Implementation of comm/shard_groups.h.
#include "comm/shard_groups.h"

#include "absl/strings/str_cat.h"

namespace zt::comm {

std::vector<int> ShardGroupRanks(int world, int k, int g) {
  std::vector<int> ranks;
  for (int r = g * k; r < (g + 1) * k && r < world; ++r) ranks.push_back(r);
  return ranks;
}

std::vector<int> ReplicaGroupRanks(int world, int k, int j) {
  std::vector<int> ranks;
  for (int r = j; r < world; r += k) ranks.push_back(r);
  return ranks;
}

absl::StatusOr<ShardGroups> MakeShardGroups(const std::shared_ptr<ProcessGroup>& world, int k, const char* key,
                                            bool replicas) {
  const int n = world->size();
  if (k <= 0 || k == n) return ShardGroups{world, nullptr};
  if (k > n || n % k != 0) {
    return absl::InvalidArgumentError(absl::StrCat(key, " is ", k, ", which does not divide the world of ", n,
                                                   " ranks: shard groups must be equal; choose a divisor of ", n,
                                                   " (e.g. the ranks per host), or leave the key at its default"));
  }
  ShardGroups out;
  for (int g = 0; g < n / k; ++g) {
    absl::StatusOr<std::shared_ptr<ProcessGroup>> made = world->NewSubGroup(ShardGroupRanks(n, k, g));
    if (!made.ok()) {
      return absl::Status(made.status().code(),
                          absl::StrCat("creating shard group ", g, " (", key, " ", k, "): ", made.status().message()));
    }
    if (*made) out.shard = *std::move(made);
  }
  for (int j = 0; replicas && j < k; ++j) {
    absl::StatusOr<std::shared_ptr<ProcessGroup>> made = world->NewSubGroup(ReplicaGroupRanks(n, k, j));
    if (!made.ok()) {
      return absl::Status(made.status().code(), absl::StrCat("creating replica group ", j, " (", key, " ", k,
                                                             "): ", made.status().message()));
    }
    if (*made) out.replica = *std::move(made);
  }
  return out;
}

}  // namespace zt::comm
