// Canonical spellings: the enum names used in JSON, and ConfigToJson, which
// writes every resolved value under its canonical key so that parsing the
// output yields an equal Config.
#include "absl/strings/str_split.h"
#include "config/schema.h"

namespace zt {
namespace config_internal {
namespace {

// Whether a row is part of this config's output: optimizer/scheduler keys
// only when the block is in use, per-type keys only for the type in use.
bool Included(const KeySpec& spec, const Config& config) {
  const std::string_view path = spec.path;
  if (path.substr(0, 10) == "optimizer.") {
    if (!config.optimizer.present) return false;
    return spec.applies_to == 0 || (spec.applies_to & TypeBit(config.optimizer.type)) != 0;
  }
  if (path.substr(0, 10) == "scheduler.") {
    if (config.scheduler.type == SchedulerType::kNone) return false;
    return spec.applies_to == 0 || (spec.applies_to & TypeBit(config.scheduler.type)) != 0;
  }
  // LoCo is on exactly when its block is written (DeepSpeed's None/dict).
  constexpr std::string_view kLoco = "zero_optimization.zeropp_loco_param.";
  if (path.substr(0, kLoco.size()) == kLoco) return config.zero.loco;
  return true;
}

}  // namespace
}  // namespace config_internal

std::string ConfigToJson(const Config& config, int indent) {
  using config_internal::Json;
  Json out = Json::object();
  for (const config_internal::KeySpec& spec : config_internal::Schema::Get().keys()) {
    if (spec.support != config_internal::Support::kImplemented || spec.kind == config_internal::Kind::kObject) continue;
    if (std::holds_alternative<std::monostate>(spec.field) || !config_internal::Included(spec, config)) continue;
    Json* node = &out;
    std::vector<std::string> parts = absl::StrSplit(spec.path, '.');
    for (size_t i = 0; i + 1 < parts.size(); ++i) node = &(*node)[parts[i]];
    (*node)[parts.back()] = config_internal::GetField(spec, config);
  }
  // Keys left to run time hold a stand-in: write what the file said.
  for (const std::string& path : config.run_time_autos) {
    Json* node = &out;
    std::vector<std::string> parts = absl::StrSplit(path, '.');
    for (size_t i = 0; i + 1 < parts.size(); ++i) node = &(*node)[parts[i]];
    (*node)[parts.back()] = "auto";
  }
  return out.dump(indent);
}

std::vector<std::pair<std::string, std::string>> ConfigSharedSettings(const Config& config) {
  const auto node_local = [](std::string_view path) {
    for (std::string_view prefix : {"aio.", "tensorboard.", "csv_monitor.", "wandb.", "comet."}) {
      if (path.substr(0, prefix.size()) == prefix) return true;
    }
    for (std::string_view suffix : {".nvme_path"}) {
      if (path.size() >= suffix.size() && path.substr(path.size() - suffix.size()) == suffix) return true;
    }
    return path == "steps_per_print" || path == "wall_clock_breakdown" || path == "memory_breakdown";
  };
  std::vector<std::pair<std::string, std::string>> out;
  for (const config_internal::KeySpec& spec : config_internal::Schema::Get().keys()) {
    if (spec.support != config_internal::Support::kImplemented || spec.kind == config_internal::Kind::kObject) continue;
    if (std::holds_alternative<std::monostate>(spec.field) || !config_internal::Included(spec, config)) continue;
    if (node_local(spec.path)) continue;
    out.emplace_back(spec.path, config_internal::GetField(spec, config).dump());
  }
  out.emplace_back("optimizer", config.optimizer.present ? "present" : "absent");
  for (const std::string& path : config.run_time_autos) out.emplace_back(path, "\"auto\" (left to run time)");
  return out;
}

std::string_view ToString(OffloadDevice v) {
  switch (v) {
    case OffloadDevice::kNone: return "none";
    case OffloadDevice::kCpu: return "cpu";
    case OffloadDevice::kNvme: return "nvme";
  }
  return "?";
}

std::string_view ToString(DType v) {
  switch (v) {
    case DType::kFloat32: return "fp32";
    case DType::kFloat16: return "fp16";
    case DType::kBFloat16: return "bf16";
  }
  return "?";
}

std::string_view ToString(OptimizerType v) {
  switch (v) {
    case OptimizerType::kAdam: return "Adam";
    case OptimizerType::kAdamW: return "AdamW";
    case OptimizerType::kAdagrad: return "Adagrad";
    case OptimizerType::kLion: return "Lion";
    case OptimizerType::kSGD: return "SGD";
  }
  return "?";
}

std::string_view ToString(SchedulerType v) {
  switch (v) {
    case SchedulerType::kNone: return "none";
    case SchedulerType::kWarmupLR: return "WarmupLR";
    case SchedulerType::kWarmupDecayLR: return "WarmupDecayLR";
    case SchedulerType::kWarmupCosineLR: return "WarmupCosineLR";
    case SchedulerType::kOneCycle: return "OneCycle";
    case SchedulerType::kLRRangeTest: return "LRRangeTest";
  }
  return "?";
}

std::string_view ToString(WarmupType v) {
  switch (v) {
    case WarmupType::kLog: return "log";
    case WarmupType::kLinear: return "linear";
  }
  return "?";
}

std::string_view ToString(TagValidation v) {
  switch (v) {
    case TagValidation::kIgnore: return "Ignore";
    case TagValidation::kWarn: return "Warn";
    case TagValidation::kFail: return "Fail";
  }
  return "?";
}

}  // namespace zt
