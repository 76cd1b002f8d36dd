// Implementation of launch/fork_spawner.h.
#include "launch/fork_spawner.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "util/system_info.h"

namespace zt::comm {
namespace {

bool g_rank_was_forked = false;

// Threads of this process (/proc/self/task entries); 0 when unknown.
int ThreadCount() {
  DIR* dir = ::opendir("/proc/self/task");
  if (dir == nullptr) return 0;
  int n = 0;
  while (struct dirent* e = ::readdir(dir)) {
    if (e->d_name[0] != '.') ++n;
  }
  ::closedir(dir);
  return n;
}

bool IsThisProgram(const std::string& path, const std::vector<std::string>& same_program) {
  if (SameFile(path, "/proc/self/exe")) return true;
  for (const std::string& other : same_program) {
    if (SameFile(path, other)) return true;
  }
  return false;
}

// Why the rank must be exec'd, or "" when it may be forked. `mode` is
// kForkRanksEnv's value.
std::string DeclineReason(const RankSpawnRequest& request, const std::string& mode,
                          const std::vector<std::string>& same_program) {
  if (mode == "0") return absl::StrCat(kForkRanksEnv, "=0");
  if (request.path == nullptr || request.argv == nullptr || request.env == nullptr) return "incomplete request";
  if (request.stdin_fd < 0 || request.stdout_fd < 0 || request.stderr_fd < 0) return "no descriptors";
  if (!IsThisProgram(*request.path, same_program)) return "another program";
  if (const int threads = ThreadCount(); threads != 1) {
    return absl::StrCat("the launcher runs ", threads, " threads");
  }
  std::map<std::string, std::string> want = LoadTimeEnvironment(*request.env);
  std::map<std::string, std::string> have;
  for (const auto& [key, value] : CurrentEnvironment()) {
    if (IsLoadTimeVariable(key)) have[key] = value;
  }
  // OMP_NUM_THREADS as one positive integer is applied at run time.
  if (auto it = want.find("OMP_NUM_THREADS"); it != want.end() && PlainThreadCount(it->second.c_str()) > 0) {
    want.erase(it);
    have.erase("OMP_NUM_THREADS");
  }
  if (want != have) return "another load-time environment";
  return "";
}

// Closes what exec would close: every close-on-exec descriptor above 2.
void CloseOnExecDescriptors() {
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) return;
  std::vector<int> doomed;
  const int own = ::dirfd(dir);
  while (struct dirent* e = ::readdir(dir)) {
    int fd = -1;
    if (!absl::SimpleAtoi(e->d_name, &fd) || fd <= 2 || fd == own) continue;
    const int flags = ::fcntl(fd, F_GETFD);
    if (flags >= 0 && (flags & FD_CLOEXEC) != 0) doomed.push_back(fd);
  }
  ::closedir(dir);
  for (int fd : doomed) ::close(fd);
}

// The child side of ForkSpawner; never returns.
[[noreturn]] void BecomeRank(const RankSpawnRequest& request, const RankMain& run_rank) {
  ::setpgid(0, 0);
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != request.launcher_pid) ::_exit(127);  // the launcher is already gone
  const int fds[3] = {request.stdin_fd, request.stdout_fd, request.stderr_fd};
  RunForkedRank(fds, *request.argv, *request.env, run_rank);
}

}  // namespace

void RunForkedRank(const int fds[3], const std::vector<std::string>& argv, const std::vector<std::string>& env,
                   const RankMain& run_rank) {
  // Caught signals back to their defaults (exec does that; a launcher's
  // handlers would write into its self-pipe).
  for (int sig = 1; sig < NSIG; ++sig) {
    struct sigaction old {};
    if (::sigaction(sig, nullptr, &old) != 0) continue;
    if (old.sa_handler != SIG_DFL && old.sa_handler != SIG_IGN) ::signal(sig, SIG_DFL);
  }
  // Moved above 2 first, so installing one cannot close another.
  int high[3];
  for (int i = 0; i < 3; ++i) high[i] = ::fcntl(fds[i], F_DUPFD_CLOEXEC, 10);
  for (int i = 0; i < 3; ++i) {
    if (high[i] < 0) ::_exit(127);
    ::dup2(high[i], i);
  }
  CloseOnExecDescriptors();  // the high copies and `fds` too, when close-on-exec
  ::clearenv();
  for (const std::string& kv : env) ::putenv(::strdup(kv.c_str()));  // environ keeps them
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  g_rank_was_forked = true;
  const int code = run_rank(argv);
  std::cout.flush();
  std::cerr.flush();
  std::exit(code);
}

bool IsLoadTimeVariable(const std::string& name) {
  static const char* const kPrefixes[] = {"OMP_",   "GOMP_",    "KMP_",    "OPENBLAS_", "GOTO",   "MKL_",  "LD_",
                                          "GLIBC_", "MALLOC_",  "ASAN_",   "UBSAN_",    "TSAN_",  "LSAN_", "MSAN_",
                                          "TORCH_", "PYTORCH_", "CAFFE2_", "DNNL_",     "ONEDNN_"};
  for (const char* prefix : kPrefixes) {
    if (absl::StartsWith(name, prefix)) return true;
  }
  return false;
}

std::map<std::string, std::string> LoadTimeEnvironment(const std::vector<std::string>& env) {
  std::map<std::string, std::string> out;
  for (const std::string& kv : env) {
    const size_t eq = kv.find('=');
    if (eq == std::string::npos) continue;
    std::string key = kv.substr(0, eq);
    if (IsLoadTimeVariable(key)) out[key] = kv.substr(eq + 1);
  }
  return out;
}

RankSpawner ForkSpawner(RankMain run_rank, std::vector<std::string> same_program) {
  return [run_rank = std::move(run_rank),
          same_program = std::move(same_program)](const RankSpawnRequest& request) -> absl::StatusOr<pid_t> {
    const char* mode_env = std::getenv(kForkRanksEnv);
    const std::string mode = mode_env != nullptr ? mode_env : "";
    if (std::string why = DeclineReason(request, mode, same_program); !why.empty()) {
      if (mode == "always") {
        return absl::FailedPreconditionError(absl::StrCat(
            kForkRanksEnv, "=always, but the rank cannot be forked: ", why, " (unset it to exec such ranks)"));
      }
      return absl::UnimplementedError(why);
    }
    std::cout.flush();
    std::cerr.flush();
    std::fflush(nullptr);  // nothing buffered here is written twice
    // No handler of ours may run in the child before it resets them.
    sigset_t all, old;
    sigfillset(&all);
    ::sigprocmask(SIG_SETMASK, &all, &old);
    const pid_t pid = ::fork();
    if (pid == 0) BecomeRank(request, run_rank);
    const int fork_errno = errno;
    ::sigprocmask(SIG_SETMASK, &old, nullptr);
    if (pid < 0) {
      return absl::InternalError(absl::StrCat("fork (rank ", request.rank, "): ", std::strerror(fork_errno)));
    }
    // Also done in the child; whichever runs first makes the group exist
    // before the launcher can signal it.
    ::setpgid(pid, pid);
    return pid;
  };
}

bool RankWasForked() { return g_rank_was_forked; }

}  // namespace zt::comm
