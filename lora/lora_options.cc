// Implementation of lora/lora_options.h.
#include "lora/lora_options.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

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
  return absl::OkStatus();
}

bool IsLoraTarget(const LoraOptions& o, const std::string& layer_name) {
  if (o.targets.size() == 1 && o.targets[0] == "all-linear") return layer_name != "lm_head";
  return std::find(o.targets.begin(), o.targets.end(), layer_name) != o.targets.end();
}

bool IsLoraParameterName(const std::string& name) {
  for (absl::string_view part : absl::StrSplit(name, '.')) {
    if (part == "lora_A" || part == "lora_B") return true;
  }
  return false;
}

}  // namespace zt
