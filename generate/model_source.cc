// Implementation of generate/model_source.h.
#include "generate/model_source.h"

#include <cstring>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ckpt/export.h"
#include "ckpt/format/dtype_convert.h"
#include "ckpt/format/llama2c.h"
#include "ckpt/lora_record.h"
#include "ckpt/zero_checkpoint.h"
#include "engine/weights.h"
#include "models/catalog/hf_config.h"
#include "models/registry.h"
#include "tokenizer/hf_tokenizer.h"
#include "util/file_io.h"
#include "util/status.h"
#include "util/strings.h"

namespace zt::generate {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

// A llama2.c file's tensors under their Hugging Face names (q/k rows
// reordered as ckpt/format/llama2c.h says).
class Llama2cSource final : public WeightSource {
 public:
  explicit Llama2cSource(ckpt::Llama2cModel m) : m_(std::move(m)) {}
  std::string Describe() const override { return absl::StrCat("'", m_.path, "'"); }
  std::vector<std::string> names() const override {
    std::vector<std::string> n;
    for (const auto& t : m_.tensors) n.push_back(t.name);
    return n;
  }
  std::optional<Info> Find(const std::string& name) const override {
    const auto* t = Tensor(name);
    if (t == nullptr) return std::nullopt;
    return Info{t->shape, ckpt::DType::kFloat32};
  }
  absl::Status Read(const std::string& name, void* dst) const override {
    ZT_ASSIGN_OR_RETURN(std::vector<float> v, ckpt::ReadLlama2cTensor(m_, *Tensor(name)));
    std::memcpy(dst, v.data(), v.size() * sizeof(float));
    return absl::OkStatus();
  }

 private:
  const ckpt::Llama2cModel::Tensor* Tensor(const std::string& name) const {
    for (const auto& t : m_.tensors) {
      if (t.name == name) return &t;
    }
    return nullptr;
  }
  ckpt::Llama2cModel m_;
};

// A checkpoint's consolidated tensors (ckpt::ExportTensors), read from the
// ranks' shards on demand.
class CheckpointSource final : public WeightSource {
 public:
  CheckpointSource(const ckpt::ZeroCheckpoint& ck, std::vector<ckpt::ExportTensor> tensors)
      : ck_(ck), tensors_(std::move(tensors)) {
    for (size_t i = 0; i < tensors_.size(); ++i) index_[tensors_[i].entry.name] = i;
  }
  std::string Describe() const override { return absl::StrCat("checkpoint '", ck_.dir(), "/", ck_.tag(), "'"); }
  std::vector<std::string> names() const override {
    std::vector<std::string> n;
    for (const auto& t : tensors_) n.push_back(t.entry.name);
    return n;
  }
  std::optional<Info> Find(const std::string& name) const override {
    auto it = index_.find(name);
    if (it == index_.end()) return std::nullopt;
    return Info{tensors_[it->second].entry.shape, tensors_[it->second].entry.dtype};
  }
  absl::Status Read(const std::string& name, void* dst) const override {
    const ckpt::ExportTensor& t = tensors_[index_.at(name)];
    return t.ReadAs(0, t.numel, dst);
  }

 private:
  const ckpt::ZeroCheckpoint& ck_;
  std::vector<ckpt::ExportTensor> tensors_;
  std::map<std::string, size_t> index_;
};

// A base model's tensors with a PEFT adapter's on top: the adapter's
// "base_model.model.<name>" is <name> (LoRA A/B, and modules_to_save,
// which replace the base's).
class AdapterSource final : public WeightSource {
 public:
  AdapterSource(std::unique_ptr<WeightSource> base, std::unique_ptr<WeightSource> adapter)
      : base_(std::move(base)), adapter_(std::move(adapter)) {
    for (const std::string& n : adapter_->names()) {
      if (absl::StartsWith(n, kPrefix)) renamed_[n.substr(kPrefix.size())] = n;
    }
  }
  std::string Describe() const override { return absl::StrCat(base_->Describe(), " with ", adapter_->Describe()); }
  std::vector<std::string> names() const override {
    std::vector<std::string> n = base_->names();
    for (const auto& [name, original] : renamed_) n.push_back(name);
    return n;
  }
  std::optional<Info> Find(const std::string& name) const override {
    auto it = renamed_.find(name);
    return it != renamed_.end() ? adapter_->Find(it->second) : base_->Find(name);
  }
  absl::Status Read(const std::string& name, void* dst) const override {
    auto it = renamed_.find(name);
    return it != renamed_.end() ? adapter_->Read(it->second, dst) : base_->Read(name, dst);
  }
  size_t adapter_tensors() const { return renamed_.size(); }

