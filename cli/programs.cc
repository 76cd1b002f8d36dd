// Implementation of cli/programs.h.
#include "cli/programs.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "launch/launcher.h"

#ifndef ZT_TORCH_DIR_FROM_BIN
#error "ZT_TORCH_DIR_FROM_BIN: zt-torch's installed folder relative to zt's (apps/CMakeLists.txt)"
#endif
#ifndef ZT_BIN_DIR_FROM_TORCH
#error "ZT_BIN_DIR_FROM_TORCH: zt's installed folder relative to zt-torch's (apps/CMakeLists.txt)"
#endif

namespace zt::cli {
namespace {

std::string Directory(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash == 0 ? 1 : slash);
}

// Beside this program, then at the installed place relative to it.
std::vector<std::string> Candidates(const std::string& name, const char* installed_dir_from_here) {
  const std::string self = ThisProgram();
  if (self.empty()) return {};
  const std::string dir = Directory(self);
  return {absl::StrCat(dir, "/", name), absl::StrCat(dir, "/", installed_dir_from_here, "/", name)};
}

}  // namespace

std::string ThisProgram() {
  char buf[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return "";
  buf[n] = '\0';
  return buf;
}

absl::StatusOr<std::string> TorchProgram() {
  const std::vector<std::string> candidates = Candidates(kTorchProgramName, ZT_TORCH_DIR_FROM_BIN);
  for (const std::string& path : candidates) {
    if (comm::IsExecutableFile(path)) return path;
  }
  if (candidates.empty()) {
    return absl::NotFoundError(absl::StrCat("cannot find ", kTorchProgramName,
                                            ": /proc/self/exe is unreadable, so zt does not know where it lies"));
  }
  return absl::NotFoundError(absl::StrCat("cannot find ", kTorchProgramName, ", the part of zt that links LibTorch (",
                                          "looked for an executable file at ", candidates[0], " and ", candidates[1],
                                          "); build it (ninja zt) or install zerotorch again"));
}

std::vector<std::string> FrontPrograms() {
  std::vector<std::string> found;
  for (const std::string& path : Candidates(kFrontProgramName, ZT_BIN_DIR_FROM_TORCH)) {
    if (comm::IsExecutableFile(path)) found.push_back(path);
  }
  return found;
}

int ExecTorchProgram(char** argv) {
  absl::StatusOr<std::string> path = TorchProgram();
  if (!path.ok()) {
    std::fprintf(stderr, "zt: %s\n", std::string(path.status().message()).c_str());
    return 127;
  }
  std::fflush(nullptr);
  ::execv(path->c_str(), argv);
  const int err = errno;
  std::fprintf(stderr, "zt: cannot execute %s: %s\n", path->c_str(), std::strerror(err));
  return err == ENOENT ? 127 : 126;
}

bool RunsThisProgramsTrain(const std::vector<std::string>& command) {
  if (command.size() < 2 || command[1] != "train") return false;
  const char* path_env = std::getenv("PATH");
  absl::StatusOr<std::string> resolved = comm::ResolveCommand(command[0], path_env != nullptr ? path_env : "");
  return resolved.ok() && comm::SameFile(*resolved, "/proc/self/exe");
}

}  // namespace zt::cli
