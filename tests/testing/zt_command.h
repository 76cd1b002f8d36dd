// Runs the built `zt` binary as a user would, for the CLI tests. Header-only:
// ZT_BINARY_DIR comes from the test's compile definitions (tests/CMakeLists.txt).
#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <string>

namespace zt::testing {

struct ZtRun {
  int code = -1;       // exit status; -1 when it did not exit normally
  std::string output;  // stdout and stderr, interleaved as written
};

// Runs `command` with /bin/sh, stderr folded into stdout.
inline ZtRun RunShell(const std::string& command) {
  ZtRun r;
  FILE* p = ::popen((command + " 2>&1").c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  while (size_t n = std::fread(buf, 1, sizeof(buf), p)) r.output.append(buf, n);
  const int status = ::pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

// `args` are shell words, quoted by the caller; `env` ("A=1 B=2") is put
// in front of the command.
inline ZtRun RunZt(const std::string& args, const std::string& env = "") {
  return RunShell(env + " " ZT_BINARY_DIR "/bin/zt " + args);
}

}  // namespace zt::testing
