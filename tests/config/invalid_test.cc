// Table-driven: each invalid config must produce exactly the expected error,
// at the JSON path the user wrote, with a message that says what is wrong.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/config/config_test_util.h"

namespace zt {
namespace {

struct InvalidCase {
  const char* name;
  const char* json;      // a batch size is added unless the case is raw
  const char* path;      // expected JSON path of the (only) error
  const char* fragment;  // expected part of its message
  bool raw = false;      // use json as is
  int world_size = 1;
};

std::string WithBatch(const InvalidCase& c) {
  std::string json = c.json;
  if (c.raw) return json;
  size_t brace = json.find('{');
  return json.substr(0, brace + 1) + "\"train_micro_batch_size_per_gpu\": 1" +
         (json.find_first_not_of(" \n", brace + 1) == json.rfind('}') ? "" : ", ") + json.substr(brace + 1);
}

const InvalidCase kCases[] = {
    // --- Document level ---
    {"syntax_trailing_comma", "{\n  \"fp16\": {\"enabled\": true,}\n}", "", "line 2, column 28", true},
    {"syntax_not_an_object", "[1, 2]", "", "must be a JSON object", true},
    {"syntax_empty", "", "", "malformed JSON at line 1, column 1", true},
    // Found by fuzzing: a number past double's range aborted (nlohmann's out_of_range).
    {"syntax_number_out_of_range", "{\n  \"gradient_clipping\": 1e99999\n}", "",
     "malformed JSON at line 2, column 24: the number 1e99999 does not fit in a double", true},
    {"duplicate_top_level", R"({"steps_per_print": 1, "steps_per_print": 2})", "steps_per_print", "duplicate key"},
    {"duplicate_nested", R"({"zero_optimization": {"stage": 1, "stage": 2}})", "zero_optimization.stage",
     "duplicate key"},
    {"duplicate_via_alias", R"({"zero_optimization": {"stage3_prefetch_bucket_size": 1, "prefetch_bucket_size": 2}})",
     "zero_optimization.prefetch_bucket_size", "given twice"},
    // --- Unknown and misplaced keys ---
    {"unknown_top_level_typo", R"({"gradient_clippng": 1.0})", "gradient_clippng",
     "did you mean \"gradient_clipping\""},
    {"unknown_top_level", R"({"my_setting": 1})", "my_setting", "unknown top-level key"},
    {"unknown_zero_typo_from_deepspeed_examples",
     R"({"zero_optimization": {"stage": 3, "stage3_param_persitance_threshold": 1e5}})",
     "zero_optimization.stage3_param_persitance_threshold", "did you mean \"stage3_param_persistence_threshold\""},
    {"misplaced_stage", R"({"stage": 2})", "stage", "belongs inside \"zero_optimization\""},
    {"misplaced_enabled", R"({"enabled": true})", "enabled",
     "\"enabled\" is a key of \"fp16\", \"bf16\", \"tensorboard\", \"csv_monitor\", not a top-level key"},
    {"misplaced_lr", R"({"optimizer": {"type": "Adam"}, "lr": 0.1})", "lr",
     "belongs inside \"optimizer.params\" (did you mean \"optimizer.params.lr\"?)"},
    {"misplaced_aio_in_zero", R"({"zero_optimization": {"stage": 3, "aio": {"queue_depth": 8}}})",
     "zero_optimization.aio", "is a top-level key"},
    {"unknown_offload_key", R"({"zero_optimization": {"stage": 2, "offload_optimizer": {"devic": "cpu"}}})",
     "zero_optimization.offload_optimizer.devic", "did you mean \"device\""},
    {"unknown_fp16_key", R"({"fp16": {"enabled": true, "loss_scale_windw": 100}})", "fp16.loss_scale_windw",
     "did you mean \"loss_scale_window\""},
    {"fp16_key_in_bf16", R"({"bf16": {"enabled": true, "loss_scale": 0}})", "bf16.loss_scale",
     "belongs inside \"fp16\""},
    {"unknown_bf16_key", R"({"bf16": {"enabled": true, "enable": true}})", "bf16.enable", "did you mean \"enabled\""},
    {"unknown_small_block_key", R"({"checkpoint": {"tag": "x"}})", "checkpoint.tag",
     "\"checkpoint\" takes async_save, load_universal, parallel_write, tag_validation, use_node_local_storage"},
    {"param_of_other_optimizer", R"({"optimizer": {"type": "Adam", "params": {"momentum": 0.9}}})",
     "optimizer.params.momentum", "not a parameter of Adam (it belongs to SGD)"},
    {"lion_has_no_eps", R"({"optimizer": {"type": "Lion", "params": {"eps": 1e-8}}})", "optimizer.params.eps",
     "not a parameter of Lion"},
    {"max_grad_norm_in_params", R"({"optimizer": {"type": "AdamW", "params": {"max_grad_norm": 1.0}}})",
     "optimizer.params.max_grad_norm", "gradient_clipping"},
    {"param_of_other_scheduler", R"({"scheduler": {"type": "WarmupLR", "params": {"total_num_steps": 100}}})",
     "scheduler.params.total_num_steps", "not a parameter of WarmupLR"},
    {"cosine_has_no_max_lr",
     R"({"scheduler": {"type": "WarmupCosineLR", "params": {"total_num_steps": 2000, "warmup_max_lr": 0.1}}})",
     "scheduler.params.warmup_max_lr", "not a parameter of WarmupCosineLR"},
    // --- Wrong types ---
    {"stage_as_string", R"({"zero_optimization": {"stage": "2"}})", "zero_optimization.stage", "remove the quotes"},
    {"stage_fractional", R"({"zero_optimization": {"stage": 2.5}})", "zero_optimization.stage",
     "must be an integer, got 2.5"},
    {"bool_as_string", R"({"fp16": {"enabled": "true"}})", "fp16.enabled", "without quotes"},
    {"bool_as_number", R"({"fp16": {"enabled": 1}})", "fp16.enabled", "must be true or false, got the integer 1"},
    {"betas_one_element", R"({"optimizer": {"type": "Adam", "params": {"betas": [0.9]}}})", "optimizer.params.betas",
     "list of two numbers"},
    {"betas_out_of_range", R"({"optimizer": {"type": "Adam", "params": {"betas": [0.9, 1.0]}}})",
     "optimizer.params.betas", "element 1 must be in [0, 1), got 1.0"},
    {"lr_not_a_number", R"({"optimizer": {"type": "Adam", "params": {"lr": "fast"}}})", "optimizer.params.lr",
     "must be a number >= 0, got the string \"fast\""},
    {"null_value", R"({"gradient_clipping": null})", "gradient_clipping", "got null; remove the key"},
    {"offload_device_unknown", R"({"zero_optimization": {"stage": 2, "offload_optimizer": {"device": "gpu"}}})",
     "zero_optimization.offload_optimizer.device", "one of \"none\", \"cpu\", \"nvme\", got \"gpu\""},
    {"block_not_object", R"({"optimizer": "AdamW"})", "optimizer", "must be an object"},
    {"nvme_path_not_string",
     R"({"zero_optimization": {"stage": 3, "offload_param": {"device": "nvme", "nvme_path": 5}}})",
     "zero_optimization.offload_param.nvme_path", "must be a string"},
    // --- Out of range ---
    {"stage_4", R"({"zero_optimization": {"stage": 4}})", "zero_optimization.stage", "must be in 0..3, got 4"},
    {"stage_negative", R"({"zero_optimization": {"stage": -1}})", "zero_optimization.stage", "in 0..3"},
    {"negative_lr", R"({"optimizer": {"type": "AdamW", "params": {"lr": -0.001}}})", "optimizer.params.lr",
     "must be >= 0, got -0.001"},
    {"zero_eps", R"({"optimizer": {"type": "AdamW", "params": {"eps": 0}}})", "optimizer.params.eps", "must be > 0"},
    {"negative_weight_decay", R"({"optimizer": {"type": "AdamW", "params": {"weight_decay": -0.1}}})",
     "optimizer.params.weight_decay", "must be >= 0"},
    {"zero_reduce_bucket", R"({"zero_optimization": {"stage": 2, "reduce_bucket_size": 0}})",
     "zero_optimization.reduce_bucket_size", "must be >= 1, got 0"},
    {"zero_allgather_bucket", R"({"zero_optimization": {"stage": 2, "allgather_bucket_size": 0}})",
     "zero_optimization.allgather_bucket_size", "must be >= 1"},
    {"hysteresis_0", R"({"fp16": {"enabled": true, "hysteresis": 0}})", "fp16.hysteresis", "must be >= 1, got 0"},
    {"loss_scale_window_0", R"({"fp16": {"enabled": true, "loss_scale_window": 0}})", "fp16.loss_scale_window",
     "must be >= 1"},
    {"min_loss_scale_0", R"({"fp16": {"enabled": true, "min_loss_scale": 0}})", "fp16.min_loss_scale", "must be > 0"},
    {"negative_loss_scale", R"({"fp16": {"enabled": true, "loss_scale": -1}})", "fp16.loss_scale", "must be >= 0"},
    {"initial_scale_power_65", R"({"fp16": {"enabled": true, "initial_scale_power": 65}})", "fp16.initial_scale_power",
     "in 0..64"},
    {"steps_per_print_0", R"({"steps_per_print": 0})", "steps_per_print", "must be >= 1"},
    {"negative_clipping", R"({"gradient_clipping": -1})", "gradient_clipping", "must be >= 0"},
    {"predivide_0", R"({"gradient_predivide_factor": 0})", "gradient_predivide_factor", "must be > 0"},
    {"offload_ratio_0", R"({"zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu", "ratio": 0}}})",
     "zero_optimization.offload_optimizer.ratio", "must be in (0, 1], got 0"},
    {"offload_ratio_above_1",
     R"({"zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu", "ratio": 1.5}}})",
     "zero_optimization.offload_optimizer.ratio", "in (0, 1]"},
    {"buffer_count_0",
     R"({"zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu", "buffer_count": 0}}})",
     "zero_optimization.offload_optimizer.buffer_count", "must be >= 1"},
    {"param_buffer_size_0",
     R"({"zero_optimization": {"stage": 3, "offload_param": {"device": "cpu", "buffer_size": 0}}})",
     "zero_optimization.offload_param.buffer_size", "must be >= 1"},
    {"aio_queue_depth_0", R"({"aio": {"queue_depth": 0}})", "aio.queue_depth", "must be >= 1"},
    {"aio_block_size_0", R"({"aio": {"block_size": 0}})", "aio.block_size", "must be >= 1"},
    {"warmup_steps_negative", R"({"scheduler": {"type": "WarmupLR", "params": {"warmup_num_steps": -5}}})",
     "scheduler.params.warmup_num_steps", "must be >= 0"},
    {"cos_min_ratio_2",
     R"({"scheduler": {"type": "WarmupCosineLR", "params": {"total_num_steps": 5000, "cos_min_ratio": 2}}})",
     "scheduler.params.cos_min_ratio", "in [0, 1]"},
    {"cycle_min_mom_1",
     R"({"scheduler": {"type": "OneCycle", "params": {"cycle_min_lr": 0.1, "cycle_max_lr": 1, "cycle_min_mom": 1}}})",
     "scheduler.params.cycle_min_mom", "in [0, 1)"},
    {"tag_validation_unknown", R"({"checkpoint": {"tag_validation": "Strict"}})", "checkpoint.tag_validation",
     "one of \"Ignore\", \"Warn\", \"Fail\""},
    {"comm_dtype_unknown", R"({"communication_data_type": "fp8"})", "communication_data_type",
     "one of \"fp32\", \"fp16\", \"bf16\""},
    {"grad_accum_dtype_unknown", R"({"data_types": {"grad_accum_dtype": "int8"}})", "data_types.grad_accum_dtype",
     "\"bf16\""},
    {"warmup_type_unknown", R"({"scheduler": {"type": "WarmupLR", "params": {"warmup_type": "cosine"}}})",
     "scheduler.params.warmup_type", "one of \"log\", \"linear\""},
    {"number_checkpoints_0", R"({"activation_checkpointing": {"number_checkpoints": 0}})",
     "activation_checkpointing.number_checkpoints", "must be >= 1"},
    {"train_batch_size_0", R"({"train_batch_size": 0})", "train_batch_size", "must be >= 1, got 0", true},
    {"int_too_large", R"({"zero_optimization": {"stage": 3, "sub_group_size": 1e20}})",
     "zero_optimization.sub_group_size", "too large"},
    {"int32_field_too_large",
     R"({"zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu", "buffer_count": 3e9}}})",
     "zero_optimization.offload_optimizer.buffer_count", "too large"},
    // --- Impossible combinations ---
    {"fp16_and_bf16", R"({"fp16": {"enabled": true}, "bf16": {"enabled": true}})", "bf16.enabled",
     "fp16 and bf16 cannot both be enabled"},
    {"fp16_and_bfloat16", R"({"bfloat16": {"enabled": true}, "fp16": {"enabled": true}})", "bfloat16.enabled",
     "cannot both be enabled"},
    {"offload_param_stage_2", R"({"zero_optimization": {"stage": 2, "offload_param": {"device": "cpu"}}})",
     "zero_optimization.offload_param.device", "needs ZeRO stage 3; zero_optimization.stage is 2"},
    {"offload_optimizer_stage_0", R"({"zero_optimization": {"offload_optimizer": {"device": "cpu"}}})",
     "zero_optimization.offload_optimizer.device", "needs ZeRO stage 1, 2 or 3"},
    {"nvme_without_path_optimizer", R"({"zero_optimization": {"stage": 3, "offload_optimizer": {"device": "nvme"}}})",
     "zero_optimization.offload_optimizer.nvme_path", "device \"nvme\" needs nvme_path"},
    {"nvme_without_path_param", R"({"zero_optimization": {"stage": 3, "offload_param": {"device": "NVMe"}}})",
     "zero_optimization.offload_param.nvme_path", "needs nvme_path"},
    {"partial_offload_stage_2",
     R"({"zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu", "ratio": 0.5}}})",
     "zero_optimization.offload_optimizer.ratio", "needs ZeRO stage 3"},
    {"adamw_without_w_mode", R"({"optimizer": {"type": "AdamW", "params": {"adam_w_mode": false}}})",
     "optimizer.params.adam_w_mode", "contradicts type \"AdamW\""},
    {"nesterov_without_momentum", R"({"optimizer": {"type": "SGD", "params": {"nesterov": true}}})",
     "optimizer.params.nesterov", "needs momentum > 0"},
    {"total_below_warmup",
     R"({"scheduler": {"type": "WarmupDecayLR", "params": {"total_num_steps": 100, "warmup_num_steps": 1000}}})",
     "scheduler.params.total_num_steps", "below warmup_num_steps 1000"},
    {"one_cycle_inverted",
     R"({"scheduler": {"type": "OneCycle", "params": {"cycle_min_lr": 0.1, "cycle_max_lr": 0.01}}})",
     "scheduler.params.cycle_max_lr", "below cycle_min_lr"},
    {"cpu_checkpointing_alone", R"({"activation_checkpointing": {"cpu_checkpointing": true}})",
     "activation_checkpointing.cpu_checkpointing", "needs partition_activations"},
    {"min_scale_above_initial", R"({"fp16": {"enabled": true, "initial_scale_power": 4, "min_loss_scale": 32}})",
     "fp16.min_loss_scale", "above the initial scale 2^4 = 16"},
    {"cpu_offload_and_offload_optimizer",
     R"({"zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu"}, "cpu_offload": true}})",
     "zero_optimization.cpu_offload", "given twice"},
    {"cpu_offload_param_stage_2", R"({"zero_optimization": {"stage": 2, "cpu_offload_param": true}})",
     "zero_optimization.cpu_offload_param", "needs ZeRO stage 3"},
    {"legacy_not_bool", R"({"zero_optimization": {"stage": 2, "cpu_offload": "yes"}})", "zero_optimization.cpu_offload",
     "must be true or false"},
    // --- Required keys ---
    {"optimizer_without_type", R"({"optimizer": {"params": {"lr": 0.1}}})", "optimizer.type",
     "missing: the block needs a \"type\""},
    {"decay_without_total", R"({"scheduler": {"type": "WarmupDecayLR", "params": {"warmup_num_steps": 10}}})",
     "scheduler.params.total_num_steps", "missing: WarmupDecayLR needs it"},
    {"one_cycle_without_max", R"({"scheduler": {"type": "OneCycle", "params": {"cycle_min_lr": 0.1}}})",
     "scheduler.params.cycle_max_lr", "missing: OneCycle needs it"},
    {"type_auto_without_value", R"({"optimizer": {"type": "auto"}})", "optimizer.type", "no default"},
    // --- Not supported by zerotorch ---
    {"optimizer_lamb", R"({"optimizer": {"type": "Lamb", "params": {"lr": 0.1, "max_coeff": 0.3}}})", "optimizer.type",
     "\"Lamb\" is not supported by zerotorch; supported: Adam, AdamW, Adagrad, Lion, SGD"},
    {"optimizer_onebitadam", R"({"optimizer": {"type": "OneBitAdam", "params": {"freeze_step": 400}}})",
     "optimizer.type", "\"OneBitAdam\" is not supported"},
    {"optimizer_typo", R"({"optimizer": {"type": "Adamm"}})", "optimizer.type", "did you mean \"Adam\""},
    {"scheduler_torch", R"({"scheduler": {"type": "StepLR", "params": {"step_size": 10}}})", "scheduler.type",
     "\"StepLR\" is not supported"},
    {"pipeline", R"({"pipeline": {"stages": 2}})", "pipeline", "pipeline parallelism is not supported by zerotorch"},
    {"amp_enabled", R"({"amp": {"enabled": true, "opt_level": "O1"}})", "amp", "use \"fp16\" or \"bf16\""},
    {"flops_profiler", R"({"flops_profiler": {"enabled": true}})", "flops_profiler", "not supported"},
    {"sparse_attention", R"({"sparse_attention": {"mode": "fixed", "block": 16}})", "sparse_attention",
     "not supported"},
    {"moe", R"({"moe": {"enabled": true, "num_experts": 8}})", "moe", "not supported"},
    {"compression_training", R"({"compression_training": {"weight_quantization": {"shared_parameters": {}}}})",
     "compression_training", "not supported"},
    {"wandb", R"({"wandb": {"enabled": true, "project": "x"}})", "wandb", "use tensorboard or csv_monitor"},
    {"zeropp_quantized_weights_stage2", R"({"zero_optimization": {"stage": 2, "zero_quantized_weights": true}})",
     "zero_optimization.zero_quantized_weights", "need ZeRO stage 3"},
    {"zeropp_quantized_frozen_stage1",
     R"({"zero_optimization": {"stage": 1, "zero_quantized_nontrainable_weights": true}})",
     "zero_optimization.zero_quantized_nontrainable_weights", "need ZeRO stage 3"},
    {"zeropp_quantized_gradients_stage2", R"({"zero_optimization": {"stage": 2, "zero_quantized_gradients": true}})",
     "zero_optimization.zero_quantized_gradients", "need ZeRO stage 3"},
    {"zeropp_quantized_gradient_bits",
     R"({"zero_optimization": {"stage": 3, "zero_quantized_gradients": true, "zero_quantized_gradients_bits": 5}})",
     "zero_optimization.zero_quantized_gradients_bits", "use 8 or 4"},
    {"zeropp_gradient_bits_without_qgz", R"({"zero_optimization": {"stage": 3, "zero_quantized_gradients_bits": 4}})",
     "zero_optimization.zero_quantized_gradients_bits", "set zero_quantized_gradients true"},
    {"zeropp_loco_without_qgz", R"({"zero_optimization": {"stage": 3, "zeropp_loco_param": {"err_beta": 0.8}}})",
     "zero_optimization.zeropp_loco_param", "needs zero_quantized_gradients true"},
    {"zeropp_loco_beta_range",
     R"({"zero_optimization": {"stage": 3, "zero_quantized_gradients": true, "zeropp_loco_param": {"err_beta": 1.5}}})",
     "zero_optimization.zeropp_loco_param.err_beta", "1"},
    {"zeropp_loco_unknown_key",
     R"({"zero_optimization": {"stage": 3, "zero_quantized_gradients": true, "zeropp_loco_param": {"err_bta": 0.5}}})",
     "zero_optimization.zeropp_loco_param.err_bta", "err_beta"},
    {"hpz_stage2", R"({"zero_optimization": {"stage": 2, "zero_hpz_partition_size": 8}})",
     "zero_optimization.zero_hpz_partition_size", "needs ZeRO stage 3"},
    {"hpz_with_mics", R"({"zero_optimization": {"stage": 3, "zero_hpz_partition_size": 2, "mics_shard_size": 2}})",
     "zero_optimization.zero_hpz_partition_size", "choose one"},
    {"hpz_zero", R"({"zero_optimization": {"stage": 3, "zero_hpz_partition_size": 0}})",
     "zero_optimization.zero_hpz_partition_size", "1"},
    {"mics_stage0", R"({"zero_optimization": {"stage": 0, "mics_shard_size": 2}})", "zero_optimization.mics_shard_size",
     "needs ZeRO stage 1, 2 or 3"},
    {"mics_below_minus_one", R"({"zero_optimization": {"stage": 3, "mics_shard_size": -2}})",
     "zero_optimization.mics_shard_size", "-1"},
    {"mics_hierarchical_gather_stage2",
     R"({"zero_optimization": {"stage": 2, "mics_shard_size": 2, "mics_hierarchical_params_gather": true}})",
     "zero_optimization.mics_hierarchical_params_gather", "needs ZeRO stage 3"},
    {"sparse_gradients", R"({"sparse_gradients": true})", "sparse_gradients", "not supported"},
    {"fp16_master_weights", R"({"fp16": {"enabled": true, "fp16_master_weights_and_grads": true}})",
     "fp16.fp16_master_weights_and_grads", "fp32 master weights"},
    {"amsgrad", R"({"optimizer": {"type": "Adam", "params": {"amsgrad": true}}})", "optimizer.params.amsgrad",
     "not supported"},
    // --- Batch sizes ---
    {"batch_inconsistent",
     R"({"train_batch_size": 32, "train_micro_batch_size_per_gpu": 3, "gradient_accumulation_steps": 2})",
     "train_batch_size",
     "train_batch_size 32 != train_micro_batch_size_per_gpu 3 * gradient_accumulation_steps 2 * world size 4 (= 24)",
     true, 4},
    {"batch_not_divisible", R"({"train_batch_size": 30, "train_micro_batch_size_per_gpu": 4})", "train_batch_size",
     "not divisible by train_micro_batch_size_per_gpu 4 * world size 2 (= 8)", true, 2},
    {"batch_only_gas", R"({"gradient_accumulation_steps": 4})", "gradient_accumulation_steps",
     "give train_batch_size or train_micro_batch_size_per_gpu", true},
    {"batch_none", R"({"zero_optimization": {"stage": 1}})", "train_batch_size",
     "give train_batch_size or train_micro_batch_size_per_gpu", true},
};

class InvalidConfigTest : public ::testing::TestWithParam<InvalidCase> {};

TEST_P(InvalidConfigTest, ReportsTheRightPathAndMessage) {
  const InvalidCase& c = GetParam();
  const std::string json = WithBatch(c);
  ParseResult result = testing::Parse(json, c.world_size);
  EXPECT_FALSE(result.config.has_value());
  ASSERT_EQ(result.errors.size(), 1u) << "config:\n" << json << "\nerrors:\n" << testing::ErrorsText(result);
  EXPECT_EQ(result.errors[0].path, c.path) << testing::ErrorsText(result);
  EXPECT_NE(result.errors[0].message.find(c.fragment), std::string::npos) << "expected \"" << c.fragment << "\" in:\n"
                                                                          << testing::ErrorsText(result);
}

INSTANTIATE_TEST_SUITE_P(Table, InvalidConfigTest, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<InvalidCase>& info) {
                           return std::string(info.param.name);
                         });

TEST(InvalidConfigTable, HasAtLeastFiftyCases) { EXPECT_GE(std::size(kCases), 50u); }

}  // namespace
}  // namespace zt
