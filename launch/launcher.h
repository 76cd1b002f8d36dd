// The rank launcher behind `zt launch` and the multi-process test harness:
// starts this node's ranks with torchrun's environment variables, relays their
// output line by line, and stops them all as soon as one fails. POSIX/Linux only.
//
// Contract
//  - Each local rank is a fresh fork+exec of `command` (or what
//    LaunchOptions::spawn starts in its place) in its own process group
//    (so stopping a rank also stops the processes it started), with
//      RANK = node_rank * nproc_per_node + local_rank, WORLD_SIZE = nnodes * nproc_per_node,
//      LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT, GROUP_RANK, NODE_RANK,
//      GROUP_WORLD_SIZE, and OMP_NUM_THREADS = max(1, cores / nproc_per_node) unless the
//      launcher's environment or extra_env sets it. extra_env overrides everything.
//  - The launcher process itself starts no threads; the child runs only
//    async-signal-safe calls between fork and exec, so Launch may be called from
//    a process that already runs threads (LibTorch, OpenMP, GoogleTest).
//  - The first rank that exits non-zero or dies from a signal stops the others:
//    SIGTERM to each rank's process group, SIGKILL after `kill_grace`. The same
//    happens at `timeout` and when the launcher gets SIGINT/SIGTERM (forwarded
//    as that signal; a second one escalates to SIGKILL). Launch returns only
//    after every rank has been reaped; processes left in a rank's process group
//    after the rank exits are killed. Ranks get PR_SET_PDEATHSIG=SIGKILL, so they
//    die if the launcher is killed (limit: processes a rank starts in another
//    process group or session are out of reach).
//  - One Launch at a time per process (it owns SIGINT/SIGTERM/SIGCHLD while it
//    runs and restores the previous handlers before returning); call it from the
//    thread that should outlive the ranks (PR_SET_PDEATHSIG follows that thread).
//
// Example:
//   zt::comm::LaunchOptions opts;
//   opts.nproc_per_node = 4;
//   opts.command = {"./train", "--config", "ds.json"};
//   ZT_ASSIGN_OR_RETURN(zt::comm::LaunchResult r, zt::comm::Launch(opts));
//   if (r.exit_code != 0) std::fprintf(stderr, "zt launch: %s\n", r.failure.c_str());
#pragma once

#include <sys/types.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace zt::comm {

// What LaunchOptions::spawn gets for one rank: the argv and environment
// fork+exec would give it, and the descriptors that become its stdin, stdout
// and stderr (the spawner duplicates what it keeps; the launcher closes its
// copies once spawn returns).
struct RankSpawnRequest {
  int rank = 0;                                    // global rank
  const std::string* path = nullptr;               // the executable, resolved as execve gets it
  const std::vector<std::string>* argv = nullptr;  // LaunchOptions::command
  const std::vector<std::string>* env = nullptr;   // "KEY=value", the whole environment
  int stdin_fd = -1;
  int stdout_fd = -1;
  int stderr_fd = -1;
  pid_t launcher_pid = 0;  // the process calling Launch
};

// Starts one rank without fork+exec. The process whose pid it returns must,
// by the time it returns, be a child of the launcher (a fork server's
// process re-parented to the launcher as a child subreaper, for instance),
// lead its own process group, and have PR_SET_PDEATHSIG set against the
// launcher. Unimplemented: this rank is started with fork+exec as usual; any
// other error stops the launch as a failed exec does.
using RankSpawner = std::function<absl::StatusOr<pid_t>(const RankSpawnRequest&)>;

