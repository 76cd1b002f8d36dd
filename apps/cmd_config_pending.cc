// Branch-local stand-in for `zt config` (apps/cmd_config.cc lives on the
// config branch): lets this branch link `zt`. Delete when that branch merges.
#include <cstdio>

#include "apps/commands.h"

namespace zt::cli {

int RunConfigCommand(const std::vector<std::string>&) {
  std::fprintf(stderr, "zt config: not part of this build (the config module is not merged yet)\n");
  return 2;
}

}  // namespace zt::cli
