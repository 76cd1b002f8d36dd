// Entry points of the `zt` subcommands, one file each (apps/cmd_<name>.cc).
// Each takes the arguments after its name and returns the process exit code:
// 0 success, 2 bad input (message on stderr), other codes as documented.
#pragma once

#include <string>
#include <vector>

namespace zt::cli {

int RunConfigCommand(const std::vector<std::string>& args);
int RunLaunchCommand(const std::vector<std::string>& args);
int RunCkptCommand(const std::vector<std::string>& args);
int RunTrainCommand(const std::vector<std::string>& args);
int RunEstimateCommand(const std::vector<std::string>& args);
int RunTokenizeCommand(const std::vector<std::string>& args);

}  // namespace zt::cli
