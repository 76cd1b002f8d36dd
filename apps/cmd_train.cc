// `zt train` in zt-torch: trains a built-in model with the engine. Outside a
// launcher it checks the job (unless the front `zt` has: cli/train_job.h)
// and then starts --nproc ranks of itself; under `zt launch`, torchrun-style
// variables, mpirun or srun it is one rank of the job. The loop itself is
// train/trainer.h.
#include <c10/util/Exception.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "apps/commands.h"
#include "ckpt/memory_copies.h"
#include "cli/flags.h"
#include "cli/programs.h"
#include "cli/train_job.h"
#include "launch/fork_spawner.h"
#include "launch/launcher.h"
#include "launch/memory_copies_dir.h"
#include "launch/rank_env.h"
#include "launch/restarts.h"
#include "train/job/run_lock.h"
#include "train/trainer.h"

namespace zt::cli {
namespace {

// An exception that ended a rank, as one message: LibTorch's without its
// stack trace (dozens of frames that tell a user nothing), and an
// allocation failure with what to change. The memory check before the
// ranks start covers the model states only (a floor), so activations that
// do not fit end here.
int ReportException(const std::string& who, const std::string& what, bool out_of_memory) {
  std::string text = what;
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  if (out_of_memory || text.find("can't allocate memory") != std::string::npos) {
    absl::StrAppend(&text,
                    "\n  out of memory while training: the model states fitted (they were checked before the ranks "
                    "started), what did not is most likely the activations of one micro-batch. Lower --micro-batch "
                    "(train_micro_batch_size_per_gpu) or --seq-len and raise --grad-accum to keep the batch, add "
                    "--activation-checkpointing, or give the ranks more memory");
  }
  std::fprintf(stderr, "%s: %s\n", who.c_str(), text.c_str());
  return 1;
}

// This process as one rank of the job: errors (and exceptions) become the
// exit code, prefixed with `who`.
int RunRank(const TrainJob& job, const std::string& who) {
  try {
    absl::Status st = train::RunTrainingRank(job.options, job.config_json, job.config_source);
    if (!st.ok()) return FailTrain(st);
  } catch (const c10::Error& e) {
    return ReportException(who, e.what_without_backtrace(), /*out_of_memory=*/false);
  } catch (const std::bad_alloc& e) {
    return ReportException(who, e.what(), /*out_of_memory=*/true);
  } catch (const std::exception& e) {
    return ReportException(who, e.what(), /*out_of_memory=*/false);
  }
  return 0;
}

// Started by another launcher: rank 0 holds the output directory's lock (a
// zt train parent that started us holds it already), then this rank runs.
int RunUnderLauncher(const Flags& flags, const comm::RankEnv& env, const TrainJob& job, const std::string& output_dir,
                     bool started_by_zt_train) {
  std::optional<train::RunLock> run_lock;  // held until this rank ends
  const char* held = std::getenv(train::kRunLockHeldEnv);
  if (env.rank == 0 && (held == nullptr || std::string(held) != "1")) {
    absl::StatusOr<train::RunLock> lock = train::RunLock::Acquire(output_dir);
    if (!lock.ok()) return FailTrain(lock.status());
    run_lock.emplace(std::move(*lock));
  }
  if (flags.WasSet("nproc") && flags.GetInt("nproc") != env.world_size && env.rank == 0) {
    std::fprintf(stderr, "zt train: note: --nproc %lld ignored: the launcher started %d ranks (%s)\n",
                 flags.GetInt("nproc"), env.world_size, env.source.c_str());
  }
  if (job.options.max_restarts > 0 && env.rank == 0 && !started_by_zt_train) {
    std::fprintf(stderr,
                 "zt train: note: --max-restarts %d ignored: the launcher (%s) starts the ranks, so it restarts them "
                 "(zt launch --max-restarts)\n",
                 job.options.max_restarts, env.source.c_str());
  }
  return RunRank(job, absl::StrCat("zt train: rank ", env.rank));
}

// Not under a launcher: check everything before any rank starts (what the
// front `zt` has not checked already), take the output directory's lock,
// then run one rank here or start --nproc ranks.
int RunOwnRanks(const Flags& flags, const std::vector<std::string>& args, const TrainJob& job,
                const std::string& output_dir, bool front_checked) {
  absl::StatusOr<int> nproc = TrainRankCount(flags, job);
  if (!nproc.ok()) return FailTrain(nproc.status());
  if (absl::Status st = train::CheckComputeDevice(job.config_json, job.config_source, *nproc); !st.ok()) {
    return FailTrain(st);
  }
  if (!front_checked) {
    if (absl::Status st = CheckTrainJobBeforeRanks(job, *nproc); !st.ok()) return FailTrain(st);
  }
  absl::StatusOr<train::RunLock> lock = train::RunLock::Acquire(output_dir);  // held until we exit
  if (!lock.ok()) return FailTrain(lock.status());
  // One rank runs here, unless it may need restarting (or keeps memory
  // copies, which outlive it in the folder this process owns): then in a child.
  if (*nproc == 1 && job.options.max_restarts == 0 && !job.options.memory_copies) return RunRank(job, "zt train");
  comm::LaunchOptions lo;
  lo.nproc_per_node = *nproc;
  lo.extra_env[train::kRunLockHeldEnv] = "1";
  const std::string self = ThisProgram();
  lo.command = {self.empty() ? std::string(kFrontProgramName) : self, "train"};
  lo.command.insert(lo.command.end(), args.begin(), args.end());
  lo.spawn = TrainRankSpawner();  // fork, not a second LibTorch start per rank
  // Ranks write straight to our stdout/stderr: rank 0's progress line can
  // redraw in place on a terminal; other ranks' log lines carry their rank.
  lo.prefix_output = false;
  lo.print_notes = false;
  std::fflush(stdout);
  std::unique_ptr<comm::MemoryCopiesDir> copies;  // removed when this returns
  if (job.options.memory_copies) {
    absl::StatusOr<std::unique_ptr<comm::MemoryCopiesDir>> made = comm::MemoryCopiesDir::Create(0);
    if (!made.ok()) return FailTrain(made.status());
    copies = std::move(*made);
    lo.extra_env[ckpt::kMemoryCopiesEnv] = copies->path();
  }
  comm::RestartOptions restart;
  restart.max_restarts = job.options.max_restarts;
  restart.who = "zt train";
  absl::StatusOr<comm::RestartedLaunch> result = comm::LaunchWithRestarts(lo, restart);
  if (!result.ok()) return FailTrain(result.status());
  if (result->last.exit_code != 0) std::fprintf(stderr, "zt train: %s\n", result->last.failure.c_str());
  return result->last.exit_code > 255 ? 255 : result->last.exit_code;
}

}  // namespace

comm::RankSpawner TrainRankSpawner() {
  comm::RankSpawner fork = comm::ForkSpawner(
      [](const std::vector<std::string>& argv) {
        return RunTrainCommand(std::vector<std::string>(argv.begin() + 2, argv.end()));
      },
      FrontPrograms());
  return [fork](const comm::RankSpawnRequest& request) -> absl::StatusOr<pid_t> {
    if (request.argv == nullptr || request.argv->size() < 2 || (*request.argv)[1] != "train") {
      return absl::UnimplementedError("not `zt train`");
    }
    return fork(request);
  };
}

int RunTrainCommand(const std::vector<std::string>& args) {
  // Read once and removed: a job the front checked, not its ranks.
  const char* checked = std::getenv(kTrainCheckedEnv);
  const bool front_checked = checked != nullptr && std::string(checked) == "1";
  ::unsetenv(kTrainCheckedEnv);

  Flags flags("zt train");
  TrainJob job;
  if (std::optional<int> done = ReadTrainJob(args, flags, &job)) return *done;
  absl::StatusOr<comm::RankEnv> env = comm::ReadRankEnv();
  if (!env.ok()) return FailTrain(env.status());
  const bool under_launcher = env->source != comm::RankEnv().source;
  // Every rank fills "auto" the same way; the process that checks the job
  // says how (the front `zt`, a zt train parent, or rank 0 under another
  // launcher). The ranks print the config with the values filled in.
  const char* held_by_parent = std::getenv(train::kRunLockHeldEnv);
  const bool started_by_zt_train = held_by_parent != nullptr && std::string(held_by_parent) == "1";
  if (under_launcher ? env->rank == 0 && !started_by_zt_train : !front_checked) {
    for (const std::string& note : job.auto_notes) std::printf("zt train: note: %s\n", note.c_str());
    std::fflush(stdout);
  }
  // A restarted attempt resumes from the last checkpoint (launch/restarts.h).
  if (under_launcher && env->restart_count > 0) {
    job.options.restart_count = env->restart_count;
    if (job.options.save_dir != "none") job.options.resume = true;
  }
  const std::string output_dir = train::ResolveOutputPaths(job.options).output_dir;
  return under_launcher ? RunUnderLauncher(flags, *env, job, output_dir, started_by_zt_train)
                        : RunOwnRanks(flags, args, job, output_dir, front_checked);
}

}  // namespace zt::cli
