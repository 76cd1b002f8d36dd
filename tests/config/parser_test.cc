// The parser on valid input: defaults, "auto", legacy spellings, aliases,
// comments; and its error reporting: all errors at once, in document order,
// duplicate keys, malformed JSON with line and column, file errors.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "tests/config/config_test_util.h"

namespace zt {
namespace {

using testing::ErrorsText;
using testing::Parse;

Config ParseOk(const std::string& json, int world_size = 1, std::map<std::string, std::string> autos = {}) {
  ParseResult result = Parse(json, world_size, std::move(autos));
  EXPECT_TRUE(result.config.has_value()) << json << "\n" << ErrorsText(result);
  return result.config.value_or(Config{});
}

bool HasNote(const ParseResult& result, const std::string& fragment) {
  for (const std::string& note : result.notes) {
    if (note.find(fragment) != std::string::npos) return true;
  }
  return false;
}

std::string Notes(const ParseResult& result) {
  std::string out;
  for (const std::string& note : result.notes) out += "  " + note + "\n";
  return out;
}

TEST(Parser, MinimalConfigMatchesHeaderDefaults) {
  // The header's field initializers and the key table must agree: a config
  // that sets nothing parses to exactly a default-constructed Config.
  Config parsed = ParseOk(R"({"train_micro_batch_size_per_gpu": 1})");
  Config defaults;
  defaults.batch = parsed.batch;
  std::vector<std::string> diff = ConfigDifferences(parsed, defaults);
  EXPECT_TRUE(diff.empty()) << "table default differs from config.h for: " << ::testing::PrintToString(diff);
}

TEST(Parser, ReadsTypedValues) {
  Config c = ParseOk(R"({
    "train_batch_size": 64, "gradient_accumulation_steps": 2,
    "steps_per_print": 5, "gradient_clipping": 1.0, "communication_data_type": "BF16",
    "bf16": {"enabled": true},
    "optimizer": {"type": "adamw", "params": {"lr": 3e-4, "betas": [0.9, 0.95], "weight_decay": 0.1}},
    "scheduler": {"type": "WarmupCosineLR", "params": {"total_num_steps": 5000, "warmup_num_steps": 100}},
    "zero_optimization": {"stage": 3, "reduce_bucket_size": 5e7, "prefetch_bucket_size": 1e6,
                          "offload_param": {"device": "CPU", "pin_memory": true}},
    "checkpoint": {"tag_validation": "fail"},
    "activation_checkpointing": {"partition_activations": true, "number_checkpoints": 12}
  })",
                     4);
  EXPECT_EQ(c.batch.train_batch, 64);
  EXPECT_EQ(c.batch.micro_batch, 8);
  EXPECT_EQ(c.batch.accumulation_steps, 2);
  EXPECT_EQ(c.batch.world_size, 4);
  EXPECT_EQ(c.steps_per_print, 5);
  EXPECT_EQ(c.communication_data_type, DType::kBFloat16);
  EXPECT_TRUE(c.bf16.enabled);
  EXPECT_TRUE(c.optimizer.present);
  EXPECT_EQ(c.optimizer.type, OptimizerType::kAdamW);
  EXPECT_DOUBLE_EQ(c.optimizer.lr, 3e-4);
  EXPECT_DOUBLE_EQ(c.optimizer.betas[1], 0.95);
  EXPECT_TRUE(c.optimizer.adam_w_mode);
  EXPECT_EQ(c.scheduler.type, SchedulerType::kWarmupCosineLR);
  EXPECT_EQ(c.scheduler.total_num_steps, 5000);
  EXPECT_DOUBLE_EQ(c.scheduler.cos_min_ratio, 1e-4);
  EXPECT_EQ(c.zero.stage, 3);
  EXPECT_EQ(c.zero.reduce_bucket_size, 50000000);
  EXPECT_EQ(c.zero.prefetch_bucket_size, 1000000);  // un-prefixed alias
  EXPECT_TRUE(c.zero.overlap_comm);                 // stage-3 default
  EXPECT_EQ(c.zero.offload_param.device, OffloadDevice::kCpu);
  EXPECT_TRUE(c.zero.offload_param.pin_memory);
  EXPECT_EQ(c.checkpoint.tag_validation, TagValidation::kFail);
  EXPECT_EQ(c.activation_checkpointing.number_checkpoints, 12);
  EXPECT_FALSE(c.source_json.empty());
}

