// Entry points of the `zt` subcommands, one file each (apps/cmd_<name>.cc).
// Each takes the arguments after its name and returns the process exit code:
// 0 success, 2 bad input (message on stderr), other codes as documented.
// `zt` (zt.cc) runs config, ckpt, estimate, tokenize and launch; `zt-torch`
// (zt_torch.cc) runs train, generate and launch (cli/programs.h says why).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "launch/kv_store.h"
#include "launch/launcher.h"

namespace zt::cli {

int RunConfigCommand(const std::vector<std::string>& args);
// What `zt launch` runs on, which depends on the program it runs in.
struct LaunchBackends {
  comm::RankSpawner spawn;  // starts ranks without exec where it can (empty: exec every rank)
  // The launchers' store for restarts and elastic membership across nodes
  // (c10d's TCPStore: zt-torch only; empty in zt).
  comm::KeyValueStoreOpener store;
  // Without `store`: runs this command line in zt-torch instead (execs it).
  std::function<int()> run_in_torch_program;
};
int RunLaunchCommand(const std::vector<std::string>& args, const LaunchBackends& backends);
int RunCkptCommand(const std::vector<std::string>& args);
int RunTrainCommand(const std::vector<std::string>& args);
int RunEstimateCommand(const std::vector<std::string>& args);
int RunTokenizeCommand(const std::vector<std::string>& args);
int RunGenerateCommand(const std::vector<std::string>& args);

// Starts ranks whose command is this binary's `zt train ...` by fork, from
// this process that has loaded LibTorch already (launch/fork_spawner.h says
// when it execs instead); other commands are left to exec. The rank runs
// RunTrainCommand on its arguments, as an exec'd one would. For
// `zt train --nproc` and `zt launch -- zt train`, in zt-torch: `zt train`
// counts as this binary's train too (FrontPrograms).
comm::RankSpawner TrainRankSpawner();

}  // namespace zt::cli
