// ComposeConfigJson / FillTrainAutos / WorldSizeFromConfig: command-line
// values land in the config before it is checked, and bad ones are errors
// that name the key.
#include "train/job/train_config.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"

namespace zt::train {
namespace {

std::string WriteTemp(const std::string& text) {
  std::string path = ::testing::TempDir() + "/zt_train_config_" + std::to_string(::getpid()) + "_" +
                     std::to_string(reinterpret_cast<uintptr_t>(&text) % 100000) + ".json";
  std::ofstream(path) << text;
  return path;
}

TEST(TrainConfig, DefaultParsesAtSeveralWorldSizes) {
  auto json = ComposeConfigJson("", {});
  ASSERT_TRUE(json.ok()) << json.status();
  auto filled = FillTrainAutos(*json, 123);
  ASSERT_TRUE(filled.ok());
  for (int world : {1, 2, 3, 4}) {
    auto c = ParseTrainConfig(*filled, "default", world);
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_EQ(c->zero.stage, 3);
    EXPECT_EQ(c->batch.train_batch, c->batch.micro_batch * world);
    EXPECT_EQ(c->scheduler.total_num_steps, 123);
  }
}

TEST(TrainConfig, OverridesWinOverTheFile) {
  const std::string path = WriteTemp(R"({"train_batch_size": 32, "train_micro_batch_size_per_gpu": 4,
      "gradient_accumulation_steps": 4, "zero_optimization": {"stage": 1},
      "optimizer": {"type": "Adam", "params": {"lr": 0.1}},
      "scheduler": {"type": "WarmupLR", "params": {"warmup_max_lr": 0.1}}})");
  ConfigOverrides o;
  o.values["zero_optimization.stage"] = "3";
  o.values["train_micro_batch_size_per_gpu"] = "8";
  o.erase.push_back("train_batch_size");
  o.values["bf16.enabled"] = "true";
  o.lr = 0.02;
  auto json = ComposeConfigJson(path, o);
  ASSERT_TRUE(json.ok()) << json.status();
  auto c = ParseTrainConfig(*json, path, 2);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->zero.stage, 3);
  EXPECT_EQ(c->batch.micro_batch, 8);
  EXPECT_EQ(c->batch.accumulation_steps, 4);
  EXPECT_EQ(c->batch.train_batch, 64);  // derived, not the file's 32
  EXPECT_TRUE(c->bf16.enabled);
  EXPECT_DOUBLE_EQ(c->optimizer.lr, 0.02);
  EXPECT_DOUBLE_EQ(c->scheduler.warmup_max_lr, 0.02);
  std::remove(path.c_str());
}

TEST(TrainConfig, Errors) {
  EXPECT_EQ(ComposeConfigJson("/nonexistent/ds.json", {}).status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(
      absl::StrContains(ComposeConfigJson("/nonexistent/ds.json", {}).status().message(), "/nonexistent/ds.json"));

  ConfigOverrides bad_json;
  bad_json.values["optimizer.type"] = "AdamW";  // unquoted string
  auto r = ComposeConfigJson("", bad_json);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(absl::StrContains(r.status().message(), "optimizer.type")) << r.status();

  ConfigOverrides through_scalar;
  through_scalar.values["train_micro_batch_size_per_gpu.x"] = "1";
  r = ComposeConfigJson("", through_scalar);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(absl::StrContains(r.status().message(), "train_micro_batch_size_per_gpu")) << r.status();

  // Unknown keys and impossible batch sizes come from the config parser, by path.
  ConfigOverrides unknown;
  unknown.values["zero_optimization.stagee"] = "2";
  auto json = ComposeConfigJson("", unknown);
  ASSERT_TRUE(json.ok());
  auto c = ParseTrainConfig(*FillTrainAutos(*json, 10), "cli", 2);
  ASSERT_FALSE(c.ok());
  EXPECT_TRUE(absl::StrContains(c.status().message(), "stagee")) << c.status();

  ConfigOverrides batch;
  batch.values["train_batch_size"] = "10";
  batch.values["train_micro_batch_size_per_gpu"] = "3";
  batch.erase.push_back("gradient_accumulation_steps");
  json = ComposeConfigJson("", batch);
  ASSERT_TRUE(json.ok());
  c = ParseTrainConfig(*FillTrainAutos(*json, 10), "cli", 2);
  ASSERT_FALSE(c.ok());
  EXPECT_TRUE(absl::StrContains(c.status().message(), "train_batch_size")) << c.status();

  // A malformed file is reported by the config parser even with overrides.
  const std::string path = WriteTemp("{\"train_batch_size\": 8,,}");
  ConfigOverrides any;
  any.values["zero_optimization.stage"] = "1";
  r = ComposeConfigJson(path, any);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(absl::StrContains(r.status().message(), path)) << r.status();
  std::remove(path.c_str());
}

TEST(TrainConfig, WorldSizeFromBatchKeys) {
  EXPECT_EQ(*WorldSizeFromConfig(R"({"train_batch_size": 24, "train_micro_batch_size_per_gpu": 4,
                                     "gradient_accumulation_steps": 2})",
                                 2),
            3);
  EXPECT_EQ(*WorldSizeFromConfig(R"({"train_micro_batch_size_per_gpu": 4})", 2), 2);
  auto bad = WorldSizeFromConfig(R"({"train_batch_size": 10, "train_micro_batch_size_per_gpu": 4,
                                     "gradient_accumulation_steps": 1})",
                                 2);
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(absl::StrContains(bad.status().message(), "train_batch_size 10")) << bad.status();
}

