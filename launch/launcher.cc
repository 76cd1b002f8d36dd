// Implementation of launch/launcher.h: fork+exec per rank, one poll() loop over
// the ranks' output pipes and a self-pipe fed by signal handlers, waitid(WNOWAIT)
// so a rank's process group id stays reserved until the rank is reaped.
#include "launch/launcher.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "launch/free_port.h"
#include "launch/line_buffer.h"
#include "launch/rank_env.h"
#include "util/status.h"
#include "util/unique_fd.h"

extern char** environ;

namespace zt::comm {
namespace {

using Clock = std::chrono::steady_clock;

absl::Status ErrnoError(const std::string& what) {
  return absl::InternalError(absl::StrCat(what, ": ", std::strerror(errno)));
}

// ---------------------------------------------------------------------------
// Signals: while Launch runs, SIGINT/SIGTERM/SIGCHLD handlers write the signal
// number into a non-blocking self-pipe that the poll loop watches.

std::atomic<bool> g_launch_active{false};
std::atomic<int> g_signal_pipe{-1};

extern "C" void OnLauncherSignal(int sig) {
  int saved_errno = errno;
  int fd = g_signal_pipe.load(std::memory_order_relaxed);
  if (fd >= 0) {
    unsigned char byte = static_cast<unsigned char>(sig);
    [[maybe_unused]] ssize_t n = ::write(fd, &byte, 1);  // full pipe: a wake-up is pending anyway
  }
  errno = saved_errno;
}

constexpr int kHandledSignals[] = {SIGINT, SIGTERM, SIGCHLD, SIGPIPE};
constexpr int kNumHandledSignals = sizeof(kHandledSignals) / sizeof(kHandledSignals[0]);

// Installs the handlers for one Launch and restores the old ones on destruction.
class SignalScope {
 public:
  SignalScope() = default;
  SignalScope(const SignalScope&) = delete;
  SignalScope& operator=(const SignalScope&) = delete;

  absl::Status Install(bool forward_signals) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) return ErrnoError("pipe2 (signal pipe)");
    read_.Reset(fds[0]);
    write_.Reset(fds[1]);
    g_signal_pipe.store(write_.get());
    for (int i = 0; i < kNumHandledSignals; ++i) {
      int sig = kHandledSignals[i];
      struct sigaction action {};
      sigemptyset(&action.sa_mask);
      action.sa_flags = SA_RESTART;
      if (sig == SIGPIPE) {
        action.sa_handler = SIG_IGN;  // a closed stdout turns into EPIPE, not death
      } else if ((sig == SIGINT || sig == SIGTERM) && !forward_signals) {
        if (::sigaction(sig, nullptr, &old_[i]) != 0) return ErrnoError("sigaction");
        saved_[i] = true;
        continue;
      } else {
        action.sa_handler = OnLauncherSignal;
        if (sig == SIGCHLD) action.sa_flags |= SA_NOCLDSTOP;
      }
      if (::sigaction(sig, &action, &old_[i]) != 0) return ErrnoError("sigaction");
      saved_[i] = true;
    }
    return absl::OkStatus();
  }

  ~SignalScope() {
    for (int i = 0; i < kNumHandledSignals; ++i) {
      if (saved_[i]) ::sigaction(kHandledSignals[i], &old_[i], nullptr);
    }
    g_signal_pipe.store(-1);
  }

  int read_fd() const { return read_.get(); }
  // The dispositions the process had before Launch; children get them back.
  const struct sigaction* old_actions() const { return old_; }

 private:
  UniqueFd read_, write_;
  struct sigaction old_[kNumHandledSignals] {};
  bool saved_[kNumHandledSignals] = {};
};

// ---------------------------------------------------------------------------
// Environment and command resolution (all before fork: the child must not allocate).

int UsableCores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  long online = ::sysconf(_SC_NPROCESSORS_ONLN);
  return online > 0 ? static_cast<int>(online) : 1;
}

// Owns the strings behind an execve() argv/envp array.
struct CStringArray {
  std::vector<std::string> strings;
  std::vector<char*> pointers;
  void Seal() {
    pointers.clear();
    for (std::string& s : strings) pointers.push_back(s.data());
    pointers.push_back(nullptr);
  }
};

// ---------------------------------------------------------------------------
// Output.

// Writes all of `data`; gives up quietly when the destination is gone (EPIPE,
// closed fd): a launcher whose stdout was closed must still stop its ranks.
void WriteAll(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n > 0) {
      data.remove_prefix(static_cast<size_t>(n));
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && errno == EAGAIN) {
      struct pollfd p {
        fd, POLLOUT, 0
      };
      ::poll(&p, 1, 100);
    } else {
      return;
    }
  }
}

struct Rank {
  RankResult result;
  bool running = true;  // not yet seen exiting (it stays unreaped until the end)
  bool reaped = false;
  UniqueFd out, err;  // read ends of its stdout/stderr pipes (prefix/capture modes)
  LineBuffer out_lines, err_lines;
  std::string prefix;  // "[rank R] "
};

