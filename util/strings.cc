// Implementation of util/strings.h.
#include "util/strings.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace zt {

std::string HumanBytes(double bytes) {
  static const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  int unit = 0;
  double v = bytes;
  while (std::fabs(v) >= 1024.0 && unit < 5) {
    v /= 1024.0;
    ++unit;
  }
  if (unit == 0) return absl::StrFormat("%.0f B", v);
  return absl::StrFormat("%.3g %s", v, kUnits[unit]);
}

std::string HumanCount(double count) {
  static const char* kUnits[] = {"", "K", "M", "B", "T"};
  int unit = 0;
  double v = count;
  while (std::fabs(v) >= 1000.0 && unit < 4) {
    v /= 1000.0;
    ++unit;
  }
  if (unit == 0) return absl::StrFormat("%.0f", v);
  return absl::StrFormat("%.3g%s", v, kUnits[unit]);
}

std::string ShapeText(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) absl::StrAppend(&s, i ? ", " : "", shape[i]);
  return s + "]";
}

int EditDistance(std::string_view a, std::string_view b) {
  std::vector<int> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = static_cast<int>(j);
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = static_cast<int>(i);
    for (size_t j = 1; j <= b.size(); ++j) {
      int sub = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

namespace {
std::string Normalize(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) out.push_back(c == '-' ? '_' : static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  return out;
}
}  // namespace

std::string NearestName(std::string_view word, const std::vector<std::string>& candidates) {
  std::string best;
  int best_distance = 1 << 30;
  const std::string norm_word = Normalize(word);
  for (const std::string& c : candidates) {
    int d = Normalize(c) == norm_word ? 0 : EditDistance(word, c);
    if (d < best_distance) {
      best_distance = d;
      best = c;
    }
  }
  const int limit = std::max<int>(2, static_cast<int>(word.size()) / 3);
  return best_distance <= limit ? best : std::string();
}

bool ParseByteSize(const std::string& text, uint64_t* out) {
  std::string t = absl::AsciiStrToUpper(absl::StripAsciiWhitespace(text));
  double scale = 1;
  const std::pair<const char*, double> units[] = {{"GIB", 1024.0 * 1024 * 1024},
                                                  {"MIB", 1024.0 * 1024},
                                                  {"KIB", 1024.0},
                                                  {"GB", 1e9},
                                                  {"MB", 1e6},
                                                  {"KB", 1e3},
                                                  {"B", 1}};
  for (const auto& [suffix, factor] : units) {
    const std::string s(suffix);
    if (t.size() > s.size() && t.compare(t.size() - s.size(), s.size(), s) == 0) {
      t.resize(t.size() - s.size());
      scale = factor;
      break;
    }
  }
  double v = 0;
  if (!absl::SimpleAtod(t, &v) || v <= 0) return false;
  *out = static_cast<uint64_t>(v * scale);
  return *out > 0;
}

bool ParseCount(const std::string& text, int64_t* out) {
  std::string t = absl::AsciiStrToUpper(absl::StripAsciiWhitespace(text));
  double scale = 1;
  if (!t.empty()) {
    const char last = t.back();
    const double factor = last == 'K'                  ? 1e3
                          : last == 'M'                ? 1e6
                          : last == 'B' || last == 'G' ? 1e9
                          : last == 'T'                ? 1e12
                                                       : 0;
    if (factor != 0) {
      scale = factor;
      t.pop_back();
    }
  }
  // Digits, one optional point, an optional exponent: no sign, no hex, no
  // "inf"/"nan" (which SimpleAtod would take).
  bool digit = false;
  for (size_t i = 0; i < t.size(); ++i) {
    const char c = t[i];
    if (c >= '0' && c <= '9') {
      digit = true;
    } else if (c != '.' && !(c == 'E' && digit && i + 1 < t.size()) &&
               !((c == '+' || c == '-') && i > 0 && t[i - 1] == 'E')) {
      return false;
    }
  }
  double v = 0;
  if (!digit || !absl::SimpleAtod(t, &v)) return false;
  const double n = v * scale;
  // A whole count, representable exactly (below 2^53) and positive.
  if (!(n >= 1) || n > 9007199254740992.0 || n != static_cast<double>(static_cast<int64_t>(n))) return false;
  *out = static_cast<int64_t>(n);
  return true;
}

int JsonNestingDepth(std::string_view text) {
  int depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return deepest;
}

}  // namespace zt