TEST(Parser, PerTypeOptimizerDefaults) {
  Config adagrad = ParseOk(R"({"train_batch_size": 1, "optimizer": {"type": "Adagrad"}})");
  EXPECT_DOUBLE_EQ(adagrad.optimizer.lr, 1e-2);
  EXPECT_DOUBLE_EQ(adagrad.optimizer.eps, 1e-10);
  Config lion = ParseOk(R"({"train_batch_size": 1, "optimizer": {"type": "Lion"}})");
  EXPECT_DOUBLE_EQ(lion.optimizer.lr, 1e-3);
  EXPECT_DOUBLE_EQ(lion.optimizer.betas[1], 0.999);  // DeepSpeed's FusedLion / CPU Lion default
  Config sgd = ParseOk(R"({"train_batch_size": 1, "optimizer": {"type": "SGD", "params": {"momentum": 0.9,
                          "nesterov": true}}})");
  EXPECT_DOUBLE_EQ(sgd.optimizer.momentum, 0.9);
  EXPECT_TRUE(sgd.optimizer.nesterov);
  Config adam = ParseOk(R"({"train_batch_size": 1, "optimizer": {"type": "Adam", "params": {"adam_w_mode": false}}})");
  EXPECT_FALSE(adam.optimizer.adam_w_mode);
  Config adam_default = ParseOk(R"({"train_batch_size": 1, "optimizer": {"type": "Adam"}})");
  EXPECT_TRUE(adam_default.optimizer.adam_w_mode);
  Config none = ParseOk(R"({"train_batch_size": 1})");
  EXPECT_FALSE(none.optimizer.present);
}

TEST(Parser, DerivedSchedulerDefaults) {
  Config c = ParseOk(R"({"train_batch_size": 1, "scheduler": {"type": "OneCycle",
      "params": {"cycle_min_lr": 1e-4, "cycle_max_lr": 1e-3, "cycle_first_step_size": 300,
                 "cycle_first_stair_count": 3}}})");
  EXPECT_EQ(c.scheduler.cycle_second_step_size, 300);
  EXPECT_EQ(c.scheduler.cycle_second_stair_count, 3);
  Config explicit_second = ParseOk(R"({"train_batch_size": 1, "scheduler": {"type": "OneCycle",
      "params": {"cycle_min_lr": 1e-4, "cycle_max_lr": 1e-3, "cycle_first_step_size": 300,
                 "cycle_second_step_size": 100}}})");
  EXPECT_EQ(explicit_second.scheduler.cycle_second_step_size, 100);
  Config overlap = ParseOk(R"({"train_batch_size": 1, "zero_optimization": {"stage": 2}})");
  EXPECT_FALSE(overlap.zero.overlap_comm);
}

TEST(Parser, IntegralFloatsAreIntegers) {
  Config c = ParseOk(R"({"train_batch_size": 8.0, "zero_optimization": {"stage": 2, "reduce_bucket_size": 5e8,
      "allgather_bucket_size": 2.5e8}})");
  EXPECT_EQ(c.batch.train_batch, 8);
  EXPECT_EQ(c.zero.reduce_bucket_size, 500000000);
  EXPECT_EQ(c.zero.allgather_bucket_size, 250000000);
}