class RankSet {
 public:
  explicit RankSet(const LaunchOptions& options) : options_(options), may_fail_(options.may_fail_ranks) {}

  std::vector<Rank>& ranks() { return ranks_; }

  void EmitLine(Rank& rank, bool is_stderr, std::string_view line) {
    if (options_.capture_output) {
      std::string& out = rank.result.output;
      out.append(line);
      if (out.size() > kMaxCapturedBytes) {
        size_t drop = out.size() - kMaxCapturedBytes;
        size_t cut = out.find('\n', drop);
        out.erase(0, cut == std::string::npos ? drop : cut + 1);
      }
      return;
    }
    line_.assign(rank.prefix);
    line_.append(line);
    WriteAll(is_stderr ? options_.err_fd : options_.out_fd, line_);
  }

  // Reads what is available on one pipe; closes it at end of stream.
  void Drain(Rank& rank, bool is_stderr) {
    UniqueFd& fd = is_stderr ? rank.err : rank.out;
    LineBuffer& lines = is_stderr ? rank.err_lines : rank.out_lines;
    auto emit = [&](std::string_view line) { EmitLine(rank, is_stderr, line); };
    char buffer[64 * 1024];
    for (int reads = 0; reads < 16 && fd.valid(); ++reads) {
      ssize_t n = ::read(fd.get(), buffer, sizeof(buffer));
      if (n > 0) {
        lines.Append(std::string_view(buffer, static_cast<size_t>(n)), emit);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno == EAGAIN) return;
      lines.Flush(emit);  // EOF (or a read error): flush the partial last line
      fd.Reset();
    }
  }

  // Closes pipes still held open by processes we could not stop, keeping what
  // was already read.
  void AbandonPipes() {
    for (Rank& rank : ranks_) {
      for (bool is_stderr : {false, true}) {
        UniqueFd& fd = is_stderr ? rank.err : rank.out;
        if (!fd.valid()) continue;
        Drain(rank, is_stderr);
        (is_stderr ? rank.err_lines : rank.out_lines).Flush([&](std::string_view line) {
          EmitLine(rank, is_stderr, line);
        });
        fd.Reset();
      }
    }
  }

  bool AnyPipeOpen() const {
    for (const Rank& rank : ranks_) {
      if (rank.out.valid() || rank.err.valid()) return true;
    }
    return false;
  }
  bool AnyRunning() const {
    for (const Rank& rank : ranks_) {
      if (rank.running) return true;
    }
    return false;
  }

  // Sends `sig` to the process group of every rank not yet reaped (a rank that
  // exited is an unreaped zombie, so its group id cannot have been reused).
  void SignalGroups(int sig) {
    for (Rank& rank : ranks_) {
      if (!rank.reaped && rank.result.pid > 0) ::kill(-rank.result.pid, sig);
    }
  }

  // Marks ranks that exited since the last call, without reaping them.
  // Returns the local rank of the first that failed, or -1.
  int CollectExits() {
    int first_failed = -1;
    for (size_t i = 0; i < ranks_.size(); ++i) {
      Rank& rank = ranks_[i];
      if (!rank.running) continue;
      siginfo_t info;
      std::memset(&info, 0, sizeof(info));
      int rc = ::waitid(P_PID, static_cast<id_t>(rank.result.pid), &info, WEXITED | WNOHANG | WNOWAIT);
      if (rc != 0 || info.si_pid != rank.result.pid) continue;
      rank.running = false;
      if (info.si_code == CLD_EXITED) {
        rank.result.exit_code = info.si_status;
      } else {
        rank.result.signal = info.si_status;
        rank.result.exit_code = 128 + info.si_status;
      }
      if (rank.result.exit_code != 0 && first_failed < 0 && !may_fail_.count(rank.result.rank)) {
        first_failed = static_cast<int>(i);
      }
    }
    return first_failed;
  }

  // Kills what is left in each rank's process group, then reaps the ranks.
  void KillLeftoversAndReap() {
    SignalGroups(SIGKILL);
    for (Rank& rank : ranks_) {
      if (rank.reaped || rank.result.pid <= 0) continue;
      int status = 0;
      while (::waitpid(rank.result.pid, &status, 0) < 0 && errno == EINTR) {
      }
      if (rank.running) {  // died between the last check and SIGKILL
        rank.running = false;
        if (WIFEXITED(status)) {
          rank.result.exit_code = WEXITSTATUS(status);
        } else if (WIFSIGNALED(status)) {
          rank.result.signal = WTERMSIG(status);
          rank.result.exit_code = 128 + rank.result.signal;
        }
      }
      rank.reaped = true;
    }
  }

 private:
  const LaunchOptions& options_;
  const std::set<int>& may_fail_;
  std::vector<Rank> ranks_;
  std::string line_;
};

