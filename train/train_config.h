// The DeepSpeed-style config a `zt train` run uses: the user's file (or the
// built-in default), with command-line values written over it before it is
// parsed, so every check and every "auto" resolution sees the final values.
//
//   ConfigOverrides o;
//   o.values["zero_optimization.stage"] = "2";   // JSON text
//   ZT_ASSIGN_OR_RETURN(std::string json, ComposeConfigJson(path, o));
//   ZT_ASSIGN_OR_RETURN(Config c, ParseTrainConfig(json, path, world_size));
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "config/config.h"

namespace zt::train {

// The config `zt train` uses without --config: ZeRO stage 3, AdamW with a
// warmup-then-decay schedule sized for the default 200-step job, fp32.
extern const char kDefaultTrainConfig[];

struct ConfigOverrides {
  // Dotted JSON path -> JSON text ("3", "true", "\"AdamW\"", "[0.9, 0.95]").
  // Written over the file's value; intermediate objects are created.
  std::map<std::string, std::string> values;
  // Keys removed before the overrides apply (e.g. train_batch_size when only
  // the micro-batch size is given, so the two cannot disagree).
  std::vector<std::string> erase;
  // optimizer.params.lr, and scheduler.params.warmup_max_lr where the file
  // gives it a number (it would otherwise cap the rate the user asked for).
  std::optional<double> lr;
};

// Reads `path` (empty: kDefaultTrainConfig), applies `overrides` and returns
// the JSON text. Errors: missing file (NotFound naming it), malformed JSON,
// an override whose path runs through a non-object value, an override value
// that is not JSON.
absl::StatusOr<std::string> ComposeConfigJson(const std::string& path, const ConfigOverrides& overrides);

// Fills the "auto" values only the run knows: scheduler.params.total_num_steps
// (the run's --steps; a numeric warmup_num_steps above it is lowered to it,
// so a short run does not end inside its warm-up). Other "auto" keys are
// left to the config parser.
absl::StatusOr<std::string> FillTrainAutos(const std::string& json, int64_t steps);

// Parses the composed text for `world_size` ranks; errors list every problem,
// each prefixed with `source_name` and the JSON path.
absl::StatusOr<Config> ParseTrainConfig(const std::string& json, const std::string& source_name, int world_size);

// The number of ranks a config implies when it fixes all three batch keys
// (train_batch_size / (micro-batch * accumulation)), else `fallback`.
// Errors when the three do not divide.
absl::StatusOr<int> WorldSizeFromConfig(const std::string& json, int fallback);

}  // namespace zt::train
