// The LM head of a model whose output projection is its token embedding
// (tie_word_embeddings): it registers the embedding's own tensor as
// lm_head.weight, so the engine sees one parameter under two names and a
// safetensors export can name the tie.
#pragma once

#include <torch/torch.h>

#include "lora/dense_linear.h"

namespace zt::models {

struct TiedLmHeadImpl : torch::nn::Module {
  explicit TiedLmHeadImpl(const torch::Tensor& tied) { weight = register_parameter("weight", tied); }
  torch::Tensor forward(const torch::Tensor& x) { return DenseLinear(x, weight, {}); }
  torch::Tensor weight;
};
TORCH_MODULE(TiedLmHead);

}  // namespace zt::models