// "rank 2" or "ranks 0, 2, 3".
std::string RanksPhrase(const std::vector<int>& ranks) {
  return absl::StrCat(ranks.size() == 1 ? "rank " : "ranks ", absl::StrJoin(ranks, ", "));
}

std::string SecondsText(std::chrono::milliseconds ms) {
  return absl::StrFormat("%g s", static_cast<double>(ms.count()) / 1000.0);
}

// Child side of fork(): only async-signal-safe calls from here to execve.
[[noreturn]] void ExecRank(const char* path, char* const* argv, char* const* envp, int out_fd, int err_fd, int stdin_fd,
                           int status_fd, pid_t launcher_pid, const struct sigaction* old_actions) {
  ::setpgid(0, 0);
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != launcher_pid) ::_exit(127);  // the launcher died before prctl
  for (int i = 0; i < kNumHandledSignals; ++i) ::sigaction(kHandledSignals[i], &old_actions[i], nullptr);
  sigset_t empty;
  sigemptyset(&empty);
  ::sigprocmask(SIG_SETMASK, &empty, nullptr);
  if (stdin_fd >= 0) ::dup2(stdin_fd, STDIN_FILENO);
  if (out_fd >= 0 && out_fd != STDOUT_FILENO) ::dup2(out_fd, STDOUT_FILENO);
  if (err_fd >= 0 && err_fd != STDERR_FILENO) ::dup2(err_fd, STDERR_FILENO);
  ::execve(path, argv, envp);
  int error = errno;
  [[maybe_unused]] ssize_t n = ::write(status_fd, &error, sizeof(error));
  ::_exit(127);
}

// What every rank's fork+exec shares.
struct SpawnSpec {
  std::string exec_path;
  const CStringArray* argv = nullptr;
  bool use_pipes = true;  // stdout/stderr to pipes (prefix/capture), else to out_fd/err_fd
  int out_fd = STDOUT_FILENO;
  int err_fd = STDERR_FILENO;
  int stdin_fd = -1;
  pid_t launcher_pid = 0;
  const struct sigaction* old_actions = nullptr;
  const RankSpawner* spawner = nullptr;  // LaunchOptions::spawn, when set
};

// Forks and execs one rank; returns once execve has succeeded (or failed, with
// the child's errno). The rank's pipes end up non-blocking in `rank`.
absl::Status StartRank(const SpawnSpec& spec, const CStringArray& envp, Rank& rank) {
  int out_pipe[2] = {-1, -1}, err_pipe[2] = {-1, -1}, status_pipe[2] = {-1, -1};
  if (spec.use_pipes) {
    if (::pipe2(out_pipe, O_CLOEXEC) != 0) return ErrnoError("pipe2");
    rank.out.Reset(out_pipe[0]);
    if (::pipe2(err_pipe, O_CLOEXEC) != 0) {
      ::close(out_pipe[1]);
      return ErrnoError("pipe2");
    }
    rank.err.Reset(err_pipe[0]);
  }
  UniqueFd out_write(spec.use_pipes ? out_pipe[1] : -1), err_write(spec.use_pipes ? err_pipe[1] : -1);
  auto pipes_nonblocking = [&] {
    if (spec.use_pipes) {
      ::fcntl(rank.out.get(), F_SETFL, O_NONBLOCK);
      ::fcntl(rank.err.get(), F_SETFL, O_NONBLOCK);
    }
  };
  if (spec.spawner != nullptr && *spec.spawner) {
    RankSpawnRequest request;
    request.rank = rank.result.rank;
    request.path = &spec.exec_path;
    request.argv = &spec.argv->strings;
    request.env = &envp.strings;
    request.stdin_fd = spec.stdin_fd;
    request.stdout_fd = spec.use_pipes ? out_write.get() : spec.out_fd;
    request.stderr_fd = spec.use_pipes ? err_write.get() : spec.err_fd;
    request.launcher_pid = spec.launcher_pid;
    absl::StatusOr<pid_t> spawned = (*spec.spawner)(request);
    if (spawned.ok()) {
      rank.result.pid = *spawned;
      pipes_nonblocking();
      return absl::OkStatus();
    }
    if (!absl::IsUnimplemented(spawned.status())) {
      return absl::Status(spawned.status().code(),
                          absl::StrCat("cannot start rank ", rank.result.rank, ": ", spawned.status().message()));
    }
  }
  if (::pipe2(status_pipe, O_CLOEXEC) != 0) return ErrnoError("pipe2");
  UniqueFd status_read(status_pipe[0]), status_write(status_pipe[1]);

  // Block every signal across fork so our handlers never run in the child
  // (they would write into the launcher's self-pipe).
  sigset_t all, old_mask;
  sigfillset(&all);
  ::pthread_sigmask(SIG_BLOCK, &all, &old_mask);
  pid_t pid = ::fork();
  if (pid == 0) {
    ExecRank(spec.exec_path.c_str(), spec.argv->pointers.data(), envp.pointers.data(),
             spec.use_pipes ? out_write.get() : spec.out_fd, spec.use_pipes ? err_write.get() : spec.err_fd,
             spec.stdin_fd, status_write.get(), spec.launcher_pid, spec.old_actions);
  }
  int fork_errno = errno;
  ::pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
  if (pid < 0) {
    errno = fork_errno;
    return ErrnoError(absl::StrCat("fork (rank ", rank.result.rank, ")"));
  }
  ::setpgid(pid, pid);  // also done in the child; whichever runs first wins the race
  rank.result.pid = pid;
  out_write.Reset();
  err_write.Reset();
  status_write.Reset();

  // EOF: execve succeeded (the pipe is close-on-exec). Else the child's errno.
  int exec_errno = 0;
  ssize_t n;
  while ((n = ::read(status_read.get(), &exec_errno, sizeof(exec_errno))) < 0 && errno == EINTR) {
  }
  if (n > 0) {
    return absl::FailedPreconditionError(absl::StrCat("cannot execute '", spec.exec_path, "' (rank ", rank.result.rank,
                                                      "): ", std::strerror(exec_errno)));
  }
  pipes_nonblocking();
  return absl::OkStatus();
}

