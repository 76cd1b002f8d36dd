// Implementation of models/catalog/catalog.h: the preset table and the override keys
// of each model family.
#include "models/catalog/catalog.h"

#include <functional>
#include <nlohmann/json.hpp>
#include <variant>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "ckpt/format/llama2c.h"
#include "models/catalog/hf_config.h"
#include "util/file_io.h"
#include "util/status.h"

namespace zt::models {
namespace {

struct Preset {
  const char* name;
  ModelConfig config;
};

Gpt2Config Gpt2(int64_t layers, int64_t dim, int64_t heads, int64_t seq, int64_t vocab) {
  Gpt2Config c;
  c.n_layer = layers;
  c.n_embd = dim;
  c.n_head = heads;
  c.n_positions = seq;
  c.vocab_size = vocab;
  return c;
}

LlamaConfig Llama(int64_t layers, int64_t dim, int64_t heads, int64_t kv_heads, int64_t intermediate, int64_t seq,
                  int64_t vocab) {
  LlamaConfig c;
  c.n_layer = layers;
  c.n_embd = dim;
  c.n_head = heads;
  c.n_kv_head = kv_heads;
  c.intermediate = intermediate;
  c.max_positions = seq;
  c.vocab_size = vocab;
  return c;
}

// Google's BERT sizes (vocab 30522, 512 positions, 2 token types), with a
// 2-label classification head.
BertConfig Bert(int64_t layers, int64_t dim, int64_t heads, int64_t intermediate) {
  BertConfig c;
  c.n_layer = layers;
  c.n_embd = dim;
  c.n_head = heads;
  c.intermediate = intermediate;
  return c;
}

const std::vector<Preset>& Presets() {
  static const std::vector<Preset> presets = {
      // Byte-level (vocab 256) sizes for tests and the default job.
      {"gpt2-tiny", Gpt2(2, 64, 4, 128, 256)},
      {"gpt2-mini", Gpt2(4, 128, 4, 128, 256)},
      // OpenAI's GPT-2 sizes (Hugging Face gpt2, gpt2-medium, gpt2-large, gpt2-xl).
      {"gpt2", Gpt2(12, 768, 12, 1024, 50257)},
      {"gpt2-medium", Gpt2(24, 1024, 16, 1024, 50257)},
      {"gpt2-large", Gpt2(36, 1280, 20, 1024, 50257)},
      {"gpt2-xl", Gpt2(48, 1600, 25, 1024, 50257)},
      {"llama-tiny", Llama(2, 64, 4, 2, 172, 128, 256)},
      {"llama-mini", Llama(4, 128, 4, 2, 344, 128, 256)},
      // TinyLlama-1.1B and Llama-2-7B dimensions.
      {"llama-1b", Llama(22, 2048, 32, 4, 5632, 2048, 32000)},
      {"llama-7b", Llama(32, 4096, 32, 32, 11008, 4096, 32000)},
      // google/bert_uncased_L-2_H-128_A-2 (bert-tiny) ... L-8_H-512_A-8
      // (bert-medium), bert-base-uncased, bert-large-uncased.
      {"bert-tiny", Bert(2, 128, 2, 512)},
      {"bert-mini", Bert(4, 256, 4, 1024)},
      {"bert-small", Bert(4, 512, 8, 2048)},
      {"bert-medium", Bert(8, 512, 8, 2048)},
      {"bert-base", Bert(12, 768, 12, 3072)},
      {"bert-large", Bert(24, 1024, 16, 4096)},
      {"mnist-cnn", MnistConfig{}},
  };
  return presets;
}

template <typename C>
using Fields = std::vector<std::pair<const char*, int64_t C::*>>;

const Fields<Gpt2Config>& Gpt2Fields() {
  static const Fields<Gpt2Config> f = {{"n_layer", &Gpt2Config::n_layer},  {"n_embd", &Gpt2Config::n_embd},
                                       {"n_head", &Gpt2Config::n_head},    {"seq_len", &Gpt2Config::n_positions},
                                       {"vocab", &Gpt2Config::vocab_size}, {"dropout", &Gpt2Config::dropout_percent}};
  return f;
}

const Fields<LlamaConfig>& LlamaFields() {
  static const Fields<LlamaConfig> f = {{"n_layer", &LlamaConfig::n_layer},
                                        {"n_embd", &LlamaConfig::n_embd},
                                        {"n_head", &LlamaConfig::n_head},
                                        {"n_kv_head", &LlamaConfig::n_kv_head},
                                        {"intermediate", &LlamaConfig::intermediate},
                                        {"seq_len", &LlamaConfig::max_positions},
                                        {"vocab", &LlamaConfig::vocab_size}};
  return f;
}

const Fields<BertConfig>& BertFields() {
  static const Fields<BertConfig> f = {
      {"n_layer", &BertConfig::n_layer},       {"n_embd", &BertConfig::n_embd},
      {"n_head", &BertConfig::n_head},         {"intermediate", &BertConfig::intermediate},
      {"seq_len", &BertConfig::max_positions}, {"vocab", &BertConfig::vocab_size},
      {"num_labels", &BertConfig::num_labels}, {"dropout", &BertConfig::dropout_percent}};
  return f;
}

const Fields<MnistConfig>& MnistFields() {
  static const Fields<MnistConfig> f;
  return f;
}

template <typename C>
absl::Status ApplyOverrides(const std::string& name, const std::map<std::string, int64_t>& overrides,
                            const Fields<C>& fields, C& config) {
  for (const auto& [key, value] : overrides) {
    bool found = false;
    for (const auto& [field_key, member] : fields) {
      if (key == field_key) {
        config.*member = value;
        found = true;
      }
    }
    if (!found) {
      std::vector<std::string> keys;
      for (const auto& f : fields) keys.emplace_back(f.first);
      return absl::InvalidArgumentError(absl::StrCat("model ", name, ": unknown override '", key, "'; ",
                                                     keys.empty()
                                                         ? std::string("this model takes no overrides")
                                                         : absl::StrCat("valid keys: ", absl::StrJoin(keys, ", "))));
    }
  }
  return absl::OkStatus();
}

// A Hugging Face model folder's config.json (models/catalog/hf_config.h) as a config.
absl::StatusOr<ModelConfig> ConfigFromFolder(const std::string& config_path) {
  ZT_ASSIGN_OR_RETURN(std::string text, ReadSmallFile(config_path));
  ZT_ASSIGN_OR_RETURN(HfArchitecture a, ArchitectureFromHfConfig(text, config_path));
  if (const auto* g = std::get_if<Gpt2Config>(&a)) return ModelConfig(*g);
  if (const auto* b = std::get_if<BertConfig>(&a)) return ModelConfig(*b);
  return ModelConfig(std::get<LlamaConfig>(a));
}

absl::StatusOr<ResolvedModel> Resolve(const ModelSpec& spec) {
  ResolvedModel r;
  r.info.name = spec.name;
  if (const std::string config_path = HfConfigPath(spec.name); !config_path.empty()) {
    ZT_ASSIGN_OR_RETURN(r.config, ConfigFromFolder(config_path));
  } else if (ckpt::LooksLikeLlama2c(spec.name)) {
    // A llama2.c model file: the LLaMA its header describes, as the HF
    // config `zt ckpt convert --to hf` writes for it.
    ZT_ASSIGN_OR_RETURN(const ckpt::Llama2cModel m, ckpt::OpenLlama2c(spec.name));
    ZT_ASSIGN_OR_RETURN(HfArchitecture a, ArchitectureFromHfConfig(ckpt::Llama2cHfConfigJson(m), spec.name));
    r.config = ModelConfig(std::get<LlamaConfig>(a));
  } else {
    const Preset* preset = nullptr;
    for (const Preset& p : Presets()) {
      if (spec.name == p.name) preset = &p;
    }
    if (preset == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown model '", spec.name, "'; known models: ", absl::StrJoin(ModelNames(), ", "),
                       ", a Hugging Face model folder with a config.json, or a llama2.c model file"));
    }
    r.config = preset->config;
  }
  if (auto* g = std::get_if<Gpt2Config>(&r.config)) {
    ZT_RETURN_IF_ERROR(ApplyOverrides(spec.name, spec.overrides, Gpt2Fields(), *g));
    ZT_RETURN_IF_ERROR(ValidateGpt2Config(spec.name, *g));
    r.info.task = Task::kLanguageModel;
    r.info.vocab_size = g->vocab_size;
    r.info.max_seq_len = g->n_positions;
    r.info.num_params = Gpt2NumParams(*g);
  } else if (auto* l = std::get_if<LlamaConfig>(&r.config)) {
    ZT_RETURN_IF_ERROR(ApplyOverrides(spec.name, spec.overrides, LlamaFields(), *l));
    ZT_RETURN_IF_ERROR(ValidateLlamaConfig(spec.name, *l));
    r.info.task = Task::kLanguageModel;
    r.info.vocab_size = l->vocab_size;
    r.info.max_seq_len = l->max_positions;
    r.info.num_params = LlamaNumParams(*l);
  } else if (auto* b = std::get_if<BertConfig>(&r.config)) {
    const int64_t labels = b->num_labels;
    ZT_RETURN_IF_ERROR(ApplyOverrides(spec.name, spec.overrides, BertFields(), *b));
    // A new label count makes a new head: the folder's names no longer fit.
    if (b->num_labels != labels) b->labels.clear();
    ZT_RETURN_IF_ERROR(ValidateBertConfig(spec.name, *b));
    r.info.task = Task::kSequenceClassification;
    r.info.vocab_size = b->vocab_size;
    r.info.max_seq_len = b->max_positions;
    r.info.num_classes = b->num_labels;
    r.info.num_params = BertNumParams(*b);
  } else {
    auto& m = std::get<MnistConfig>(r.config);
    ZT_RETURN_IF_ERROR(ApplyOverrides(spec.name, spec.overrides, MnistFields(), m));
    r.info.task = Task::kImageClassification;
    r.info.num_classes = 10;
    r.info.image_size = 28;
    r.info.num_params = kMnistCnnParams;
  }
  return r;
}

