// "auto" as the Hugging Face Trainer fills it. The expected values come from
// a transcription of transformers' rules (HfTrainerDeepSpeedConfig in
// src/transformers/integrations/deepspeed.py, TrainingArguments.get_warmup_steps
// in training_args.py), kept apart from the key table so that a wrong row
// in the table fails here. Also: values only the run knows (left to run time
// or refused), CheckAutosResolved, and that keys written as numbers never change.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <optional>

#include "tests/config/config_test_util.h"

namespace zt {
namespace {

using testing::ErrorsText;

// The TrainingArguments fields the DeepSpeed integration reads, at
// transformers' defaults.
struct TrainingArguments {
  double learning_rate = 5e-5;
  double adam_beta1 = 0.9;
  double adam_beta2 = 0.999;
  double adam_epsilon = 1e-8;
  double weight_decay = 0.0;
  double max_grad_norm = 1.0;
  int64_t warmup_steps = 0;
  double warmup_ratio = 0.0;
  int64_t per_device_train_batch_size = 8;
  int64_t gradient_accumulation_steps = 1;
  bool fp16 = false;
  bool bf16 = false;
};

// What the Trainer knows besides its arguments.
struct Run {
  int world_size = 1;
  int64_t num_training_steps = 0;
  int64_t hidden_size = 0;
  int stage = 3;
};

// TrainingArguments.get_warmup_steps: warmup_steps if > 0 else
// math.ceil(num_training_steps * warmup_ratio).
int64_t GetWarmupSteps(const TrainingArguments& a, int64_t num_training_steps) {
  return a.warmup_steps > 0 ? a.warmup_steps : static_cast<int64_t>(std::ceil(num_training_steps * a.warmup_ratio));
}

// The value the Trainer writes for `key` ("auto" in the config), or nullopt
// where it leaves the key alone (the stage-3 sizes below stage 3).
std::optional<double> TrainerValue(const std::string& key, const TrainingArguments& a, const Run& run) {
  const double h = static_cast<double>(run.hidden_size);
  const std::map<std::string, std::function<std::optional<double>()>> rules = {
      // trainer_config_process
      {"train_micro_batch_size_per_gpu", [&] { return a.per_device_train_batch_size; }},
      {"gradient_accumulation_steps", [&] { return a.gradient_accumulation_steps; }},
      {"train_batch_size",
       [&] { return run.world_size * a.per_device_train_batch_size * a.gradient_accumulation_steps; }},
      {"gradient_clipping", [&] { return a.max_grad_norm; }},
      {"optimizer.params.lr", [&] { return a.learning_rate; }},
      {"optimizer.params.betas[0]", [&] { return a.adam_beta1; }},
      {"optimizer.params.betas[1]", [&] { return a.adam_beta2; }},
      {"optimizer.params.eps", [&] { return a.adam_epsilon; }},
      {"optimizer.params.weight_decay", [&] { return a.weight_decay; }},
      {"scheduler.params.warmup_min_lr", [&] { return 0.0; }},
      {"scheduler.params.warmup_max_lr", [&] { return a.learning_rate; }},
      {"fp16.enabled", [&] { return a.fp16 ? 1.0 : 0.0; }},
      {"bf16.enabled", [&] { return a.bf16 ? 1.0 : 0.0; }},
      // trainer_config_finalize
      {"zero_optimization.reduce_bucket_size", [&] { return h * h; }},
      {"zero_optimization.stage3_prefetch_bucket_size",
       [&]() -> std::optional<double> {
         if (run.stage != 3) return std::nullopt;
         return std::trunc(0.9 * h * h);  // int(0.9 * hidden_size * hidden_size)
       }},
      {"zero_optimization.stage3_param_persistence_threshold",
       [&]() -> std::optional<double> {
         if (run.stage != 3) return std::nullopt;
         return 10 * h;
       }},
      {"scheduler.params.total_num_steps", [&] { return run.num_training_steps; }},
      {"scheduler.params.warmup_num_steps", [&] { return GetWarmupSteps(a, run.num_training_steps); }},
  };
  return rules.at(key)();
}

// The resolved value of `key` in a config, as a number.
double Resolved(const std::string& key, const Config& c) {
  const std::map<std::string, std::function<double()>> fields = {
      {"train_micro_batch_size_per_gpu", [&] { return c.batch.micro_batch; }},
      {"gradient_accumulation_steps", [&] { return c.batch.accumulation_steps; }},
      {"train_batch_size", [&] { return c.batch.train_batch; }},
      {"gradient_clipping", [&] { return c.gradient_clipping; }},
      {"optimizer.params.lr", [&] { return c.optimizer.lr; }},
      {"optimizer.params.betas[0]", [&] { return c.optimizer.betas[0]; }},
      {"optimizer.params.betas[1]", [&] { return c.optimizer.betas[1]; }},
      {"optimizer.params.eps", [&] { return c.optimizer.eps; }},
      {"optimizer.params.weight_decay", [&] { return c.optimizer.weight_decay; }},
      {"scheduler.params.warmup_min_lr", [&] { return c.scheduler.warmup_min_lr; }},
      {"scheduler.params.warmup_max_lr", [&] { return c.scheduler.warmup_max_lr; }},
      {"fp16.enabled", [&] { return c.fp16.enabled ? 1.0 : 0.0; }},
      {"bf16.enabled", [&] { return c.bf16.enabled ? 1.0 : 0.0; }},
      {"zero_optimization.reduce_bucket_size", [&] { return c.zero.reduce_bucket_size; }},
      {"zero_optimization.stage3_prefetch_bucket_size", [&] { return c.zero.prefetch_bucket_size; }},
      {"zero_optimization.stage3_param_persistence_threshold", [&] { return c.zero.param_persistence_threshold; }},
      {"scheduler.params.total_num_steps", [&] { return c.scheduler.total_num_steps; }},
      {"scheduler.params.warmup_num_steps", [&] { return c.scheduler.warmup_num_steps; }},
  };
  return static_cast<double>(fields.at(key)());
}

// Every key the Trainer fills, written "auto" (HF's templates), at `stage`.
std::string AllAutoConfig(int stage) {
  return R"({
    "train_batch_size": "auto", "train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": "auto",
    "gradient_clipping": "auto",
    "fp16": {"enabled": "auto"}, "bf16": {"enabled": "auto"},
    "optimizer": {"type": "AdamW", "params": {"lr": "auto", "betas": "auto", "eps": "auto", "weight_decay": "auto"}},
    "scheduler": {"type": "WarmupDecayLR", "params": {"warmup_min_lr": "auto", "warmup_max_lr": "auto",
                                                      "warmup_num_steps": "auto", "total_num_steps": "auto"}},
    "zero_optimization": {"stage": )" +
         std::to_string(stage) + R"(, "reduce_bucket_size": "auto", "stage3_prefetch_bucket_size": "auto",
                          "stage3_param_persistence_threshold": "auto"}})";
}