// Sets the exit code and the one-line account of what went wrong.
void DescribeOutcome(const LaunchOptions& options, const std::vector<int>& stopped_ranks,
                     const std::vector<int>& needed_sigkill, LaunchResult& result) {
  std::string stopped_text = stopped_ranks.empty() ? "" : absl::StrCat("; stopped ", RanksPhrase(stopped_ranks));
  std::string sigkill_text =
      needed_sigkill.empty()
          ? ""
          : absl::StrCat(" (", RanksPhrase(needed_sigkill), " ignored SIGTERM for ", SecondsText(options.kill_grace),
                         needed_sigkill.size() == 1 ? " and was killed)" : " and were killed)");
  if (result.failed_local_rank >= 0) {
    const RankResult& failed = result.ranks[static_cast<size_t>(result.failed_local_rank)];
    result.exit_code = failed.exit_code;
    std::string how = failed.signal != 0
                          ? absl::StrCat("was killed by signal ", failed.signal, " (", SignalName(failed.signal), ")")
                          : absl::StrCat("exited with code ", failed.exit_code);
    result.failure = absl::StrCat("rank ", failed.rank, " (pid ", failed.pid, ") ", how, stopped_text, sigkill_text);
  } else if (result.interrupted_by != 0) {
    result.exit_code = 128 + result.interrupted_by;
    std::string forwarded = stopped_ranks.empty() ? "" : absl::StrCat("; forwarded to ", RanksPhrase(stopped_ranks));
    result.failure = absl::StrCat("interrupted by ", SignalName(result.interrupted_by), forwarded, sigkill_text);
  } else if (result.timed_out) {
    result.exit_code = kTimeoutExitCode;
    result.failure = absl::StrCat("timed out after ", SecondsText(*options.timeout), stopped_text, sigkill_text);
  } else if (!result.stopped_for.empty()) {
    result.exit_code = kStoppedExitCode;
    result.failure = absl::StrCat("stopped: ", result.stopped_for, stopped_text, sigkill_text);
  }
}

// ---------------------------------------------------------------------------
// Setup: the ranks' environment and command, resolved before anything starts.

// What every rank of this node shares.
struct JobEnvironment {
  // The launcher's environment with torchrun's job-wide variables set; each
  // rank adds RANK and LOCAL_RANK, then extra_env.
  std::map<std::string, std::string> shared;
  std::string exec_path;  // command[0] as execve gets it
  std::string omp_note;   // says which OMP_NUM_THREADS the ranks get; empty when the user chose
};

