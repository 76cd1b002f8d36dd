// `zt train`'s command line without LibTorch: its flags, read into the run's
// options and its config (the file, the command line's overrides, "auto"
// filled), and everything checked before any rank starts. Both programs use
// it: the front `zt` checks a job before it execs zt-torch (so bad input
// fails at once, without loading LibTorch), and zt-torch reads the same
// command line again to run it (cli/programs.h).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cli/flags.h"
#include "train/job/train_options.h"

namespace zt::cli {

// A `zt train` command line, read.
struct TrainJob {
  train::TrainOptions options;
  std::string config_json;              // composed, "auto" values filled
  std::string config_source;            // the --config file, or "built-in default config"
  std::vector<std::string> auto_notes;  // how the "auto" values were filled
};

// Parses `args` (after `zt train`) into `flags` (named "zt train") and
// `job`. Returns the exit code when the command is done already: --help and
// --list-models (printed, 0), bad input (message on stderr, 2 or 1); else
// nullopt.
std::optional<int> ReadTrainJob(const std::vector<std::string>& args, Flags& flags, TrainJob* job);

// The ranks `zt train` starts outside a launcher: --nproc, else the number
// the config's batch sizes imply, else 2; in [1, 256].
absl::StatusOr<int> TrainRankCount(const Flags& flags, const TrainJob& job);

// What `zt train` checks before it starts `nproc` ranks (TrainRankCount):
// train::CheckTrainJob, and the rank count against this machine's cores and
// memory (a warning or a refusal). LibTorch's own check
// (train::CheckComputeDevice) is zt-torch's.
absl::Status CheckTrainJobBeforeRanks(const TrainJob& job, int nproc);

// Prints "zt train: <message>" and returns the exit code for `status`: 2
// for bad input (invalid or missing), else 1.
int FailTrain(const absl::Status& status);

// Set by the front `zt` on the zt-torch it execs for a job that passed
// CheckTrainJobBeforeRanks: zt-torch skips those checks and the notes the
// front printed. zt-torch removes it from its environment as it reads it,
// so no rank inherits it.
inline constexpr char kTrainCheckedEnv[] = "ZT_TRAIN_CHECKED";

// The front's `zt train`: reads and checks the job here, then execs
// zt-torch with the same `argv`. Under a launcher (each process one rank)
// it execs at once: the ranks' checks are their own.
int RunTrainFront(const std::vector<std::string>& args, char** argv);

}  // namespace zt::cli
