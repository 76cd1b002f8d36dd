// Implementation of comm/sub_group.h.
#include "comm/sub_group.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace zt::comm {
namespace {

absl::Status CheckLayout(const RankEnv& env) {
  const int local = env.local_world_size;
  if (local < 1 || env.world_size % local != 0) {
    return absl::InvalidArgumentError(absl::StrCat("the world of ", env.world_size,
                                                   " ranks is not a whole number of hosts of LOCAL_WORLD_SIZE ", local,
                                                   " ranks: node-local and cross-node groups need every host to run "
                                                   "the same number of ranks"));
  }
  if (env.rank % local != env.local_rank) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rank ", env.rank, " has LOCAL_RANK ", env.local_rank, ", but with LOCAL_WORLD_SIZE ", local,
        " the ranks of a host must be contiguous (host n: ranks n*", local, " .. n*", local, "+", local - 1,
        ", as zt launch and torchrun number them); start the ranks so, or build the groups from rank lists"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckSubGroupRanks(const std::vector<int>& ranks, int group_size) {
  const std::string list = absl::StrCat("[", absl::StrJoin(ranks, ", "), "]");
  if (ranks.empty()) return absl::InvalidArgumentError("a sub-group needs at least one rank (got [])");
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (ranks[i] < 0 || ranks[i] >= group_size) {
      return absl::InvalidArgumentError(absl::StrCat("sub-group ranks ", list, ": rank ", ranks[i],
                                                     " is outside the group of ", group_size, " ranks"));
    }
    if (i > 0 && ranks[i] <= ranks[i - 1]) {
      return absl::InvalidArgumentError(absl::StrCat(
          "sub-group ranks ", list, " must be ascending without repeats (every rank passes the same list)"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int>> NodeLocalRanks(const RankEnv& env) {
  if (absl::Status s = CheckLayout(env); !s.ok()) return s;
  std::vector<int> ranks;
  const int first = env.rank - env.local_rank;
  for (int r = 0; r < env.local_world_size; ++r) ranks.push_back(first + r);
  return ranks;
}

absl::StatusOr<std::vector<int>> CrossNodeRanks(const RankEnv& env) {
  if (absl::Status s = CheckLayout(env); !s.ok()) return s;
  std::vector<int> ranks;
  for (int r = env.local_rank; r < env.world_size; r += env.local_world_size) ranks.push_back(r);
  return ranks;
}

}  // namespace zt::comm
