#include "train/train_config.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

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

absl::StatusOr<std::string> FillTrainAutos(const std::string& json, int64_t steps) {
  Json doc = Json::parse(json, nullptr, false, true);
  if (doc.is_discarded() || !doc.is_object()) return json;  // the parser reports it
  auto sched = doc.find("scheduler");
  if (sched == doc.end() || !sched->is_object()) return json;
  auto params = sched->find("params");
  if (params == sched->end() || !params->is_object()) return json;
  auto total = params->find("total_num_steps");
  if (total == params->end() || !total->is_string() || total->get<std::string>() != "auto") return json;
  *total = steps;
  // A short run must not end inside its warm-up: cap the warm-up at the run.
  auto warmup = params->find("warmup_num_steps");
  if (warmup != params->end() && warmup->is_number_integer() && warmup->get<int64_t>() > steps) *warmup = steps;
  return doc.dump(2);
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