// "auto" is what the Hugging Face Trainer writes at its default arguments
// (max_grad_norm 1.0, learning_rate 5e-5, ...), derived where it follows
// other keys, computed from the hidden size for the ZeRO sizes, and the
// documented default for keys the Trainer does not fill.
TEST(Parser, AutoTakesTheTrainersDefaultsAndSaysSo) {
  ParseResult r = Parse(R"({"train_micro_batch_size_per_gpu": 2, "gradient_clipping": "auto",
      "optimizer": {"type": "AdamW", "params": {"lr": "auto", "betas": "auto"}},
      "zero_optimization": {"stage": 3, "overlap_comm": "auto", "reduce_bucket_size": "auto",
                            "sub_group_size": "auto"}})",
                        1, {}, /*hidden_size=*/64);
  ASSERT_TRUE(r.config) << ErrorsText(r);
  EXPECT_DOUBLE_EQ(r.config->gradient_clipping, 1.0);
  EXPECT_DOUBLE_EQ(r.config->optimizer.lr, 5e-5);
  EXPECT_TRUE(r.config->zero.overlap_comm);
  EXPECT_EQ(r.config->zero.reduce_bucket_size, 64 * 64);
  EXPECT_EQ(r.config->zero.sub_group_size, 1000000000);
  EXPECT_TRUE(HasNote(r, "gradient_clipping: \"auto\" -> 1.0 (the Hugging Face Trainer's default max_grad_norm)"))
      << Notes(r);
  EXPECT_TRUE(HasNote(r, "optimizer.params.lr: \"auto\" -> 5e-05 (the Hugging Face Trainer's default learning_rate)"))
      << Notes(r);
  EXPECT_TRUE(HasNote(r,
                      "optimizer.params.betas: \"auto\" -> [0.9,0.999] (the Hugging Face Trainer's default "
                      "adam_beta1, adam_beta2)"))
      << Notes(r);
  EXPECT_TRUE(HasNote(r, "zero_optimization.overlap_comm: \"auto\" -> true (true at stage 3")) << Notes(r);
  EXPECT_TRUE(HasNote(r,
                      "zero_optimization.reduce_bucket_size: \"auto\" -> 4096 (hidden_size * hidden_size with "
                      "hidden_size 64)"))
      << Notes(r);
  EXPECT_TRUE(HasNote(r, "zero_optimization.sub_group_size: \"auto\" -> 1000000000 (default)")) << Notes(r);
  EXPECT_EQ(r.config->notes, r.notes);
  EXPECT_TRUE(r.config->run_time_autos.empty());
  EXPECT_EQ(r.auto_resolutions, (std::map<std::string, std::string>{
                                    {"gradient_clipping", "1.0"},
                                    {"optimizer.params.betas", "[0.9,0.999]"},
                                    {"optimizer.params.lr", "5e-05"},
                                    {"zero_optimization.overlap_comm", "true"},
                                    {"zero_optimization.reduce_bucket_size", "4096"},
                                    {"zero_optimization.sub_group_size", "1000000000"},
                                }));
}

TEST(Parser, AutoTakesGivenValues) {
  ParseResult r = Parse(R"({"train_batch_size": "auto", "train_micro_batch_size_per_gpu": "auto",
      "gradient_accumulation_steps": "auto", "bf16": {"enabled": "auto"},
      "optimizer": {"type": "AdamW", "params": {"lr": "auto"}},
      "scheduler": {"type": "WarmupDecayLR", "params": {"warmup_max_lr": "auto", "total_num_steps": "auto"}}})",
                        4,
                        {{"optimizer.params.lr", "3e-4"},
                         {"bf16.enabled", "true"},
                         {"train_micro_batch_size_per_gpu", "8"},
                         {"gradient_accumulation_steps", "2"},
                         {"scheduler.params.total_num_steps", "10000"}});
  ASSERT_TRUE(r.config) << ErrorsText(r);
  const Config& c = *r.config;
  EXPECT_DOUBLE_EQ(c.optimizer.lr, 3e-4);
  EXPECT_DOUBLE_EQ(c.scheduler.warmup_max_lr, 3e-4);  // "auto" follows the optimizer's lr
  EXPECT_TRUE(c.bf16.enabled);
  EXPECT_EQ(c.scheduler.total_num_steps, 10000);
  EXPECT_EQ(c.batch.micro_batch, 8);
  EXPECT_EQ(c.batch.accumulation_steps, 2);
  EXPECT_EQ(c.batch.train_batch, 64);
  EXPECT_TRUE(HasNote(r, "optimizer.params.lr: \"auto\" -> 0.0003 (given)")) << Notes(r);
  EXPECT_TRUE(HasNote(r, "scheduler.params.warmup_max_lr: \"auto\" -> 0.0003 (= optimizer.params.lr)")) << Notes(r);
  EXPECT_TRUE(HasNote(r, "train_batch_size: \"auto\" -> 64 (train_batch_size 64 = micro 8 * gas 2 * world 4)"))
      << Notes(r);
}