std::string Dims(const ModelConfig& config) {
  if (const auto* g = std::get_if<Gpt2Config>(&config)) {
    return absl::StrFormat("n_layer=%d n_embd=%d n_head=%d seq_len=%d vocab=%d", g->n_layer, g->n_embd, g->n_head,
                           g->n_positions, g->vocab_size);
  }
  if (const auto* l = std::get_if<LlamaConfig>(&config)) {
    return absl::StrFormat("n_layer=%d n_embd=%d n_head=%d n_kv_head=%d intermediate=%d seq_len=%d vocab=%d",
                           l->n_layer, l->n_embd, l->n_head, l->n_kv_head, l->intermediate, l->max_positions,
                           l->vocab_size);
  }
  if (const auto* b = std::get_if<BertConfig>(&config)) {
    return absl::StrFormat("n_layer=%d n_embd=%d n_head=%d intermediate=%d seq_len=%d vocab=%d num_labels=%d",
                           b->n_layer, b->n_embd, b->n_head, b->intermediate, b->max_positions, b->vocab_size,
                           b->num_labels);
  }
  return "conv 32, conv 64, fc 9216x128, 10 classes (28x28 grayscale)";
}

}  // namespace

absl::StatusOr<ResolvedModel> ResolveModel(const ModelSpec& spec) { return Resolve(spec); }

