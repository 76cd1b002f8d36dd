// Implementation of models/gpt2_config.h.
#include "models/gpt2_config.h"

#include "absl/strings/str_cat.h"

namespace zt::models {

absl::Status ValidateGpt2Config(const std::string& name, const Gpt2Config& c) {
  auto bad = [&name](const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat("model ", name, ": ", what));
  };
  struct Dim {
    const char* key;
    int64_t value, max;
  };
  for (const Dim& d :
       {Dim{"n_layer", c.n_layer, 1 << 12}, Dim{"n_embd", c.n_embd, 1 << 17}, Dim{"n_head", c.n_head, 1 << 12},
        Dim{"seq_len", c.n_positions, 1 << 20}, Dim{"vocab", c.vocab_size, 1 << 24}}) {
    if (d.value < 1 || d.value > d.max) {
      return bad(absl::StrCat(d.key, " ", d.value, " is outside 1..", d.max, "; choose a value in that range"));
    }
  }
  if (c.n_embd % c.n_head != 0) {
    return bad(absl::StrCat("n_embd ", c.n_embd, " is not divisible by n_head ", c.n_head,
                            "; set n_embd to a multiple of n_head (e.g. ", (c.n_embd / c.n_head + 1) * c.n_head,
                            ") or n_head to a divisor of n_embd"));
  }
  if (c.dropout_percent < 0 || c.dropout_percent > 99) {
    return bad(absl::StrCat("dropout ", c.dropout_percent, " is outside 0..99 (percent)"));
  }
  return absl::OkStatus();
}

int64_t Gpt2NumParams(const Gpt2Config& c) {
  const int64_t d = c.n_embd;
  // ln_1, ln_2: 4d; c_attn: 3d^2 + 3d; attn.c_proj: d^2 + d; c_fc: 4d^2 + 4d; mlp.c_proj: 4d^2 + d.
  const int64_t block = 12 * d * d + 13 * d;
  return c.vocab_size * d + c.n_positions * d + c.n_layer * block + 2 * d;
}

}  // namespace zt::models