// The Trainer's per_device_train_batch_size defaults to 8 and its
// gradient_accumulation_steps to 1. The 8 stays in the written sizes, so the
// engine can resolve the batch again for its own world size.
TEST(Parser, AutoBatchKeysWithNothingToDeriveFromUseTheTrainersMicroBatch) {
  ParseResult r = Parse(R"({"train_batch_size": "auto", "train_micro_batch_size_per_gpu": "auto",
                            "gradient_accumulation_steps": "auto"})",
                        2);
  ASSERT_TRUE(r.config) << ErrorsText(r);
  EXPECT_EQ(r.config->batch.micro_batch, 8);
  EXPECT_EQ(r.config->batch.accumulation_steps, 1);
  EXPECT_EQ(r.config->batch.train_batch, 16);
  EXPECT_EQ(r.config->batch.train_micro_batch_size_per_gpu, std::optional<int64_t>(8));
  EXPECT_FALSE(r.config->batch.train_batch_size.has_value());
  EXPECT_FALSE(r.config->batch.gradient_accumulation_steps.has_value());
  EXPECT_TRUE(HasNote(r, "nothing to derive it from; pass --auto train_micro_batch_size_per_gpu=N")) << Notes(r);
  EXPECT_TRUE(HasNote(r, "8 is the Hugging Face Trainer's default per_device_train_batch_size")) << Notes(r);
  BatchConfig at_four = r.config->batch;
  ASSERT_TRUE(ResolveBatch(at_four, 4).ok());  // what Engine::Create does with a world of 4
  EXPECT_EQ(at_four.train_batch, 32);
}

TEST(Parser, AutoBatchDerivesFromTheOtherKeys) {
  ParseResult r = Parse(R"({"train_batch_size": 48, "train_micro_batch_size_per_gpu": 4,
                            "gradient_accumulation_steps": "auto"})",
                        3);
  ASSERT_TRUE(r.config) << ErrorsText(r);
  EXPECT_EQ(r.config->batch.accumulation_steps, 4);
  EXPECT_TRUE(HasNote(r, "gradient_accumulation_steps: \"auto\" -> 4")) << Notes(r);
}

TEST(Parser, BadAutoValuesAreErrors) {
  ParseResult bad_value = Parse(R"({"train_batch_size": 1, "optimizer": {"type": "Adam", "params": {"lr": "auto"}}})",
                                1, {{"optimizer.params.lr", "-1"}});
  ASSERT_EQ(bad_value.errors.size(), 1u) << ErrorsText(bad_value);
  EXPECT_EQ(bad_value.errors[0].path, "optimizer.params.lr");
  EXPECT_NE(bad_value.errors[0].message.find("\"auto\" was given the value -1, which must be >= 0"), std::string::npos);

  ParseResult unknown_key = Parse(R"({"train_batch_size": 1})", 1, {{"optimizer.params.lrr", "1"}});
  ASSERT_EQ(unknown_key.errors.size(), 1u) << ErrorsText(unknown_key);
  EXPECT_EQ(unknown_key.errors[0].path, "optimizer.params.lrr");
  EXPECT_NE(unknown_key.errors[0].message.find("did you mean \"optimizer.params.lr\""), std::string::npos);

  ParseResult unused = Parse(R"({"train_batch_size": 1, "gradient_clipping": 1.0})", 1, {{"gradient_clipping", "2"}});
  ASSERT_TRUE(unused.config) << ErrorsText(unused);
  EXPECT_DOUBLE_EQ(unused.config->gradient_clipping, 1.0);
  EXPECT_TRUE(HasNote(unused, "gradient_clipping: the value 2 given for \"auto\" is unused")) << Notes(unused);

  // With the hidden size given, only the number of training steps is missing.
  ParseResult nvme =
      Parse(testing::ReadFile(ZT_SOURCE_DIR "/tests/config/data/hf_zero3_nvme_auto.json"), 1, {}, /*hidden_size=*/1024);
  ASSERT_EQ(nvme.errors.size(), 1u) << ErrorsText(nvme);
  EXPECT_EQ(nvme.errors[0].path, "scheduler.params.total_num_steps");
  EXPECT_NE(nvme.errors[0].message.find("--auto scheduler.params.total_num_steps=VALUE"), std::string::npos);
}

