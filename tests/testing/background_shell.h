// Test helpers for commands run in the background: start one with /bin/sh
// and collect its exit code, waiting at most a while. Header-only; for the
// tests that kill processes at chosen moments (restarts, node rounds).
#pragma once

#include <spawn.h>
#include <sys/types.h>
#include <sys/wait.h>

#include <chrono>
#include <optional>
#include <string>
#include <thread>

extern char** environ;

namespace zt::testing {

// Starts `command` with `/bin/sh -c` (this process's environment); its pid,
// or -1 when it could not be started.
inline pid_t StartShell(const std::string& command) {
  pid_t pid = -1;
  const char* argv[] = {"/bin/sh", "-c", command.c_str(), nullptr};
  if (::posix_spawn(&pid, "/bin/sh", nullptr, nullptr, const_cast<char**>(argv), environ) != 0) return -1;
  return pid;
}

// The exit code of child `pid` (128 + the signal that ended it); -1 while it
// still runs after `timeout` (nullopt: wait as long as it takes; zero: only
// look), -2 when it is not a child of this process (already reaped).
inline int WaitShell(pid_t pid, std::optional<std::chrono::milliseconds> timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout.value_or(std::chrono::milliseconds(0));
  while (true) {
    int status = 0;
    const pid_t r = ::waitpid(pid, &status, timeout.has_value() ? WNOHANG : 0);
    if (r == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (r < 0) return -2;
    if (std::chrono::steady_clock::now() >= deadline) return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace zt::testing