// Starts nothing, so its errors (the command not found or not executable, as
// ResolveCommand says) leave nothing to clean up.
absl::StatusOr<JobEnvironment> PrepareJobEnvironment(const LaunchOptions& options, int master_port) {
  JobEnvironment job;
  std::map<std::string, std::string>& env = job.shared;
  env = CurrentEnvironment();
  const int world_size = options.nnodes * options.nproc_per_node;
  env["WORLD_SIZE"] = std::to_string(world_size);
  env["LOCAL_WORLD_SIZE"] = std::to_string(options.nproc_per_node);
  env["MASTER_ADDR"] = options.master_addr;
  env["MASTER_PORT"] = std::to_string(master_port);
  env["GROUP_RANK"] = std::to_string(options.node_rank);
  env["NODE_RANK"] = std::to_string(options.node_rank);
  env["GROUP_WORLD_SIZE"] = std::to_string(options.nnodes);
  // The job's identity, checked at the rendezvous so that a rank of another
  // job that finds this job's store on the same port is refused. One node:
  // a fresh id for every launch. Several nodes: each node's launcher would
  // draw its own, so a ZT_JOB_ID (or torchrun's TORCHELASTIC_RUN_ID) the user
  // gives every node is used, and without one the ranks' command line names
  // the job, as it names ranks started by hand (launch/rank_env.h). The
  // launcher computes it here because a rank it forks from its fork server
  // (launch/fork_spawner.h) reads the launcher's own command line as its
  // /proc/self/cmdline, and that differs between nodes (--node-rank).
  if (options.nnodes == 1) {
    env["ZT_JOB_ID"] = NewJobId();
  } else if (auto given = env.find("ZT_JOB_ID"); (given == env.end() || given->second.empty()) &&
                                                 !env.count("TORCHELASTIC_RUN_ID") &&
                                                 !options.extra_env.count("ZT_JOB_ID")) {
    env["ZT_JOB_ID"] = CommandLineJobId(options.command);
  }
  if (!env.count("OMP_NUM_THREADS") && !options.extra_env.count("OMP_NUM_THREADS")) {
    int cores = UsableCores();
    int threads = std::max(1, cores / options.nproc_per_node);
    env["OMP_NUM_THREADS"] = std::to_string(threads);
    job.omp_note = absl::StrCat("zt launch: OMP_NUM_THREADS is not set; using ", threads, " per rank (", cores,
                                " cores / ", options.nproc_per_node, " ranks). Set OMP_NUM_THREADS to choose.\n");
  }

  // Look the command up in the PATH the ranks will have.
  std::string path_env = "/usr/local/bin:/usr/bin:/bin";
  if (auto it = options.extra_env.find("PATH"); it != options.extra_env.end()) {
    path_env = it->second;
  } else if (auto it2 = env.find("PATH"); it2 != env.end()) {
    path_env = it2->second;
  }
  ZT_ASSIGN_OR_RETURN(job.exec_path, ResolveCommand(options.command[0], path_env));
  return job;
}

// One rank's environment as execve's "KEY=value" strings: the shared
// variables, its own, then extra_env, which overrides everything.
std::vector<std::string> RankEnvironment(const LaunchOptions& options, const std::map<std::string, std::string>& shared,
                                         const RankResult& rank) {
  std::map<std::string, std::string> rank_env = shared;
  rank_env["RANK"] = std::to_string(rank.rank);
  rank_env["LOCAL_RANK"] = std::to_string(rank.local_rank);
  for (const auto& [key, value] : options.extra_env) rank_env[key] = value;
  std::vector<std::string> strings;
  for (const auto& [key, value] : rank_env) strings.push_back(absl::StrCat(key, "=", value));
  return strings;
}

