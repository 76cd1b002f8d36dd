// Every preset in configs/ and every real-world fixture in tests/config/data/
// is accepted; each round-trips through ConfigToJson to an equal Config; and
// docs/config_reference.md is exactly what the key table generates.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "tests/config/config_test_util.h"

namespace zt {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> JsonFiles(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() == ".json") out.push_back(entry.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Values the HF templates leave to the trainer; a launcher passes them in
// (with the model's hidden size, kHiddenSize).
std::map<std::string, std::string> TrainerAutoValues() {
  return {{"scheduler.params.total_num_steps", "2000"}, {"train_micro_batch_size_per_gpu", "4"}};
}
constexpr int64_t kHiddenSize = 1024;

void ExpectRoundTrip(const Config& config, int world_size, const std::string& name) {
  const std::string printed = ConfigToJson(config);
  ParseResult again = testing::Parse(printed, world_size);
  ASSERT_TRUE(again.config) << name << ": the printed config does not re-parse:\n"
                            << testing::ErrorsText(again) << printed;
  // The printed form needs no notes (no legacy spellings, no "auto"), except
  // that a key this build reads but ignores is noted again when its value is
  // off the default, exactly as it was for the original.
  for (const std::string& note : again.notes) {
    const bool ignored_key = note.find(": accepted, ignored by this build: ") != std::string::npos;
    const bool noted_before = std::find(config.notes.begin(), config.notes.end(), note) != config.notes.end();
    EXPECT_TRUE(ignored_key && noted_before) << name << ": the printed config should need no new notes: " << note;
  }
  std::vector<std::string> diff = ConfigDifferences(config, *again.config);
  EXPECT_TRUE(diff.empty()) << name << ": round trip changed " << ::testing::PrintToString(diff);
  EXPECT_EQ(ConfigToJson(*again.config), printed) << name;
}

TEST(Presets, EveryPresetIsAcceptedAndRoundTrips) {
  std::vector<std::string> files = JsonFiles(ZT_SOURCE_DIR "/configs");
  ASSERT_GE(files.size(), 11u);
  for (const std::string& file : files) {
    for (int world : {1, 2}) {
      ParseOptions options;
      options.world_size = world;
      absl::StatusOr<Config> config = LoadConfigFile(file, options);
      ASSERT_TRUE(config.ok()) << config.status();
      EXPECT_TRUE(config->notes.empty()) << file << ": presets should need no notes: " << config->notes[0];
      ExpectRoundTrip(*config, world, file);
    }
  }
}

TEST(Presets, SmallEnoughForATwoCoreMachine) {
  for (const std::string& file : JsonFiles(ZT_SOURCE_DIR "/configs")) {
    absl::StatusOr<Config> config = LoadConfigFile(file, ParseOptions{});
    ASSERT_TRUE(config.ok()) << config.status();
    EXPECT_LE(config->batch.micro_batch, 16) << file;
    EXPECT_TRUE(config->optimizer.present) << file;
  }
}

TEST(Presets, CoverTheStagesAndVariants) {
  auto load = [](const std::string& name) {
    absl::StatusOr<Config> c = LoadConfigFile(ZT_SOURCE_DIR "/configs/" + name, ParseOptions{});
    EXPECT_TRUE(c.ok()) << c.status();
    return c.value_or(Config{});
  };
  for (int stage = 0; stage <= 3; ++stage) EXPECT_EQ(load("zero" + std::to_string(stage) + ".json").zero.stage, stage);
  EXPECT_EQ(load("zero2_offload_cpu.json").zero.offload_optimizer.device, OffloadDevice::kCpu);
  Config z3cpu = load("zero3_offload_cpu.json");
  EXPECT_EQ(z3cpu.zero.offload_param.device, OffloadDevice::kCpu);
  EXPECT_EQ(z3cpu.zero.offload_optimizer.device, OffloadDevice::kCpu);
  Config nvme = load("zero3_offload_nvme.json");
  EXPECT_EQ(nvme.zero.offload_param.device, OffloadDevice::kNvme);
  EXPECT_EQ(nvme.zero.offload_optimizer.device, OffloadDevice::kNvme);
  EXPECT_EQ(nvme.zero.offload_param.nvme_path, "/tmp/zerotorch_nvme");
  EXPECT_TRUE(load("zero2_bf16.json").bf16.enabled);
  EXPECT_TRUE(load("zero3_bf16.json").bf16.enabled);
  EXPECT_TRUE(load("zero2_fp16.json").fp16.enabled);
  EXPECT_TRUE(load("zero3_activation_checkpointing.json").activation_checkpointing.partition_activations);
}

TEST(RealWorldConfigs, DeepSpeedAndHuggingFaceExamplesAreAccepted) {
  std::vector<std::string> files = JsonFiles(ZT_SOURCE_DIR "/tests/config/data");
  ASSERT_GE(files.size(), 10u);
  for (const std::string& file : files) {
    ParseOptions options;
    options.world_size = 4;
    options.auto_values = TrainerAutoValues();
    options.hidden_size = kHiddenSize;
    options.source_name = file;
    ParseResult result = ParseConfig(testing::ReadFile(file), options);
    ASSERT_TRUE(result.config) << result.status();
    ExpectRoundTrip(*result.config, 4, file);
  }
}

TEST(RealWorldConfigs, ResolvedValuesMatchTheirSource) {
  ParseOptions options;
  options.world_size = 2;
  options.hidden_size = kHiddenSize;
  absl::StatusOr<Config> cifar = LoadConfigFile(ZT_SOURCE_DIR "/tests/config/data/ds_cifar.json", options);
  ASSERT_TRUE(cifar.ok()) << cifar.status();
  EXPECT_EQ(cifar->zero.stage, 2);
  EXPECT_EQ(cifar->zero.offload_optimizer.device, OffloadDevice::kCpu);  // legacy cpu_offload
  EXPECT_EQ(cifar->fp16.initial_scale_power, 15);
  EXPECT_EQ(cifar->batch.micro_batch, 2);
  EXPECT_DOUBLE_EQ(cifar->optimizer.betas[0], 0.8);

  absl::StatusOr<Config> infinity = LoadConfigFile(ZT_SOURCE_DIR "/tests/config/data/ds_zero_infinity.json", options);
  ASSERT_TRUE(infinity.ok()) << infinity.status();
  EXPECT_EQ(infinity->aio.intra_op_parallelism, 2);  // legacy thread_count
  EXPECT_DOUBLE_EQ(infinity->fp16.loss_scale, 1024);
  EXPECT_FALSE(infinity->fp16.dynamic());
  EXPECT_EQ(infinity->zero.max_reuse_distance, 100000000);

  absl::StatusOr<Config> bf16 = LoadConfigFile(ZT_SOURCE_DIR "/tests/config/data/hf_zero3_bf16_auto.json", options);
  ASSERT_TRUE(bf16.ok()) << bf16.status();
  EXPECT_FALSE(bf16->bf16.enabled);  // "auto" without a value: the default
  EXPECT_EQ(bf16->zero.reduce_bucket_size, kHiddenSize * kHiddenSize);
  EXPECT_EQ(bf16->zero.prefetch_bucket_size, 943718);  // int(0.9 * 1024 * 1024) = int(943718.4)
  EXPECT_EQ(bf16->zero.param_persistence_threshold, 10 * kHiddenSize);
  EXPECT_DOUBLE_EQ(bf16->optimizer.lr, 5e-5);      // the Trainer's default learning_rate
  EXPECT_EQ(bf16->scheduler.warmup_num_steps, 0);  // and warmup_steps
  EXPECT_DOUBLE_EQ(bf16->gradient_clipping, 1.0);  // and max_grad_norm
}

TEST(RealWorldConfigs, UnsupportedFeaturesInRealConfigsAreNamed) {
  // DeepSpeed's CIFAR example as published keeps fp16 master weights.
  std::string cifar = testing::ReadFile(ZT_SOURCE_DIR "/tests/config/data/ds_cifar.json");
  size_t at = cifar.find("\"fp16_master_weights_and_grads\": false");
  ASSERT_NE(at, std::string::npos);
  cifar.replace(at, std::string("\"fp16_master_weights_and_grads\": false").size(),
                "\"fp16_master_weights_and_grads\": true");
  ParseResult r = testing::Parse(cifar);
  ASSERT_EQ(r.errors.size(), 1u) << testing::ErrorsText(r);
  EXPECT_EQ(r.errors[0].path, "fp16.fp16_master_weights_and_grads");

  // The ZeRO++ tutorial's config: hpZ, qwZ and qgZ are all accepted (a
  // world of 16 or more ranks in multiples of 16 is checked when the engine
  // starts); with LoCo's block as DeepSpeed documents it.
  ParseResult zeropp = testing::Parse(R"({"train_batch_size": 8, "zero_optimization": {
      "stage": 3, "reduce_bucket_size": 10000000, "reduce_scatter": false,
      "zero_quantized_weights": true, "zero_hpz_partition_size": 16, "zero_quantized_gradients": true,
      "zeropp_loco_param": {"err_beta": 0.8, "reset_T": 1024},
      "contiguous_gradients": true, "overlap_comm": true}})");
  ASSERT_TRUE(zeropp.errors.empty()) << testing::ErrorsText(zeropp);
  ASSERT_TRUE(zeropp.config.has_value());
  const ZeroConfig& z = zeropp.config->zero;
  EXPECT_TRUE(z.quantized_weights);
  EXPECT_TRUE(z.quantized_gradients);
  EXPECT_EQ(z.quantized_gradients_bits, 8);
  EXPECT_EQ(z.hpz_partition_size, 16);
  EXPECT_TRUE(z.loco);
  EXPECT_DOUBLE_EQ(z.loco_err_beta, 0.8);
  EXPECT_EQ(z.loco_reset_t, 1024);
  // An empty block leaves LoCo off (DeepSpeed would fail on it at its first reduction).
  ParseResult empty = testing::Parse(
      R"({"train_batch_size": 8, "zero_optimization": {"stage": 3, "zero_quantized_gradients": true, "zeropp_loco_param": {}}})");
  ASSERT_TRUE(empty.errors.empty()) << testing::ErrorsText(empty);
  EXPECT_FALSE(empty.config->zero.loco);
}

