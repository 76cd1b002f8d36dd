// ComposeConfigJson / FillTrainAutos / WorldSizeFromConfig: command-line
// values land in the config before it is checked, and bad ones are errors
// that name the key.
#include "train/train_config.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>

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

}  // namespace
}  // namespace zt::train