// What a caller passes for the Trainer's arguments: one auto_values entry per
// argument that differs from its default (the rest are the parser's
// defaults), plus the run's values, which have none.
ParseOptions OptionsFor(const TrainingArguments& a, const Run& run) {
  const TrainingArguments d;
  ParseOptions o;
  o.world_size = run.world_size;
  o.hidden_size = run.hidden_size;
  auto num = [](double v) {
    std::ostringstream s;
    s.precision(17);
    s << v;
    return s.str();
  };
  if (a.learning_rate != d.learning_rate) o.auto_values["optimizer.params.lr"] = num(a.learning_rate);
  if (a.adam_beta1 != d.adam_beta1 || a.adam_beta2 != d.adam_beta2) {
    o.auto_values["optimizer.params.betas"] = "[" + num(a.adam_beta1) + ", " + num(a.adam_beta2) + "]";
  }
  if (a.adam_epsilon != d.adam_epsilon) o.auto_values["optimizer.params.eps"] = num(a.adam_epsilon);
  if (a.weight_decay != d.weight_decay) o.auto_values["optimizer.params.weight_decay"] = num(a.weight_decay);
  if (a.max_grad_norm != d.max_grad_norm) o.auto_values["gradient_clipping"] = num(a.max_grad_norm);
  if (a.warmup_steps != d.warmup_steps || a.warmup_ratio != d.warmup_ratio) {
    o.auto_values["scheduler.params.warmup_num_steps"] =
        std::to_string(TrainerWarmupSteps(a.warmup_steps, a.warmup_ratio, run.num_training_steps));
  }
  if (a.per_device_train_batch_size != d.per_device_train_batch_size) {
    o.auto_values["train_micro_batch_size_per_gpu"] = std::to_string(a.per_device_train_batch_size);
  }
  if (a.gradient_accumulation_steps != d.gradient_accumulation_steps) {
    o.auto_values["gradient_accumulation_steps"] = std::to_string(a.gradient_accumulation_steps);
  }
  if (a.fp16) o.auto_values["fp16.enabled"] = "true";
  if (a.bf16) o.auto_values["bf16.enabled"] = "true";
  o.auto_values["scheduler.params.total_num_steps"] = std::to_string(run.num_training_steps);
  return o;
}

