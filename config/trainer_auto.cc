// The Hugging Face Trainer's "auto" rules (config/schema.h, TrainerAuto):
// the row builders, what fills a key left to run time, CheckAutosResolved and
// the Trainer's warm-up length. The rules themselves are rows of the key table.
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "config/schema.h"

namespace zt {
namespace config_internal {

TrainerAuto TrainerArgument(std::string argument, Json default_value, std::string rule) {
  TrainerAuto t;
  t.rule = rule.empty() ? absl::StrCat("`", argument, "`") : std::move(rule);
  t.argument = std::move(argument);
  t.default_value = std::move(default_value);
  return t;
}

TrainerAuto TrainerRunValue(RunInput input, std::string argument, std::string rule) {
  TrainerAuto t;
  t.argument = std::move(argument);
  t.input = input;
  t.rule = std::move(rule);
  return t;
}

TrainerAuto TrainerHiddenSize(int64_t (*from_hidden)(int64_t), bool stage3_only, std::string rule) {
  TrainerAuto t;
  t.argument = "hidden_size";
  t.input = RunInput::kHiddenSize;
  t.from_hidden = from_hidden;
  t.stage3_only = stage3_only;
  t.rule = std::move(rule);
  return t;
}

std::string RunTimeHowTo(const KeySpec& spec) {
  if (!spec.trainer_auto) return "";
  const TrainerAuto& t = *spec.trainer_auto;
  switch (t.input) {
    case RunInput::kTrainingSteps:
      return absl::StrCat("the Trainer fills it with ", t.argument,
                          ", the number of optimizer steps of the run: zt train takes --steps; from C++ give "
                          "ParseOptions::auto_values[\"",
                          spec.path, "\"]; zt config check takes --auto ", spec.path, "=VALUE");
    case RunInput::kHiddenSize:
      return absl::StrCat("the Trainer fills it from the model's hidden size (", t.rule,
                          "): zt train takes the built-in model's; from C++ give ParseOptions::hidden_size or "
                          "ParseOptions::auto_values[\"",
                          spec.path, "\"]; zt config check takes --hidden-size N or --auto ", spec.path, "=VALUE");
    case RunInput::kNone: break;
  }
  return "";
}

}  // namespace config_internal

absl::Status CheckAutosResolved(const Config& config) {
  if (config.run_time_autos.empty()) return absl::OkStatus();
  std::vector<std::string> lines;
  for (const std::string& path : config.run_time_autos) {
    const config_internal::KeySpec* spec = config_internal::Schema::Get().FindPath(path);
    lines.push_back(absl::StrCat(path, ": \"auto\" is still left to run time: ",
                                 spec != nullptr ? config_internal::RunTimeHowTo(*spec) : "write a number"));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("the config was parsed with ParseOptions::allow_run_time_autos and cannot train yet:\n",
                   absl::StrJoin(lines, "\n")));
}

int64_t TrainerWarmupSteps(int64_t warmup_steps, double warmup_ratio, int64_t num_training_steps) {
  if (warmup_steps > 0) return warmup_steps;
  return static_cast<int64_t>(std::ceil(static_cast<double>(num_training_steps) * warmup_ratio));
}

}  // namespace zt
