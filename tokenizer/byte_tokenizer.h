// Byte-level tokenizer: every byte of the text is one token (its value,
// 0..255), so any file is a corpus and no vocabulary file is needed. Limits:
// no merges, so sequences are ~4x longer than with a BPE tokenizer.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/types/span.h"

namespace zt::data {

// Vocabulary size of the byte tokenizer: one token per byte value.
inline constexpr int64_t kByteVocabSize = 256;

// The character Decode writes for an id outside 0..255 (e.g. a model with a
// larger vocabulary sampled it); decoding never fails so that generated text
// can always be printed.
inline constexpr char kByteReplacementChar = '?';

// Token ids of `text`: one per byte, the byte's unsigned value.
// Example: EncodeBytes("Hi") == {72, 105}.
std::vector<int32_t> EncodeBytes(std::string_view text);

// The bytes of `ids`; ids outside 0..255 become kByteReplacementChar.
std::string DecodeBytes(absl::Span<const int32_t> ids);
std::string DecodeBytes(absl::Span<const int64_t> ids);

}  // namespace zt::data
