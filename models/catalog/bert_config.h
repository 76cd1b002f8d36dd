// The dimensions of the built-in BERT (BertForSequenceClassification), their checks and analytic
// parameter count: what the model catalog (models/catalog/catalog.h) resolves and
// sizes without LibTorch; models/bert.h builds the model from them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace zt::models {

struct BertConfig {
  int64_t n_layer = 12;            // num_hidden_layers
  int64_t n_embd = 768;            // hidden_size
  int64_t n_head = 12;             // num_attention_heads
  int64_t intermediate = 3072;     // intermediate_size
  int64_t max_positions = 512;     // max_position_embeddings (override key: seq_len)
  int64_t vocab_size = 30522;      // override key: vocab
  int64_t type_vocab_size = 2;     // token types; only type 0 is used
  int64_t num_labels = 2;          // classes of the head (override key: num_labels)
  int64_t dropout_percent = 0;     // hidden_dropout_prob = attention_probs_dropout_prob, in percent (key: dropout)
  double classifier_dropout = -1;  // before the classifier; < 0: config.json's null, the hidden dropout
  double layer_norm_eps = 1e-12;
  double initializer_range = 0.02;
  int64_t pad_token_id = 0;  // its word-embedding row starts at zero and gets no gradient (padding_idx)
  // config.json's id2label names, by id; empty: LABEL_0, LABEL_1, ...
  // Kept so an export writes back the names it was given.
  std::vector<std::string> labels;
};

// Checks the dimensions; messages name the override key and what to change.
absl::Status ValidateBertConfig(const std::string& name, const BertConfig& c);
// Every parameter of BertForSequenceClassification (HF's num_parameters()).
int64_t BertNumParams(const BertConfig& c);
// The label names: c.labels, or LABEL_i for each of num_labels.
std::vector<std::string> BertLabelNames(const BertConfig& c);

}  // namespace zt::models
