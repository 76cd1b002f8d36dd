// Implementation of ckpt/lora_record.h.
#include "ckpt/lora_record.h"

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "util/file_io.h"

namespace zt {

ckpt::Value LoraRecordToValue(const LoraRecord& record) {
  ckpt::Dict d;
  d.Set(ckpt::Value(std::string("r")), ckpt::Value(record.options.r));
  d.Set(ckpt::Value(std::string("alpha")), ckpt::Value(record.options.alpha));
  d.Set(ckpt::Value(std::string("dropout")), ckpt::Value(record.options.dropout));
  ckpt::List targets;
  for (const std::string& t : record.options.targets) targets.push_back(ckpt::Value(t));
  d.Set(ckpt::Value(std::string("targets")), ckpt::Value(std::move(targets)));
  d.Set(ckpt::Value(std::string("fan_in_fan_out")), ckpt::Value(record.fan_in_fan_out));
  ckpt::List saved;
  for (const std::string& m : record.options.modules_to_save) saved.push_back(ckpt::Value(m));
  d.Set(ckpt::Value(std::string("modules_to_save")), ckpt::Value(std::move(saved)));
  d.Set(ckpt::Value(std::string("task_type")), ckpt::Value(record.task_type));
  return ckpt::Value(std::move(d));
}

absl::StatusOr<std::optional<LoraRecord>> LoraRecordFromValue(const ckpt::Value* v) {
  if (v == nullptr || v->is_none()) return std::nullopt;
  auto bad = [](const std::string& what) {
    return absl::DataLossError(absl::StrCat("the checkpoint's LoRA record (client state \"lora\") ", what));
  };
  if (!v->is_dict()) return bad("is not a dict");
  const ckpt::Dict& d = v->AsDict();
  const ckpt::Value* r = d.Find("r");
  const ckpt::Value* alpha = d.Find("alpha");
  const ckpt::Value* dropout = d.Find("dropout");
  const ckpt::Value* targets = d.Find("targets");
  const ckpt::Value* fifo = d.Find("fan_in_fan_out");
  if (r == nullptr || !r->is_int()) return bad("has no integer \"r\"");
  if (alpha == nullptr || !(alpha->is_int() || alpha->is_double())) return bad("has no number \"alpha\"");
  if (dropout == nullptr || !(dropout->is_int() || dropout->is_double())) return bad("has no number \"dropout\"");
  if (targets == nullptr || !targets->is_list()) return bad("has no list \"targets\"");
  if (fifo == nullptr || !fifo->is_bool()) return bad("has no bool \"fan_in_fan_out\"");
  LoraRecord rec;
  rec.options.r = r->AsInt();
  rec.options.alpha = alpha->AsDouble();
  rec.options.dropout = dropout->AsDouble();
  for (const ckpt::Value& t : targets->AsList()) {
    if (!t.is_string()) return bad("has a target that is not a string");
    rec.options.targets.push_back(t.AsString());
  }
  rec.fan_in_fan_out = fifo->AsBool();
  if (const ckpt::Value* saved = d.Find("modules_to_save"); saved != nullptr) {
    if (!saved->is_list()) return bad("has a \"modules_to_save\" that is not a list");
    for (const ckpt::Value& m : saved->AsList()) {
      if (!m.is_string()) return bad("has a module to save that is not a string");
      rec.options.modules_to_save.push_back(m.AsString());
    }
  }
  if (const ckpt::Value* task = d.Find("task_type"); task != nullptr) {
    if (!task->is_string()) return bad("has a \"task_type\" that is not a string");
    rec.task_type = task->AsString();
  }
  if (absl::Status st = ValidateLoraOptions(rec.options); !st.ok() || !rec.options.enabled()) {
    return bad(absl::StrCat("holds invalid settings: ", st.ok() ? "r is 0" : std::string(st.message())));
  }
  return rec;
}

std::string PeftAdapterConfigJson(const LoraRecord& record, const std::string& base_model) {
  const LoraOptions& o = record.options;
  nlohmann::ordered_json j;
  j["alpha_pattern"] = nlohmann::json::object();
  j["auto_mapping"] = nullptr;
  j["base_model_name_or_path"] = base_model.empty() ? nlohmann::json(nullptr) : nlohmann::json(base_model);
  j["bias"] = "none";
  j["fan_in_fan_out"] = record.fan_in_fan_out;
  j["inference_mode"] = true;
  j["init_lora_weights"] = true;
  j["layers_pattern"] = nullptr;
  j["layers_to_transform"] = nullptr;
  j["lora_alpha"] = o.alpha;
  j["lora_dropout"] = o.dropout;
  j["modules_to_save"] = o.modules_to_save.empty() ? nlohmann::json(nullptr) : nlohmann::json(o.modules_to_save);
  j["peft_type"] = "LORA";
  j["r"] = o.r;
  j["rank_pattern"] = nlohmann::json::object();
  j["revision"] = nullptr;
  // PEFT writes "all-linear" as given and resolves it when loading.
  j["target_modules"] =
      o.targets.size() == 1 && o.targets[0] == "all-linear" ? nlohmann::json("all-linear") : nlohmann::json(o.targets);
  j["task_type"] = record.task_type;
  j["use_dora"] = false;
  j["use_rslora"] = false;
  return j.dump(2) + "\n";
}

absl::Status WritePeftAdapterConfig(const std::string& dir, const LoraRecord& record, const std::string& base_model) {
  return WriteFileAtomically(dir + "/adapter_config.json", PeftAdapterConfigJson(record, base_model));
}

}  // namespace zt
