// zt::LoraLinear: torch::nn::Linear that can carry a LoRA adapter. Same
// options, same parameter names (weight, bias), same initialization and
// random draws as torch::nn::Linear, so a model switches to it without
// changing its checkpoints or its weights for a given seed. Without an
// adapter it computes exactly what torch::nn::Linear does.
//
//   struct AttentionImpl : torch::nn::Module {
//     zt::LoraLinear q_proj{nullptr};
//     AttentionImpl() { q_proj = register_module("q_proj", zt::LoraLinear(512, 512)); }
//   };
//   zt::ApplyLora(*model, {.r = 8, .alpha = 16, .targets = {"q_proj"}});
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>

#include "lora/lora_layer.h"

namespace zt {

class LoraLinearImpl : public torch::nn::Module, public LoraLayer {
 public:
  explicit LoraLinearImpl(const torch::nn::LinearOptions& options);
  LoraLinearImpl(int64_t in_features, int64_t out_features)
      : LoraLinearImpl(torch::nn::LinearOptions(in_features, out_features)) {}

  at::Tensor forward(const at::Tensor& input);

  int64_t lora_in_features() const override { return options.in_features(); }
  int64_t lora_out_features() const override { return options.out_features(); }
  bool lora_fan_in_fan_out() const override { return false; }

  torch::nn::LinearOptions options;
  at::Tensor weight, bias;  // weight [out, in]; bias [out] or undefined
};
TORCH_MODULE(LoraLinear);

}  // namespace zt
