// Implementation of models/catalog/model_info.h.
#include "models/catalog/model_info.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace zt::models {

std::string FormatCount(int64_t n) {
  const double x = static_cast<double>(n);
  if (x >= 1e9) return absl::StrFormat("%.2fB", x / 1e9);
  if (x >= 1e6) return absl::StrFormat("%.1fM", x / 1e6);
  if (x >= 1e3) return absl::StrFormat("%.1fK", x / 1e3);
  return absl::StrCat(n);
}

}  // namespace zt::models
