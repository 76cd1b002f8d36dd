// Implementation of estimate/builtin_models.h. The dimensions come from the
// registry's Hugging Face config (HfConfigJson), so presets and overrides are
// resolved exactly as `zt train` resolves them; the parameter lists restate
// the modules' registration order in models/gpt2.cc, llama.cc and
// mnist_cnn.cc (tests/estimate/engine_validation_test.cc compares them with
// the built modules).
#include "estimate/builtin_models.h"

#include <nlohmann/json.hpp>

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

ModelShape Gpt2Shape(const TransformerShape& t, int64_t positions) {
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
    Add(s, b + "attn.c_attn.weight", d * 3 * d, unit);
    Add(s, b + "attn.c_attn.bias", 3 * d, unit);
    Add(s, b + "attn.c_proj.weight", d * d, unit);
    Add(s, b + "attn.c_proj.bias", d, unit);
    Add(s, b + "ln_2.weight", d, unit);
    Add(s, b + "ln_2.bias", d, unit);
    Add(s, b + "mlp.c_fc.weight", d * 4 * d, unit);
    Add(s, b + "mlp.c_fc.bias", 4 * d, unit);
    Add(s, b + "mlp.c_proj.weight", 4 * d * d, unit);
    Add(s, b + "mlp.c_proj.bias", d, unit);
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

ModelShape LlamaShape(const TransformerShape& t, const LlamaExtras& x) {
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
      Add(s, absl::StrCat(b, "self_attn.", proj, ".weight"), out * d, unit);
      if (x.qkv_bias) Add(s, absl::StrCat(b, "self_attn.", proj, ".bias"), out, unit);
    }
    Add(s, b + "self_attn.o_proj.weight", d * d, unit);
    Add(s, b + "mlp.gate_proj.weight", m * d, unit);
    Add(s, b + "mlp.up_proj.weight", m * d, unit);
    Add(s, b + "mlp.down_proj.weight", d * m, unit);
    Add(s, b + "input_layernorm.weight", d, unit);
    Add(s, b + "post_attention_layernorm.weight", d, unit);
    s.sequence.push_back(unit);
  }
  Add(s, "model.norm.weight", d, 1);
  if (!x.tied) Add(s, "lm_head.weight", t.vocab * d, 1);
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
      shape = Gpt2Shape(t, positions);
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
      shape = LlamaShape(t, extras);
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
  return shape;
}

}  // namespace zt::estimate
