// Implementation of estimate/builtin_models.h. The dimensions come from the
// registry's Hugging Face config (HfConfigJson), so presets and overrides are
// resolved exactly as `zt train` resolves them; the parameter lists restate
// the modules' registration order in models/gpt2.cc, llama.cc, bert.cc and
// mnist_cnn.cc (tests/estimate/engine_validation_test.cc compares them with
// the built modules).
#include "estimate/builtin_models.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "util/status.h"

namespace zt::estimate {
namespace {

absl::StatusOr<int64_t> Key(const nlohmann::json& j, const char* key, const std::string& model) {
  if (!j.contains(key) || !j[key].is_number_integer()) {
    return absl::InternalError(absl::StrCat("model ", model, ": its config has no integer '", key, "'"));
  }
  return j[key].get<int64_t>();
}

void Add(ModelShape& s, std::string name, int64_t numel, int unit) {
  s.params.push_back(ParamShape{std::move(name), numel, unit, true});
}

// A layer that can take a LoRA adapter (zt::LoraLinear, GPT-2's Conv1D):
// its path, sizes, and its last own parameter in ModelShape::params.
struct LoraCapable {
  std::string path;
  int64_t in = 0, out = 0;
  size_t last_param = 0;
};
// A linear layer's weight [out, in] (or [in, out]; same count) and bias.
void Linear(ModelShape& s, std::vector<LoraCapable>* layers, const std::string& path, int64_t in, int64_t out,
            bool bias, int unit) {
  Add(s, path + ".weight", in * out, unit);
  if (bias) Add(s, path + ".bias", out, unit);
  layers->push_back({path, in, out, s.params.size() - 1});
}

// The shape with LoRA: adapters (trainable) after each targeted layer's own
// parameters -- the modules register them there -- and every other
// parameter frozen.
ModelShape WithLora(const ModelShape& base, const std::vector<LoraCapable>& layers, const LoraOptions& o) {
  std::vector<std::vector<ParamShape>> after(base.params.size());
  for (const LoraCapable& l : layers) {
    const std::string name = l.path.substr(l.path.find_last_of('.') + 1);
    if (!IsLoraTarget(o, name)) continue;
    const int unit = base.params[l.last_param].unit;
    after[l.last_param].push_back(ParamShape{l.path + ".lora_A.weight", o.r * l.in, unit, true});
    after[l.last_param].push_back(ParamShape{l.path + ".lora_B.weight", l.out * o.r, unit, true});
  }
  ModelShape s = base;
  s.params.clear();
  for (size_t i = 0; i < base.params.size(); ++i) {
    s.params.push_back(base.params[i]);
    s.params.back().trainable = IsLoraSavedModuleParameter(o, base.params[i].name);
    for (const ParamShape& p : after[i]) s.params.push_back(p);
  }
  return s;
}

ModelShape Gpt2Shape(const TransformerShape& t, int64_t positions, std::vector<LoraCapable>* layers) {
  ModelShape s;
  const int64_t d = t.hidden;
  // Unit 1: the model (its top module is a zt::Unit); 2..: the blocks.
  s.num_units = 2 + static_cast<int>(t.layers);
  s.outer_unit = 1;
  Add(s, "transformer.wte.weight", t.vocab * d, 1);
  Add(s, "transformer.wpe.weight", positions * d, 1);
  for (int64_t i = 0; i < t.layers; ++i) {
    const int unit = 2 + static_cast<int>(i);
    const std::string b = absl::StrCat("transformer.h.", i, ".");
    Add(s, b + "ln_1.weight", d, unit);
    Add(s, b + "ln_1.bias", d, unit);
    Linear(s, layers, b + "attn.c_attn", d, 3 * d, true, unit);
    Linear(s, layers, b + "attn.c_proj", d, d, true, unit);
    Add(s, b + "ln_2.weight", d, unit);
    Add(s, b + "ln_2.bias", d, unit);
    Linear(s, layers, b + "mlp.c_fc", d, 4 * d, true, unit);
    Linear(s, layers, b + "mlp.c_proj", 4 * d, d, true, unit);
    s.sequence.push_back(unit);
  }
  Add(s, "transformer.ln_f.weight", d, 1);
  Add(s, "transformer.ln_f.bias", d, 1);
  // lm_head.weight is transformer.wte.weight (tied): counted once.
  s.transformer = t;
  return s;
}

// The LLaMA family's extras that change which tensors exist.
struct LlamaExtras {
  bool qkv_bias = false;  // Qwen2
  bool tied = false;      // lm_head.weight is model.embed_tokens.weight: counted once
};

ModelShape LlamaShape(const TransformerShape& t, const LlamaExtras& x, std::vector<LoraCapable>* layers) {
  ModelShape s;
  const int64_t d = t.hidden, kv = t.kv_heads * (d / t.heads), m = t.intermediate;
  s.num_units = 2 + static_cast<int>(t.layers);
  s.outer_unit = 1;
  Add(s, "model.embed_tokens.weight", t.vocab * d, 1);
  for (int64_t i = 0; i < t.layers; ++i) {
    const int unit = 2 + static_cast<int>(i);
    const std::string b = absl::StrCat("model.layers.", i, ".");
    // In the modules' registration order: weight, then bias.
    for (const auto& [proj, out] : {std::pair{"q_proj", d}, std::pair{"k_proj", kv}, std::pair{"v_proj", kv}}) {
      Linear(s, layers, absl::StrCat(b, "self_attn.", proj), d, out, x.qkv_bias, unit);
    }
    Linear(s, layers, b + "self_attn.o_proj", d, d, false, unit);
    Linear(s, layers, b + "mlp.gate_proj", d, m, false, unit);
    Linear(s, layers, b + "mlp.up_proj", d, m, false, unit);
    Linear(s, layers, b + "mlp.down_proj", m, d, false, unit);
    Add(s, b + "input_layernorm.weight", d, unit);
    Add(s, b + "post_attention_layernorm.weight", d, unit);
    s.sequence.push_back(unit);
  }
  Add(s, "model.norm.weight", d, 1);
  if (!x.tied) Linear(s, layers, "lm_head", d, t.vocab, false, 1);
  s.transformer = t;
  return s;
}

ModelShape BertShape(const TransformerShape& t, int64_t positions, int64_t token_types,
                     std::vector<LoraCapable>* layers) {
  ModelShape s;
  const int64_t d = t.hidden, m = t.intermediate;
  // Unit 1: BertForSequenceClassification (embeddings, pooler, classifier);
  // 2..: the encoder layers.
  s.num_units = 2 + static_cast<int>(t.layers);
  s.outer_unit = 1;
  Add(s, "bert.embeddings.word_embeddings.weight", t.vocab * d, 1);
  Add(s, "bert.embeddings.position_embeddings.weight", positions * d, 1);
  Add(s, "bert.embeddings.token_type_embeddings.weight", token_types * d, 1);
  Add(s, "bert.embeddings.LayerNorm.weight", d, 1);
  Add(s, "bert.embeddings.LayerNorm.bias", d, 1);
  for (int64_t i = 0; i < t.layers; ++i) {
    const int unit = 2 + static_cast<int>(i);
    const std::string b = absl::StrCat("bert.encoder.layer.", i, ".");
    for (const char* proj : {"query", "key", "value"}) {
      Linear(s, layers, absl::StrCat(b, "attention.self.", proj), d, d, true, unit);
    }
    Linear(s, layers, b + "attention.output.dense", d, d, true, unit);
    Add(s, b + "attention.output.LayerNorm.weight", d, unit);
    Add(s, b + "attention.output.LayerNorm.bias", d, unit);
    Linear(s, layers, b + "intermediate.dense", d, m, true, unit);
    Linear(s, layers, b + "output.dense", m, d, true, unit);
    Add(s, b + "output.LayerNorm.weight", d, unit);
    Add(s, b + "output.LayerNorm.bias", d, unit);
    s.sequence.push_back(unit);
  }
  Linear(s, layers, "bert.pooler.dense", d, d, true, 1);
  Linear(s, layers, "classifier", d, t.classes, true, 1);
  s.transformer = t;
  return s;
}

ModelShape MnistShape() {
  ModelShape s;
  // Four units (conv1, conv2, fc1, fc2); the top module is not a unit.
  s.num_units = 5;
  Add(s, "conv1.weight", 32 * 1 * 3 * 3, 1);
  Add(s, "conv1.bias", 32, 1);
  Add(s, "conv2.weight", 64 * 32 * 3 * 3, 2);
  Add(s, "conv2.bias", 64, 2);
  Add(s, "fc1.weight", 128 * 9216, 3);
  Add(s, "fc1.bias", 128, 3);
  Add(s, "fc2.weight", 10 * 128, 4);
  Add(s, "fc2.bias", 10, 4);
  s.sequence = {1, 2, 3, 4};
  return s;
}

}  // namespace

absl::StatusOr<ModelShape> BuiltinModelShape(const models::ModelSpec& spec) {
  ZT_ASSIGN_OR_RETURN(models::ModelInfo info, models::DescribeModel(spec));
  ZT_ASSIGN_OR_RETURN(std::string text, models::HfConfigJson(spec));
  ZT_ASSIGN_OR_RETURN(const LoraOptions lora, models::ResolveLora(spec));
  std::vector<LoraCapable> layers;
  ModelShape shape;
  if (text.empty()) {
    shape = MnistShape();
  } else {
    const nlohmann::json j = nlohmann::json::parse(text);
    TransformerShape t;
    const std::string type = j.value("model_type", "");
    if (type == "gpt2") {
      t.architecture = Architecture::kGpt2;
      ZT_ASSIGN_OR_RETURN(t.layers, Key(j, "n_layer", spec.name));
      ZT_ASSIGN_OR_RETURN(t.hidden, Key(j, "n_embd", spec.name));
      ZT_ASSIGN_OR_RETURN(t.heads, Key(j, "n_head", spec.name));
      ZT_ASSIGN_OR_RETURN(t.vocab, Key(j, "vocab_size", spec.name));
      ZT_ASSIGN_OR_RETURN(int64_t positions, Key(j, "n_positions", spec.name));
      t.kv_heads = t.heads;
      t.intermediate = 4 * t.hidden;
      shape = Gpt2Shape(t, positions, &layers);
    } else if (type == "llama" || type == "mistral" || type == "qwen2") {
      t.architecture = Architecture::kLlama;
      ZT_ASSIGN_OR_RETURN(t.layers, Key(j, "num_hidden_layers", spec.name));
      ZT_ASSIGN_OR_RETURN(t.hidden, Key(j, "hidden_size", spec.name));
      ZT_ASSIGN_OR_RETURN(t.heads, Key(j, "num_attention_heads", spec.name));
      ZT_ASSIGN_OR_RETURN(t.kv_heads, Key(j, "num_key_value_heads", spec.name));
      ZT_ASSIGN_OR_RETURN(t.intermediate, Key(j, "intermediate_size", spec.name));
      ZT_ASSIGN_OR_RETURN(t.vocab, Key(j, "vocab_size", spec.name));
      LlamaExtras extras;
      extras.qkv_bias = type == "qwen2";
      extras.tied = j.value("tie_word_embeddings", false);
      shape = LlamaShape(t, extras, &layers);
    } else if (type == "bert") {
      t.architecture = Architecture::kBert;
      ZT_ASSIGN_OR_RETURN(t.layers, Key(j, "num_hidden_layers", spec.name));
      ZT_ASSIGN_OR_RETURN(t.hidden, Key(j, "hidden_size", spec.name));
      ZT_ASSIGN_OR_RETURN(t.heads, Key(j, "num_attention_heads", spec.name));
      ZT_ASSIGN_OR_RETURN(t.intermediate, Key(j, "intermediate_size", spec.name));
      ZT_ASSIGN_OR_RETURN(t.vocab, Key(j, "vocab_size", spec.name));
      ZT_ASSIGN_OR_RETURN(int64_t positions, Key(j, "max_position_embeddings", spec.name));
      ZT_ASSIGN_OR_RETURN(int64_t token_types, Key(j, "type_vocab_size", spec.name));
      t.kv_heads = t.heads;
      t.classes = info.num_classes;
      shape = BertShape(t, positions, token_types, &layers);
    } else {
      return absl::UnimplementedError(
          absl::StrCat("model ", spec.name, ": no estimator shape for model type '", type, "'"));
    }
  }
  shape.name = spec.name;
  if (shape.numel() != info.num_params) {
    return absl::InternalError(absl::StrCat("model ", spec.name, ": the estimator counts ", shape.numel(),
                                            " parameters, the registry ", info.num_params));
  }
  return lora.enabled() ? WithLora(shape, layers, lora) : shape;
}

}  // namespace zt::estimate
