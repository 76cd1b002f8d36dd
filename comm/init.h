// Entry point: turn this process's rank environment into a ProcessGroup.
//
//   ZT_ASSIGN_OR_RETURN(zt::comm::RankEnv env, zt::comm::ReadRankEnv());
//   ZT_ASSIGN_OR_RETURN(auto group, zt::comm::InitProcessGroup(env, {}));
//   group->AllReduce(grad, zt::comm::ReduceOp::kAvg)->Wait();
//
// Collective: every rank of the world must call it (same options).
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "comm/group_options.h"
#include "comm/process_group.h"
#include "launch/rank_env.h"

namespace zt::comm {

// Applies the environment overrides (comm/group_options.h), then:
//  * sets the log prefix rank (zt::SetLogRank);
//  * gives this rank its threads: at::set_num_threads(OMP_NUM_THREADS) when
//    that is one positive integer (again: a rank forked from its launcher
//    loaded OpenMP with the launcher's value); when it is unset, its share of
//    the CPUs, max(1, usable cores / local_world_size);
//  * ignores SIGPIPE (a peer that dies must become an error, not kill us);
//  * picks the backend: single rank when world_size == 1 (unless
//    GroupOptions::backend forces Gloo), Gloo for CPU tensors otherwise;
//  * runs the rendezvous and connects the group.
// Errors name the rank, the address and the variable to change.
absl::StatusOr<std::shared_ptr<ProcessGroup>> InitProcessGroup(const RankEnv& env, const GroupOptions& options);

// The intra-op thread count InitProcessGroup chooses for a rank: CPUs this
// process may run on (sched_getaffinity) divided by ranks on this host.
int DefaultThreadsPerRank(int local_world_size);

}  // namespace zt::comm