// Starts this node's nproc_per_node ranks into `set`, in local rank order.
// On an error the ranks already started are killed and reaped, so none is
// left running.
absl::Status StartRanks(const LaunchOptions& options, const SpawnSpec& spawn,
                        const std::map<std::string, std::string>& shared_env, RankSet& set) {
  std::vector<Rank>& ranks = set.ranks();
  ranks.resize(static_cast<size_t>(options.nproc_per_node));
  for (int local = 0; local < options.nproc_per_node; ++local) {
    Rank& rank = ranks[static_cast<size_t>(local)];
    rank.result.local_rank = local;
    rank.result.rank = options.node_rank * options.nproc_per_node + local;
    rank.prefix = absl::StrCat("[rank ", rank.result.rank, "] ");
    CStringArray envp;
    envp.strings = RankEnvironment(options, shared_env, rank.result);
    envp.Seal();
    absl::Status started = StartRank(spawn, envp, rank);
    if (!started.ok()) {
      set.SignalGroups(SIGKILL);
      set.KillLeftoversAndReap();
      return started;
    }
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// Supervision: one poll() loop from when every rank has started until the
// last one has exited and its output has been read.

// Where the supervisor is in stopping the ranks. It only moves forward:
//   kRunning  -> kStopping  on the first of: a rank outside may_fail_ranks
//                           fails, the timeout passes with ranks running,
//                           SIGINT/SIGTERM reaches the launcher, stop_check
//                           returns a reason, or every rank
//                           has exited while something it started still holds
//                           an output pipe. Every rank's process group gets
//                           SIGTERM (the received signal for an interrupt);
//                           SIGKILL follows kill_grace later.
//   kStopping -> kKilling   kill_grace passed with ranks running, or a second
//                           SIGINT/SIGTERM came (the user wants out now):
//                           SIGKILL to every group, then 2 s for the pipes.
//   any       -> kDone      no rank runs and every output pipe is closed; or,
//                           in kKilling, no rank runs and the 2 s have passed:
//                           only processes outside the ranks' groups can still
//                           hold the pipes, which are then abandoned.
// Why the stop began is not state but outcome, each set at most once in
// LaunchResult (failed_local_rank, timed_out, interrupted_by, stopped_for) for
// DescribeOutcome. After the stop began, a failing rank or the timeout is no
// longer taken as a cause; the first interrupt still is, and is forwarded.
enum class SupervisorState { kRunning, kStopping, kKilling, kDone };

// Relays the ranks' output and reacts to their exits, the timeout and the
// launcher's signals until kDone. The ranks stay unreaped (their process group
// ids stay reserved for SignalGroups); the caller reaps them.
class Supervisor {
 public:
  Supervisor(const LaunchOptions& options, Clock::time_point start, int signal_fd, RankSet& set, LaunchResult& result)
      : options_(options),
        set_(set),
        result_(result),
        signal_fd_(signal_fd),
        deadline_(options.timeout ? start + *options.timeout : Clock::time_point::max()) {}

  // Returns once kDone is reached. Internal when poll() fails; every rank has
  // then been killed and reaped.
  absl::Status Run() {
    while (true) {
      const Clock::time_point now = Advance();
      if (state_ == SupervisorState::kDone) return absl::OkStatus();
      ZT_RETURN_IF_ERROR(WaitAndRelay(now));
    }
  }

  // Ranks sent the stopping signal while still running (the failed one aside).
  const std::vector<int>& stopped_ranks() const { return stopped_ranks_; }
  // Ranks still running when kill_grace ran out.
  const std::vector<int>& needed_sigkill() const { return needed_sigkill_; }

 private:
  // Takes the transitions that exits and the clock call for; returns the time
  // it judged them by, which the next wake-up counts from.
  Clock::time_point Advance() {
    const int failed = set_.CollectExits();
    if (failed >= 0 && state_ == SupervisorState::kRunning) {
      result_.failed_local_rank = failed;
      BeginStop(SIGTERM);
    }
    const Clock::time_point now = Clock::now();
    if (options_.stop_check && state_ == SupervisorState::kRunning && now >= next_stop_check_) {
      next_stop_check_ = now + std::chrono::milliseconds(200);
      if (std::optional<std::string> why = options_.stop_check(); why.has_value()) {
        result_.stopped_for = why->empty() ? std::string("asked to stop") : *why;
        BeginStop(SIGTERM);
      }
    }
    if (now >= deadline_ && state_ == SupervisorState::kRunning && set_.AnyRunning()) {
      result_.timed_out = true;
      for (Rank& rank : set_.ranks()) rank.result.timed_out = rank.running;
      BeginStop(SIGTERM);
    }
    if (!set_.AnyRunning() && !set_.AnyPipeOpen()) {
      state_ = SupervisorState::kDone;
      return now;
    }
    // Every rank exited but something they started still holds a pipe.
    if (!set_.AnyRunning() && state_ == SupervisorState::kRunning) BeginStop(SIGTERM);
    if (state_ == SupervisorState::kStopping && now >= kill_at_) {
      for (const Rank& rank : set_.ranks()) {
        if (rank.running) needed_sigkill_.push_back(rank.result.rank);
      }
      EscalateToKill(now);
    }
    if (state_ == SupervisorState::kKilling && !set_.AnyRunning() && now >= give_up_at_) {
      set_.AbandonPipes();
      state_ = SupervisorState::kDone;
    }
    return now;
  }

  // kRunning -> kStopping: `sig` to every rank's group. The ranks it reaches
  // running count as stopped, except the one whose failure caused the stop.
  void BeginStop(int sig) {
    std::vector<Rank>& ranks = set_.ranks();
    for (size_t i = 0; i < ranks.size(); ++i) {
      Rank& rank = ranks[i];
      if (rank.running && !rank.result.stopped && static_cast<int>(i) != result_.failed_local_rank) {
        rank.result.stopped = true;
        stopped_ranks_.push_back(rank.result.rank);
      }
    }
    set_.SignalGroups(sig);
    if (state_ == SupervisorState::kRunning) {
      state_ = SupervisorState::kStopping;
      kill_at_ = Clock::now() + options_.kill_grace;
    }
  }

  // kStopping -> kKilling.
  void EscalateToKill(Clock::time_point now) {
    set_.SignalGroups(SIGKILL);
    state_ = SupervisorState::kKilling;
    give_up_at_ = now + std::chrono::seconds(2);
  }

  // Waits in poll() for output, a signal or the state's next deadline, then
  // handles what arrived.
  absl::Status WaitAndRelay(Clock::time_point now) {
    fds_.clear();
    fd_owner_.clear();
    fds_.push_back({signal_fd_, POLLIN, 0});
    for (Rank& rank : set_.ranks()) {
      if (rank.out.valid()) {
        fds_.push_back({rank.out.get(), POLLIN, 0});
        fd_owner_.emplace_back(&rank, false);
      }
      if (rank.err.valid()) {
        fds_.push_back({rank.err.get(), POLLIN, 0});
        fd_owner_.emplace_back(&rank, true);
      }
    }
    const Clock::time_point wake = NextWake(now);
    int wait_ms = static_cast<int>(
        std::max<long long>(0, std::chrono::duration_cast<std::chrono::milliseconds>(wake - now).count() + 1));
    int ready = ::poll(fds_.data(), fds_.size(), wait_ms);
    if (ready < 0 && errno != EINTR) {
      absl::Status status = ErrnoError("poll");
      set_.SignalGroups(SIGKILL);
      set_.KillLeftoversAndReap();
      return status;
    }
    if (ready <= 0) return absl::OkStatus();
    if (fds_[0].revents & POLLIN) HandleSignals();
    for (size_t i = 1; i < fds_.size(); ++i) {
      if (fds_[i].revents == 0) continue;
      set_.Drain(*fd_owner_[i - 1].first, fd_owner_[i - 1].second);
    }
    return absl::OkStatus();
  }

  // At least every 200 ms: SIGCHLD is the usual wake-up, the period is a
  // safety net. Sooner when the state's deadline comes first.
  Clock::time_point NextWake(Clock::time_point now) const {
    const Clock::time_point wake = now + std::chrono::milliseconds(200);
    switch (state_) {
      case SupervisorState::kRunning: return std::min(wake, deadline_);
      case SupervisorState::kStopping: return std::min(wake, kill_at_);
      case SupervisorState::kKilling: return std::min(wake, give_up_at_);
      case SupervisorState::kDone: break;
    }
    return wake;
  }

  // Reads the self-pipe. The first SIGINT/SIGTERM is recorded and forwarded
  // (starting the stop in kRunning); a later one escalates kStopping to
  // kKilling. SIGCHLD is only a wake-up.
  void HandleSignals() {
    unsigned char sigs[64];
    ssize_t n = ::read(signal_fd_, sigs, sizeof(sigs));
    for (ssize_t i = 0; i < n; ++i) {
      int sig = sigs[i];
      if (sig != SIGINT && sig != SIGTERM) continue;
      if (result_.interrupted_by == 0) {
        result_.interrupted_by = sig;
        if (state_ == SupervisorState::kRunning) {
          BeginStop(sig);
        } else {
          set_.SignalGroups(sig);
        }
      } else if (state_ == SupervisorState::kStopping) {
        EscalateToKill(Clock::now());
      }
    }
  }

  const LaunchOptions& options_;
  RankSet& set_;
  LaunchResult& result_;
  const int signal_fd_;
  const Clock::time_point deadline_;  // max(): no timeout
  SupervisorState state_ = SupervisorState::kRunning;
  Clock::time_point kill_at_{};                              // kStopping: when SIGKILL follows
  Clock::time_point give_up_at_ = Clock::time_point::max();  // kKilling: when the pipes are abandoned
  Clock::time_point next_stop_check_{};                      // kRunning: when stop_check is asked next
  std::vector<int> stopped_ranks_;
  std::vector<int> needed_sigkill_;
  std::vector<struct pollfd> fds_;                // the self-pipe, then the open rank pipes
  std::vector<std::pair<Rank*, bool>> fd_owner_;  // (rank, is_stderr) for fds_[1..]
};

}  // namespace

bool IsExecutableFile(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

bool SameFile(const std::string& a, const std::string& b) {
  struct stat sa {
  }, sb{};
  return ::stat(a.c_str(), &sa) == 0 && ::stat(b.c_str(), &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

absl::StatusOr<std::string> ResolveCommand(const std::string& name, const std::string& path_env) {
  if (name.empty()) return absl::InvalidArgumentError("the command to launch is an empty string");
  if (name.find('/') != std::string::npos) {
    struct stat st {};
    if (::stat(name.c_str(), &st) != 0) {
      return absl::NotFoundError(absl::StrCat("cannot execute '", name, "': ", std::strerror(errno)));
    }
    if (!S_ISREG(st.st_mode) || ::access(name.c_str(), X_OK) != 0) {
      return absl::PermissionDeniedError(absl::StrCat(
          "cannot execute '", name, "': ", S_ISDIR(st.st_mode) ? "it is a directory" : "not an executable file",
          " (check the path and its permissions)"));
    }
    return name;
  }
  bool found_unexecutable = false;
  for (absl::string_view dir : absl::StrSplit(path_env, ':')) {
    std::string candidate = absl::StrCat(dir.empty() ? absl::string_view(".") : dir, "/", name);
    if (IsExecutableFile(candidate)) return candidate;
    if (::access(candidate.c_str(), F_OK) == 0) found_unexecutable = true;
  }
  if (found_unexecutable) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot execute '", name, "': found in PATH but not executable (PATH=", path_env, ")"));
  }
  return absl::NotFoundError(absl::StrCat("cannot execute '", name, "': command not found in PATH=", path_env,
                                          " (give a path such as ./", name, " or fix PATH)"));
}

std::map<std::string, std::string> CurrentEnvironment() {
  std::map<std::string, std::string> env;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    std::string_view kv(*entry);
    size_t eq = kv.find('=');
    if (eq == std::string_view::npos) continue;
    env.emplace(std::string(kv.substr(0, eq)), std::string(kv.substr(eq + 1)));
  }
  return env;
}

std::string SignalName(int signal) {
  switch (signal) {
    case SIGHUP: return "SIGHUP";
    case SIGINT: return "SIGINT";
    case SIGQUIT: return "SIGQUIT";
    case SIGILL: return "SIGILL";
    case SIGTRAP: return "SIGTRAP";
    case SIGABRT: return "SIGABRT";
    case SIGBUS: return "SIGBUS";
    case SIGFPE: return "SIGFPE";
    case SIGKILL: return "SIGKILL";
    case SIGUSR1: return "SIGUSR1";
    case SIGSEGV: return "SIGSEGV";
    case SIGUSR2: return "SIGUSR2";
    case SIGPIPE: return "SIGPIPE";
    case SIGALRM: return "SIGALRM";
    case SIGTERM: return "SIGTERM";
    case SIGXCPU: return "SIGXCPU";
    case SIGXFSZ: return "SIGXFSZ";
    default: return absl::StrCat("signal ", signal);
  }
}

absl::Status ValidateLaunchOptions(const LaunchOptions& o) {
  if (o.nproc_per_node < 1) {
    return absl::InvalidArgumentError(absl::StrCat("nproc_per_node must be at least 1, got ", o.nproc_per_node));
  }
  if (o.nnodes < 1) return absl::InvalidArgumentError(absl::StrCat("nnodes must be at least 1, got ", o.nnodes));
  if (o.node_rank < 0 || o.node_rank >= o.nnodes) {
    return absl::InvalidArgumentError(
        absl::StrCat("node_rank must be in [0, ", o.nnodes - 1, "] for nnodes=", o.nnodes, ", got ", o.node_rank));
  }
  if (o.master_addr.empty()) return absl::InvalidArgumentError("master_addr is empty");
  if (o.master_port < 0 || o.master_port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("master_port must be in [0, 65535], got ", o.master_port));
  }
  if (o.nnodes > 1 && o.master_port == 0) {
    return absl::InvalidArgumentError(
        "a multi-node launch needs an explicit master port, the same on every node "
        "(a free port picked on one node means nothing to the others)");
  }
  if (o.command.empty()) return absl::InvalidArgumentError("no command to launch");
  if (o.timeout && o.timeout->count() <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("timeout must be positive, got ", o.timeout->count(), " ms"));
  }
  if (o.kill_grace.count() < 0) return absl::InvalidArgumentError("kill_grace must not be negative");
  return absl::OkStatus();
}