struct Case {
  std::string name;
  TrainingArguments args;
  Run run;
};

std::vector<Case> Cases() {
  std::vector<Case> cases;
  cases.push_back({"defaults", {}, {1, 100, 768, 3}});
  TrainingArguments a;
  a.learning_rate = 3e-4;
  a.adam_beta1 = 0.8;
  a.adam_beta2 = 0.95;
  a.adam_epsilon = 1e-6;
  a.weight_decay = 0.1;
  a.max_grad_norm = 0.5;
  a.warmup_steps = 7;
  a.per_device_train_batch_size = 4;
  a.gradient_accumulation_steps = 2;
  a.bf16 = true;
  cases.push_back({"every_argument", a, {3, 50, 64, 3}});
  TrainingArguments ratio;
  ratio.warmup_ratio = 0.07;  // 100 * 0.07 = 7.000000000000001 in doubles: ceil gives 8
  ratio.fp16 = true;
  cases.push_back({"warmup_ratio_rounds_up", ratio, {2, 100, 1000, 3}});
  TrainingArguments both;
  both.warmup_steps = 3;
  both.warmup_ratio = 0.5;  // warmup_steps > 0 wins
  cases.push_back({"warmup_steps_win_over_ratio", both, {1, 40, 5120, 3}});
  cases.push_back({"stage_2_leaves_the_stage3_sizes", {}, {2, 10, 4096, 2}});
  cases.push_back({"hidden_size_1", {}, {1, 1, 1, 3}});  // int(0.9) = 0
  return cases;
}

const char* kTrainerKeys[] = {"train_micro_batch_size_per_gpu",
                              "gradient_accumulation_steps",
                              "train_batch_size",
                              "gradient_clipping",
                              "optimizer.params.lr",
                              "optimizer.params.betas[0]",
                              "optimizer.params.betas[1]",
                              "optimizer.params.eps",
                              "optimizer.params.weight_decay",
                              "scheduler.params.warmup_min_lr",
                              "scheduler.params.warmup_max_lr",
                              "fp16.enabled",
                              "bf16.enabled",
                              "zero_optimization.reduce_bucket_size",
                              "zero_optimization.stage3_prefetch_bucket_size",
                              "zero_optimization.stage3_param_persistence_threshold",
                              "scheduler.params.total_num_steps",
                              "scheduler.params.warmup_num_steps"};

// Each key against the Trainer's rule, for several argument sets. Where the
// Trainer leaves a key alone, zerotorch keeps the key's default.
TEST(TrainerAuto, EveryKeyFollowsTheTrainersRule) {
  const Config defaults;
  for (const Case& c : Cases()) {
    SCOPED_TRACE(c.name);
    ParseResult r = ParseConfig(AllAutoConfig(c.run.stage), OptionsFor(c.args, c.run));
    ASSERT_TRUE(r.config) << ErrorsText(r);
    for (const char* key : kTrainerKeys) {
      std::optional<double> expected = TrainerValue(key, c.args, c.run);
      const double want = expected ? *expected : Resolved(key, defaults);
      EXPECT_DOUBLE_EQ(Resolved(key, *r.config), want) << key;
    }
  }
}

