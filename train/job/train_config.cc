#include "train/job/train_config.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "util/status.h"

namespace zt::train {

const char kDefaultTrainConfig[] = R"({
  "train_micro_batch_size_per_gpu": 16,
  "gradient_accumulation_steps": 1,
  "steps_per_print": 50,
  "gradient_clipping": 1.0,
  "optimizer": {
    "type": "AdamW",
    "params": {"lr": 3e-3, "betas": [0.9, 0.95], "eps": 1e-8, "weight_decay": 0.1}
  },
  "scheduler": {
    "type": "WarmupDecayLR",
    "params": {
      "warmup_min_lr": 0,
      "warmup_max_lr": "auto",
      "warmup_num_steps": 20,
      "warmup_type": "linear",
      "total_num_steps": "auto"
    }
  },
  "zero_optimization": {
    "stage": 3,
    "stage3_prefetch_bucket_size": 200000,
    "stage3_param_persistence_threshold": 1000
  },
  "csv_monitor": {"enabled": true},
  "tensorboard": {"enabled": true}
})";

namespace {

using Json = nlohmann::ordered_json;

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("config file '", path, "' does not exist or cannot be read"));
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The object holding the last component of `path`, created on the way;
// nullptr (with *error set) when a component is not an object.
Json* Parent(Json& root, const std::vector<std::string>& parts, bool create, std::string* error) {
  Json* node = &root;
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    if (!node->is_object()) {
      *error = absl::StrCat("'", absl::StrJoin(parts.begin(), parts.begin() + static_cast<long>(i), "."),
                            "' is not an object");
      return nullptr;
    }
    if (!node->contains(parts[i])) {
      if (!create) return nullptr;
      (*node)[parts[i]] = Json::object();
    }
    node = &(*node)[parts[i]];
  }
  if (!node->is_object()) {
    *error = absl::StrCat("'", absl::StrJoin(parts.begin(), parts.end() - 1, "."), "' is not an object");
    return nullptr;
  }
  return node;
}

}  // namespace

absl::StatusOr<std::string> ComposeConfigJson(const std::string& path, const ConfigOverrides& overrides) {
  std::string text = kDefaultTrainConfig;
  const std::string source = path.empty() ? "the built-in default config" : path;
  if (!path.empty()) {
    auto read = ReadFile(path);
    if (!read.ok()) return read.status();
    text = *std::move(read);
  }
  if (overrides.values.empty() && overrides.erase.empty() && !overrides.lr) return text;
  Json doc = Json::parse(text, nullptr, /*allow_exceptions=*/false, /*ignore_comments=*/true);
  if (doc.is_discarded() || !doc.is_object()) {
    // The config parser reports syntax errors with line and column: let it.
    ParseOptions po;
    po.source_name = source;
    ParseResult r = ParseConfig(text, po);
    if (!r.status().ok()) return r.status();
    return absl::InvalidArgumentError(absl::StrCat(source, ": the top level must be a JSON object"));
  }
  for (const std::string& key : overrides.erase) {
    std::string error;
    std::vector<std::string> parts = absl::StrSplit(key, '.');
    if (Json* parent = Parent(doc, parts, /*create=*/false, &error)) parent->erase(parts.back());
  }
  for (const auto& [key, value_text] : overrides.values) {
    Json value = Json::parse(value_text, nullptr, false);
    if (value.is_discarded()) {
      return absl::InvalidArgumentError(absl::StrCat("override ", key, "=", value_text,
                                                     ": the value is not JSON (quote strings: ", key, "='\"text\"')"));
    }
    std::string error;
    std::vector<std::string> parts = absl::StrSplit(key, '.');
    Json* parent = Parent(doc, parts, /*create=*/true, &error);
    if (parent == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("override ", key, "=", value_text, ": ", error, " in ", source));
    }
    (*parent)[parts.back()] = std::move(value);
  }
  if (overrides.lr) {
    doc["optimizer"]["params"]["lr"] = *overrides.lr;
    auto sched = doc.find("scheduler");
    if (sched != doc.end() && sched->is_object() && sched->contains("params") && (*sched)["params"].is_object()) {
      Json& params = (*sched)["params"];
      if (params.contains("warmup_max_lr") && params["warmup_max_lr"].is_number()) {
        params["warmup_max_lr"] = *overrides.lr;
      }
    }
  }
  return doc.dump(2);
}

