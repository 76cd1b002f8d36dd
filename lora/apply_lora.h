// Putting LoRA adapters on a model: every LoRA-capable layer (lora/lora_layer.h)
// whose name is one of the targets gets an adapter, the modules to save stay
// trainable, and every other parameter is frozen (requires_grad false), so the engine keeps gradients
// and optimizer state for the adapters only and, at stage 3, shards the
// frozen base like any frozen parameter.
//
// Without construction-time sharding, build the model, then apply:
//   ZT_ASSIGN_OR_RETURN(zt::LoraSummary s, zt::ApplyLora(*model, options));
// Under zt::ShardedInit each unit shards itself as soon as it is built, so
// the adapters must exist by then: build inside a LoraScope, then Finish:
//   zt::LoraScope lora(options);
//   { zt::ShardedInit init(pg, config); model = Model(...); }
//   ZT_ASSIGN_OR_RETURN(zt::LoraSummary s, lora.Finish(*model));
// Contract: on the constructing thread; options validated by the caller
// (ValidateLoraOptions) -- the scope checks them again in Finish.
#pragma once

#include <torch/nn/module.h>

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "absl/status/statusor.h"
#include "config/lora_options.h"
#include "zero/unit.h"

namespace zt {

struct LoraSummary {
  int64_t layers = 0;           // layers given an adapter
  int64_t trainable_numel = 0;  // adapter elements
  int64_t frozen_numel = 0;     // every other parameter element (tied ones once)
  bool fan_in_fan_out = false;  // the adapted layers store weights [in, out] (GPT-2)
};

class LoraScope {
 public:
  explicit LoraScope(LoraOptions options);
  ~LoraScope();
  LoraScope(const LoraScope&) = delete;
  LoraScope& operator=(const LoraScope&) = delete;

  // Adapters for the layers outside every unit built in the scope, the rest
  // frozen, then checks: every target matched at least one layer (the error
  // lists the model's LoRA-capable layer names), adapted layers agree on
  // their weight layout. FailedPrecondition when a unit was sharded at
  // construction outside the scope (its layers cannot take adapters any
  // more). Ends the scope.
  absl::StatusOr<LoraSummary> Finish(torch::nn::Module& model);

 private:
  void Visit(torch::nn::Module& module, bool root);

  LoraOptions options_;
  std::map<std::string, int64_t> matched_;  // target -> layers matched
  std::map<std::string, int64_t> capable_;  // LoRA-capable layer name -> count
  std::set<std::string> saved_;             // path components of the kept parameters (module names matched)
  int64_t layers_ = 0;
  int fan_in_fan_out_ = 0, fan_out_fan_in_ = 0;
  std::string error_;
  std::unique_ptr<UnitConstructionHook> hook_;
};

// What `model` holds now: its adapted layers, adapter and other elements.
LoraSummary SummarizeLora(torch::nn::Module& model);

// LoraScope(options).Finish(model) for a model built without ShardedInit.
absl::StatusOr<LoraSummary> ApplyLora(torch::nn::Module& model, const LoraOptions& options);

}  // namespace zt
