// Implementation of data/classify.h.
#include "data/classify.h"

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "data/jsonl.h"
#include "util/status.h"

namespace zt::data {
namespace {

struct Line {
  std::string where, text;
  nlohmann::json label;
};

}  // namespace

absl::StatusOr<SpecialTokens> FindSpecialTokens(const HfTokenizer& tokenizer) {
  // A probe that is a few ordinary tokens in any vocabulary.
  constexpr const char* kProbe = "the probe text";
  ZT_ASSIGN_OR_RETURN(std::vector<int32_t> plain, tokenizer.Encode(kProbe, false));
  ZT_ASSIGN_OR_RETURN(std::vector<int32_t> full, tokenizer.Encode(kProbe, true));
  auto at = std::search(full.begin(), full.end(), plain.begin(), plain.end());
  if (plain.empty() || at == full.end()) {
    return absl::InvalidArgumentError(absl::StrCat("tokenizer ", tokenizer.Describe(),
                                                   ": its special tokens do not surround the text (the "
                                                   "post-processor changes the text's tokens), so a cut text "
                                                   "cannot keep them; use a tokenizer with a template "
                                                   "post-processor"));
  }
  SpecialTokens s;
  s.prefix.assign(full.begin(), at);
  s.suffix.assign(at + static_cast<std::ptrdiff_t>(plain.size()), full.end());
  return s;
}

bool IsClassifyJsonl(const std::string& path) {
  if (!absl::EndsWith(path, ".jsonl")) return false;
  const nlohmann::json j = FirstJsonlObject(path);
  return j.is_object() && j.contains("label");
}

absl::StatusOr<ClassifySet> ReadClassifyJsonl(const HfTokenizer& tokenizer, const std::string& path,
                                              const std::vector<std::string>& label_names, int64_t num_classes) {
  // First pass: parse and check every line, so the names are known before
  // any id is given out.
  std::vector<Line> lines;
  int kinds = 0;  // bit 1: integer labels, bit 2: string labels
  ZT_RETURN_IF_ERROR(ForEachJsonlValue(path, JsonlValues::kObjects, [&](JsonlLine& line) -> absl::Status {
    Line l;
    l.where = std::move(line.where);
    nlohmann::json& j = line.value;
    if (!j.contains("text") || !j["text"].is_string()) {
      return absl::InvalidArgumentError(
          absl::StrCat(l.where, ": expected a \"text\" string and a \"label\" (sentence pairs are not supported)"));
    }
    if (!j.contains("label")) {
      return absl::InvalidArgumentError(absl::StrCat(l.where, ": no \"label\" (a class id or name)"));
    }
    l.label = j["label"];
    if (l.label.is_number_integer()) {
      kinds |= 1;
    } else if (l.label.is_string()) {
      kinds |= 2;
    } else {
      return absl::InvalidArgumentError(absl::StrCat(l.where,
                                                     ": \"label\" must be an integer class id or a string "
                                                     "class name, got ",
                                                     l.label.dump()));
    }
    if (kinds == 3) {
      return absl::InvalidArgumentError(
          absl::StrCat(l.where, ": mixes integer and string labels; use one kind in a file"));
    }
    l.text = j["text"].get<std::string>();
    lines.push_back(std::move(l));
    return absl::OkStatus();
  }));
  if (lines.empty()) return absl::InvalidArgumentError(absl::StrCat("'", path, "' holds no examples"));

  ClassifySet set;
  std::map<std::string, int64_t> ids;
  if (kinds == 2) {
    set.label_names = label_names;
    if (set.label_names.empty()) {
      std::set<std::string> distinct;
      for (const Line& l : lines) distinct.insert(l.label.get<std::string>());
      set.label_names.assign(distinct.begin(), distinct.end());
    }
    if (static_cast<int64_t>(set.label_names.size()) > num_classes) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, " has ", set.label_names.size(), " classes (", absl::StrJoin(set.label_names, ", "),
                       ") but the model has ", num_classes, "; pass --model-set num_labels=", set.label_names.size()));
    }
    for (size_t i = 0; i < set.label_names.size(); ++i) ids[set.label_names[i]] = static_cast<int64_t>(i);
  }
  for (Line& l : lines) {
    ClassifyExample e;
    if (kinds == 1) {
      e.label = l.label.get<int64_t>();
      if (e.label < 0 || e.label >= num_classes) {
        return absl::InvalidArgumentError(absl::StrCat(l.where, ": label ", e.label, " is outside 0..", num_classes - 1,
                                                       " (the model's classes); pass "
                                                       "--model-set num_labels=N for more classes"));
      }
    } else {
      auto it = ids.find(l.label.get<std::string>());
      if (it == ids.end()) {
        return absl::InvalidArgumentError(absl::StrCat(l.where, ": label \"", l.label.get<std::string>(),
                                                       "\" is not one of the training data's classes (",
                                                       absl::StrJoin(set.label_names, ", "), ")"));
      }
      e.label = it->second;
    }
    auto encoded = tokenizer.Encode(l.text, false);
    if (!encoded.ok()) {
      return absl::Status(encoded.status().code(), absl::StrCat(l.where, ": ", encoded.status().message()));
    }
    e.ids = *std::move(encoded);
    set.examples.push_back(std::move(e));
  }
  return set;
}

bool ClassifyWindow(const ClassifyExample& e, const SpecialTokens& specials, int64_t seq_len, int32_t pad,
                    int64_t* input, int64_t* mask) {
  const int64_t room = seq_len - static_cast<int64_t>(specials.prefix.size() + specials.suffix.size());
  const int64_t n = std::min<int64_t>(std::max<int64_t>(room, 0), static_cast<int64_t>(e.ids.size()));
  int64_t t = 0;
  auto put = [&](int32_t id) {
    if (t < seq_len) {
      input[t] = id;
      mask[t] = 1;
      ++t;
    }
  };
  for (int32_t id : specials.prefix) put(id);
  for (int64_t i = 0; i < n; ++i) put(e.ids[static_cast<size_t>(i)]);
  for (int32_t id : specials.suffix) put(id);
  for (; t < seq_len; ++t) {
    input[t] = pad;
    mask[t] = 0;
  }
  return n < static_cast<int64_t>(e.ids.size());
}

}  // namespace zt::data