absl::StatusOr<ModelInfo> DescribeModel(const ModelSpec& spec) {
  ZT_ASSIGN_OR_RETURN(ResolvedModel r, Resolve(spec));
  return r.info;
}

absl::StatusOr<LoraOptions> ResolveLora(const ModelSpec& spec) {
  LoraOptions o = spec.lora;
  ZT_RETURN_IF_ERROR(ValidateLoraOptions(o));
  if (!o.enabled()) return o;
  ZT_ASSIGN_OR_RETURN(ResolvedModel r, Resolve(spec));
  if (std::holds_alternative<MnistConfig>(r.config)) {
    return absl::InvalidArgumentError(
        absl::StrCat("model ", spec.name, " has no LoRA-capable layers; LoRA is for the transformers"));
  }
  if (o.targets.empty()) {
    if (std::holds_alternative<Gpt2Config>(r.config)) {
      o.targets = {"c_attn"};
    } else if (std::holds_alternative<BertConfig>(r.config)) {
      o.targets = {"query", "value"};
    } else {
      o.targets = {"q_proj", "v_proj"};
    }
  }
  // PEFT's SEQ_CLS task trains the new classification head in full.
  if (o.modules_to_save.empty() && std::holds_alternative<BertConfig>(r.config)) o.modules_to_save = {"classifier"};
  ZT_RETURN_IF_ERROR(ValidateLoraOptions(o));
  return o;
}

