// `zt-torch`: the commands of `zt` that need LibTorch (train, and launch of
// `zt train`, whose ranks it forks with LibTorch loaded). `zt`
// execs it with its own argv, so argv[1] is the command (cli/programs.h).
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "apps/commands.h"
#include "comm/launcher_store.h"

namespace {

int RunLaunch(const std::vector<std::string>& args) {
  zt::cli::LaunchBackends backends;
  backends.spawn = zt::cli::TrainRankSpawner();  // `zt train` ranks fork; others exec
  backends.store = zt::comm::TcpKeyValueStoreOpener();
  return zt::cli::RunLaunchCommand(args, backends);
}

struct Command {
  const char* name;
  int (*run)(const std::vector<std::string>&);
};

const Command kCommands[] = {
    {"train", zt::cli::RunTrainCommand},
    {"generate", zt::cli::RunGenerateCommand},
    {"launch", RunLaunch},
};

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2) {
    std::vector<std::string> args(argv + 2, argv + argc);
    for (const Command& c : kCommands) {
      if (std::strcmp(argv[1], c.name) == 0) return c.run(args);
    }
  }
  std::fprintf(stderr,
               "zt-torch: runs the commands train, generate and launch for zt, which starts it; "
               "run `zt %s` instead\n",
               argc >= 2 ? argv[1] : "--help");
  return 2;
}
