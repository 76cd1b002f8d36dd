// The dimensions of the built-in GPT-2 (GPT2LMHeadModel), their checks and analytic
// parameter count: what the model catalog (models/catalog/catalog.h) resolves and
// sizes without LibTorch; models/gpt2.h builds the model from them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace zt::models {

struct Gpt2Config {
  int64_t n_layer = 12;
  int64_t n_embd = 768;
  int64_t n_head = 12;
  int64_t n_positions = 1024;   // override key: seq_len
  int64_t vocab_size = 50257;   // override key: vocab
  int64_t dropout_percent = 0;  // embd/attn/resid dropout, in percent (override key: dropout)
  double layer_norm_epsilon = 1e-5;
  double initializer_range = 0.02;
};

// Checks the dimensions; messages name the override key and what to change.
absl::Status ValidateGpt2Config(const std::string& name, const Gpt2Config& c);
// Parameters with the tied head counted once (HF's num_parameters()).
int64_t Gpt2NumParams(const Gpt2Config& c);

}  // namespace zt::models
