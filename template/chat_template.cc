// ChatTemplate: reads tokenizer_config.json and renders with template/jinja.h set
// up as transformers sets up Jinja2 for apply_chat_template.
#include "template/chat_template.h"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "util/file_io.h"
#include "util/json_reader.h"

namespace zt::data {

absl::StatusOr<ChatTemplate> ChatTemplate::Load(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const std::string file = fs::is_directory(path, ec) ? (fs::path(path) / "tokenizer_config.json").string() : path;
  // A regular file only (a FIFO would block in open), bounded in size,
  // nesting and keys.
  auto text = ReadSmallFile(file, 64u << 20);
  if (!text.ok()) {
    return absl::Status(text.status().code(),
                        absl::StrCat(text.status().message(), " (a chat template is read from a tokenizer folder's ",
                                     "tokenizer_config.json, or that file's path)"));
  }
  auto parsed = ReadJsonText(*text, file);
  if (!parsed.ok()) return absl::InvalidArgumentError(parsed.status().message());
  const nlohmann::json config(*parsed);
  if (!config.is_object()) return absl::InvalidArgumentError(absl::StrCat(file, ": expected a JSON object"));
  if (!config.contains("chat_template") || config["chat_template"].is_null()) {
    return absl::InvalidArgumentError(absl::StrCat(
        file, ": the tokenizer has no chat template (no \"chat_template\" key); use a tokenizer that has one, ",
        "or add its Jinja template as \"chat_template\""));
  }
  const nlohmann::json& t = config["chat_template"];
  std::string source;
  if (t.is_string()) {
    source = t.get<std::string>();
  } else if (t.is_array()) {
    bool found = false;
    for (const auto& e : t) {
      if (!e.is_object() || !e.contains("name") || !e["name"].is_string() || !e.contains("template") ||
          !e["template"].is_string()) {
        return absl::InvalidArgumentError(absl::StrCat(
            file, ": \"chat_template\" as a list must hold {\"name\": string, \"template\": string} objects"));
      }
      if (e["name"] == "default") {
        source = e["template"].get<std::string>();
        found = true;
      }
    }
    if (!found) {
      return absl::InvalidArgumentError(
          absl::StrCat(file, ": \"chat_template\" is a list of named templates without one named \"default\""));
    }
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat(file, ": \"chat_template\" must be a string or a list of {\"name\", \"template\"}"));
  }
  std::vector<std::pair<std::string, std::string>> tokens;
  for (const char* key : {"bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"}) {
    if (!config.contains(key) || config[key].is_null()) continue;
    const nlohmann::json& v = config[key];
    if (v.is_string()) {
      tokens.emplace_back(key, v.get<std::string>());
    } else if (v.is_object() && v.contains("content") && v["content"].is_string()) {
      tokens.emplace_back(key, v["content"].get<std::string>());
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat(file, ": \"", key, "\" must be a string or an object with a string \"content\""));
    }
  }
  auto tmpl = jinja::Template::Parse(source, jinja::Options{/*trim_blocks=*/true, /*lstrip_blocks=*/true});
  if (!tmpl.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(file, ": \"chat_template\": ", tmpl.status().message()));
  }
  return ChatTemplate(file, std::move(source), std::move(*tmpl), std::move(tokens));
}

absl::StatusOr<std::string> ChatTemplate::Render(const std::vector<ChatMessage>& messages,
                                                 bool add_generation_prompt) const {
  std::vector<jinja::Value> list;
  list.reserve(messages.size());
  for (const ChatMessage& m : messages) {
    std::vector<std::pair<std::string, jinja::Value>> kv = {{"role", m.role}, {"content", m.content}};
    for (const auto& [k, v] : m.fields) kv.emplace_back(k, v);
    list.push_back(jinja::Value::MakeDict(std::move(kv)));
  }
  std::vector<std::pair<std::string, jinja::Value>> vars = {
      {"messages", jinja::Value::MakeList(std::move(list))},
      {"tools", jinja::Value::None()},
      {"documents", jinja::Value::None()},
      {"add_generation_prompt", add_generation_prompt},
  };
  for (const auto& [k, v] : special_tokens_) vars.emplace_back(k, v);
  auto fn = std::make_shared<jinja::Function>();
  fn->name = "raise_exception";
  fn->call = [](const std::vector<jinja::Value>& args, const jinja::Kwargs&) -> absl::StatusOr<jinja::Value> {
    auto text = args.empty() ? absl::StatusOr<std::string>("") : jinja::ToPyString(args[0]);
    if (!text.ok()) return text.status();
    return jinja::RaisedByTemplate(*text);
  };
  vars.emplace_back("raise_exception", jinja::Value(fn));
  auto out = template_.Render(vars);
  if (out.ok()) return out;
  absl::Status s = absl::InvalidArgumentError(absl::StrCat(
      config_path_, ": chat template: ",
      jinja::IsRaisedByTemplate(out.status()) ? "the template raised an exception: " : "", out.status().message()));
  if (jinja::IsRaisedByTemplate(out.status())) s = jinja::RaisedByTemplate(s.message());
  return s;
}

}  // namespace zt::data