 private:
  inline static const std::string kPrefix = "base_model.model.";
  std::unique_ptr<WeightSource> base_, adapter_;
  std::map<std::string, std::string> renamed_;
};

// config.json's eos_token_id: an id, a list of ids, or absent / null.
std::vector<int32_t> EosIds(const std::string& config_path) {
  std::vector<int32_t> ids;
  absl::StatusOr<std::string> text = ReadSmallFile(config_path);
  if (!text.ok()) return ids;
  const Json j = Json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("eos_token_id")) return ids;
  const Json& e = j["eos_token_id"];
  if (e.is_number_integer()) ids.push_back(e.get<int32_t>());
  if (e.is_array()) {
    for (const Json& x : e) {
      if (x.is_number_integer()) ids.push_back(x.get<int32_t>());
    }
  }
  return ids;
}

bool HasTokenizer(const std::string& dir) {
  return !dir.empty() && data::HfTokenizer::Locate(dir).ok() && fs::is_directory(dir);
}

absl::StatusOr<std::unique_ptr<models::Model>> Build(const models::ModelSpec& spec) {
  ZT_ASSIGN_OR_RETURN(std::unique_ptr<models::Model> model, models::CreateModel(spec));
  if (model->info().task != models::Task::kLanguageModel) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model ", spec.name, " is not a causal language model; zt generate runs GPT-2 and the LLaMA family"));
  }
  return model;
}

// Any weights file or folder a base model may be: llama2.c or safetensors.
absl::StatusOr<std::unique_ptr<WeightSource>> OpenWeights(const std::string& path) {
  if (ckpt::LooksLikeLlama2c(path)) {
    ZT_ASSIGN_OR_RETURN(ckpt::Llama2cModel m, ckpt::OpenLlama2c(path));
    return std::unique_ptr<WeightSource>(new Llama2cSource(std::move(m)));
  }
  return OpenSafetensorsSource(path);
}

bool IsCheckpointTagDir(const fs::path& dir) {
  std::error_code ec;
  for (const auto& f : fs::directory_iterator(dir, ec)) {
    const std::string name = f.path().filename().string();
    if (absl::EndsWith(name, "model_states.pt") || absl::EndsWith(name, "optim_states.pt")) return true;
  }
  return false;
}

absl::StatusOr<GenerationModel> FromLlama2c(const std::string& path) {
  ZT_ASSIGN_OR_RETURN(ckpt::Llama2cModel m, ckpt::OpenLlama2c(path));
  GenerationModel g;
  ZT_ASSIGN_OR_RETURN(g.model, Build(models::ModelSpec{path, {}, 1}));
  ZT_RETURN_IF_ERROR(LoadWeights(*g.model->module(), Llama2cSource(m), /*strict=*/true));
  g.description = absl::StrCat("llama2.c file ", path, " (LLaMA, dim ", m.dim, ", ", m.n_layers, " layers, ", m.n_heads,
                               " heads on ", m.n_kv_heads, " kv heads, vocab ", m.vocab_size, ")");
  return g;
}

absl::StatusOr<GenerationModel> FromFolder(const std::string& path) {
  // An export file: the config.json beside it.
  const bool file = absl::EndsWith(path, ".safetensors");
  std::string dir = file ? fs::path(path).parent_path().string() : path;
  if (dir.empty()) dir = ".";
  const std::string config = models::HfConfigPath(dir);
  if (config.empty()) {
    return absl::NotFoundError(absl::StrCat(
        "--model ", path, ": no config.json ", file ? "beside it" : "in it",
        " (a Hugging Face folder or a zt train export holds one), and it is neither a llama2.c file, a checkpoint "
        "(a folder with `latest` or a tag's *_model_states.pt) nor a LoRA adapter (adapter_config.json)"));
  }
  GenerationModel g;
  ZT_ASSIGN_OR_RETURN(g.model, Build(models::ModelSpec{dir, {}, 1}));
  ZT_RETURN_IF_ERROR(LoadSafetensors(*g.model->module(), path));
  g.description = absl::StrCat(file ? "export " : "model folder ", path);
  g.eos_ids = EosIds(config);
  if (HasTokenizer(dir)) g.tokenizer_dir = dir;
  return g;
}