TEST(TrainConfig, TotalStepsAutoOnlyWhenAuto) {
  auto filled = FillTrainAutos(R"({"scheduler": {"type": "WarmupDecayLR", "params": {"total_num_steps": 77}}})", 5);
  ASSERT_TRUE(filled.ok());
  EXPECT_TRUE(absl::StrContains(*filled, "77"));
  filled = FillTrainAutos(R"({"scheduler": {"type": "WarmupDecayLR", "params": {"total_num_steps": "auto"}}})", 5);
  ASSERT_TRUE(filled.ok());
  EXPECT_TRUE(absl::StrContains(*filled, "\"total_num_steps\": 5")) << *filled;
  // The default config (20 warm-up steps) works for a 2-step run.
  filled = FillTrainAutos(*ComposeConfigJson("", {}), 2);
  ASSERT_TRUE(filled.ok());
  auto c = ParseTrainConfig(*filled, "default", 2);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->scheduler.warmup_num_steps, 2);
}

const std::string kHfData = ZT_SOURCE_DIR "/tests/config/data/";

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// zt train's flags are the Hugging Face Trainer's arguments: each row gives
// some and checks every "auto" of HF's zero3 WarmupDecayLR config against the
// Trainer's rule (docs/config.md, "Hugging Face Trainer configs").
TEST(TrainConfig, FlagsFillAutoAsTheTrainerDoes) {
  struct Row {
    std::string name;
    TrainerArgs args;
    int64_t warmup;  // get_warmup_steps(steps)
    double clipping, weight_decay;
  };
  auto args = [](int64_t steps, std::optional<int64_t> ws, std::optional<double> ratio, std::optional<double> clip,
                 std::optional<double> wd, std::optional<int64_t> hidden) {
    TrainerArgs a;
    a.steps = steps;
    a.warmup_steps = ws;
    a.warmup_ratio = ratio;
    a.max_grad_norm = clip;
    a.weight_decay = wd;
    a.hidden_size = hidden;
    return a;
  };
  const std::vector<Row> rows = {
      {"defaults", args(5, {}, {}, {}, {}, 64), 0, 1.0, 0.0},
      {"warmup_steps", args(50, 7, {}, 0.5, 0.1, 64), 7, 0.5, 0.1},
      {"warmup_ratio_rounds_up", args(100, {}, 0.07, {}, {}, 768), 8, 1.0, 0.0},
      {"warmup_steps_win_over_ratio", args(40, 3, 0.5, 0.0, {}, 1024), 3, 0.0, 0.0},
      {"warmup_steps_0_uses_ratio", args(10, 0, 0.25, {}, {}, 64), 3, 1.0, 0.0},
  };
  const std::string json = ReadText(kHfData + "hf_zero3_warmupdecay_auto.json");
  for (const Row& row : rows) {
    SCOPED_TRACE(row.name);
    std::vector<std::string> notes;
    auto filled = FillTrainAutos(json, row.args, &notes);
    ASSERT_TRUE(filled.ok()) << filled.status();
    EXPECT_FALSE(absl::StrContains(*filled, "\"lr\": \"auto\"")) << *filled;
    auto c = ParseTrainConfig(*filled, "hf", 2);
    ASSERT_TRUE(c.ok()) << c.status();
    const int64_t h = *row.args.hidden_size;
    EXPECT_EQ(c->scheduler.total_num_steps, row.args.steps);
    EXPECT_EQ(c->scheduler.warmup_num_steps, row.warmup);
    EXPECT_DOUBLE_EQ(c->gradient_clipping, row.clipping);
    EXPECT_DOUBLE_EQ(c->optimizer.weight_decay, row.weight_decay);
    EXPECT_DOUBLE_EQ(c->optimizer.lr, 5e-5);
    EXPECT_DOUBLE_EQ(c->scheduler.warmup_max_lr, 5e-5);
    EXPECT_DOUBLE_EQ(c->scheduler.warmup_min_lr, 0.0);
    EXPECT_DOUBLE_EQ(c->optimizer.betas[0], 0.9);
    EXPECT_DOUBLE_EQ(c->optimizer.betas[1], 0.999);
    EXPECT_DOUBLE_EQ(c->optimizer.eps, 1e-8);
    EXPECT_FALSE(c->fp16.enabled);
    EXPECT_EQ(c->zero.reduce_bucket_size, h * h);
    EXPECT_EQ(c->zero.prefetch_bucket_size, static_cast<int64_t>(0.9 * static_cast<double>(h) * h));
    EXPECT_EQ(c->zero.param_persistence_threshold, 10 * h);
    EXPECT_EQ(c->batch.micro_batch, 8);  // the batch keys stay "auto": the parser derives them per world size
    EXPECT_EQ(c->batch.train_batch, 16);
    bool steps_note = false;
    for (const std::string& note : notes) {
      steps_note = steps_note || absl::StrContains(note, "total_num_steps: \"auto\" -> " +
                                                             std::to_string(row.args.steps) + " (--steps ");
    }
    EXPECT_TRUE(steps_note) << ::testing::PrintToString(notes);
  }
}

