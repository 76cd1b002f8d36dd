// Implementation of models/catalog/llama_config.h.
#include "models/catalog/llama_config.h"

#include "absl/strings/str_cat.h"
#include "models/catalog/dimension_checks.h"
#include "util/status.h"

namespace zt::models {

absl::Status ValidateLlamaConfig(const std::string& name, const LlamaConfig& c) {
  ZT_RETURN_IF_ERROR(CheckDimensionRanges(
      name, {DimensionRange{"n_layer", c.n_layer, 1 << 12}, DimensionRange{"n_embd", c.n_embd, 1 << 17},
             DimensionRange{"n_head", c.n_head, 1 << 12}, DimensionRange{"n_kv_head", c.n_kv_head, 1 << 12},
             DimensionRange{"intermediate", c.intermediate, 1 << 19},
             DimensionRange{"seq_len", c.max_positions, 1 << 22}, DimensionRange{"vocab", c.vocab_size, 1 << 24}}));
  ZT_RETURN_IF_ERROR(CheckHeadsDivideWidth(name, c.n_embd, c.n_head));
  if ((c.n_embd / c.n_head) % 2 != 0) {
    return ModelError(name, absl::StrCat("head dimension n_embd / n_head = ", c.n_embd / c.n_head,
                                         " is odd; rotary embeddings need an even one: change n_embd or n_head"));
  }
  if (c.n_head % c.n_kv_head != 0) {
    return ModelError(name,
                      absl::StrCat("n_head ", c.n_head, " is not divisible by n_kv_head ", c.n_kv_head,
                                   "; set n_kv_head to a divisor of n_head (1 = multi-query, n_head = multi-head)"));
  }
  return absl::OkStatus();
}

int64_t LlamaNumParams(const LlamaConfig& c) {
  const int64_t d = c.n_embd, kv = c.n_kv_head * (c.n_embd / c.n_head);
  const int64_t bias = c.qkv_bias ? d + 2 * kv : 0;
  const int64_t layer = 2 * d * d + 2 * d * kv + 3 * d * c.intermediate + 2 * d + bias;  // q, o; k, v; mlp; norms
  return (c.tie_word_embeddings ? 1 : 2) * c.vocab_size * d + c.n_layer * layer + d;
}

}  // namespace zt::models
