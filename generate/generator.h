// Text generation from a causal language model (models::Model), one
// sequence at a time: the prompt's forward once, then one token's forward
// per new token over a KV cache (Model::ForwardCached), each token chosen
// by a Sampler (generate/sampling/sampler.h) and the text released through
// a TextStream (whole characters, stop strings). `use_cache = false` runs
// the full forward over the whole sequence for every token instead: the
// reference the cached path is tested against (generate_generator_test).
//
//   GenerateOptions o;
//   o.max_new_tokens = 40;
//   auto r = Generate(*model, prompt_ids, o, DecodeWith(tokenizer.get()),
//                     [](const std::string& s) { std::fputs(s.c_str(), stdout); });
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "generate/sampling/sampler.h"
#include "models/model.h"
#include "tokenizer/hf_tokenizer.h"

namespace zt::generate {

struct GenerateOptions {
  int64_t max_new_tokens = 128;
  SamplingOptions sampling;
  // Generation ends after the text holding one of these (left out of the text).
  std::vector<std::string> stop;
  // Generation ends at one of these tokens (left out of ids and text): the
  // model's EOS, and BOS for llama2.c models as run.c ends there.
  std::vector<int32_t> stop_ids;
  bool use_cache = true;
  // > 0: tokens at and above this id are never chosen (a model whose
  // embedding is padded past its tokenizer's vocabulary).
  int64_t vocab_limit = 0;
  // Called with each chosen token on every rank that generates together
  // (zt train's samples under stage 3, whose forwards are collectives):
  // returns the token all of them continue with (rank 0's, broadcast), so a
  // near-tie decided differently on another CPU cannot desynchronize them.
  // Empty: the chosen token.
  std::function<int32_t(int32_t)> agree;
};

// The text of token ids (special tokens left out), or an error for ids the
// tokenizer does not have.
using Decoder = std::function<absl::StatusOr<std::string>(const std::vector<int32_t>&)>;
// `tokenizer`'s Decode (skipping special tokens); empty for null.
Decoder DecodeWith(const data::HfTokenizer* tokenizer);

struct GenerateResult {
  std::vector<int32_t> ids;  // the new tokens (a stop id left out)
  std::string text;          // their text, after the prompt's (a stop string and what follows it left out)
  // "length" (max_new_tokens), "stop_id", "stop_text", "positions" (the
  // model's max_seq_len reached).
  std::string finish;
  double prompt_seconds = 0;  // the prompt's forward
  double decode_seconds = 0;  // the rest
  int64_t decode_steps = 0;   // forwards after the prompt's
};

// `prompt`: 1 .. max_seq_len ids. `decode` may be empty (ids only: no
// text, no stop strings). `on_text` gets each piece of text as it is
// released (may be empty). InvalidArgument for an empty or too long prompt,
// ids outside the model's vocabulary, bad sampling options, stop strings
// without a decoder.
absl::StatusOr<GenerateResult> Generate(models::Model& model, const std::vector<int32_t>& prompt,
                                        const GenerateOptions& options, const Decoder& decode = {},
                                        const std::function<void(const std::string&)>& on_text = {});

}  // namespace zt::generate
