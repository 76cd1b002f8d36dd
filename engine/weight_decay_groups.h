// Hugging Face Trainer's optimizer param groups: weight decay for every
// trainable parameter except biases and normalization weights, which get
// none (Trainer.get_decay_parameter_names and create_optimizer).
//
//   options.param_groups = zt::WeightDecayGroups(*model, config.optimizer.weight_decay);
//
// A parameter gets no decay when the module that holds it is a
// torch::nn::LayerNorm, or when its full name, lower-cased, contains
// "bias", "layernorm" or "rmsnorm", or has "norm" or "_norm" as (the end
// of) one of its dotted parts ("model.norm.weight", "final_norm.weight").
// That reaches LLaMA's RMSNorm ("input_layernorm", "norm"), GPT-2's ln_1 /
// ln_2 / ln_f (LayerNorm modules) and BERT's "LayerNorm". Frozen
// parameters are left out. Groups, in Trainer's order: "decay" (weight
// decay `weight_decay`) and "no_decay" (0.0); a group that would be empty
// is left out.
#pragma once

#include <torch/nn/module.h>

#include <string>
#include <vector>

#include "config/param_groups.h"

namespace zt {

std::vector<ParamGroupOptions> WeightDecayGroups(torch::nn::Module& module, double weight_decay);

// The name rule alone (no module types): true where Trainer's patterns
// exclude `name` from weight decay.
bool NoDecayByName(const std::string& name);

}  // namespace zt
