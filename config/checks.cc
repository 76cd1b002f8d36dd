// Checks that span several keys (fp16 vs bf16, offload vs stage, optimizer
// and scheduler consistency) and batch-size resolution. Each error names the
// key to change, as the user wrote it, and the values involved.
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "config/parser.h"

namespace zt::config_internal {
namespace {

std::string Num(double v) { return ShowValue(Json(v)); }

}  // namespace

void Parser::CheckCombinations() {
  CheckPrecision();
  CheckZero();
  CheckOptimizer();
  CheckScheduler();
  CheckActivationCheckpointing();
}

void Parser::CheckPrecision() {
  const Config& c = config_;
  if (c.fp16.enabled && c.bf16.enabled) {
    Error(Written("bf16.enabled"), absl::StrCat("fp16 and bf16 cannot both be enabled (", Written("fp16.enabled"),
                                                " is true too); keep one: bf16 needs no loss scaling"));
  }
  if (c.fp16.enabled && c.fp16.dynamic()) {
    double initial = std::ldexp(1.0, c.fp16.initial_scale_power);
    if (c.fp16.min_loss_scale > initial) {
      Error(Written("fp16.min_loss_scale"),
            absl::StrCat(Num(c.fp16.min_loss_scale), " is above the initial scale 2^", c.fp16.initial_scale_power,
                         " = ", Num(initial), "; lower min_loss_scale or raise initial_scale_power"));
    }
  }
}

void Parser::CheckZero() {
  if (Failed("zero_optimization.stage")) return;
  const ZeroConfig& z = config_.zero;
  const std::string stage = absl::StrCat("zero_optimization.stage is ", z.stage);
  const OffloadOptimizerConfig& oo = z.offload_optimizer;
  const OffloadParamConfig& op = z.offload_param;
  if (oo.device != OffloadDevice::kNone && z.stage == 0) {
    Error(Written("zero_optimization.offload_optimizer.device"),
          absl::StrCat("optimizer offload needs ZeRO stage 1, 2 or 3; ", stage));
  }
  if (op.device != OffloadDevice::kNone && z.stage != 3) {
    Error(Written("zero_optimization.offload_param.device"),
          absl::StrCat("parameter offload needs ZeRO stage 3; ", stage,
                       " (at stage 1 or 2 offload the optimizer instead: offload_optimizer)"));
  }
  if (oo.device == OffloadDevice::kNvme && oo.nvme_path.empty() &&
      !Failed("zero_optimization.offload_optimizer.nvme_path")) {
    Error(Written("zero_optimization.offload_optimizer.nvme_path"),
          "missing: device \"nvme\" needs nvme_path, a directory on a local NVMe drive");
  }
  if (op.device == OffloadDevice::kNvme && op.nvme_path.empty() &&
      !Failed("zero_optimization.offload_param.nvme_path")) {
    Error(Written("zero_optimization.offload_param.nvme_path"),
          "missing: device \"nvme\" needs nvme_path, a directory on a local NVMe drive");
  }
  if (z.mics_shard_size > 0 && z.stage == 0) {
    Error(
        Written("zero_optimization.mics_shard_size"),
        absl::StrCat("hierarchical sharding (", z.mics_shard_size,
                     ") shards the optimizer state, gradients or parameters: it needs ZeRO stage 1, 2 or 3; ", stage));
  }
  if (z.mics_hierarchical_params_gather && z.stage != 3) {
    Error(Written("zero_optimization.mics_hierarchical_params_gather"),
          absl::StrCat("the hierarchical gather is how stage 3 all-gathers its parameter shards: it needs ZeRO "
                       "stage 3 (stages 1 and 2 gather the updated parameters once per step); ",
                       stage));
  }
  for (const auto& [on, key] : {std::pair<bool, const char*>{z.quantized_weights, "zero_quantized_weights"},
                                {z.quantized_nontrainable_weights, "zero_quantized_nontrainable_weights"}}) {
    if (on && z.stage != 3) {
      Error(Written(absl::StrCat("zero_optimization.", key)),
            absl::StrCat("quantized weights (ZeRO++ qwZ) are how stage 3 all-gathers its parameter shards: they need "
                         "ZeRO stage 3 (stages 1 and 2 gather the updated parameters once per step, exactly); ",
                         stage));
    }
  }
  config_.zero.loco = IsExplicit("zero_optimization.zeropp_loco_param.err_beta") ||
                      IsExplicit("zero_optimization.zeropp_loco_param.reset_T");
  if (z.quantized_gradients && z.stage != 3) {
    Error(Written("zero_optimization.zero_quantized_gradients"),
          absl::StrCat("quantized gradients (ZeRO++ qgZ) are how stage 3 reduce-scatters its gradient buckets: they "
                       "need ZeRO stage 3 (as in DeepSpeed); ",
                       stage));
  }
  if (z.quantized_gradients_bits != 8 && z.quantized_gradients_bits != 4 &&
      !Failed("zero_optimization.zero_quantized_gradients_bits")) {
    Error(Written("zero_optimization.zero_quantized_gradients_bits"),
          absl::StrCat(z.quantized_gradients_bits, " is not a block width qgZ has: use 8 or 4"));
  }
  if (z.quantized_gradients_bits != 8 && !z.quantized_gradients &&
      !Failed("zero_optimization.zero_quantized_gradients_bits")) {
    Error(Written("zero_optimization.zero_quantized_gradients_bits"),
          "sets the bits of qgZ's gradient blocks, which are off: set zero_quantized_gradients true (or drop it)");
  }
  if (config_.zero.loco && !z.quantized_gradients) {
    Error(Written("zero_optimization.zeropp_loco_param"),
          "LoCo feeds back qgZ's rounding: it needs zero_quantized_gradients true (or drop zeropp_loco_param)");
  }
  if (z.hpz_partition_size > 1) {
    if (z.stage != 3) {
      Error(Written("zero_optimization.zero_hpz_partition_size"),
            absl::StrCat("hpZ (", z.hpz_partition_size,
                         ") keeps secondary shards of stage 3's gathered parameters: it needs ZeRO stage 3; ", stage));
    } else if (z.mics_hierarchical_params_gather) {
      Error(Written("zero_optimization.zero_hpz_partition_size"),
            "hpZ and mics_hierarchical_params_gather both reshape stage 3's gathers across hosts; choose one");
    } else if (z.mics_shard_size > 0) {
      Error(Written("zero_optimization.zero_hpz_partition_size"),
            "hpZ and mics_shard_size both keep gathers inside a host; choose one (mics_shard_size also keeps "
            "the reduce-scatter there, hpZ keeps the optimizer state sharded over every rank)");
    } else if (op.device == OffloadDevice::kNvme) {
      Error(Written("zero_optimization.zero_hpz_partition_size"),
            "hpZ with parameter offload to NVMe is not supported: keep the parameter shards in memory "
            "(offload_param.device \"none\" or \"cpu\") or leave zero_hpz_partition_size at 1");
    }
  }
  if (oo.ratio < 1.0) {
    if (z.stage != 3) {
      Error(
          Written("zero_optimization.offload_optimizer.ratio"),
          absl::StrCat("partial offload (ratio ", Num(oo.ratio), " < 1) needs ZeRO stage 3, as in DeepSpeed; ", stage));
    } else if (oo.device == OffloadDevice::kNone) {
      Error(Written("zero_optimization.offload_optimizer.ratio"),
            "a ratio below 1 needs an offload device: set offload_optimizer.device to \"cpu\" or \"nvme\"");
    }
  }
}

void Parser::CheckOptimizer() {
  const OptimizerConfig& o = config_.optimizer;
  if (!o.present) return;
  if (o.type == OptimizerType::kAdamW && IsExplicit("optimizer.params.adam_w_mode") && !o.adam_w_mode) {
    Error(Written("optimizer.params.adam_w_mode"),
          "false contradicts type \"AdamW\", which always decouples weight decay; for L2 regularization use "
          "type \"Adam\" with adam_w_mode false");
  }
  if (o.type == OptimizerType::kSGD && o.nesterov && (o.momentum <= 0 || o.dampening != 0)) {
    Error(Written("optimizer.params.nesterov"),
          absl::StrCat("Nesterov momentum needs momentum > 0 and dampening 0 (got momentum ", Num(o.momentum),
                       ", dampening ", Num(o.dampening), ")"));
  }
}

void Parser::CheckScheduler() {
  const SchedulerConfig& s = config_.scheduler;
  if (!scheduler_type_) return;
  const bool has_total = s.type == SchedulerType::kWarmupDecayLR || s.type == SchedulerType::kWarmupCosineLR;
  if (has_total && IsExplicit("scheduler.params.total_num_steps") && !Failed("scheduler.params.warmup_num_steps") &&
      s.total_num_steps < s.warmup_num_steps) {
    Error(Written("scheduler.params.total_num_steps"),
          absl::StrCat(s.total_num_steps, " is below warmup_num_steps ", s.warmup_num_steps,
                       ": the schedule would end before its warm-up; raise total_num_steps or lower "
                       "warmup_num_steps"));
  }
  if (s.type == SchedulerType::kOneCycle) {
    if (IsExplicit("scheduler.params.cycle_min_lr") && IsExplicit("scheduler.params.cycle_max_lr") &&
        s.cycle_min_lr > s.cycle_max_lr) {
      Error(Written("scheduler.params.cycle_max_lr"),
            absl::StrCat(Num(s.cycle_max_lr), " is below cycle_min_lr ", Num(s.cycle_min_lr),
                         "; the cycle rises from cycle_min_lr to cycle_max_lr"));
    }
    if (s.cycle_momentum && s.cycle_min_mom > s.cycle_max_mom) {
      Error(Written("scheduler.params.cycle_min_mom"),
            absl::StrCat(Num(s.cycle_min_mom), " is above cycle_max_mom ", Num(s.cycle_max_mom),
                         "; momentum falls from cycle_max_mom to cycle_min_mom"));
    }
  }
}

void Parser::CheckActivationCheckpointing() {
  const ActivationCheckpointingConfig& a = config_.activation_checkpointing;
  if (a.cpu_checkpointing && !a.partition_activations) {
    Error(Written("activation_checkpointing.cpu_checkpointing"),
          "cpu_checkpointing moves the partitioned activations to the CPU, so it needs partition_activations: "
          "true (DeepSpeed silently ignores it otherwise)");
  }
  if (a.contiguous_memory_optimization && !a.partition_activations) {
    Error(Written("activation_checkpointing.contiguous_memory_optimization"),
          "contiguous_memory_optimization packs partitioned activations, so it needs partition_activations: "
          "true (as in DeepSpeed)");
  }
}

void Parser::ResolveBatchSizes() {
  static const char* kKeys[] = {"train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps"};
  for (const char* key : kKeys) {
    if (Failed(key)) return;  // the equation would only repeat that error
  }
  std::optional<int64_t> values[3];
  bool is_auto[3] = {false, false, false};
  std::string auto_written[3];
  bool any_auto = false;
  for (int i = 0; i < 3; ++i) {
    auto given = batch_written_.find(kKeys[i]);
    if (given != batch_written_.end()) values[i] = given->second;
    for (const AutoKey& a : autos_) {
      if (a.spec->path != kKeys[i]) continue;
      is_auto[i] = true;
      auto_written[i] = a.written;
      if (std::optional<std::string> text = AutoValueText(*a.spec, a.written)) {
        Json parsed = Json::parse(*text, nullptr, /*allow_exceptions=*/false);
        absl::StatusOr<Json> checked = CheckValue(*a.spec, parsed.is_discarded() ? Json(*text) : parsed);
        if (!checked.ok()) {
          Error(a.written,
                absl::StrCat("\"auto\" was given the value ", *text, ", which ", checked.status().message()));
          return;
        }
        values[i] = checked->get<int64_t>();
        is_auto[i] = false;
        Note(a.written, absl::StrCat("\"auto\" -> ", *values[i], " (given)"));
      } else {
        any_auto = true;
      }
    }
  }
  // Hugging Face templates leave every batch key "auto"; with nothing to
  // derive from, the micro-batch is the Trainer's default
  // per_device_train_batch_size (and accumulation its default 1, below).
  const TrainerAuto& micro_rule = *Schema::Get().FindPath(kKeys[1])->trainer_auto;
  bool micro_fallback = false;
  if (any_auto && !values[0] && !values[1]) {
    values[1] = micro_rule.default_value.get<int64_t>();
    micro_fallback = true;
  }
  BatchConfig& b = config_.batch;
  b.train_batch_size = values[0];
  b.train_micro_batch_size_per_gpu = values[1];
  b.gradient_accumulation_steps = values[2];
  absl::Status status = ResolveBatch(b, options_.world_size);
  if (!status.ok()) {
    // Name train_batch_size unless the file only has the other keys.
    std::string path = kKeys[0];
    for (const char* key : kKeys) {
      if (doc_.key_order.count(path) == 0 && doc_.key_order.count(key)) path = key;
    }
    Error(path, std::string(status.message()));
    return;
  }
  // The fallback stays in train_micro_batch_size_per_gpu, as if given: it
  // does not depend on the world size, and Engine::Create re-resolves the
  // batch from these fields for its own world, which needs a micro-batch.
  const std::string equation = absl::StrCat("train_batch_size ", b.train_batch, " = micro ", b.micro_batch, " * gas ",
                                            b.accumulation_steps, " * world ", b.world_size);
  const int64_t resolved[3] = {b.train_batch, b.micro_batch, b.accumulation_steps};
  for (int i = 0; i < 3; ++i) {
    if (!is_auto[i]) continue;
    std::string why = equation;
    if (i == 1 && micro_fallback) {
      why = absl::StrCat(
          "nothing to derive it from; pass --auto train_micro_batch_size_per_gpu=N to choose (zt train: "
          "--micro-batch); ",
          resolved[i], " is the Hugging Face Trainer's default ", micro_rule.argument, "; ", equation);
    }
    Note(auto_written[i], absl::StrCat("\"auto\" -> ", resolved[i], " (", why, ")"));
  }
}

}  // namespace zt::config_internal
