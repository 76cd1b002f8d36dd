// Implementation of models/catalog/bert_config.h.
#include "models/catalog/bert_config.h"

#include "absl/strings/str_cat.h"
#include "models/catalog/dimension_checks.h"
#include "util/status.h"

namespace zt::models {

absl::Status ValidateBertConfig(const std::string& name, const BertConfig& c) {
  ZT_RETURN_IF_ERROR(CheckDimensionRanges(
      name, {DimensionRange{"n_layer", c.n_layer, 1 << 12}, DimensionRange{"n_embd", c.n_embd, 1 << 17},
             DimensionRange{"n_head", c.n_head, 1 << 12}, DimensionRange{"intermediate", c.intermediate, 1 << 19},
             DimensionRange{"seq_len", c.max_positions, 1 << 20}, DimensionRange{"vocab", c.vocab_size, 1 << 24},
             DimensionRange{"num_labels", c.num_labels, 1 << 20},
             DimensionRange{"type_vocab_size", c.type_vocab_size, 1 << 10}}));
  if (c.num_labels < 2) {
    return ModelError(name,
                      absl::StrCat("num_labels ", c.num_labels,
                                   " is below 2; a classifier needs at least two labels (regression is not trained)"));
  }
  ZT_RETURN_IF_ERROR(CheckHeadsDivideWidth(name, c.n_embd, c.n_head));
  ZT_RETURN_IF_ERROR(CheckDropoutPercent(name, c.dropout_percent));
  if (c.pad_token_id < 0 || c.pad_token_id >= c.vocab_size) {
    return ModelError(name, absl::StrCat("pad_token_id ", c.pad_token_id, " is outside the vocab 0..", c.vocab_size - 1,
                                         "; raise the vocab override"));
  }
  if (!c.labels.empty() && static_cast<int64_t>(c.labels.size()) != c.num_labels) {
    return ModelError(name, absl::StrCat("num_labels ", c.num_labels, " differs from the ", c.labels.size(),
                                         " label names its config gives; leave num_labels as the config says"));
  }
  return absl::OkStatus();
}

int64_t BertNumParams(const BertConfig& c) {
  const int64_t d = c.n_embd, m = c.intermediate;
  const int64_t embeddings = (c.vocab_size + c.max_positions + c.type_vocab_size) * d + 2 * d;
  // query, key, value, attention.output.dense: 4(d^2 + d); two LayerNorms: 4d;
  // intermediate.dense: dm + m; output.dense: md + d.
  const int64_t layer = 4 * d * d + 4 * d + 4 * d + 2 * d * m + m + d;
  const int64_t pooler = d * d + d, classifier = d * c.num_labels + c.num_labels;
  return embeddings + c.n_layer * layer + pooler + classifier;
}

std::vector<std::string> BertLabelNames(const BertConfig& c) {
  if (!c.labels.empty()) return c.labels;
  std::vector<std::string> names;
  for (int64_t i = 0; i < c.num_labels; ++i) names.push_back(absl::StrCat("LABEL_", i));
  return names;
}

}  // namespace zt::models
