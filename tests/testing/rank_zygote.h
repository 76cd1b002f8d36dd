// A fork server for the rank harness (tests/testing/ranks.h).
//
// Starting a process that links Debian's LibTorch costs 1-3 s of CPU before
// main: the dynamic loader maps about 300 libraries (LibTorch's OpenCV,
// FFmpeg, GDAL, Qt ... dependencies) and binds about 140,000 symbols, then
// LibTorch registers its operators. A test that starts hundreds of ranks
// spent most of its time there. The server is the test binary exec'd once
// (with --zt-rank-zygote=FD), so it has paid that cost; it runs none of
// LibTorch's or our code, keeps one thread, and forks each rank from that
// state. A rank forked from it is what exec would have given, minus the
// start-up: the same binary, static initialisers run, no threads, and the
// rank's own environment, stdin/stdout/stderr and process group.
//
// Contract
//  - Spawn is a comm::RankSpawner for comm::LaunchOptions::spawn. It serves
//    only ranks that run this binary's workers and whose load-time
//    environment (comm::IsLoadTimeVariable: OMP_*, OPENBLAS_*, LD_*,
//    sanitizer options, ...) equals the server's; for
//    anything else it returns Unimplemented and the launcher execs the rank
//    as before. A server that died or stopped answering is not used again.
//  - Each rank is forked through a short-lived intermediate process, so it is
//    re-parented to the calling process, which Start makes a child subreaper
//    (PR_SET_CHILD_SUBREAPER): the launcher waits for and signals its ranks
//    as its own children. The rank sets PR_SET_PDEATHSIG once re-parented, so
//    it dies with the test binary, as an exec'd rank does.
//  - The server dies with the test binary (PR_SET_PDEATHSIG) and exits when
//    the RankZygote is destroyed (its socket closes).
//  - Not thread-safe: one caller, like RunRanks.
#pragma once

#include <sys/types.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "launch/launcher.h"

namespace zt::testing {

inline constexpr char kZygoteFlag[] = "--zt-rank-zygote=";

class RankZygote {
 public:
  // Execs `self_exe` --zt-rank-zygote=FD with this process's environment and
  // `env_overrides` (the load-time environment the ranks it serves must have).
  static absl::StatusOr<std::unique_ptr<RankZygote>> Start(const std::string& self_exe,
                                                           const std::map<std::string, std::string>& env_overrides);
  ~RankZygote();
  RankZygote(const RankZygote&) = delete;
  RankZygote& operator=(const RankZygote&) = delete;

  // See the contract above. Starts the rank with `request.argv` as its
  // arguments; the server's `run_rank` runs it.
  absl::StatusOr<pid_t> Spawn(const comm::RankSpawnRequest& request);

  pid_t server_pid() const { return pid_; }

 private:
  RankZygote() = default;
  int fd_ = -1;
  pid_t pid_ = -1;
  bool broken_ = false;
  std::string self_exe_;
  std::map<std::string, std::string> load_env_;  // the server's load-time variables
};

// The server's main loop, in the process exec'd with --zt-rank-zygote=FD:
// serves requests on `fd` until the socket closes, then exits. Each rank
// process calls run_rank(argv) and exits with what it returns.
[[noreturn]] void ServeRankZygote(int fd, const std::function<int(const std::vector<std::string>& argv)>& run_rank);

// RankForkedFromServer() (tests/testing/ranks.h) is defined here: the flag
// is set by the server's rank side.

}  // namespace zt::testing