// A number in the file is never changed, whatever the arguments say.
TEST(TrainerAuto, NumbersInTheFileAreKept) {
  const std::string json = R"({"train_micro_batch_size_per_gpu": 2, "gradient_clipping": 0.25,
      "optimizer": {"type": "AdamW", "params": {"lr": 0.002, "weight_decay": 0.3}},
      "scheduler": {"type": "WarmupDecayLR", "params": {"warmup_num_steps": 11, "total_num_steps": 99}},
      "zero_optimization": {"stage": 3, "reduce_bucket_size": 1234}})";
  ParseOptions o;
  o.hidden_size = 64;
  o.auto_values = {{"gradient_clipping", "9"}, {"optimizer.params.lr", "9"}, {"scheduler.params.total_num_steps", "5"}};
  ParseResult r = ParseConfig(json, o);
  ASSERT_TRUE(r.config) << ErrorsText(r);
  EXPECT_DOUBLE_EQ(r.config->gradient_clipping, 0.25);
  EXPECT_DOUBLE_EQ(r.config->optimizer.lr, 0.002);
  EXPECT_DOUBLE_EQ(r.config->optimizer.weight_decay, 0.3);
  EXPECT_EQ(r.config->scheduler.warmup_num_steps, 11);
  EXPECT_EQ(r.config->scheduler.total_num_steps, 99);
  EXPECT_EQ(r.config->zero.reduce_bucket_size, 1234);
  EXPECT_EQ(r.config->batch.micro_batch, 2);
  EXPECT_TRUE(r.auto_resolutions.empty());
}

// transformers' get_warmup_steps, with Python's double arithmetic.
TEST(TrainerAuto, WarmupStepsAsTheTrainerComputesThem) {
  struct Row {
    int64_t warmup_steps;
    double warmup_ratio;
    int64_t total;
    int64_t expected;
  };
  for (const Row& row : std::vector<Row>{{0, 0.0, 100, 0},
                                         {0, 0.1, 5, 1},
                                         {0, 0.1, 3, 1},      // 0.30000000000000004
                                         {0, 0.07, 100, 8},   // 7.000000000000001
                                         {0, 0.57, 100, 57},  // 56.99999999999999
                                         {0, 1.0, 7, 7},
                                         {10, 0.5, 100, 10},
                                         {10, 0.0, 5, 10}}) {
    EXPECT_EQ(TrainerWarmupSteps(row.warmup_steps, row.warmup_ratio, row.total), row.expected)
        << row.warmup_steps << " " << row.warmup_ratio << " " << row.total;
  }
}

