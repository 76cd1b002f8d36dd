// zt::GatheredParameters: full parameter values on demand, for code that
// must read or change whole parameters under stage 3 (custom
// initialization, export, debugging), like DeepSpeed's GatheredParameters.
//
//   {
//     zt::GatheredParameters full(*engine, model->lm_head, /*modifier_rank=*/0);
//     if (rank == 0) model->lm_head->weight.normal_(0, 0.02);   // under NoGradGuard
//     full.Release();          // rank 0's values are broadcast into every shard
//   }
//
// Contract:
//  * Collective: every rank creates it with the same parameters and the same
//    modifier rank, in the same order relative to other engine calls, and
//    outside a forward/backward pass.
//  * Inside the scope the parameters hold their full values on every rank.
//    Without a modifier rank changes are discarded; with one, that rank's
//    values are broadcast and written into every rank's shard (and into the
//    optimizer's fp32 master copy) when the scope ends.
//  * Release() ends the scope and throws zt::Error on a communication
//    failure; the destructor calls it when you did not, and logs the error
//    instead of throwing.
//  * Stages 0-2 keep full parameters on every rank: the scope gathers
//    nothing, and a modifier rank's values are broadcast at the end.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include <optional>
#include <vector>

namespace zt {

class Engine;

class GatheredParameters {
 public:
  // Every parameter of the engine's model, frozen ones included.
  explicit GatheredParameters(Engine& engine, std::optional<int> modifier_rank = std::nullopt);
  // The parameters of `module` (part of the engine's model), recursively.
  GatheredParameters(Engine& engine, const torch::nn::Module& module, std::optional<int> modifier_rank = std::nullopt);
  ~GatheredParameters();
  GatheredParameters(const GatheredParameters&) = delete;
  GatheredParameters& operator=(const GatheredParameters&) = delete;

  void Release();

 private:
  void Acquire(const std::vector<at::Tensor>& params);

  Engine* engine_;
  std::optional<int> modifier_rank_;
  std::vector<int> chunks_;
  bool released_ = false;
};

}  // namespace zt
