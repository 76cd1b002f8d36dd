// ParseConfig / LoadConfigFile: walks the document with the key table,
// resolves "auto", maps legacy spellings, fills defaults, and collects every
// error with the JSON path as written. Checks that span several keys live in
// checks.cc.
#include "config/parser.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "util/status.h"
#include "util/strings.h"

namespace zt {
namespace config_internal {
namespace {

bool IsAuto(const Json& value) { return value.is_string() && value.get_ref<const std::string&>() == "auto"; }

bool StartsWith(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

// Large enough for any model; small enough that hidden_size^2 fits in int64.
constexpr int64_t kMaxHiddenSize = int64_t{1} << 30;

// Reads a command-line style value: JSON when it parses, else a bare string
// (so `--auto optimizer.type=AdamW` needs no quotes).
Json ParseLooseValue(const std::string& text) {
  Json value = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded()) return Json(text);
  return value;
}

template <typename E>
std::optional<E> MatchType(const KeySpec* spec, const Json& value) {
  if (spec == nullptr || !value.is_string()) return std::nullopt;
  for (const EnumChoice& c : spec->choices) {
    if (absl::EqualsIgnoreCase(c.name, value.get_ref<const std::string&>())) return static_cast<E>(c.value);
  }
  return std::nullopt;
}

std::vector<std::string> TypeNames(uint32_t mask, const KeySpec* type_row) {
  std::vector<std::string> out;
  for (const EnumChoice& c : type_row->choices) {
    if (mask & (1u << c.value)) out.push_back(c.name);
  }
  return out;
}

}  // namespace

Parser::Parser(std::string_view text, const ParseOptions& options)
    : schema_(Schema::Get()), options_(options), text_(text) {}

void Parser::Error(std::string path, std::string message) { errors_.push_back({std::move(path), std::move(message)}); }

void Parser::Note(const std::string& path, const std::string& text) {
  notes_.push_back(path.empty() ? text : absl::StrCat(path, ": ", text));
}

std::string Parser::Written(const std::string& canonical) const {
  auto it = claimed_.find(canonical);
  if (it != claimed_.end()) return it->second;
  // A key inside a block the user spelled differently (bfloat16 -> bf16).
  size_t dot = canonical.rfind('.');
  if (dot != std::string::npos) {
    auto parent = claimed_.find(canonical.substr(0, dot));
    if (parent != claimed_.end()) return JoinPath(parent->second, canonical.substr(dot + 1));
  }
  return canonical;
}

bool Parser::Applies(const KeySpec& spec) const {
  if (spec.applies_to == 0) return true;
  if (StartsWith(spec.path, "optimizer.params.")) {
    OptimizerType t = optimizer_type_.value_or(config_.optimizer.type);
    return (spec.applies_to & TypeBit(t)) != 0;
  }
  if (StartsWith(spec.path, "scheduler.params.")) {
    return scheduler_type_ && (spec.applies_to & TypeBit(*scheduler_type_)) != 0;
  }
  return true;
}

bool Parser::Claim(const std::string& canonical, const std::string& written) {
  auto [it, inserted] = claimed_.emplace(canonical, written);
  if (!inserted) {
    Error(written, absl::StrCat("given twice: already set as \"", it->second, "\"; keep one of them"));
  }
  return inserted;
}

int Parser::DocumentOrder(const std::string& path) const {
  std::string p = path;
  while (!p.empty()) {
    auto it = doc_.key_order.find(p);
    if (it != doc_.key_order.end()) return it->second;
    size_t cut = p.find_last_of(".[");
    if (cut == std::string::npos) break;
    p = p.substr(0, cut);
  }
  return INT_MAX;
}

// The type decides which params are valid, so it is read before the walk.
void Parser::ReadTypes() {
  const Json& root = doc_.root;
  auto type_of = [&](const char* block, const char* type_path) -> Json {
    auto it = root.find(block);
    if (it == root.end() || !it->is_object()) return Json();
    auto type = it->find("type");
    if (type == it->end()) return Json();
    if (IsAuto(*type)) {
      auto value = options_.auto_values.find(type_path);
      return value == options_.auto_values.end() ? Json() : ParseLooseValue(value->second);
    }
    return *type;
  };
  optimizer_type_ =
      MatchType<OptimizerType>(schema_.FindPath("optimizer.type"), type_of("optimizer", "optimizer.type"));
  scheduler_type_ =
      MatchType<SchedulerType>(schema_.FindPath("scheduler.type"), type_of("scheduler", "scheduler.type"));
}

void Parser::WalkObject(const Json& object, const std::string& canonical, const std::string& written) {
  for (auto it = object.begin(); it != object.end(); ++it) {
    HandleKey(canonical, written, it.key(), it.value());
  }
}

void Parser::HandleKey(const std::string& canonical_parent, const std::string& written_parent, const std::string& key,
                       const Json& value) {
  const std::string written = JoinPath(written_parent, key);
  std::vector<const KeySpec*> rows = schema_.Find(canonical_parent, key);
  if (rows.empty()) {
    const LegacySpelling* legacy = schema_.FindLegacy(canonical_parent, key);
    if (legacy == nullptr) {
      ReportUnknownKey(canonical_parent, written_parent, key);
      return;
    }
    if (!legacy->rename) {
      HandleLegacy(*legacy, value, written);
      return;
    }
    Note(written, absl::StrCat("deprecated spelling, read as \"", legacy->new_path, "\""));
    rows = {schema_.FindPath(legacy->new_path)};
  }
  if (rows.front()->applies_to != 0) {
    std::vector<const KeySpec*> matching;
    for (const KeySpec* row : rows) {
      if (Applies(*row)) matching.push_back(row);
    }
    if (matching.empty()) {
      ReportWrongType(canonical_parent, rows, key, written);
      return;
    }
    rows = matching;
  }
  const KeySpec& spec = *rows.front();
  if (!Claim(spec.path, written)) return;
  if (spec.kind == Kind::kObject) {
    HandleBlock(spec, value, written);
  } else {
    HandleScalar(spec, value, written);
  }
}

void Parser::HandleBlock(const KeySpec& spec, const Json& value, const std::string& written) {
  if (spec.support == Support::kUnsupported) {
    HandleFeatureBlock(spec, value, written);
    return;
  }
  if (value.is_null()) return;  // same as leaving the block out
  if (spec.path == "zero_optimization" && value.is_boolean()) {
    const LegacySpelling* legacy = schema_.FindLegacy("", "zero_optimization");
    HandleLegacy(*legacy, value, written);
    return;
  }
  if (!value.is_object()) {
    Error(written, absl::StrCat("must be an object ({...}), got ", DescribeType(value)));
    return;
  }
  if (spec.path == "optimizer") config_.optimizer.present = true;
  if (spec.path == "scheduler") scheduler_block_ = true;
  // Without a valid type the params cannot be judged; the type error says why.
  if (spec.path == "optimizer.params" && !optimizer_type_) return;
  if (spec.path == "scheduler.params" && !scheduler_type_) return;
  WalkObject(value, spec.path, written);
}

void Parser::HandleFeatureBlock(const KeySpec& spec, const Json& value, const std::string& written) {
  bool off = value.is_null() || (value.is_boolean() && !value.get<bool>());
  if (value.is_object()) {
    auto enabled = value.find("enabled");
    if (enabled != value.end()) {
      Json e = *enabled;
      if (IsAuto(e)) {
        std::string path = JoinPath(spec.path, "enabled");
        auto given = options_.auto_values.find(path);
        e = given == options_.auto_values.end() ? Json(false) : ParseLooseValue(given->second);
      }
      off = e.is_boolean() && !e.get<bool>();
    } else {
      // {} or {"pipeline_stage": false}: nothing switched on.
      off = std::all_of(value.begin(), value.end(),
                        [](const Json& v) { return v.is_null() || (v.is_boolean() && !v.get<bool>()); });
    }
  }
  if (off) return;
  std::string message = absl::StrCat(spec.meaning, " is not supported by zerotorch");
  if (!spec.unsupported_hint.empty()) absl::StrAppend(&message, " (", spec.unsupported_hint, ")");
  absl::StrAppend(&message, "; remove \"", spec.name(), "\" or set \"enabled\": false");
  Error(written, std::move(message));
}

void Parser::HandleScalar(const KeySpec& spec, const Json& value, const std::string& written) {
  if (IsAuto(value)) {
    autos_.push_back({&spec, written});
    return;
  }
  if ((spec.path == "optimizer.type" || spec.path == "scheduler.type") && value.is_string() &&
      !CheckValue(spec, value).ok()) {
    const std::string& name = value.get_ref<const std::string&>();
    std::string known =
        spec.path == "optimizer.type" ? KnownUnsupportedOptimizer(name) : KnownUnsupportedScheduler(name);
    if (!known.empty()) {
      std::vector<std::string> names;
      for (const EnumChoice& c : spec.choices) names.push_back(c.name);
      Error(written,
            absl::StrCat("\"", known, "\" is not supported by zerotorch; supported: ", absl::StrJoin(names, ", ")));
      failed_.insert(spec.path);
      return;
    }
  }
  absl::StatusOr<Json> checked = CheckValue(spec, value);
  if (!checked.ok()) {
    Error(written, std::string(checked.status().message()));
    failed_.insert(spec.path);
    return;
  }
  Apply(spec, *checked, written);
}

void Parser::Apply(const KeySpec& spec, const Json& value, const std::string& written) {
  if (spec.support == Support::kUnsupported) {
    if (value != spec.default_value) {
      Error(written, absl::StrCat("not supported by zerotorch: ", spec.meaning, "; ", spec.unsupported_hint, " (got ",
                                  ShowValue(value), ")"));
    }
    return;
  }
  if (spec.support == Support::kNoEffect) {
    if (value != spec.default_value)
      Note(written, absl::StrCat("accepted, no effect in zerotorch (", spec.meaning, ")"));
    return;
  }
  if (!spec.ignored_reason.empty() && value != spec.default_value) {
    Note(written, absl::StrCat("accepted, ignored by this build: ", spec.ignored_reason));
  }
  if (spec.batch) {
    batch_written_[spec.path] = value.get<int64_t>();
  } else {
    SetField(spec, config_, value);
  }
  explicit_.insert(spec.path);
}

void Parser::HandleLegacy(const LegacySpelling& legacy, const Json& value, const std::string& written) {
  if (!value.is_boolean()) {
    Error(written, absl::StrCat("must be true or false, got ", DescribeType(value), "; it is also deprecated: use \"",
                                legacy.new_path, "\""));
    return;
  }
  const bool on = value.get<bool>();
  if (legacy.old_path == "zero_optimization") {
    if (!Claim("zero_optimization.stage", written)) return;
    config_.zero.stage = on ? 1 : 0;
    explicit_.insert("zero_optimization.stage");
    Note(written, absl::StrCat("deprecated boolean form, read as {\"stage\": ", on ? 1 : 0, "}"));
    return;
  }
  if (legacy.old_path == "zero_optimization.cpu_offload_use_pin_memory") {
    legacy_pin_memory_ = on;
    Note(written, absl::StrCat("deprecated, read as pin_memory ", on ? "true" : "false",
                               " for offload_optimizer and offload_param"));
    return;
  }
  // cpu_offload / cpu_offload_param: true means {"device": "cpu"}.
  const bool params = legacy.old_path == "zero_optimization.cpu_offload_param";
  const std::string block = params ? "zero_optimization.offload_param" : "zero_optimization.offload_optimizer";
  if (!on) {
    Note(written, absl::StrCat("deprecated; false is the default (no offload): remove it"));
    return;
  }
  if (!Claim(block, written)) return;
  claimed_.emplace(block + ".device", written);  // errors about the device name the key the user wrote
  (params ? config_.zero.offload_param.device : config_.zero.offload_optimizer.device) = OffloadDevice::kCpu;
  explicit_.insert(block + ".device");
  Note(written, absl::StrCat("deprecated, read as \"", block, "\": {\"device\": \"cpu\"}"));
}

void Parser::ReportWrongType(const std::string& canonical_parent, const std::vector<const KeySpec*>& rows,
                             const std::string& key, const std::string& written) {
  const bool optimizer = canonical_parent == "optimizer.params";
  const KeySpec* type_row = schema_.FindPath(optimizer ? "optimizer.type" : "scheduler.type");
  uint32_t owners = 0;
  for (const KeySpec* row : rows) owners |= row->applies_to;
  std::string type = optimizer ? std::string(ToString(optimizer_type_.value_or(config_.optimizer.type)))
                               : std::string(ToString(scheduler_type_.value_or(SchedulerType::kNone)));
  std::vector<std::string> valid;
  for (const KeySpec* row : schema_.Children(canonical_parent)) {
    if (Applies(*row) && std::find(valid.begin(), valid.end(), row->name()) == valid.end()) {
      valid.emplace_back(row->name());
    }
  }
  Error(written, absl::StrCat("\"", key, "\" is not a parameter of ", type, " (it belongs to ",
                              absl::StrJoin(TypeNames(owners, type_row), ", "), "); ", type, " takes ",
                              absl::StrJoin(valid, ", ")));
}

void Parser::ReportUnknownKey(const std::string& canonical_parent, const std::string& written_parent,
                              const std::string& key) {
  const std::string written = JoinPath(written_parent, key);
  if (canonical_parent == "optimizer.params" && key == "max_grad_norm") {
    Error(written,
          "max_grad_norm is not an optimizer parameter here: use the top-level \"gradient_clipping\" "
          "(DeepSpeed ignores max_grad_norm too)");
    return;
  }
  std::vector<std::string> candidates;
  for (const KeySpec* row : schema_.Children(canonical_parent)) {
    if (!Applies(*row)) continue;
    candidates.emplace_back(row->name());
    for (const std::string& alias : row->aliases) candidates.push_back(alias);
  }
  std::string near = NearestName(key, candidates);
  if (!near.empty()) {
    Error(written, absl::StrCat("unknown key (did you mean \"", near, "\"?)"));
    return;
  }
  // A real key in the wrong place, e.g. "aio" inside zero_optimization.
  std::vector<const KeySpec*> elsewhere;
  for (const KeySpec& row : schema_.keys()) {
    if (row.name() != key || row.parent() == canonical_parent) continue;
    bool seen = false;
    for (const KeySpec* other : elsewhere) seen = seen || other->parent() == row.parent();
    if (!seen) elsewhere.push_back(&row);
  }
  if (elsewhere.size() == 1 && elsewhere[0]->parent().empty()) {
    Error(written,
          absl::StrCat("unknown key here: \"", key, "\" is a top-level key; move it out of \"", written_parent, "\""));
    return;
  }
  if (elsewhere.size() == 1) {
    Error(written, absl::StrCat("unknown key here: \"", key, "\" belongs inside \"", elsewhere[0]->parent(),
                                "\" (did you mean \"", elsewhere[0]->path, "\"?)"));
    return;
  }
  if (!elsewhere.empty()) {
    std::vector<std::string> parents;
    for (const KeySpec* row : elsewhere) parents.push_back(absl::StrCat("\"", row->parent(), "\""));
    Error(written, absl::StrCat("unknown key here: \"", key, "\" is a key of ", absl::StrJoin(parents, ", "),
                                written_parent.empty() ? ", not a top-level key"
                                                       : absl::StrCat(", not of \"", written_parent, "\"")));
    return;
  }
  if (canonical_parent.empty()) {
    Error(written,
          "unknown top-level key (DeepSpeed silently ignores unknown top-level keys; zerotorch "
          "rejects them so a typo cannot change training unnoticed). `zt config reference` lists "
          "every key");
    return;
  }
  std::sort(candidates.begin(), candidates.end());
  if (candidates.size() <= 12) {
    Error(written, absl::StrCat("unknown key; \"", written_parent, "\" takes ", absl::StrJoin(candidates, ", ")));
  } else {
    Error(written, absl::StrCat("unknown key in \"", written_parent, "\"; `zt config reference` lists its keys"));
  }
}

void Parser::ApplyLegacyPinMemory() {
  if (!legacy_pin_memory_) return;
  for (const char* path :
       {"zero_optimization.offload_optimizer.pin_memory", "zero_optimization.offload_param.pin_memory"}) {
    if (IsExplicit(path)) continue;
    SetField(*schema_.FindPath(path), config_, *legacy_pin_memory_);
    explicit_.insert(path);
  }
}

void Parser::ApplyDefaults() {
  for (const KeySpec& spec : schema_.keys()) {
    if (spec.support != Support::kImplemented || spec.kind == Kind::kObject || spec.batch) continue;
    if (std::holds_alternative<std::monostate>(spec.field)) continue;
    if (IsExplicit(spec.path) || spec.required || spec.derive != nullptr || !Applies(spec)) continue;
    SetField(spec, config_, spec.default_value);
  }
}

std::optional<std::string> Parser::AutoValueText(const KeySpec& spec, const std::string& written) const {
  for (const std::string& key : {spec.path, written}) {
    auto it = options_.auto_values.find(key);
    if (it != options_.auto_values.end()) return it->second;
  }
  return std::nullopt;
}

void Parser::ApplyAuto(const AutoKey& a, const Json& value, const std::string& why) {
  Apply(*a.spec, value, a.written);
  resolutions_[a.written] = value.dump();
  Note(a.written, absl::StrCat("\"auto\" -> ", ShowValue(value), " (", why, ")"));
}

void Parser::LeaveToRunTime(const AutoKey& a) {
  const KeySpec& spec = *a.spec;
  if (options_.allow_run_time_autos) {
    config_.run_time_autos.push_back(spec.path);
    Note(a.written, absl::StrCat("\"auto\" left to run time: ", RunTimeHowTo(spec)));
    return;
  }
  Error(a.written, absl::StrCat("\"auto\" is left to run time here and nothing gave its value: ", RunTimeHowTo(spec),
                                "; or write a number"));
  failed_.insert(spec.path);
}

void Parser::ResolveTrainerAuto(const AutoKey& a) {
  const TrainerAuto& t = *a.spec->trainer_auto;
  switch (t.input) {
    case RunInput::kTrainingSteps: LeaveToRunTime(a); return;
    case RunInput::kHiddenSize: hidden_autos_.push_back(a); return;
    case RunInput::kNone: break;
  }
  if (t.default_value.is_null()) {  // follows another key, e.g. warmup_max_lr = optimizer.params.lr
    derived_autos_.push_back(a);
    return;
  }
  // The table's values are in range: a failure here is a bug in the table.
  absl::StatusOr<Json> checked = CheckValue(*a.spec, t.default_value);
  ZT_CHECK_MSG(checked.ok(), "%s: the Trainer's default is out of range", a.spec->path.c_str());
  ApplyAuto(a, *checked,
            t.argument.empty() ? "what the Hugging Face Trainer always writes"
                               : absl::StrCat("the Hugging Face Trainer's default ", t.argument));
}

void Parser::ResolveAutos() {
  for (const AutoKey& a : autos_) {
    const KeySpec& spec = *a.spec;
    if (spec.batch) continue;  // ResolveBatchSizes derives these
    if (std::optional<std::string> text = AutoValueText(spec, a.written)) {
      absl::StatusOr<Json> checked = CheckValue(spec, ParseLooseValue(*text));
      if (!checked.ok()) {
        Error(a.written, absl::StrCat("\"auto\" was given the value ", *text, ", which ", checked.status().message()));
        failed_.insert(spec.path);
        continue;
      }
      ApplyAuto(a, *checked, "given");
      continue;
    }
    if (spec.trainer_auto) {
      ResolveTrainerAuto(a);
      continue;
    }
    if (spec.required) {
      Error(a.written, absl::StrCat("\"auto\" has no default to fall back on here; write the value, or pass "
                                    "it with --auto ",
                                    spec.path, "=VALUE"));
      failed_.insert(spec.path);
      continue;
    }
    if (spec.derive != nullptr || spec.derive_auto != nullptr) {
      derived_autos_.push_back(a);
      continue;
    }
    // A key the Trainer leaves alone: its default stands (ApplyDefaults set it).
    resolutions_[a.written] = spec.default_value.dump();
    Note(a.written, absl::StrCat("\"auto\" -> ", ShowValue(spec.default_value), " (default)"));
  }
}

void Parser::ResolveHiddenSizeAutos() {
  for (const AutoKey& a : hidden_autos_) {
    const TrainerAuto& t = *a.spec->trainer_auto;
    if (t.stage3_only && config_.zero.stage != 3) {
      // The Trainer leaves it "auto" below stage 3, where it has no effect.
      resolutions_[a.written] = a.spec->default_value.dump();
      Note(a.written,
           absl::StrCat("\"auto\" -> ", ShowValue(a.spec->default_value), " (default: a stage-3 key at stage ",
                        config_.zero.stage, ", which the Hugging Face Trainer fills only at stage 3)"));
      continue;
    }
    if (!options_.hidden_size) {
      LeaveToRunTime(a);
      continue;
    }
    if (*options_.hidden_size < 1 || *options_.hidden_size > kMaxHiddenSize) continue;  // Run() reported it
    const int64_t h = *options_.hidden_size;
    absl::StatusOr<Json> checked = CheckValue(*a.spec, Json(t.from_hidden(h)));
    if (!checked.ok()) {
      Error(a.written, absl::StrCat("\"auto\" resolves to ", t.from_hidden(h), " (", t.rule, " with hidden_size ", h,
                                    "), which ", checked.status().message()));
      failed_.insert(a.spec->path);
      continue;
    }
    ApplyAuto(a, *checked, absl::StrCat(t.rule, " with hidden_size ", h));
  }
}

void Parser::ApplyDerived() {
  std::set<std::string> auto_paths;
  for (const AutoKey& a : derived_autos_) auto_paths.insert(a.spec->path);
  for (const KeySpec& spec : schema_.keys()) {
    if (spec.derive == nullptr || IsExplicit(spec.path) || !Applies(spec)) continue;
    SetField(spec, config_, spec.derive(config_));
  }
  for (const AutoKey& a : derived_autos_) {
    const KeySpec& spec = *a.spec;
    Derive fn = spec.derive_auto != nullptr ? spec.derive_auto : spec.derive;
    absl::StatusOr<Json> checked = CheckValue(spec, fn(config_));
    if (!checked.ok()) {
      Error(a.written, absl::StrCat("\"auto\" resolves to ", ShowValue(fn(config_)), " (", spec.derive_text,
                                    "), which ", checked.status().message()));
      continue;
    }
    SetField(spec, config_, *checked);
    resolutions_[a.written] = checked->dump();
    Note(a.written, absl::StrCat("\"auto\" -> ", ShowValue(*checked), " (", spec.derive_text, ")"));
  }
}

void Parser::CheckRequired() {
  for (const KeySpec& spec : schema_.keys()) {
    if (!spec.required || claimed_.count(spec.path)) continue;
    std::string owner;
    if (spec.path == "optimizer.type") {
      if (!config_.optimizer.present) continue;
    } else if (spec.path == "scheduler.type") {
      if (!scheduler_block_) continue;
    } else {
      if (spec.applies_to == 0 || !Applies(spec)) continue;
      owner = StartsWith(spec.path, "optimizer.")
                  ? std::string(ToString(optimizer_type_.value_or(config_.optimizer.type)))
                  : std::string(ToString(scheduler_type_.value_or(SchedulerType::kNone)));
    }
    if (owner.empty()) {
      std::vector<std::string> names;
      for (const EnumChoice& c : spec.choices) names.push_back(c.name);
      Error(Written(spec.path),
            absl::StrCat("missing: the block needs a \"type\", one of ", absl::StrJoin(names, ", ")));
    } else {
      Error(Written(spec.path), absl::StrCat("missing: ", owner, " needs it (", spec.meaning, ")"));
    }
  }
}

void Parser::CheckAutoValues() {
  std::vector<std::string> all_paths;
  for (const KeySpec& spec : schema_.keys()) {
    if (spec.kind != Kind::kObject) all_paths.push_back(spec.path);
  }
  for (const auto& [key, text] : options_.auto_values) {
    bool used = false;
    for (const AutoKey& a : autos_) used = used || a.spec->path == key || a.written == key;
    if (used) continue;
    bool in_file = false;
    for (const auto& [canonical, written] : claimed_) in_file = in_file || canonical == key || written == key;
    const KeySpec* spec = schema_.FindPath(key);
    if (!in_file && (spec == nullptr || spec->kind == Kind::kObject)) {
      std::string near = NearestName(key, all_paths);
      Error(key, absl::StrCat("a value for \"auto\" was given for this path, but no config key has it",
                              near.empty() ? "" : absl::StrCat(" (did you mean \"", near, "\"?)")));
    } else if (in_file) {
      Note(key, absl::StrCat("the value ", text, " given for \"auto\" is unused: the file sets this key itself"));
    } else {
      Note(key, absl::StrCat("the value ", text,
                             " given for \"auto\" is unused: the file does not have this key "
                             "(write \"auto\" there to use it)"));
    }
  }
}

ParseResult Parser::Run() {
  ParseResult result;
  result.source_name = options_.source_name;
  doc_ = ParseJsonText(text_);
  errors_ = doc_.errors;
  if (doc_.syntax_ok && !doc_.root.is_object()) {
    Error("", absl::StrCat("the config must be a JSON object ({...}), got ", DescribeType(doc_.root)));
  }
  if (doc_.syntax_ok && doc_.root.is_object()) {
    if (options_.world_size < 1) {
      Error("", absl::StrCat("the world size must be >= 1, got ", options_.world_size));
    }
    if (options_.hidden_size && (*options_.hidden_size < 1 || *options_.hidden_size > kMaxHiddenSize)) {
      Error("", absl::StrCat("the hidden size (ParseOptions::hidden_size) must be in 1..", kMaxHiddenSize, ", got ",
                             *options_.hidden_size));
    }
    ReadTypes();
    WalkObject(doc_.root, "", "");
    ApplyLegacyPinMemory();
    ApplyDefaults();
    ResolveAutos();
    ApplyDerived();
    ResolveHiddenSizeAutos();
    CheckRequired();
    CheckAutoValues();
    CheckCombinations();
    if (options_.world_size >= 1) ResolveBatchSizes();
  }
  std::stable_sort(errors_.begin(), errors_.end(), [&](const ConfigError& a, const ConfigError& b) {
    return DocumentOrder(a.path) < DocumentOrder(b.path);
  });
  result.errors = errors_;
  result.notes = notes_;
  result.auto_resolutions = resolutions_;
  if (errors_.empty()) {
    config_.source_json = std::string(text_);
    config_.notes = notes_;
    result.config = std::move(config_);
  }
  return result;
}

}  // namespace config_internal

absl::Status ParseResult::status() const {
  if (errors.empty()) return absl::OkStatus();
  std::vector<std::string> lines;
  for (const ConfigError& e : errors) {
    std::string line = source_name.empty() ? "" : absl::StrCat(source_name, ": ");
    if (!e.path.empty()) absl::StrAppend(&line, e.path, ": ");
    absl::StrAppend(&line, e.message);
    lines.push_back(std::move(line));
  }
  return absl::InvalidArgumentError(absl::StrJoin(lines, "\n"));
}

ParseResult ParseConfig(std::string_view json_text, const ParseOptions& options) {
  return config_internal::Parser(json_text, options).Run();
}

absl::StatusOr<Config> LoadConfigFile(const std::string& path, const ParseOptions& options) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    return absl::NotFoundError(absl::StrCat("config file '", path, "' does not exist"));
  }
  if (std::filesystem::is_directory(path, ec)) {
    return absl::InvalidArgumentError(absl::StrCat("'", path, "' is a directory, not a config file"));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    int err = errno;
    std::string why = absl::StrCat("cannot read config file '", path, "': ", std::strerror(err));
    if (err == EACCES || err == EPERM) return absl::PermissionDeniedError(why);
    return absl::UnavailableError(why);
  }
  std::ostringstream text;
  text << in.rdbuf();
  ParseOptions named = options;
  if (named.source_name.empty()) named.source_name = path;
  ParseResult result = ParseConfig(text.str(), named);
  if (!result.config) return result.status();
  return std::move(*result.config);
}

}  // namespace zt
