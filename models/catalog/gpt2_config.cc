// Implementation of models/catalog/gpt2_config.h.
#include "models/catalog/gpt2_config.h"

#include "absl/strings/str_cat.h"
#include "models/catalog/dimension_checks.h"
#include "util/status.h"

namespace zt::models {

absl::Status ValidateGpt2Config(const std::string& name, const Gpt2Config& c) {
  ZT_RETURN_IF_ERROR(CheckDimensionRanges(
      name, {DimensionRange{"n_layer", c.n_layer, 1 << 12}, DimensionRange{"n_embd", c.n_embd, 1 << 17},
             DimensionRange{"n_head", c.n_head, 1 << 12}, DimensionRange{"seq_len", c.n_positions, 1 << 20},
             DimensionRange{"vocab", c.vocab_size, 1 << 24}}));
  ZT_RETURN_IF_ERROR(CheckHeadsDivideWidth(name, c.n_embd, c.n_head));
  ZT_RETURN_IF_ERROR(CheckDropoutPercent(name, c.dropout_percent));
  return absl::OkStatus();
}

int64_t Gpt2NumParams(const Gpt2Config& c) {
  const int64_t d = c.n_embd;
  // ln_1, ln_2: 4d; c_attn: 3d^2 + 3d; attn.c_proj: d^2 + d; c_fc: 4d^2 + 4d; mlp.c_proj: 4d^2 + d.
  const int64_t block = 12 * d * d + 13 * d;
  return c.vocab_size * d + c.n_positions * d + c.n_layer * block + 2 * d;
}

}  // namespace zt::models
