// The model `zt generate` runs, from whatever a user points it at, with
// full weights in memory on one process:
//   * a Hugging Face folder, or a zt train export (config.json beside
//     model.safetensors, shards + index, or a .safetensors file);
//   * a llama2.c model file (stories260K.bin: ckpt/format/llama2c.h);
//   * a training checkpoint at any ZeRO stage and world size (the save
//     directory, with `tag`, or one tag's directory): every rank's shards
//     gathered as `zt ckpt consolidate` gathers them, without writing a
//     file; LoRA adapters trained in it merged into their weights. Its
//     architecture is the config.json in the tag's directory (zt train
//     writes one at each save), the save directory or the folder above it,
//     else `arch` (a preset name or a model folder);
//   * a PEFT LoRA adapter folder (adapter_config.json +
//     adapter_model.safetensors, as zt train exports it) on its base model
//     (`base`, else the adapter's base_model_name_or_path), the adapters
//     kept as layers of their own.
// Errors name the path and what is missing or unreadable.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "models/model.h"

namespace zt::generate {

struct ModelSourceOptions {
  std::string tag;   // checkpoint tag ("" : the one `latest` names)
  std::string arch;  // the architecture of a checkpoint without a config.json
  std::string base;  // an adapter's base model (overrides adapter_config.json)
};

struct GenerationModel {
  std::unique_ptr<models::Model> model;  // eval mode, fp32, CPU
  // "llama2.c file stories260K.bin", "checkpoint runs/x/checkpoints/global_step40 (ZeRO stage 3, 2 ranks)", ...
  std::string description;
  // Where a tokenizer may be found when none is given: the model's folder
  // (or the base model's); "" when there is none.
  std::string tokenizer_dir;
  // config.json's eos_token_id (one id or a list); empty when it has none.
  std::vector<int32_t> eos_ids;
};

absl::StatusOr<GenerationModel> OpenGenerationModel(const std::string& path, const ModelSourceOptions& options = {});

}  // namespace zt::generate
