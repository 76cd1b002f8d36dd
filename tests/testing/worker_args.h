// Rank-worker arguments in the form "key=value;key=value" (the harness's
// RankContext::arg), as a map. Header-only: tests include it directly.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"

namespace zt::testing {

inline std::map<std::string, std::string> WorkerArgs(const std::string& arg) {
  std::map<std::string, std::string> out;
  for (absl::string_view kv : absl::StrSplit(arg, ';', absl::SkipEmpty())) {
    std::vector<std::string> p = absl::StrSplit(kv, absl::MaxSplits('=', 1));
    out[p[0]] = p.size() > 1 ? p[1] : "";
  }
  return out;
}

}  // namespace zt::testing
