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

// The Hugging Face Trainer arguments `zt train` fills "auto" keys from
// (docs/config.md, "Hugging Face Trainer configs"). --lr, --micro-batch,
// --grad-accum and --precision are not here: they are written over the file
// (ConfigOverrides) and so fill "auto" there as well.
struct TrainerArgs {
  int64_t steps = 200;  // num_training_steps: scheduler.params.total_num_steps
  // Unset: the Trainer's default, which the config parser applies itself
  // (warm-up 0, max_grad_norm 1.0, weight_decay 0).
  std::optional<int64_t> warmup_steps;  // > 0 wins over warmup_ratio, as in the Trainer
  std::optional<double> warmup_ratio;   // warm-up = ceil(ratio * steps)
  std::optional<double> max_grad_norm;  // gradient_clipping
  std::optional<double> weight_decay;   // optimizer.params.weight_decay
  // The model's hidden size, for the "auto" ZeRO sizes; unset for a model
  // without one (they must then be written as numbers).
  std::optional<int64_t> hidden_size;
};

// Replaces every "auto" in `json` except the batch keys (those follow the
// world size, which is fixed later: the config parser derives them) with the
// value the Hugging Face Trainer would write for `args`, as the config parser
// resolves it (config/config.h, ParseOptions). A key written with a value
// keeps it, with one exception kept from before: when total_num_steps is
// "auto", a numeric warmup_num_steps above `args.steps` is lowered to it so a
// short run does not end inside its warm-up. `notes` (optional) receives the
// parser's note for each filled key, and one per argument that filled
// nothing. A document the parser rejects is returned with what could be
// filled: the parse of the result reports its errors. Errors
// (InvalidArgument): an argument out of range (named by its zt train flag);
// an "auto" ZeRO size when `args.hidden_size` is unset.
absl::StatusOr<std::string> FillTrainAutos(const std::string& json, const TrainerArgs& args,
                                           std::vector<std::string>* notes = nullptr);
// FillTrainAutos with only the run's length given.
absl::StatusOr<std::string> FillTrainAutos(const std::string& json, int64_t steps);

// Parses the composed text for `world_size` ranks; errors list every problem,
// each prefixed with `source_name` and the JSON path.
absl::StatusOr<Config> ParseTrainConfig(const std::string& json, const std::string& source_name, int world_size);

// The number of ranks a config implies when it fixes all three batch keys
// (train_batch_size / (micro-batch * accumulation)), else `fallback`.
// Errors when the three do not divide.
absl::StatusOr<int> WorldSizeFromConfig(const std::string& json, int fallback);

}  // namespace zt::train