// config.json's rope_scaling for `s` ("null" for plain RoPE).
std::string RopeScalingJson(const RopeScaling& s) {
  switch (s.type) {
    case RopeScaling::Type::kNone: return "null";
    case RopeScaling::Type::kLinear: return absl::StrFormat("{\"rope_type\": \"linear\", \"factor\": %g}", s.factor);
    case RopeScaling::Type::kLlama3:
      return absl::StrFormat(
          "{\"rope_type\": \"llama3\", \"factor\": %g, \"low_freq_factor\": %g, \"high_freq_factor\": %g, "
          "\"original_max_position_embeddings\": %d}",
          s.factor, s.low_freq_factor, s.high_freq_factor, s.original_max_positions);
  }
  return "null";
}

absl::StatusOr<std::string> HfConfigJson(const ModelSpec& spec) {
  ZT_ASSIGN_OR_RETURN(ResolvedModel r, Resolve(spec));
  if (const auto* g = std::get_if<Gpt2Config>(&r.config)) {
    const double p = static_cast<double>(g->dropout_percent) / 100.0;
    return absl::StrFormat(
        "{\n  \"architectures\": [\"GPT2LMHeadModel\"],\n  \"model_type\": \"gpt2\",\n"
        "  \"vocab_size\": %d,\n  \"n_positions\": %d,\n  \"n_embd\": %d,\n  \"n_layer\": %d,\n"
        "  \"n_head\": %d,\n  \"n_inner\": null,\n  \"activation_function\": \"gelu_new\",\n"
        "  \"resid_pdrop\": %g,\n  \"embd_pdrop\": %g,\n  \"attn_pdrop\": %g,\n"
        "  \"layer_norm_epsilon\": %g,\n  \"initializer_range\": %g,\n  \"tie_word_embeddings\": true,\n"
        "  \"torch_dtype\": \"float32\"\n}\n",
        g->vocab_size, g->n_positions, g->n_embd, g->n_layer, g->n_head, p, p, p, g->layer_norm_epsilon,
        g->initializer_range);
  }
  if (const auto* l = std::get_if<LlamaConfig>(&r.config)) {
    // The family's own class and keys: Mistral's window is already folded
    // into max_position_embeddings (models/catalog/hf_config.h), Qwen2's q/k/v
    // biases are its architecture's, LLaMA says it has none.
    const std::string arch = l->model_type == "mistral" ? "MistralForCausalLM"
                             : l->model_type == "qwen2" ? "Qwen2ForCausalLM"
                                                        : "LlamaForCausalLM";
    const std::string family_keys = l->model_type == "mistral" ? "  \"sliding_window\": null,\n"
                                    : l->model_type == "qwen2" ? "  \"use_sliding_window\": false,\n"
                                                               : "  \"attention_bias\": false,\n";
    return absl::StrFormat(
        "{\n  \"architectures\": [\"%s\"],\n  \"model_type\": \"%s\",\n"
        "  \"vocab_size\": %d,\n  \"hidden_size\": %d,\n  \"intermediate_size\": %d,\n"
        "  \"num_hidden_layers\": %d,\n  \"num_attention_heads\": %d,\n  \"num_key_value_heads\": %d,\n"
        "  \"max_position_embeddings\": %d,\n  \"hidden_act\": \"silu\",\n  \"rms_norm_eps\": %g,\n"
        "  \"rope_theta\": %g,\n  \"rope_scaling\": %s,\n%s  \"initializer_range\": %g,\n"
        "  \"tie_word_embeddings\": %s,\n  \"torch_dtype\": \"float32\"\n}\n",
        arch, l->model_type, l->vocab_size, l->n_embd, l->intermediate, l->n_layer, l->n_head, l->n_kv_head,
        l->max_positions, l->rms_norm_eps, l->rope_theta, RopeScalingJson(l->rope_scaling), family_keys,
        l->initializer_range, l->tie_word_embeddings ? "true" : "false");
  }
  if (const auto* b = std::get_if<BertConfig>(&r.config)) {
    // BertForSequenceClassification as transformers writes it; id2label and
    // label2id carry the label names (LABEL_i unless the folder named them).
    const std::vector<std::string> names = BertLabelNames(*b);
    std::vector<std::string> id2label, label2id;
    for (size_t i = 0; i < names.size(); ++i) {
      const std::string quoted = nlohmann::json(names[i]).dump();
      id2label.push_back(absl::StrFormat("    \"%d\": %s", i, quoted));
      label2id.push_back(absl::StrFormat("    %s: %d", quoted, i));
    }
    const double p = static_cast<double>(b->dropout_percent) / 100.0;
    const std::string classifier_dropout =
        b->classifier_dropout >= 0 ? absl::StrFormat("%g", b->classifier_dropout) : std::string("null");
    return absl::StrFormat(
        "{\n  \"architectures\": [\"BertForSequenceClassification\"],\n  \"model_type\": \"bert\",\n"
        "  \"vocab_size\": %d,\n  \"hidden_size\": %d,\n  \"num_hidden_layers\": %d,\n"
        "  \"num_attention_heads\": %d,\n  \"intermediate_size\": %d,\n  \"hidden_act\": \"gelu\",\n"
        "  \"hidden_dropout_prob\": %g,\n  \"attention_probs_dropout_prob\": %g,\n"
        "  \"classifier_dropout\": %s,\n  \"max_position_embeddings\": %d,\n  \"type_vocab_size\": %d,\n"
        "  \"position_embedding_type\": \"absolute\",\n  \"layer_norm_eps\": %g,\n"
        "  \"initializer_range\": %g,\n  \"pad_token_id\": %d,\n  \"is_decoder\": false,\n"
        "  \"add_cross_attention\": false,\n  \"problem_type\": \"single_label_classification\",\n"
        "  \"id2label\": {\n%s\n  },\n  \"label2id\": {\n%s\n  },\n  \"use_cache\": false,\n"
        "  \"torch_dtype\": \"float32\"\n}\n",
        b->vocab_size, b->n_embd, b->n_layer, b->n_head, b->intermediate, p, p, classifier_dropout, b->max_positions,
        b->type_vocab_size, b->layer_norm_eps, b->initializer_range, b->pad_token_id, absl::StrJoin(id2label, ",\n"),
        absl::StrJoin(label2id, ",\n"));
  }
  return std::string();
}

std::vector<std::string> ModelNames() {
  std::vector<std::string> names;
  for (const Preset& p : Presets()) names.emplace_back(p.name);
  return names;
}

std::string ModelHelp() {
  std::string out;
  for (const Preset& p : Presets()) {
    absl::StatusOr<ModelInfo> info = DescribeModel(ModelSpec{p.name, {}, 1});
    const std::string count = info.ok() ? FormatCount(info->num_params) : std::string("?");
    absl::StrAppend(&out, absl::StrFormat("%-12s %8s  %s\n", p.name, count, Dims(p.config)));
  }
  return out;
}

}  // namespace zt::models