// The Trainer's arguments fill "auto" and nothing else: a number in the file
// stays, and the flag says it filled nothing.
TEST(TrainConfig, FlagsLeaveNumbersAlone) {
  const std::string json = R"({"train_micro_batch_size_per_gpu": 2, "gradient_clipping": 0.25,
      "optimizer": {"type": "AdamW", "params": {"lr": 0.002, "weight_decay": 0.3}},
      "scheduler": {"type": "WarmupLR", "params": {"warmup_num_steps": 11}},
      "zero_optimization": {"stage": 3, "reduce_bucket_size": 1234}})";
  TrainerArgs a;
  a.steps = 50;
  a.warmup_steps = 4;
  a.max_grad_norm = 0.5;
  a.weight_decay = 0.01;
  a.hidden_size = 64;
  std::vector<std::string> notes;
  auto filled = FillTrainAutos(json, a, &notes);
  ASSERT_TRUE(filled.ok()) << filled.status();
  EXPECT_EQ(*filled, json);  // nothing to fill: the text is unchanged
  EXPECT_EQ(notes, (std::vector<std::string>{
                       "--warmup-steps 4 fills nothing: the config sets scheduler.params.warmup_num_steps to 11 "
                       "itself (write \"auto\" there, or --set scheduler.params.warmup_num_steps=4)",
                       "--max-grad-norm 0.5 fills nothing: the config sets gradient_clipping to 0.25 itself (write "
                       "\"auto\" there, or --set gradient_clipping=0.5)",
                       "--weight-decay 0.01 fills nothing: the config sets optimizer.params.weight_decay to 0.3 "
                       "itself (write \"auto\" there, or --set optimizer.params.weight_decay=0.01)"}));
}

TEST(TrainConfig, TrainerArgumentErrors) {
  const std::string json = ReadText(kHfData + "hf_zero3_auto.json");
  TrainerArgs no_hidden;  // a model without a hidden size (mnist-cnn)
  auto r = FillTrainAutos(json, no_hidden);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(r.status().message(),
                                "zero_optimization.reduce_bucket_size, zero_optimization.stage3_prefetch_bucket_size, "
                                "zero_optimization.stage3_param_persistence_threshold: \"auto\" needs the model's "
                                "hidden size"))
      << r.status();
  // Without the "auto" ZeRO sizes no hidden size is needed.
  EXPECT_TRUE(FillTrainAutos(ReadText(kHfData + "hf_zero2_auto.json"), no_hidden).ok());

  TrainerArgs bad;
  bad.hidden_size = 64;
  bad.warmup_ratio = 1.5;
  r = FillTrainAutos(json, bad);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(absl::StrContains(r.status().message(), "--warmup-ratio must be in [0, 1], got 1.5")) << r.status();
  bad.warmup_ratio.reset();
  bad.max_grad_norm = -1;
  r = FillTrainAutos(json, bad);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(absl::StrContains(r.status().message(), "--max-grad-norm must be >= 0")) << r.status();
}

// A config whose run-time "auto" nobody filled does not train: the parse
// names the key and how to give it.
TEST(TrainConfig, UnfilledRunTimeAutoIsAnErrorNamingTheKey) {
  auto c = ParseTrainConfig(ReadText(kHfData + "hf_zero2_warmupdecay_auto.json"), "hf.json", 2);
  ASSERT_FALSE(c.ok());
  EXPECT_TRUE(absl::StrContains(c.status().message(),
                                "hf.json: scheduler.params.total_num_steps: \"auto\" is left to run time here"))
      << c.status();
  EXPECT_TRUE(absl::StrContains(c.status().message(), "zt train takes --steps")) << c.status();
}

}  // namespace
}  // namespace zt::train