absl::StatusOr<LaunchResult> Launch(const LaunchOptions& options) {
  ZT_RETURN_IF_ERROR(ValidateLaunchOptions(options));
  const Clock::time_point start = Clock::now();

  LaunchResult result;
  result.master_port = options.master_port;
  if (result.master_port == 0) {
    ZT_ASSIGN_OR_RETURN(result.master_port, PickFreePort(options.master_addr));
  }
  ZT_ASSIGN_OR_RETURN(JobEnvironment job, PrepareJobEnvironment(options, result.master_port));
  if (options.print_notes && !job.omp_note.empty()) WriteAll(options.err_fd, job.omp_note);
  CStringArray argv;
  argv.strings = options.command;
  argv.Seal();

  if (g_launch_active.exchange(true)) {
    return absl::FailedPreconditionError("another Launch is already running in this process");
  }
  struct ActiveReset {
    ~ActiveReset() { g_launch_active.store(false); }
  } active_reset;
  SignalScope signals;
  ZT_RETURN_IF_ERROR(signals.Install(options.forward_signals));

  UniqueFd dev_null(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  if (!dev_null.valid()) return ErrnoError("open /dev/null");

  SpawnSpec spawn;
  spawn.exec_path = job.exec_path;
  spawn.argv = &argv;
  spawn.use_pipes = options.prefix_output || options.capture_output;
  spawn.out_fd = options.out_fd;
  spawn.err_fd = options.err_fd;
  spawn.stdin_fd = dev_null.get();
  spawn.launcher_pid = ::getpid();
  spawn.old_actions = signals.old_actions();
  spawn.spawner = &options.spawn;
  RankSet set(options);
  ZT_RETURN_IF_ERROR(StartRanks(options, spawn, job.shared, set));

  Supervisor supervisor(options, start, signals.read_fd(), set, result);
  ZT_RETURN_IF_ERROR(supervisor.Run());
  set.KillLeftoversAndReap();

  for (Rank& rank : set.ranks()) result.ranks.push_back(std::move(rank.result));
  DescribeOutcome(options, supervisor.stopped_ranks(), supervisor.needed_sigkill(), result);
  result.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return result;
}

}  // namespace zt::comm