// Without the number of training steps or the hidden size, a plain parse
// refuses the key, naming it and how to give it; a check before the run
// (allow_run_time_autos) accepts it with one note per key, writes it back as
// "auto", and CheckAutosResolved refuses to train with it.
TEST(TrainerAuto, ValuesOnlyTheRunKnowsAreLeftToRunTime) {
  const std::string json = AllAutoConfig(3);
  ParseResult refused = ParseConfig(json, ParseOptions{});
  std::vector<std::string> paths;
  for (const ConfigError& e : refused.errors) {
    paths.push_back(e.path);
    EXPECT_NE(e.message.find("\"auto\" is left to run time here and nothing gave its value"), std::string::npos)
        << e.message;
    EXPECT_NE(e.message.find("ParseOptions::auto_values[\"" + e.path + "\"]"), std::string::npos) << e.message;
  }
  EXPECT_EQ(paths, (std::vector<std::string>{"scheduler.params.total_num_steps", "zero_optimization.reduce_bucket_size",
                                             "zero_optimization.stage3_prefetch_bucket_size",
                                             "zero_optimization.stage3_param_persistence_threshold"}))
      << ErrorsText(refused);
  EXPECT_NE(refused.errors[0].message.find("zt train takes --steps"), std::string::npos);
  EXPECT_NE(refused.errors[1].message.find("ParseOptions::hidden_size"), std::string::npos);

  ParseOptions check;
  check.allow_run_time_autos = true;
  ParseResult checked = ParseConfig(json, check);
  ASSERT_TRUE(checked.config) << ErrorsText(checked);
  EXPECT_EQ(checked.config->run_time_autos, paths);
  int run_time_notes = 0;
  for (const std::string& note : checked.notes) {
    if (note.find("\"auto\" left to run time: the Trainer fills it") != std::string::npos) ++run_time_notes;
  }
  EXPECT_EQ(run_time_notes, 4) << ::testing::PrintToString(checked.notes);
  for (const std::string& path : paths) EXPECT_EQ(checked.auto_resolutions.count(path), 0u) << path;

  absl::Status train = CheckAutosResolved(*checked.config);
  EXPECT_EQ(train.code(), absl::StatusCode::kInvalidArgument);
  for (const std::string& path : paths) EXPECT_NE(train.message().find(path), absl::string_view::npos) << train;
  EXPECT_NE(train.message().find("--steps"), absl::string_view::npos) << train;

  // ConfigToJson keeps them "auto": the printed config checks to the same config.
  const std::string printed = ConfigToJson(*checked.config);
  EXPECT_NE(printed.find("\"total_num_steps\": \"auto\""), std::string::npos) << printed;
  ParseResult again = ParseConfig(printed, check);
  ASSERT_TRUE(again.config) << ErrorsText(again);
  EXPECT_TRUE(ConfigsEqual(*checked.config, *again.config))
      << ::testing::PrintToString(ConfigDifferences(*checked.config, *again.config));

  // Given the two, nothing is left and the config can train.
  check.hidden_size = 768;
  check.auto_values["scheduler.params.total_num_steps"] = "100";
  ParseResult given = ParseConfig(json, check);
  ASSERT_TRUE(given.config) << ErrorsText(given);
  EXPECT_TRUE(given.config->run_time_autos.empty());
  EXPECT_TRUE(CheckAutosResolved(*given.config).ok());
  EXPECT_EQ(given.auto_resolutions.at("zero_optimization.stage3_prefetch_bucket_size"), "530841");
}

// Below stage 3 the Trainer leaves the stage-3 sizes alone and they have no
// effect: no hidden size is needed for them.
TEST(TrainerAuto, StageThreeSizesBelowStageThreeTakeTheirDefaults) {
  ParseResult r = testing::Parse(R"({"train_batch_size": 4, "zero_optimization": {"stage": 2,
      "stage3_prefetch_bucket_size": "auto", "stage3_param_persistence_threshold": "auto"}})");
  ASSERT_TRUE(r.config) << ErrorsText(r);
  EXPECT_EQ(r.config->zero.prefetch_bucket_size, 50000000);
  EXPECT_EQ(r.config->zero.param_persistence_threshold, 100000);
  bool noted = false;
  for (const std::string& note : r.notes) {
    noted = noted || note.find("which the Hugging Face Trainer fills only at stage 3") != std::string::npos;
  }
  EXPECT_TRUE(noted) << ::testing::PrintToString(r.notes);
}

TEST(TrainerAuto, BadHiddenSizeIsAnError) {
  for (int64_t bad : {int64_t{0}, int64_t{-3}, int64_t{1} << 40}) {
    ParseResult r = testing::Parse(R"({"train_batch_size": 4})", 1, {}, bad);
    ASSERT_EQ(r.errors.size(), 1u) << ErrorsText(r);
    EXPECT_NE(r.errors[0].message.find("hidden size (ParseOptions::hidden_size) must be in 1.."), std::string::npos)
        << r.errors[0].message;
  }
}

}  // namespace
}  // namespace zt