absl::StatusOr<GenerationModel> FromCheckpoint(const std::string& save_dir, const std::string& tag,
                                               const ModelSourceOptions& o) {
  ZT_ASSIGN_OR_RETURN(auto ck, ckpt::ZeroCheckpoint::Open(save_dir, tag));
  const fs::path tag_dir = fs::path(save_dir) / ck->tag();
  // The architecture: --arch, else the nearest config.json.
  std::string arch = o.arch, config;
  if (arch.empty()) {
    for (const fs::path& d : {tag_dir, fs::path(save_dir), fs::path(save_dir).parent_path()}) {
      if (!d.empty() && !(config = models::HfConfigPath(d.string())).empty()) {
        arch = d.string();
        break;
      }
    }
  } else {
    config = models::HfConfigPath(arch);
  }
  if (arch.empty()) {
    return absl::NotFoundError(absl::StrCat(
        "checkpoint ", tag_dir.string(),
        ": no config.json in its folder, the save folder or the one above it, so its architecture is unknown; pass "
        "--arch with the --model it was trained with (a preset name or a model folder)"));
  }
  // LoRA trained in the run: merged into the weights, the record says how.
  ckpt::ExportOptions eo;
  const ckpt::Value* client = ck->client_state();
  ZT_ASSIGN_OR_RETURN(
      std::optional<LoraRecord> lora,
      LoraRecordFromValue(client != nullptr && client->is_dict() ? client->AsDict().Find("lora") : nullptr));
  if (lora) {
    eo.lora = ckpt::LoraExport::kMerged;
    eo.lora_scaling = lora->options.scaling();
    eo.lora_fan_in_fan_out = lora->fan_in_fan_out;
  }
  ZT_ASSIGN_OR_RETURN(std::vector<ckpt::ExportTensor> tensors, ckpt::ExportTensors(*ck, eo));
  GenerationModel g;
  ZT_ASSIGN_OR_RETURN(g.model, Build(models::ModelSpec{arch, {}, 1}));
  const absl::Status loaded = LoadWeights(*g.model->module(), CheckpointSource(*ck, std::move(tensors)), true);
  if (!loaded.ok()) {
    return absl::Status(loaded.code(),
                        absl::StrCat(loaded.message(), " (the architecture came from ", config.empty() ? arch : config,
                                     "; pass --arch with the model the run trained)"));
  }
  // Every piece read is checked against the records' CRC-32 before use.
  ZT_RETURN_IF_ERROR(ck->VerifyRead());
  const ckpt::SavedLayout& l = ck->layout();
  g.description = absl::StrCat("checkpoint ", tag_dir.string(), " (ZeRO stage ", l.stage, ", ", l.world_size, " rank",
                               l.world_size == 1 ? "" : "s", ", step ", ck->training_state().global_steps,
                               lora ? ", LoRA merged" : "", ")");
  if (!config.empty()) g.eos_ids = EosIds(config);
  const std::string config_dir = config.empty() ? "" : fs::path(config).parent_path().string();
  if (HasTokenizer(config_dir)) g.tokenizer_dir = config_dir;
  return g;
}

