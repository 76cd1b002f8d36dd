// Implementation of config/lora_options.h.
#include "config/lora_options.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

namespace zt {

absl::Status ValidateLoraOptions(const LoraOptions& o) {
  if (o.r < 0)
    return absl::InvalidArgumentError(absl::StrCat("lora r ", o.r, " is negative; use 0 (off) or a rank >= 1"));
  if (!o.enabled()) return absl::OkStatus();
  if (!(o.alpha > 0)) {
    return absl::InvalidArgumentError(absl::StrCat("lora alpha ", o.alpha, " must be positive (PEFT's default is 8)"));
  }
  if (!(o.dropout >= 0 && o.dropout < 1)) {
    return absl::InvalidArgumentError(absl::StrCat("lora dropout ", o.dropout, " is outside [0, 1)"));
  }
  for (const std::string& t : o.targets) {
    if (t.empty()) return absl::InvalidArgumentError("lora targets contain an empty name");
    if (t == "all-linear" && o.targets.size() > 1) {
      return absl::InvalidArgumentError("lora target all-linear stands alone: drop the other names or all-linear");
    }
    if (absl::StrContains(t, '.')) {
      return absl::InvalidArgumentError(
          absl::StrCat("lora target '", t, "' is a dotted path; give layer names such as ",
                       t.substr(t.find_last_of('.') + 1), " (every layer registered under that name gets an adapter)"));
    }
  }
  for (const std::string& m : o.modules_to_save) {
    if (m.empty() || absl::StrContains(m, '.')) {
      return absl::InvalidArgumentError(absl::StrCat("lora modules_to_save '", m,
                                                     "' must be a module's own name (e.g. classifier), not empty or "
                                                     "a dotted path"));
    }
    if (std::find(o.targets.begin(), o.targets.end(), m) != o.targets.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "lora '", m, "' is both a target and a module to save; a module is either adapted or trained in full"));
    }
  }
  return absl::OkStatus();
}

bool IsLoraTarget(const LoraOptions& o, const std::string& layer_name) {
  if (std::find(o.modules_to_save.begin(), o.modules_to_save.end(), layer_name) != o.modules_to_save.end()) {
    return false;
  }
  if (o.targets.size() == 1 && o.targets[0] == "all-linear") return layer_name != "lm_head";
  return std::find(o.targets.begin(), o.targets.end(), layer_name) != o.targets.end();
}

bool IsLoraParameterName(const std::string& name) {
  for (absl::string_view part : absl::StrSplit(name, '.')) {
    if (part == "lora_A" || part == "lora_B") return true;
  }
  return false;
}

bool IsLoraSavedModuleParameter(const LoraOptions& o, const std::string& name) {
  if (o.modules_to_save.empty()) return false;
  std::vector<absl::string_view> parts = absl::StrSplit(name, '.');
  parts.pop_back();  // the parameter's own name
  for (absl::string_view part : parts) {
    if (std::find(o.modules_to_save.begin(), o.modules_to_save.end(), part) != o.modules_to_save.end()) return true;
  }
  return false;
}

bool IsLoraTrainable(const LoraOptions& o, const std::string& name) {
  return IsLoraParameterName(name) || IsLoraSavedModuleParameter(o, name);
}

}  // namespace zt
