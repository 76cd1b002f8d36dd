// Multi-process rank tests: each rank is a process of this GoogleTest binary
// with the same environment variables `zt launch` and torchrun set (RANK,
// WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR=127.0.0.1,
// MASTER_PORT=<a free port>). No fork() after LibTorch/OpenMP start-up: a
// rank is forked from a fork server, this binary exec'd once that has run
// nothing but its static initialisers (tests/testing/rank_zygote.h), or,
// where the server cannot serve it (another load-time environment, e.g.
// OMP_NUM_THREADS in extra_env; ZT_RANK_FORK_SERVER=0; fork_server false),
// a fresh exec of /proc/self/exe.
//
// Usage (the test binary uses RankTestMain as its main, see zt_add_test OWN_MAIN):
//
//   ZT_RANK_WORKER(allgather_fp32) {        // runs in each rank process
//     ZT_ASSIGN_OR_RETURN(auto env, zt::comm::ReadRankEnv());
//     ...                                    // ctx.arg holds RankRunOptions::arg
//     return absl::OkStatus();               // non-OK: message printed, exit code 1
//   }
//
//   TEST(Gloo, AllGather) {
//     for (int world : {1, 2, 3, 4}) {
//       auto result = zt::testing::RunRanks("allgather_fp32", {.world_size = world});
//       EXPECT_TRUE(result.ok()) << result.Summary();
//     }
//   }
//
//   int main(int argc, char** argv) { return zt::testing::RankTestMain(argc, argv); }
//
// Contract: RunRanks never hangs: after `timeout` every rank still running is
// killed (SIGTERM, then SIGKILL) and the result says which ranks timed out.
// The first rank to fail (non-zero exit or a signal) that is not in
// may_fail_ranks stops the others the same way. Defaults per call:
// MASTER_ADDR=127.0.0.1, a fresh free MASTER_PORT, OMP_NUM_THREADS=1 (extra_env
// overrides any of them). Output is captured, never printed; Summary() shows the
// tail of each failing rank's output. One RunRanks at a time per process.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace zt::testing {

struct RankContext {
  int rank = 0;
  int world_size = 1;
  std::string arg;  // RankRunOptions::arg, passed through verbatim
};

using RankWorkerFn = std::function<absl::Status(const RankContext&)>;

// Registers a worker under `name` (use the macro below). Returns true.
bool RegisterRankWorker(const std::string& name, RankWorkerFn fn);

struct RankRunOptions {
  int world_size = 1;
  std::string arg;
  std::chrono::seconds timeout{120};
  std::map<std::string, std::string> extra_env;
  // Ranks that are expected to kill themselves or be killed (fault tests):
  // their exit status does not make the run fail.
  std::vector<int> may_fail_ranks;
  // Fork the ranks from the fork server where it can serve them (see above);
  // false: exec each rank.
  bool fork_server = true;
};

struct RankRunResult {
  std::vector<int> exit_codes;       // per rank: exit code, or 128+signal
  std::vector<bool> timed_out;       // per rank
  std::vector<std::string> outputs;  // per rank: stdout+stderr, captured
  double seconds = 0.0;              // wall time of the whole run
  std::string worker;                // the worker's name, for Summary()
  std::vector<int> may_fail_ranks;   // as in RankRunOptions
  // What went wrong as a whole: the launcher's account of the first failure
  // ("rank 1 (pid 4242) exited with code 1; stopped ranks 0, 2"), a timeout, or
  // why the ranks could not be started. Empty when every rank outside
  // may_fail_ranks exited 0 and nothing timed out.
  std::string failure;
  // True when every rank not in may_fail_ranks exited 0 within the timeout.
  bool ok() const { return ok_; }
  // Exit codes, timeouts and each failing rank's output, for test messages.
  std::string Summary() const;

  bool ok_ = false;
};

RankRunResult RunRanks(const std::string& worker, const RankRunOptions& options);
// The common case: `world_size` ranks within `timeout`, `arg` passed
// through, every other option at its default.
inline RankRunResult RunRanks(const std::string& worker, int world_size, std::chrono::seconds timeout,
                              const std::string& arg = "") {
  RankRunOptions o;
  o.world_size = world_size;
  o.timeout = timeout;
  o.arg = arg;
  return RunRanks(worker, o);
}

// Inside a worker: runs `run(name)` for each of `names` in turn, in these
// same ranks (starting a LibTorch process costs more than a small check). A
// name whose run returns an error is recorded and the next one runs, so one
// failure never hides the others; a run that throws ends the loop, because
// the ranks may have parted in the middle of a collective. The error lists
// every failure, one per line.
absl::Status RunEachInTheseRanks(const std::vector<std::string>& names,
                                 const std::function<absl::Status(const std::string&)>& run);

// In a rank: true when it was forked from the fork server, false when exec'd.
bool RankForkedFromServer();

// main() for rank-test binaries: in a worker process (started by RunRanks)
// runs the named worker and exits; otherwise runs the GoogleTest suite.
int RankTestMain(int argc, char** argv);

}  // namespace zt::testing

#define ZT_RANK_WORKER_CONCAT_(a, b) a##b
#define ZT_RANK_WORKER(name)                                                                    \
  static ::absl::Status ZtRankWorker_##name(const ::zt::testing::RankContext& ctx);             \
  [[maybe_unused]] static const bool ZT_RANK_WORKER_CONCAT_(zt_rank_worker_registered_, name) = \
      ::zt::testing::RegisterRankWorker(#name, &ZtRankWorker_##name);                           \
  static ::absl::Status ZtRankWorker_##name([[maybe_unused]] const ::zt::testing::RankContext& ctx)