struct LaunchOptions {
  int nproc_per_node = 1;
  int nnodes = 1;
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 0;               // 0: a free port on master_addr (single node only)
  std::vector<std::string> command;  // argv; argv[0] is looked up in PATH when it has no '/'
  std::map<std::string, std::string> extra_env;
  // Global ranks whose failure does not stop the others (fault tests kill a
  // rank on purpose and watch the survivors). Their exit codes are still reported.
  std::set<int> may_fail_ranks;
  // Prefix every line of rank output with "[rank R] " (stdout stays on out_fd,
  // stderr on err_fd). false: ranks write straight to out_fd/err_fd.
  bool prefix_output = true;
  // Keep each rank's stdout+stderr (unprefixed, in arrival order, at most
  // kMaxCapturedBytes, oldest dropped first) in RankResult::output instead of
  // writing it to out_fd/err_fd.
  bool capture_output = false;
  // Launcher notes (the OMP_NUM_THREADS default) go to err_fd when true.
  bool print_notes = true;
  // Forward SIGINT/SIGTERM received by this process to the ranks.
  bool forward_signals = true;
  std::optional<std::chrono::milliseconds> timeout;  // none: wait forever
  std::chrono::milliseconds kill_grace{5000};        // SIGTERM -> SIGKILL delay
  int out_fd = STDOUT_FILENO;
  int err_fd = STDERR_FILENO;
  // Polled while the ranks run, at most every 200 ms: a reason returned
  // stops every rank as a failing rank would (SIGTERM, then SIGKILL after
  // kill_grace), and LaunchResult::stopped_for says why. Multi-node
  // restarts (launch/node_rounds.h) stop a node's ranks with it when another
  // node's ranks failed. It must return quickly (bounded store calls).
  std::function<std::optional<std::string>()> stop_check;
  // When set, asked first to start each rank (ForkSpawner in
  // launch/fork_spawner.h for `zt train`, the test harness's fork server in
  // tests/testing/ranks.cc); supervision, output and the outcome are the same
  // whichever way a rank started.
  RankSpawner spawn;
};

inline constexpr size_t kMaxCapturedBytes = 8u << 20;

struct RankResult {
  int rank = 0;  // global rank
  int local_rank = 0;
  pid_t pid = -1;
  int exit_code = 0;       // exit status, or 128 + signal when killed by a signal
  int signal = 0;          // the signal that killed it, 0 if it exited
  bool timed_out = false;  // still running at the timeout
  bool stopped = false;    // still running when the launcher stopped the ranks
  std::string output;      // capture_output only
};

struct LaunchResult {
  std::vector<RankResult> ranks;  // this node's ranks, by local rank
  int master_port = 0;            // the port the ranks were given
  // 0 when every rank exited 0. Otherwise the first failing rank's exit code
  // (128 + signal for a signal), kTimeoutExitCode at the timeout,
  // 128 + signal when the launcher was interrupted, or kStoppedExitCode
  // when stop_check stopped the ranks.
  int exit_code = 0;
  int failed_local_rank = -1;  // the first failing rank, -1 if none
  bool timed_out = false;
  int interrupted_by = 0;   // SIGINT/SIGTERM the launcher received, 0 if none
  std::string stopped_for;  // what LaunchOptions::stop_check returned, empty if it never stopped the ranks
  // One line saying what went wrong, e.g. "rank 1 (pid 4242) exited with code 3;
  // stopped ranks 0, 2, 3". Empty on success.
  std::string failure;
  double seconds = 0.0;
};

inline constexpr int kTimeoutExitCode = 124;  // as timeout(1)
inline constexpr int kStoppedExitCode = 1;    // stopped for another node's failure (stop_check)

// Starts the ranks and waits for all of them. Errors (InvalidArgument for bad
// options, NotFound/PermissionDenied for a command that cannot be executed,
// Internal for a failing system call) mean no rank is left running; a rank that
// fails is not an error but a LaunchResult with exit_code != 0.
absl::StatusOr<LaunchResult> Launch(const LaunchOptions& options);

// The path execve will get for a command's argv[0]: `name` itself when it
// has a '/', else the first executable match in `path_env` (PATH's value),
// as execvp would find it. NotFound / PermissionDenied say what to fix.
absl::StatusOr<std::string> ResolveCommand(const std::string& name, const std::string& path_env);

// A regular file this process may execute.
bool IsExecutableFile(const std::string& path);

// Both paths exist and name the same file (device and inode; links followed).
bool SameFile(const std::string& a, const std::string& b);

// This process's environment, KEY -> value.
std::map<std::string, std::string> CurrentEnvironment();

// Checks the options Launch would reject (ranks, nodes, port, command), without
// starting anything.
absl::Status ValidateLaunchOptions(const LaunchOptions& options);

// "SIGTERM", "SIGKILL", ..., or "signal N".
std::string SignalName(int signal);

}  // namespace zt::comm
