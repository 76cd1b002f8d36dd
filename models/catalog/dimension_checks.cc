// Implementation of models/catalog/dimension_checks.h.
#include "models/catalog/dimension_checks.h"

#include "absl/strings/str_cat.h"

namespace zt::models {

absl::Status ModelError(const std::string& model, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("model ", model, ": ", what));
}

absl::Status CheckDimensionRanges(const std::string& model, std::initializer_list<DimensionRange> dims) {
  for (const DimensionRange& d : dims) {
    if (d.value < 1 || d.value > d.max) {
      return ModelError(model,
                        absl::StrCat(d.key, " ", d.value, " is outside 1..", d.max, "; choose a value in that range"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckHeadsDivideWidth(const std::string& model, int64_t n_embd, int64_t n_head) {
  if (n_embd % n_head == 0) return absl::OkStatus();
  return ModelError(model, absl::StrCat("n_embd ", n_embd, " is not divisible by n_head ", n_head,
                                        "; set n_embd to a multiple of n_head (e.g. ", (n_embd / n_head + 1) * n_head,
                                        ") or n_head to a divisor of n_embd"));
}

absl::Status CheckDropoutPercent(const std::string& model, int64_t percent) {
  if (percent >= 0 && percent <= 99) return absl::OkStatus();
  return ModelError(model, absl::StrCat("dropout ", percent, " is outside 0..99 (percent)"));
}

}  // namespace zt::models
