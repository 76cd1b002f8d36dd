// Choosing the next token from a model's logits, as Hugging Face's
// generate() does with do_sample: greedy at temperature 0 (the first largest
// logit, llama2.c run.c's argmax), else softmax(logits / temperature) cut to
// the top_k most likely tokens and then to the smallest set whose
// probability reaches top_p (nucleus sampling), drawn with a seeded PRNG
// (data/prng.h): the same seed gives the same tokens on every machine.
// No LibTorch.
//
//   auto sampler = zt::generate::Sampler::Create({.temperature = 0.8, .top_k = 40, .seed = 1});
//   int32_t next = sampler->Next(logits);   // logits: one position's, [vocab]
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "data/prng.h"

namespace zt::generate {

struct SamplingOptions {
  double temperature = 0.0;  // 0: greedy
  int64_t top_k = 0;         // 0: every token
  double top_p = 1.0;        // 1: every token
  uint64_t seed = 0;
};

class Sampler {
 public:
  // InvalidArgument naming the option: a negative or non-finite
  // temperature, a negative top_k, top_p outside (0, 1].
  static absl::StatusOr<Sampler> Create(const SamplingOptions& options);

  // The next token for one position's logits (at least one finite).
  int32_t Next(absl::Span<const float> logits);
  bool greedy() const { return options_.temperature == 0.0; }

 private:
  explicit Sampler(const SamplingOptions& options) : options_(options), rng_(options.seed) {}
  SamplingOptions options_;
  data::Xoshiro256 rng_;
  std::vector<int32_t> order_;  // scratch: token ids by probability
  std::vector<double> probs_;
};

// The index of the first largest value (run.c's argmax).
int32_t Argmax(absl::Span<const float> logits);

}  // namespace zt::generate
