// Implementation of models/catalog/hf_config.h.
#include "models/catalog/hf_config.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iterator>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "util/json_reader.h"
#include "util/status.h"

namespace zt::models {
namespace {

using Json = nlohmann::json;

// Reads config.json keys with the checks and errors of one file.
class Reader {
 public:
  Reader(const Json& j, std::string where) : j_(j), where_(std::move(where)) {}

  absl::Status Error(const std::string& key, const std::string& what) const {
    return absl::InvalidArgumentError(absl::StrCat(where_, ": ", key, ": ", what));
  }
  bool Has(const char* key) const { return j_.contains(key) && !j_[key].is_null(); }

  absl::StatusOr<int64_t> Int(const char* key) const {
    if (!Has(key)) return Error(key, "missing");
    if (!j_[key].is_number_integer()) return Error(key, absl::StrCat("expected an integer, got ", j_[key].dump()));
    return j_[key].get<int64_t>();
  }
  absl::StatusOr<int64_t> Int(const char* key, int64_t fallback) const { return Has(key) ? Int(key) : fallback; }
  absl::StatusOr<double> Number(const char* key, double fallback) const {
    if (!Has(key)) return fallback;
    if (!j_[key].is_number()) return Error(key, absl::StrCat("expected a number, got ", j_[key].dump()));
    return j_[key].get<double>();
  }
  // A normalization epsilon: added to a variance before its square root,
  // so it must be positive (-1 trained to NaN before) and small.
  absl::StatusOr<double> Epsilon(const char* key, double fallback) const {
    ZT_ASSIGN_OR_RETURN(const double eps, Number(key, fallback));
    if (!(eps > 0.0 && eps < 1.0)) {
      return Error(
          key, absl::StrCat(j_[key].dump(), " is not an epsilon: it must lie in (0, 1) (typically ", fallback, ")"));
    }
    return eps;
  }
  absl::StatusOr<bool> Bool(const char* key, bool fallback) const {
    if (!Has(key)) return fallback;
    if (!j_[key].is_boolean()) return Error(key, absl::StrCat("expected true or false, got ", j_[key].dump()));
    return j_[key].get<bool>();
  }
  const Json& json() const { return j_; }
  const std::string& where() const { return where_; }
  // The key must be absent, null, or `want`.
  absl::Status Expect(const char* key, const Json& want, const std::string& why) const {
    if (!Has(key) || j_[key] == want) return absl::OkStatus();
    return Error(key, absl::StrCat(j_[key].dump(), " is not supported: ", why));
  }