absl::StatusOr<GenerationModel> FromAdapter(const std::string& dir, const ModelSourceOptions& o) {
  const std::string config_path = dir + "/adapter_config.json";
  ZT_ASSIGN_OR_RETURN(const std::string text, ReadSmallFile(config_path));
  const Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  auto bad = [&](const std::string& what) { return absl::InvalidArgumentError(absl::StrCat(config_path, ": ", what)); };
  if (!j.is_object()) return bad("not a JSON object");
  if (j.value("peft_type", "") != "LORA") return bad("peft_type is not \"LORA\"; only LoRA adapters are supported");
  for (const char* key : {"use_dora", "use_rslora"}) {
    if (j.contains(key) && j[key].is_boolean() && j[key].get<bool>()) {
      return bad(absl::StrCat(key, " is true; zerotorch's LoRA layers compute plain LoRA only"));
    }
  }
  if (!j.contains("r") || !j["r"].is_number_integer()) return bad("\"r\" is missing or not an integer");
  if (!j.contains("lora_alpha") || !j["lora_alpha"].is_number())
    return bad("\"lora_alpha\" is missing or not a number");
  models::ModelSpec spec;
  spec.lora.r = j["r"].get<int64_t>();
  spec.lora.alpha = j["lora_alpha"].get<double>();
  const Json& targets = j.value("target_modules", Json());
  if (targets.is_string()) spec.lora.targets = {targets.get<std::string>()};
  if (targets.is_array()) {
    for (const Json& t : targets) {
      if (!t.is_string()) return bad("\"target_modules\" holds a value that is not a string");
      spec.lora.targets.push_back(t.get<std::string>());
    }
  }
  const Json& keep = j.value("modules_to_save", Json());
  if (keep.is_array()) {
    for (const Json& m : keep) {
      if (m.is_string()) spec.lora.modules_to_save.push_back(m.get<std::string>());
    }
  }
  std::string base = o.base;
  if (base.empty() && j.contains("base_model_name_or_path") && j["base_model_name_or_path"].is_string()) {
    base = j["base_model_name_or_path"].get<std::string>();
  }
  if (base.empty() || !fs::exists(base)) {
    return absl::NotFoundError(
        absl::StrCat("adapter ", dir, ": its base model ",
                     base.empty() ? "is not named" : absl::StrCat("'", base, "' does not exist"),
                     "; pass --base with the model folder (or llama2.c file) it was trained on"));
  }
  const bool llama2c = ckpt::LooksLikeLlama2c(base);
  spec.name = base;
  spec.seed = 1;
  GenerationModel g;
  ZT_ASSIGN_OR_RETURN(g.model, Build(spec));
  ZT_ASSIGN_OR_RETURN(std::unique_ptr<WeightSource> base_weights, OpenWeights(base));
  const std::string adapter_file = dir + "/adapter_model.safetensors";
  ZT_ASSIGN_OR_RETURN(std::unique_ptr<WeightSource> adapter_weights, OpenSafetensorsSource(adapter_file));
  AdapterSource source(std::move(base_weights), std::move(adapter_weights));
  if (source.adapter_tensors() == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(adapter_file, " holds no tensor named base_model.model.* (PEFT's names); it is not an adapter"));
  }
  ZT_RETURN_IF_ERROR(LoadWeights(*g.model->module(), source, /*strict=*/true));
  g.description = absl::StrCat("LoRA adapter ", dir, " (r ", spec.lora.r, ", alpha ", spec.lora.alpha, ") on ", base);
  if (!llama2c) {
    const std::string config = models::HfConfigPath(base);
    if (!config.empty()) g.eos_ids = EosIds(config);
    if (HasTokenizer(base)) g.tokenizer_dir = base;
  }
  return g;
}

}  // namespace

absl::StatusOr<GenerationModel> OpenGenerationModel(const std::string& path, const ModelSourceOptions& o) {
  std::error_code ec;
  if (!fs::exists(path, ec)) {
    return absl::NotFoundError(absl::StrCat("--model ", path,
                                            " does not exist: give a model folder, a zt train export or checkpoint "
                                            "folder, a LoRA adapter folder or a llama2.c model file"));
  }
  absl::StatusOr<GenerationModel> g;
  if (fs::is_regular_file(path, ec) && ckpt::LooksLikeLlama2c(path)) {
    g = FromLlama2c(path);
  } else if (fs::is_directory(path, ec) && fs::exists(fs::path(path) / "adapter_config.json", ec)) {
    g = FromAdapter(path, o);
  } else if (fs::is_directory(path, ec) && fs::exists(fs::path(path) / "latest", ec)) {
    g = FromCheckpoint(path, o.tag, o);
  } else if (fs::is_directory(path, ec) && IsCheckpointTagDir(path)) {
    const fs::path p = fs::path(path).lexically_normal();
    const fs::path tag_dir = p.filename().empty() ? p.parent_path() : p;
    if (!o.tag.empty() && o.tag != tag_dir.filename().string()) {
      return absl::InvalidArgumentError(absl::StrCat("--model ", path, " is the checkpoint tag ",
                                                     tag_dir.filename().string(), ", not --tag ", o.tag));
    }
    g = FromCheckpoint(tag_dir.parent_path().string(), tag_dir.filename().string(), o);
  } else {
    g = FromFolder(path);
  }
  if (g.ok()) g->model->module()->eval();
  return g;
}

}  // namespace zt::generate
