// The two programs behind the `zt` command, and how one finds the other.
//
// Why two: a process linking Debian's LibTorch spends 1-3 s before main
// (about 300 libraries mapped, about 140,000 symbols bound, then LibTorch's
// operator registration). `zt ckpt`, `zt config`, `zt estimate`,
// `zt tokenize` and `zt launch` of a user's program need none of it. So `zt`
// links no LibTorch: it runs those commands itself and execs `zt-torch` for
// the ones that build models (`train`, and `launch` of this program's
// `train`, whose launcher forks its ranks with LibTorch loaded).
// The exec keeps the pid, argv (argv[0] included) and environment: a caller
// sees one `zt` process either way.
//
// Layout: in a build tree both are in build/bin. Installed, `zt` is in
// <prefix>/bin and `zt-torch` in <prefix>/libexec/zerotorch (the relative
// path is fixed when the project is configured). Each program looks for the
// other beside itself first, then at its installed place.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace zt::cli {

inline constexpr char kTorchProgramName[] = "zt-torch";
inline constexpr char kFrontProgramName[] = "zt";

// This process's executable (/proc/self/exe resolved); "" when unknown.
std::string ThisProgram();

// The `zt-torch` that belongs to this `zt`; NotFound names the places looked at.
absl::StatusOr<std::string> TorchProgram();

// The `zt` programs that exec this `zt-torch` (those of the two places that
// exist), so that its launcher treats a rank command `zt train` as its own.
std::vector<std::string> FrontPrograms();

// Replaces this process with `zt-torch`, with the same argv and environment.
// Returns only when that fails: the message is on stderr and the result is
// the exit code to use (127: not found, 126: not executable).
int ExecTorchProgram(char** argv);

// True when `command` (a launch's argv) runs this `zt`'s own `train`:
// argv[0] resolves through PATH to this executable and argv[1] is "train".
bool RunsThisProgramsTrain(const std::vector<std::string>& command);

}  // namespace zt::cli