 private:
  const Json& j_;
  std::string where_;
};

absl::StatusOr<HfArchitecture> Gpt2(const Reader& r) {
  Gpt2Config c;
  ZT_ASSIGN_OR_RETURN(c.n_layer, r.Int("n_layer"));
  ZT_ASSIGN_OR_RETURN(c.n_embd, r.Int("n_embd"));
  ZT_ASSIGN_OR_RETURN(c.n_head, r.Int("n_head"));
  ZT_ASSIGN_OR_RETURN(c.n_positions, r.Int("n_positions"));
  ZT_ASSIGN_OR_RETURN(c.vocab_size, r.Int("vocab_size"));
  ZT_ASSIGN_OR_RETURN(c.layer_norm_epsilon, r.Epsilon("layer_norm_epsilon", 1e-5));
  ZT_ASSIGN_OR_RETURN(c.initializer_range, r.Number("initializer_range", 0.02));
  ZT_ASSIGN_OR_RETURN(const double dropout, r.Number("resid_pdrop", 0.1));
  c.dropout_percent = static_cast<int64_t>(std::lround(dropout * 100));
  for (const char* key : {"embd_pdrop", "attn_pdrop"}) {
    ZT_ASSIGN_OR_RETURN(const double p, r.Number(key, 0.1));
    if (std::lround(p * 100) != c.dropout_percent) {
      return r.Error(key, "differs from resid_pdrop; the built-in GPT-2 uses one dropout rate for all three");
    }
  }
  if (r.Has("n_inner")) {
    ZT_ASSIGN_OR_RETURN(const int64_t inner, r.Int("n_inner"));
    if (inner != 4 * c.n_embd) return r.Error("n_inner", "only 4 * n_embd (or null) is supported");
  }
  ZT_RETURN_IF_ERROR(r.Expect("activation_function", "gelu_new", "the built-in GPT-2 computes gelu_new"));
  ZT_RETURN_IF_ERROR(r.Expect("tie_word_embeddings", true, "GPT-2's head is tied to wte"));
  ZT_RETURN_IF_ERROR(r.Expect("scale_attn_weights", true, "attention is scaled by 1/sqrt(head_dim)"));
  ZT_RETURN_IF_ERROR(r.Expect("scale_attn_by_inverse_layer_idx", false, "not computed"));
  ZT_RETURN_IF_ERROR(r.Expect("reorder_and_upcast_attn", false, "not computed"));
  ZT_RETURN_IF_ERROR(r.Expect("add_cross_attention", false, "decoder-only"));
  return HfArchitecture(c);
}

// rope_scaling: null, {"rope_type" (or the older "type"): "linear",
// "factor"}, or {"rope_type": "llama3", "factor", "low_freq_factor",
// "high_freq_factor", "original_max_position_embeddings"}. Other types
// (dynamic, yarn, longrope) are refused by name.
absl::StatusOr<RopeScaling> RopeScalingOf(const Reader& top) {
  RopeScaling s;
  if (!top.Has("rope_scaling")) return s;
  const Json& j = top.json()["rope_scaling"];
  if (!j.is_object()) return top.Error("rope_scaling", absl::StrCat("expected an object or null, got ", j.dump()));
  const Reader r(j, top.where() + ": rope_scaling");
  const char* type_key = j.contains("rope_type") ? "rope_type" : "type";
  if (!j.contains(type_key) || !j[type_key].is_string()) return r.Error("rope_type", "missing");
  const std::string type = j[type_key].get<std::string>();
  ZT_ASSIGN_OR_RETURN(s.factor, r.Number("factor", 0.0));
  if (type == "default") return RopeScaling{};
  if (!(s.factor >= 1.0)) return r.Error("factor", absl::StrCat(s.factor, ": expected a number >= 1"));
  for (const char* ignored : {"attention_factor", "beta_fast", "beta_slow", "short_factor", "long_factor"}) {
    if (r.Has(ignored)) return r.Error(ignored, absl::StrCat("not computed for rope_type '", type, "'"));
  }
  if (type == "linear") {
    s.type = RopeScaling::Type::kLinear;
    return s;
  }
  if (type == "llama3") {
    s.type = RopeScaling::Type::kLlama3;
    ZT_ASSIGN_OR_RETURN(s.low_freq_factor, r.Number("low_freq_factor", 1.0));
    ZT_ASSIGN_OR_RETURN(s.high_freq_factor, r.Number("high_freq_factor", 4.0));
    ZT_ASSIGN_OR_RETURN(s.original_max_positions, r.Int("original_max_position_embeddings"));
    if (!(s.high_freq_factor > s.low_freq_factor) || !(s.low_freq_factor > 0) || s.original_max_positions < 1) {
      return r.Error("low_freq_factor",
                     "expected 0 < low_freq_factor < high_freq_factor and a positive "
                     "original_max_position_embeddings");
    }
    return s;
  }
  return r.Error(type_key, absl::StrCat("'", type, "' is not computed (linear and llama3 are)"));
}

absl::StatusOr<HfArchitecture> LlamaFamily(const Reader& r, const std::string& type) {
  LlamaConfig c;
  c.model_type = type;
  ZT_ASSIGN_OR_RETURN(c.n_layer, r.Int("num_hidden_layers"));
  ZT_ASSIGN_OR_RETURN(c.n_embd, r.Int("hidden_size"));
  ZT_ASSIGN_OR_RETURN(c.n_head, r.Int("num_attention_heads"));
  ZT_ASSIGN_OR_RETURN(c.n_kv_head, r.Int("num_key_value_heads", c.n_head));
  ZT_ASSIGN_OR_RETURN(c.intermediate, r.Int("intermediate_size"));
  ZT_ASSIGN_OR_RETURN(c.max_positions, r.Int("max_position_embeddings"));
  ZT_ASSIGN_OR_RETURN(c.vocab_size, r.Int("vocab_size"));
  ZT_ASSIGN_OR_RETURN(c.rms_norm_eps, r.Epsilon("rms_norm_eps", 1e-6));
  ZT_ASSIGN_OR_RETURN(c.rope_theta, r.Number("rope_theta", 10000.0));
  ZT_ASSIGN_OR_RETURN(c.initializer_range, r.Number("initializer_range", 0.02));
  ZT_ASSIGN_OR_RETURN(c.tie_word_embeddings, r.Bool("tie_word_embeddings", false));
  c.qkv_bias = type == "qwen2";
  ZT_RETURN_IF_ERROR(r.Expect("hidden_act", "silu", "the built-in MLP computes SiLU (SwiGLU)"));
  ZT_ASSIGN_OR_RETURN(c.rope_scaling, RopeScalingOf(r));
  ZT_RETURN_IF_ERROR(r.Expect("attention_bias", false, "only Qwen2's q/k/v biases are computed"));
  ZT_RETURN_IF_ERROR(r.Expect("mlp_bias", false, "MLP biases are not computed"));
  ZT_RETURN_IF_ERROR(r.Expect("pretraining_tp", 1, "tensor-parallel pretraining splits are not computed"));
  if (r.Has("head_dim")) {
    ZT_ASSIGN_OR_RETURN(const int64_t head_dim, r.Int("head_dim"));
    if (c.n_head > 0 && head_dim * c.n_head != c.n_embd) {
      return r.Error("head_dim", "only hidden_size / num_attention_heads is supported");
    }
  }
  // A sliding window: Mistral always, Qwen2 only with use_sliding_window.
  ZT_ASSIGN_OR_RETURN(const bool sliding, r.Bool("use_sliding_window", type == "mistral"));
  if (sliding && r.Has("sliding_window")) {
    ZT_ASSIGN_OR_RETURN(const int64_t window, r.Int("sliding_window"));
    if (window > 0 && window < c.max_positions) c.max_positions = window;
  }
  return HfArchitecture(c);
}

// BERT: BertConfig's keys. The encoder is single-sentence, absolute-position,
// not a decoder, and its head single-label classification; anything else is
// refused by key.
absl::StatusOr<HfArchitecture> Bert(const Reader& r) {
  BertConfig c;
  const Json& j = r.json();
  if (j.contains("architectures") && !j["architectures"].is_null()) {
    if (!j["architectures"].is_array()) return r.Error("architectures", "expected a list of class names");
    for (const Json& a : j["architectures"]) {
      static const char* const kKnown[] = {"BertForSequenceClassification", "BertModel", "BertForMaskedLM",
                                           "BertForPreTraining"};
      const bool known =
          a.is_string() && std::find(std::begin(kKnown), std::end(kKnown), a.get<std::string>()) != std::end(kKnown);
      if (!known) {
        return r.Error("architectures", absl::StrCat(a.dump(),
                                                     " is not supported: the built-in BERT is "
                                                     "BertForSequenceClassification (BertModel, "
                                                     "BertForMaskedLM and BertForPreTraining "
                                                     "give its encoder)"));
      }
    }
  }
  ZT_ASSIGN_OR_RETURN(c.n_layer, r.Int("num_hidden_layers"));
  ZT_ASSIGN_OR_RETURN(c.n_embd, r.Int("hidden_size"));
  ZT_ASSIGN_OR_RETURN(c.n_head, r.Int("num_attention_heads"));
  ZT_ASSIGN_OR_RETURN(c.intermediate, r.Int("intermediate_size"));
  ZT_ASSIGN_OR_RETURN(c.max_positions, r.Int("max_position_embeddings"));
  ZT_ASSIGN_OR_RETURN(c.vocab_size, r.Int("vocab_size"));
  ZT_ASSIGN_OR_RETURN(c.type_vocab_size, r.Int("type_vocab_size", 2));
  ZT_ASSIGN_OR_RETURN(c.pad_token_id, r.Int("pad_token_id", 0));
  ZT_ASSIGN_OR_RETURN(c.layer_norm_eps, r.Epsilon("layer_norm_eps", 1e-12));
  ZT_ASSIGN_OR_RETURN(c.initializer_range, r.Number("initializer_range", 0.02));
  ZT_ASSIGN_OR_RETURN(const double hidden, r.Number("hidden_dropout_prob", 0.1));
  c.dropout_percent = static_cast<int64_t>(std::lround(hidden * 100));
  ZT_ASSIGN_OR_RETURN(const double attention, r.Number("attention_probs_dropout_prob", 0.1));
  if (std::lround(attention * 100) != c.dropout_percent) {
    return r.Error("attention_probs_dropout_prob",
                   "differs from hidden_dropout_prob; the built-in BERT uses one dropout rate for both");
  }
  if (r.Has("classifier_dropout")) {
    ZT_ASSIGN_OR_RETURN(c.classifier_dropout, r.Number("classifier_dropout", 0.0));
    if (!(c.classifier_dropout >= 0 && c.classifier_dropout < 1)) {
      return r.Error("classifier_dropout", "expected a probability in [0, 1) or null");
    }
  }
  ZT_RETURN_IF_ERROR(r.Expect("hidden_act", "gelu", "the built-in BERT computes the exact (erf) GELU"));
  ZT_RETURN_IF_ERROR(r.Expect("position_embedding_type", "absolute",
                              "only absolute position embeddings are computed (no relative_key variants)"));
  ZT_RETURN_IF_ERROR(r.Expect("is_decoder", false, "the built-in BERT is an encoder"));
  ZT_RETURN_IF_ERROR(r.Expect("add_cross_attention", false, "the built-in BERT is an encoder"));
  ZT_RETURN_IF_ERROR(r.Expect("problem_type", "single_label_classification",
                              "only single-label classification is trained (no regression, no multi-label)"));
  // id2label's names (keys "0".."n-1"), else num_labels, else HF's default 2.
  if (r.Has("id2label")) {
    const Json& labels = j["id2label"];
    if (!labels.is_object() || labels.empty()) {
      return r.Error("id2label", "expected an object of label names by id (\"0\": \"NEGATIVE\", ...)");
    }
    c.labels.assign(labels.size(), std::string());
    for (const auto& [key, name] : labels.items()) {
      size_t used = 0;
      int64_t id = -1;
      try {
        id = std::stoll(key, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used != key.size() || id < 0 || id >= static_cast<int64_t>(labels.size()) || !name.is_string()) {
        return r.Error("id2label",
                       absl::StrCat("entry \"", key, "\": ", name.dump(), " is not supported: expected ids 0..",
                                    labels.size() - 1, " with string names"));
      }
      c.labels[static_cast<size_t>(id)] = name.get<std::string>();
    }
    c.num_labels = static_cast<int64_t>(c.labels.size());
  }
  if (r.Has("num_labels")) {
    ZT_ASSIGN_OR_RETURN(const int64_t n, r.Int("num_labels"));
    if (!c.labels.empty() && n != c.num_labels) {
      return r.Error("num_labels", absl::StrCat(n, " differs from id2label's ", c.num_labels, " labels"));
    }
    c.num_labels = n;
  }
  if (c.num_labels < 2) {
    return r.Error(r.Has("id2label") ? "id2label" : "num_labels",
                   absl::StrCat(c.num_labels,
                                " label(s): single-label classification needs at least 2 "
                                "(one label is regression, which is not trained)"));
  }
  return HfArchitecture(c);
}

}  // namespace

absl::StatusOr<HfArchitecture> ArchitectureFromHfConfig(const std::string& text, const std::string& where) {
  // Untrusted text: bounded, duplicate keys refused (a config.json with
  // two "n_layer" would otherwise build whichever nlohmann kept).
  auto parsed = ReadJsonText(text, where);
  if (!parsed.ok()) return absl::InvalidArgumentError(parsed.status().message());
  const Json j(*parsed);
  if (!j.is_object()) return absl::InvalidArgumentError(absl::StrCat(where, ": not a JSON object"));
  const Reader r(j, where);
  if (!j.contains("model_type") || !j["model_type"].is_string()) {
    return r.Error("model_type", "missing: this is not a transformers config.json");
  }
  const std::string type = j["model_type"].get<std::string>();
  if (type == "gpt2") return Gpt2(r);
  if (type == "llama" || type == "mistral" || type == "qwen2") return LlamaFamily(r, type);
  if (type == "bert") return Bert(r);
  return r.Error("model_type",
                 absl::StrCat("'", type, "' has no built-in architecture (gpt2, llama, mistral, qwen2, bert)"));
}

std::string HfConfigPath(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    const fs::path p = fs::path(path) / "config.json";
    return fs::is_regular_file(p, ec) ? p.string() : std::string();
  }
  return fs::path(path).filename() == "config.json" && fs::is_regular_file(path, ec) ? path : std::string();
}

}  // namespace zt::models