// Keys a DeepSpeed config may carry that this build reads but does not act
// on: set off their default, `zt config check` says so in a note naming the
// key and what zerotorch does instead; at their default, nothing is said.
TEST(Parser, KeysThisBuildIgnoresAreNotedWhenSet) {
  ParseResult r = Parse(R"({"train_batch_size": 1, "zero_optimization": {"stage": 2,
      "contiguous_gradients": false, "reduce_scatter": true,
      "offload_optimizer": {"device": "cpu", "pin_memory": true}}})");
  ASSERT_TRUE(r.config) << ErrorsText(r);
  EXPECT_FALSE(r.config->zero.contiguous_gradients);
  EXPECT_TRUE(HasNote(r, "zero_optimization.contiguous_gradients: accepted, ignored by this build: gradients always"))
      << Notes(r);
  EXPECT_TRUE(HasNote(r, "zero_optimization.offload_optimizer.pin_memory: accepted, ignored by this build"))
      << Notes(r);
  EXPECT_FALSE(HasNote(r, "reduce_scatter")) << Notes(r);
  EXPECT_EQ(r.notes.size(), 2u) << Notes(r);
}

TEST(Parser, LegacySpellingsAreMappedWithNotes) {
  ParseResult r = Parse(R"({"train_batch_size": 1, "bfloat16": {"enabled": true},
      "zero_optimization": {"stage": 3, "cpu_offload": true, "cpu_offload_param": true,
                            "cpu_offload_use_pin_memory": true,
                            "stage3_gather_fp16_weights_on_model_save": true},
      "aio": {"thread_count": 4}})");
  ASSERT_TRUE(r.config) << ErrorsText(r);
  const Config& c = *r.config;
  EXPECT_TRUE(c.bf16.enabled);
  EXPECT_EQ(c.zero.offload_optimizer.device, OffloadDevice::kCpu);
  EXPECT_EQ(c.zero.offload_param.device, OffloadDevice::kCpu);
  EXPECT_TRUE(c.zero.offload_optimizer.pin_memory);
  EXPECT_TRUE(c.zero.offload_param.pin_memory);
  EXPECT_TRUE(c.zero.gather_16bit_weights_on_model_save);
  EXPECT_EQ(c.aio.intra_op_parallelism, 4);
  EXPECT_EQ(r.notes.size(), 6u) << Notes(r);
  EXPECT_TRUE(HasNote(r, "bfloat16: deprecated spelling, read as \"bf16\"")) << Notes(r);
  EXPECT_TRUE(HasNote(r, "zero_optimization.cpu_offload: deprecated")) << Notes(r);
  EXPECT_TRUE(HasNote(r, "aio.thread_count: deprecated spelling, read as \"aio.intra_op_parallelism\"")) << Notes(r);

  ParseResult boolean = Parse(R"({"train_batch_size": 1, "zero_optimization": true})");
  ASSERT_TRUE(boolean.config) << ErrorsText(boolean);
  EXPECT_EQ(boolean.config->zero.stage, 1);
  EXPECT_TRUE(HasNote(boolean, "zero_optimization: deprecated boolean form, read as {\"stage\": 1}"));
  ParseResult off = Parse(R"({"train_batch_size": 1, "zero_optimization": false})");
  ASSERT_TRUE(off.config) << ErrorsText(off);
  EXPECT_EQ(off.config->zero.stage, 0);

  // An explicit pin_memory in the block wins over the legacy flag.
  ParseResult pin = Parse(R"({"train_batch_size": 1, "zero_optimization": {"stage": 3,
      "cpu_offload_use_pin_memory": true, "offload_param": {"device": "cpu", "pin_memory": false}}})");
  ASSERT_TRUE(pin.config) << ErrorsText(pin);
  EXPECT_FALSE(pin.config->zero.offload_param.pin_memory);
  EXPECT_TRUE(pin.config->zero.offload_optimizer.pin_memory);
}

TEST(Parser, DisabledUnsupportedFeaturesAreAccepted) {
  ParseResult r = Parse(R"({"train_batch_size": 1,
      "pipeline": {}, "amp": {"enabled": false, "opt_level": "O1"}, "wandb": {"enabled": "auto"},
      "flops_profiler": false, "sparse_attention": null, "compression_training": {"enabled": false},
      "checkpoint": {"parallel_write": {"pipeline_stage": false}},
      "sparse_gradients": false, "zero_optimization": {"stage": 3, "zero_hpz_partition_size": 1,
      "zero_quantized_weights": false, "mics_shard_size": -1, "memory_efficient_linear": false},
      "dataloader_drop_last": true})");
  ASSERT_TRUE(r.config) << ErrorsText(r);
  EXPECT_TRUE(HasNote(r, "zero_optimization.memory_efficient_linear: accepted, no effect")) << Notes(r);
  EXPECT_TRUE(HasNote(r, "dataloader_drop_last: accepted, no effect")) << Notes(r);
}

