// Implementation of comm/init.h.
#include "comm/init.h"

#include <ATen/Parallel.h>
#include <sched.h>
#include <signal.h>

#include <algorithm>
#include <cstdlib>
#include <thread>

#include "absl/strings/str_cat.h"
#include "comm/cpu_group.h"
#include "comm/rendezvous.h"
#include "comm/single_group.h"
#include "util/log.h"
#include "util/status.h"
#include "util/system_info.h"

namespace zt::comm {
namespace {

void IgnoreSigpipe() {
  struct sigaction current {};
  if (sigaction(SIGPIPE, nullptr, &current) == 0 && current.sa_handler == SIG_DFL) {
    signal(SIGPIPE, SIG_IGN);
  }
}

}  // namespace

int DefaultThreadsPerRank(int local_world_size) {
  int cores = 0;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) cores = CPU_COUNT(&set);
  if (cores <= 0) cores = static_cast<int>(std::thread::hardware_concurrency());
  return std::max(1, cores / std::max(1, local_world_size));
}

absl::StatusOr<std::shared_ptr<ProcessGroup>> InitProcessGroup(const RankEnv& env, const GroupOptions& options) {
  GroupOptions opts = options;
  ZT_RETURN_IF_ERROR(ApplyEnvOverrides(opts));
  SetLogRank(env.rank);
  // OpenMP read OMP_NUM_THREADS while it loaded; a rank forked from its
  // launcher (launch/fork_spawner.h) loaded with the launcher's value, so a
  // plain count is applied again here.
  const char* omp = std::getenv("OMP_NUM_THREADS");
  if (const int asked = PlainThreadCount(omp); asked > 0) {
    at::set_num_threads(asked);
  } else if (omp == nullptr || *omp == '\0') {
    at::set_num_threads(DefaultThreadsPerRank(env.local_world_size));
  }
  IgnoreSigpipe();

  if (opts.backend == BackendChoice::kSingle && env.world_size != 1) {
    return absl::InvalidArgumentError(absl::StrCat("backend 'single' needs a world of one rank, but the world size is ",
                                                   env.world_size, " (", env.source,
                                                   "): use ZT_COMM_BACKEND=auto or gloo"));
  }
  if (env.world_size == 1 && opts.backend != BackendChoice::kGloo) {
    return std::shared_ptr<ProcessGroup>(std::make_shared<SingleGroup>(opts.timeout));
  }
  // An agent's store outlives the attempts of a restarted job (torchrun's,
  // or node 0's zt launch across nodes: launch/node_rounds.h), so each
  // attempt keys its rendezvous and groups apart, as torchrun's workers use
  // "/worker/attempt_<n>": no rank of attempt n meets a key of attempt n - 1.
  if (env.agent_hosts_store) opts.store_prefix = absl::StrCat(opts.store_prefix, "/attempt_", env.restart_count);
  ZT_ASSIGN_OR_RETURN(StoreHandle store, Rendezvous(env, opts.rendezvous_timeout, opts.store_prefix));
  ZT_ASSIGN_OR_RETURN(std::shared_ptr<CpuGroup> group, CpuGroup::Create(store, opts));
  ZT_LOG(DEBUG) << "process group ready: " << group->backend_name() << ", " << env.DebugString() << ", over "
                << group->device_description() << ", timeout " << FormatDuration(opts.timeout) << ", reduce-scatter "
                << ToString(opts.reduce_scatter_algorithm);
  return std::shared_ptr<ProcessGroup>(std::move(group));
}

}  // namespace zt::comm
