// Where a run's LoRA settings travel with its weights:
//  * in a checkpoint, as the "lora" entry of zt train's client state, so
//    `zt ckpt consolidate --lora merge|adapter` knows alpha / r without
//    being told;
//  * beside an exported adapter, as PEFT's adapter_config.json, so PEFT's
//    PeftModel.from_pretrained(base, dir) finds r, alpha, dropout and the
//    target modules.
// LibTorch-free (part of zt_lora_options).
#pragma once

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "ckpt/format/value.h"
#include "config/lora_options.h"

namespace zt {

struct LoraRecord {
  LoraOptions options;
  bool fan_in_fan_out = false;  // adapted weights stored [in, out] (GPT-2's Conv1D)
  // PEFT's task_type: CAUSAL_LM (decoders) or SEQ_CLS (sequence classifiers).
  std::string task_type = "CAUSAL_LM";
};

// {"r": .., "alpha": .., "dropout": .., "targets": [..], "fan_in_fan_out": ..,
//  "modules_to_save": [..], "task_type": ..}; the last two are optional when
// read (records written before them mean [] and CAUSAL_LM).
ckpt::Value LoraRecordToValue(const LoraRecord& record);
// nullopt when `v` is null (no LoRA); DataLoss naming the field when it is
// malformed.
absl::StatusOr<std::optional<LoraRecord>> LoraRecordFromValue(const ckpt::Value* v);

// PEFT's adapter_config.json for `record` (peft_type LORA, the record's
// task_type and modules_to_save, bias none). `base_model`: base_model_name_or_path ("" : null).
std::string PeftAdapterConfigJson(const LoraRecord& record, const std::string& base_model);

// Writes PEFT's adapter_config.json into `dir` (atomically).
absl::Status WritePeftAdapterConfig(const std::string& dir, const LoraRecord& record, const std::string& base_model);

}  // namespace zt