TEST(Reference, CommittedDocMatchesTheKeyTable) {
  const std::string committed = testing::ReadFile(ZT_SOURCE_DIR "/docs/config_reference.md");
  EXPECT_TRUE(committed == ConfigReferenceMarkdown())
      << "docs/config_reference.md is out of date with the key table in config/schema_*.cc; regenerate it with:\n"
         "  build/bin/zt config reference > docs/config_reference.md";
}

TEST(Reference, ListsEveryKeyWithItsDefault) {
  const std::string doc = ConfigReferenceMarkdown();
  for (const char* needle :
       {"| `zero_optimization.stage` | int, in 0..3 | 0 |",
        "| `zero_optimization.reduce_bucket_size` | int, >= 1 | 5e8 |",
        "`optimizer.params.lr` (Adagrad) | float, >= 0 | 0.01 |", "| `fp16.hysteresis` | int, >= 1 | 2 |",
        "| `zero_optimization.overlap_comm` | bool | true at stage 3, else false |",
        "| `zero_optimization.cpu_offload` |", "| `pipeline` | off |", "## Batch size", "## Legacy spellings",
        "## Not supported", "Also accepted as `prefetch_bucket_size`"}) {
    EXPECT_NE(doc.find(needle), std::string::npos) << needle;
  }
}

}  // namespace
}  // namespace zt
