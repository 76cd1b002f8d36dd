// Small string helpers used for user-facing messages.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace zt {

// "1.5 GiB", "512 B": binary units, three significant digits.
std::string HumanBytes(double bytes);

// "124M", "1.56B", "812K", "950": decimal units, three significant digits.
std::string HumanCount(double count);

// "5GB", "500MB", "1.5GiB", "1000000" (bytes; decimal KB/MB/GB, binary
// KiB/MiB/GiB, case-insensitive) -> bytes. False for anything else or <= 0.
bool ParseByteSize(const std::string& text, uint64_t* out);

// A count as users type one: "7000000000", "7e9", "7.5e9", "7.5B", "350M",
// "124k" (K, M, B or G, T: decimal thousands ... trillions; case-insensitive)
// -> the whole number. False for anything else: not whole (1.5 with no
// unit), below 1, past 2^53, signs, hex, inf/nan.
bool ParseCount(const std::string& text, int64_t* out);

// The deepest nesting of arrays and objects in JSON text (brackets inside
// strings not counted), found without parsing: a check to make before
// handing untrusted JSON to code that copies or walks it recursively.
int JsonNestingDepth(std::string_view text);

// "[2, 3]": a tensor shape as Python prints a list.
std::string ShapeText(const std::vector<int64_t>& shape);

// Levenshtein distance (insert/delete/substitute, each cost 1), case-sensitive.
int EditDistance(std::string_view a, std::string_view b);

// The candidate closest to `word` when it is plausibly a misspelling (distance
// at most max(2, |word|/3), or differing only in case/'-' vs '_'); else "".
std::string NearestName(std::string_view word, const std::vector<std::string>& candidates);

}  // namespace zt
