// A layer that can carry a LoRA adapter: y = base(x) + (alpha / r) * B A
// dropout(x), with A [r, in] and B [out, r] registered on the layer as
// lora_A and lora_B (modules holding one `weight`), so the parameters are
// named <layer>.lora_A.weight and <layer>.lora_B.weight as in PEFT's
// adapter files. A starts as torch::nn::Linear's default (Kaiming uniform
// with a = sqrt(5), i.e. U(-1/sqrt(in), 1/sqrt(in)): PEFT's
// init_lora_weights=True), B at zero: the adapted layer starts out
// computing exactly the base layer.
//
// LibTorch modules have no forward hooks, so a layer opts in by deriving
// from LoraLayer and calling AddLoraTerm in its forward: zt::LoraLinear (a
// drop-in for torch::nn::Linear) and the built-in GPT-2's Conv1D do.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include <cstdint>
#include <utility>

#include "config/lora_options.h"

namespace zt {

// One adapter matrix, registered as <layer>.lora_A / lora_B so that its
// parameter is named <layer>.lora_A.weight as in PEFT's files.
struct LoraMatrixImpl : torch::nn::Module {
  explicit LoraMatrixImpl(at::Tensor w) { weight = register_parameter("weight", std::move(w)); }
  at::Tensor weight;
};
TORCH_MODULE(LoraMatrix);

class LoraLayer {
 public:
  virtual ~LoraLayer() = default;

  virtual int64_t lora_in_features() const = 0;
  virtual int64_t lora_out_features() const = 0;
  // True when the base weight is stored [in, out] (GPT-2's Conv1D; PEFT's
  // fan_in_fan_out), false for [out, in] (torch::nn::Linear).
  virtual bool lora_fan_in_fan_out() const = 0;

  bool has_lora() const { return !lora_A.is_empty(); }
  double lora_scaling() const { return scaling_; }

  // Registers lora_A and lora_B on `self` (this layer, as a module) in the
  // dtype of `like` (the base weight). Once per layer. A's values come from
  // a generator seeded with `seed`, not from torch's global one, so adding
  // adapters while a model is built leaves its base weights as they are
  // without LoRA.
  void AddLora(torch::nn::Module& self, const LoraOptions& options, const at::Tensor& like, uint64_t seed = 0);

  LoraMatrix lora_A{nullptr}, lora_B{nullptr};

 protected:
  // base_out + scaling * lora_B(lora_A(dropout(x))); base_out alone without
  // an adapter. `training`: the module's mode (dropout only in training).
  at::Tensor AddLoraTerm(const at::Tensor& x, const at::Tensor& base_out, bool training) const;

 private:
  double scaling_ = 0.0;
  double dropout_ = 0.0;
};

}  // namespace zt