TEST(Parser, CommentsAreAllowed) {
  Config c = ParseOk(
      "{\n  // micro batch\n  \"train_micro_batch_size_per_gpu\": 2, /* block */ \"zero_optimization\": "
      "{\"stage\": 1}\n}");
  EXPECT_EQ(c.zero.stage, 1);
}

TEST(Parser, ReportsAllErrorsInDocumentOrder) {
  const std::string json = R"({
    "zero_optimization": {"stage": 4, "reduce_bucket_size": 0, "offload_param": {"device": "cpu"}},
    "fp16": {"enabled": true, "hysteresis": 0},
    "bf16": {"enabled": true},
    "optimizer": {"type": "Adam", "params": {"lr": -1, "momentum": 0.9}},
    "train_batch_size": 30, "train_micro_batch_size_per_gpu": 4,
    "wandb": {"enabled": true},
    "trian_steps": 5
  })";
  ParseOptions options;
  options.world_size = 2;
  options.source_name = "ds.json";
  ParseResult r = ParseConfig(json, options);
  std::vector<std::string> paths;
  for (const ConfigError& e : r.errors) paths.push_back(e.path);
  // offload_param is not reported: it needs stage 3, but the stage written
  // (4) is itself the error, so judging offload against it would mislead.
  const std::vector<std::string> expected = {"zero_optimization.stage",
                                             "zero_optimization.reduce_bucket_size",
                                             "fp16.hysteresis",
                                             "bf16.enabled",
                                             "optimizer.params.lr",
                                             "optimizer.params.momentum",
                                             "train_batch_size",
                                             "wandb",
                                             "trian_steps"};
  EXPECT_EQ(paths, expected) << ErrorsText(r);
  absl::Status status = r.status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  std::string text(status.message());
  EXPECT_NE(text.find("ds.json: zero_optimization.stage: must be in 0..3, got 4\n"), std::string::npos) << text;
  EXPECT_NE(text.find("ds.json: trian_steps: unknown top-level key"), std::string::npos) << text;
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n') + 1, static_cast<long>(expected.size()));
}

TEST(Parser, DuplicateKeysAllReported) {
  ParseResult r = Parse(R"({"train_batch_size": 1, "fp16": {"enabled": true, "enabled": false},
                            "train_batch_size": 2, "optimizer": {"type": "Adam", "params": {"lr": 1, "lr": 2}}})");
  std::vector<std::string> paths;
  for (const ConfigError& e : r.errors) paths.push_back(e.path);
  EXPECT_EQ(paths, (std::vector<std::string>{"train_batch_size", "fp16.enabled", "optimizer.params.lr"}))
      << ErrorsText(r);
  for (const ConfigError& e : r.errors) EXPECT_NE(e.message.find("duplicate key"), std::string::npos);
}

TEST(Parser, MalformedJsonHasLineAndColumn) {
  ParseResult missing_comma = Parse("{\n  \"train_batch_size\": 8\n  \"steps_per_print\": 1\n}");
  ASSERT_EQ(missing_comma.errors.size(), 1u);
  EXPECT_EQ(missing_comma.errors[0].path, "");
  EXPECT_NE(missing_comma.errors[0].message.find("malformed JSON at line 3, column 3"), std::string::npos)
      << missing_comma.errors[0].message;

  ParseResult trailing = Parse("{\"a\": [1, 2,]}");
  ASSERT_EQ(trailing.errors.size(), 1u);
  EXPECT_NE(trailing.errors[0].message.find("line 1, column 13"), std::string::npos) << trailing.errors[0].message;
  EXPECT_NE(trailing.errors[0].message.find("no comma after the last element"), std::string::npos);

  ParseResult bad_literal = Parse("{\n\"fp16\": {\"enabled\": tru}\n}");
  ASSERT_EQ(bad_literal.errors.size(), 1u);
  EXPECT_NE(bad_literal.errors[0].message.find("line 2, column 21: syntax error while parsing value - invalid literal"),
            std::string::npos)
      << bad_literal.errors[0].message;

  // Pathological nesting is refused before it can exhaust the stack.
  ParseResult deep =
      Parse(R"({"train_batch_size": 1, "x": )" + std::string(100000, '[') + std::string(100000, ']') + "}");
  ASSERT_EQ(deep.errors.size(), 1u);
  EXPECT_NE(deep.errors[0].message.find("line 1, column 93: nested more than 64 levels deep"), std::string::npos)
      << deep.errors[0].message;
}

