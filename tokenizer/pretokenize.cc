// Implementation of tokenizer/pretokenize.h: hand-written matchers for the three
// split patterns, alternative by alternative in the regex's order.
#include "tokenizer/pretokenize.h"

#include <unicode/uchar.h>

#include "absl/strings/str_cat.h"

namespace zt::data {
namespace {

constexpr std::string_view kGpt2Regex = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
constexpr std::string_view kLlama3Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kQwen2Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

bool IsCrLf(char32_t c) { return c == U'\r' || c == U'\n'; }
bool IsOther(char32_t c) { return !IsWhitespace(c) && !IsLetter(c) && !IsNumber(c); }  // [^\s\p{L}\p{N}]

char32_t Lower(char32_t c, bool fold) { return fold && c >= U'A' && c <= U'Z' ? c + 32 : c; }

// 's|'t|'re|'ve|'m|'ll|'d at i (ASCII case folded when `fold`): its length, or 0.
size_t Contraction(std::u32string_view s, size_t i, bool fold) {
  if (s[i] != U'\'' || i + 1 >= s.size()) return 0;
  const char32_t a = Lower(s[i + 1], fold);
  const char32_t b = i + 2 < s.size() ? Lower(s[i + 2], fold) : 0;
  if (a == U's' || a == U't' || a == U'm' || a == U'd') return 2;
  if ((a == U'r' && b == U'e') || (a == U'v' && b == U'e') || (a == U'l' && b == U'l')) return 3;
  return 0;
}

// End of the run of code points from i that satisfy `pred`.
template <typename Pred>
size_t Run(std::u32string_view s, size_t i, Pred pred) {
  while (i < s.size() && pred(s[i])) ++i;
  return i;
}

// \s+(?!\S) then \s+ at i (s[i] is whitespace): the whole run when it ends
// the text or is one code point long, else all but its last code point.
size_t Whitespace(std::u32string_view s, size_t i) {
  const size_t end = Run(s, i, IsWhitespace);
  if (end == s.size() || end - i == 1) return end;
  return end - 1;
}

// GPT-2: '(s|t|re|ve|m|ll|d)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
size_t MatchGpt2(std::u32string_view s, size_t i) {
  if (size_t n = Contraction(s, i, /*fold=*/false)) return i + n;
  const size_t j = s[i] == U' ' && i + 1 < s.size() ? i + 1 : i;
  if (IsLetter(s[j])) return Run(s, j, IsLetter);
  if (IsNumber(s[j])) return Run(s, j, IsNumber);
  if (IsOther(s[j])) return Run(s, j, IsOther);
  return Whitespace(s, i);
}

// LLaMA-3 / Qwen2: (?i:'s|...)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,max_digits}|
// ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
size_t MatchLlama3(std::u32string_view s, size_t i, size_t max_digits) {
  if (size_t n = Contraction(s, i, /*fold=*/true)) return i + n;
  const char32_t c = s[i];
  if (IsLetter(c)) return Run(s, i, IsLetter);
  if (!IsCrLf(c) && !IsNumber(c) && i + 1 < s.size() && IsLetter(s[i + 1])) return Run(s, i + 1, IsLetter);
  if (IsNumber(c)) {
    size_t j = i;
    while (j < s.size() && j - i < max_digits && IsNumber(s[j])) ++j;
    return j;
  }
  const size_t j = c == U' ' && i + 1 < s.size() && IsOther(s[i + 1]) ? i + 1 : i;
  if (IsOther(s[j])) return Run(s, Run(s, j, IsOther), IsCrLf);
  // c is whitespace from here on. \s*[\r\n]+: up to the last CR/LF of the run.
  const size_t end = Run(s, i, IsWhitespace);
  for (size_t k = end; k > i; --k) {
    if (IsCrLf(s[k - 1])) return k;
  }
  return Whitespace(s, i);
}

}  // namespace

absl::StatusOr<SplitPattern> PatternFromRegex(std::string_view regex) {
  if (regex == kGpt2Regex) return SplitPattern::kGpt2;
  if (regex == kLlama3Regex) return SplitPattern::kLlama3;
  if (regex == kQwen2Regex) return SplitPattern::kQwen2;
  return absl::InvalidArgumentError(
      absl::StrCat("pre-tokenizer regex '", std::string(regex),
                   "' is not one zerotorch knows (GPT-2's, LLaMA-3's or Qwen2's); splitting on another pattern would "
                   "give other token ids than the tokenizer was trained with"));
}

std::string_view RegexOf(SplitPattern p) {
  switch (p) {
    case SplitPattern::kGpt2: return kGpt2Regex;
    case SplitPattern::kLlama3: return kLlama3Regex;
    case SplitPattern::kQwen2: return kQwen2Regex;
  }
  return "";
}

absl::StatusOr<std::u32string> DecodeUtf8(std::string_view text) {
  std::u32string out;
  out.reserve(text.size());
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  for (size_t i = 0; i < n;) {
    const unsigned char b = p[i];
    int len = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0;
    char32_t c = len == 1 ? b : len == 2 ? (b & 0x1F) : len == 3 ? (b & 0x0F) : (b & 0x07);
    bool ok = len > 0 && i + static_cast<size_t>(len) <= n;
    for (int k = 1; ok && k < len; ++k) {
      ok = (p[i + static_cast<size_t>(k)] & 0xC0) == 0x80;
      c = (c << 6) | (p[i + static_cast<size_t>(k)] & 0x3F);
    }
    // Overlong forms, surrogates and values past U+10FFFF are malformed too.
    ok = ok && !(len == 2 && c < 0x80) && !(len == 3 && c < 0x800) && !(len == 4 && c < 0x10000) &&
         !(c >= 0xD800 && c <= 0xDFFF) && c <= 0x10FFFF;
    if (!ok) return absl::InvalidArgumentError(absl::StrCat("text is not valid UTF-8 at byte ", i));
    out.push_back(c);
    i += static_cast<size_t>(len);
  }
  return out;
}

std::string EncodeUtf8(std::u32string_view cps) {
  std::string out;
  out.reserve(cps.size());
  for (char32_t c : cps) {
    if (c < 0x80) {
      out.push_back(static_cast<char>(c));
    } else if (c < 0x800) {
      out.push_back(static_cast<char>(0xC0 | (c >> 6)));
      out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    } else if (c < 0x10000) {
      out.push_back(static_cast<char>(0xE0 | (c >> 12)));
      out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    } else {
      out.push_back(static_cast<char>(0xF0 | (c >> 18)));
      out.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    }
  }
  return out;
}

std::vector<std::pair<size_t, size_t>> SplitByPattern(std::u32string_view cps, SplitPattern p) {
  std::vector<std::pair<size_t, size_t>> pieces;
  for (size_t i = 0; i < cps.size();) {
    const size_t end = p == SplitPattern::kGpt2     ? MatchGpt2(cps, i)
                       : p == SplitPattern::kLlama3 ? MatchLlama3(cps, i, 3)
                                                    : MatchLlama3(cps, i, 1);
    pieces.emplace_back(i, end);
    i = end;
  }
  return pieces;
}

bool IsLetter(char32_t c) { return (U_GET_GC_MASK(static_cast<UChar32>(c)) & U_GC_L_MASK) != 0; }
bool IsNumber(char32_t c) { return (U_GET_GC_MASK(static_cast<UChar32>(c)) & U_GC_N_MASK) != 0; }
bool IsWhitespace(char32_t c) { return u_hasBinaryProperty(static_cast<UChar32>(c), UCHAR_WHITE_SPACE) != 0; }

}  // namespace zt::data
