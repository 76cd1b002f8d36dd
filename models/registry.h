// Builds the built-in models (models/catalog/catalog.h names and sizes them):
//
//   ModelSpec spec{"gpt2-tiny", {{"n_layer", 4}}, /*seed=*/1};
//   ZT_ASSIGN_OR_RETURN(std::unique_ptr<Model> model, CreateModel(spec));
//   ZT_ASSIGN_OR_RETURN(auto engine, Engine::Create(model->module(), config, pg));
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "models/catalog/catalog.h"
#include "models/model.h"

namespace zt::models {

// Builds the model (float32, CPU), with LoRA adapters when spec.lora.r > 0
// (inside a LoraScope, so it works under zt::ShardedInit). Errors
// (InvalidArgument): bad LoRA options, an unknown name
// (lists the known ones), an override key the model does not have (lists its
// keys), dimensions that do not fit (names the key and what to change).
// Reseeds torch's global generator with spec.seed.
absl::StatusOr<std::unique_ptr<Model>> CreateModel(const ModelSpec& spec);

}  // namespace zt::models