// Mangled versions of real configs: never a crash, always either a config
// or at least one error with a message.
TEST(Parser, MangledConfigsNeverCrash) {
  std::vector<std::string> sources;
  for (const char* name : {"hf_zero3_auto.json", "ds_zero_infinity.json", "ds_one_cycle.json", "ds_cifar.json"}) {
    sources.push_back(testing::ReadFile(std::string(ZT_SOURCE_DIR "/tests/config/data/") + name));
  }
  const std::string alphabet = "{}[]\",:0123456789.eE-+ truefalsnul\"auto\"";
  uint64_t state = 42;
  auto next = [&](uint64_t bound) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (state >> 33) % bound;
  };
  int parsed_ok = 0;
  for (int round = 0; round < 3000; ++round) {
    std::string text = sources[round % sources.size()];
    for (int edits = 1 + next(4); edits > 0; --edits) {
      size_t at = next(text.size());
      switch (next(3)) {
        case 0: text.erase(at, 1 + next(8)); break;
        case 1: text.insert(at, 1, alphabet[next(alphabet.size())]); break;
        default: text[at] = alphabet[next(alphabet.size())]; break;
      }
    }
    ParseResult r = Parse(text, 1 + static_cast<int>(next(8)));
    ASSERT_NE(r.config.has_value(), !r.errors.empty()) << text;
    for (const ConfigError& e : r.errors) ASSERT_FALSE(e.message.empty()) << text;
    parsed_ok += r.config.has_value();
  }
  EXPECT_GT(parsed_ok, 0);  // some edits keep a valid config (e.g. in a string)
}

TEST(Parser, WorldSizeMustBePositive) {
  ParseResult r = Parse(R"({"train_batch_size": 8})", 0);
  ASSERT_EQ(r.errors.size(), 1u) << ErrorsText(r);
  EXPECT_NE(r.errors[0].message.find("world size must be >= 1, got 0"), std::string::npos);
}

TEST(LoadConfigFile, FileErrorsNameThePath) {
  ParseOptions options;
  absl::StatusOr<Config> missing = LoadConfigFile("/nonexistent/ds_config.json", options);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("/nonexistent/ds_config.json"), absl::string_view::npos);

  absl::StatusOr<Config> directory = LoadConfigFile(ZT_SOURCE_DIR "/configs", options);
  EXPECT_EQ(directory.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(directory.status().message().find("is a directory"), absl::string_view::npos);

  const std::string path = ::testing::TempDir() + "/bad_config_" + std::to_string(::getpid()) + ".json";
  {
    std::ofstream out(path);
    out << R"({"train_batch_size": 8, "zero_optimization": {"stage": 5}})";
  }
  absl::StatusOr<Config> bad = LoadConfigFile(path, options);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(std::string(bad.status().message()), path + ": zero_optimization.stage: must be in 0..3, got 5");
  std::remove(path.c_str());
}

TEST(ConfigDifferences, NamesDifferingKeys) {
  Config a = ParseOk(R"({"train_batch_size": 8, "zero_optimization": {"stage": 2}})");
  Config b = ParseOk(R"({"train_batch_size": 8, "zero_optimization": {"stage": 2}})");
  EXPECT_TRUE(ConfigsEqual(a, b));
  b.zero.offload_optimizer.pin_memory = true;
  b.optimizer.betas[0] = 0.5;
  EXPECT_EQ(ConfigDifferences(a, b),
            (std::vector<std::string>{"optimizer.params.betas", "zero_optimization.offload_optimizer.pin_memory"}));
}

}  // namespace
}  // namespace zt