namespace {

bool IsAuto(const Json* value) { return value != nullptr && value->is_string() && value->get<std::string>() == "auto"; }

// The value at dotted `path`, or nullptr.
Json* Find(Json& doc, const std::string& path) {
  std::vector<std::string> parts = absl::StrSplit(path, '.');
  std::string error;
  Json* parent = Parent(doc, parts, /*create=*/false, &error);
  if (parent == nullptr) return nullptr;
  auto it = parent->find(parts.back());
  return it == parent->end() ? nullptr : &*it;
}

absl::Status CheckArgs(const TrainerArgs& a) {
  if (a.steps < 1) return absl::InvalidArgumentError(absl::StrCat("--steps must be at least 1, got ", a.steps));
  if (a.warmup_steps && *a.warmup_steps < 0) {
    return absl::InvalidArgumentError(absl::StrCat("--warmup-steps must be >= 0, got ", *a.warmup_steps));
  }
  if (a.warmup_ratio && !(*a.warmup_ratio >= 0 && *a.warmup_ratio <= 1)) {
    return absl::InvalidArgumentError(absl::StrCat("--warmup-ratio must be in [0, 1], got ", *a.warmup_ratio));
  }
  if (a.max_grad_norm && !(*a.max_grad_norm >= 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max-grad-norm must be >= 0 (0: no clipping), got ", *a.max_grad_norm));
  }
  if (a.weight_decay && !(*a.weight_decay >= 0)) {
    return absl::InvalidArgumentError(absl::StrCat("--weight-decay must be >= 0, got ", *a.weight_decay));
  }
  return absl::OkStatus();
}

// What the Trainer's arguments give, for the keys the file writes as "auto"
// (`flag_of`: each filled path -> the flag its value came from); an argument
// whose key has a value (or is absent) fills nothing, and `notes` says so.
ParseOptions AutoValuesFromArgs(Json& doc, const TrainerArgs& args, std::map<std::string, std::string>* flag_of,
                                std::vector<std::string>* notes) {
  ParseOptions po;
  po.world_size = 1;  // batch keys are not filled here
  po.hidden_size = args.hidden_size;
  po.allow_run_time_autos = true;  // the model may lack a hidden size: reported below, by key
  const bool total_auto = IsAuto(Find(doc, "scheduler.params.total_num_steps"));
  if (total_auto) {
    po.auto_values["scheduler.params.total_num_steps"] = absl::StrCat(args.steps);
    (*flag_of)["scheduler.params.total_num_steps"] = absl::StrCat("--steps ", args.steps);
  }
  // `given` names the flag and its value, for the notes.
  auto give = [&](const std::string& given, const std::string& path, const std::string& value) {
    Json* current = Find(doc, path);
    if (IsAuto(current)) {
      po.auto_values[path] = value;
      (*flag_of)[path] = given;
    } else if (current == nullptr) {
      notes->push_back(absl::StrCat(given, " fills nothing: the config has no ", path));
    } else {
      notes->push_back(absl::StrCat(given, " fills nothing: the config sets ", path, " to ", current->dump(),
                                    " itself (write \"auto\" there, or --set ", path, "=", value, ")"));
    }
  };
  if (args.warmup_steps || args.warmup_ratio) {
    const int64_t warmup =
        TrainerWarmupSteps(args.warmup_steps.value_or(0), args.warmup_ratio.value_or(0.0), args.steps);
    const std::string given = args.warmup_steps && (*args.warmup_steps > 0 || !args.warmup_ratio)
                                  ? absl::StrCat("--warmup-steps ", *args.warmup_steps)
                                  : absl::StrCat("--warmup-ratio ", *args.warmup_ratio, " (", warmup, " steps)");
    give(given, "scheduler.params.warmup_num_steps", absl::StrCat(warmup));
  }
  if (args.max_grad_norm) {
    const std::string value = Json(*args.max_grad_norm).dump();
    give("--max-grad-norm " + value, "gradient_clipping", value);
  }
  if (args.weight_decay) {
    const std::string value = Json(*args.weight_decay).dump();
    give("--weight-decay " + value, "optimizer.params.weight_decay", value);
  }

  return po;
}

// The parser's notes on what each "auto" became, naming the flag that gave
// it; an error for "auto" values nothing here could fill.
absl::Status CollectAutoNotes(const ParseResult& r, const std::map<std::string, std::string>& flag_of,
                              std::vector<std::string>* notes) {
  std::vector<std::string> unfilled;
  for (const std::string& note : r.notes) {
    const size_t colon = note.find(": \"auto\" ");
    if (colon == std::string::npos) continue;
    const std::string path = note.substr(0, colon);
    if (r.auto_resolutions.count(path)) {
      auto flag = flag_of.find(path);
      // "(given)": the parser's word for an auto_values entry; name the flag instead.
      if (flag != flag_of.end() && absl::EndsWith(note, " (given)")) {
        notes->push_back(absl::StrCat(note.substr(0, note.size() - 7), "(", flag->second, ")"));
      } else {
        notes->push_back(note);
      }
    } else if (absl::StrContains(note, "\"auto\" left to run time")) {
      unfilled.push_back(path);
    }
  }
  if (!unfilled.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        absl::StrJoin(unfilled, ", "),
        ": \"auto\" needs the model's hidden size (the Hugging Face Trainer reads model.config.hidden_size) and "
        "this model has none; write numbers for ",
        unfilled.size() == 1 ? "it" : "them", " in the config, or pass them with --set KEY=N"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::string> FillTrainAutos(const std::string& json, const TrainerArgs& args,
                                           std::vector<std::string>* notes) {
  if (absl::Status st = CheckArgs(args); !st.ok()) return st;
  Json doc = Json::parse(json, nullptr, false, true);
  if (doc.is_discarded() || !doc.is_object()) return json;  // the parser reports it
  std::vector<std::string> out_notes;
  std::map<std::string, std::string> flag_of;
  const bool total_auto = IsAuto(Find(doc, "scheduler.params.total_num_steps"));
  const ParseOptions po = AutoValuesFromArgs(doc, args, &flag_of, &out_notes);
  const ParseResult r = ParseConfig(json, po);
  ZT_RETURN_IF_ERROR(CollectAutoNotes(r, flag_of, &out_notes));
  bool changed = false;
  for (const auto& [path, value] : r.auto_resolutions) {
    if (Json* target = Find(doc, path)) {
      *target = Json::parse(value);
      changed = true;
    }
  }
  // A short run must not end inside its warm-up: a warm-up the file writes as
  // a number is capped at the run when the schedule's length is the run's.
  Json* warmup = Find(doc, "scheduler.params.warmup_num_steps");
  if (total_auto && warmup != nullptr && warmup->is_number_integer() &&
      r.auto_resolutions.count("scheduler.params.warmup_num_steps") == 0 && warmup->get<int64_t>() > args.steps) {
    out_notes.push_back(absl::StrCat("scheduler.params.warmup_num_steps: ", warmup->get<int64_t>(), " lowered to ",
                                     args.steps,
                                     ", the run's --steps, which total_num_steps \"auto\" takes: the run "
                                     "must not end inside its warm-up"));
    *warmup = args.steps;
    changed = true;
  }
  if (notes != nullptr) *notes = std::move(out_notes);
  return changed ? doc.dump(2) : json;
}

absl::StatusOr<std::string> FillTrainAutos(const std::string& json, int64_t steps) {
  TrainerArgs args;
  args.steps = steps;
  return FillTrainAutos(json, args);
}

absl::StatusOr<Config> ParseTrainConfig(const std::string& json, const std::string& source_name, int world_size) {
  ParseOptions po;
  po.world_size = world_size;
  po.source_name = source_name;
  ParseResult r = ParseConfig(json, po);
  if (!r.status().ok()) return r.status();
  return *std::move(r.config);
}

absl::StatusOr<int> WorldSizeFromConfig(const std::string& json, int fallback) {
  Json doc = Json::parse(json, nullptr, false, true);
  if (doc.is_discarded() || !doc.is_object()) return fallback;
  auto number = [&](const char* key) -> int64_t {
    auto it = doc.find(key);
    return it != doc.end() && it->is_number_integer() ? it->get<int64_t>() : 0;
  };
  const int64_t train = number("train_batch_size");
  const int64_t micro = number("train_micro_batch_size_per_gpu");
  const int64_t gas = number("gradient_accumulation_steps");
  if (train <= 0 || micro <= 0 || gas <= 0) return fallback;
  if (train % (micro * gas) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "train_batch_size ", train, " is not a multiple of train_micro_batch_size_per_gpu ", micro,
        " * gradient_accumulation_steps ", gas, ": no whole number of ranks fits; change one of the three"));
  }
  return static_cast<int>(train / (micro * gas));
}

}  // namespace zt::train
