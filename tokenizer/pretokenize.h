// Pre-tokenization: the regex splits that byte-level BPE tokenizers run
// before BPE (Hugging Face tokenizers' `Split` / `ByteLevel(use_regex)`).
// Rather than a general regex engine, the three patterns real tokenizers use
// are matched by hand, exactly as a backtracking engine would, over Unicode
// code points with ICU's character properties:
//   kGpt2:   GPT-2 / GPT-3, RoBERTa ('s|'t|... | ?\p{L}+| ?\p{N}+|...)
//   kLlama3: LLaMA-3 (case-insensitive contractions, \p{N}{1,3}, newline runs)
//   kQwen2:  Qwen2 / Qwen3 (as kLlama3 with single digits)
// PatternFromRegex recognises them from the tokenizer.json text; any other
// pattern is an error naming it (a wrong split would silently give other
// ids). \s is Unicode's White_Space (the Rust regex crate's, which Hugging
// Face uses); JavaScript's \s differs on U+0085 and U+FEFF.
//
// Contract: pure functions, thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace zt::data {

enum class SplitPattern { kGpt2, kLlama3, kQwen2 };

// The pattern of a tokenizer.json `Split` regex; InvalidArgument naming it
// when it is none of the three.
absl::StatusOr<SplitPattern> PatternFromRegex(std::string_view regex);
// The regex text of a pattern (as tokenizer.json writes it).
std::string_view RegexOf(SplitPattern p);

// UTF-8 -> code points; InvalidArgument naming the byte offset of the first
// malformed sequence.
absl::StatusOr<std::u32string> DecodeUtf8(std::string_view text);
std::string EncodeUtf8(std::u32string_view cps);

// The pieces of `cps` as [begin, end) code-point ranges, in order, covering
// every code point (the split's "Isolated" behaviour).
std::vector<std::pair<size_t, size_t>> SplitByPattern(std::u32string_view cps, SplitPattern p);

// Unicode properties the patterns use (ICU).
bool IsLetter(char32_t c);      // \p{L}
bool IsNumber(char32_t c);      // \p{N}
bool IsWhitespace(char32_t c);  // \s: White_Space

}  // namespace zt::data
