// Byte tokenizer: bytes <-> ids 0..255.
#include "tokenizer/byte_tokenizer.h"

namespace zt::data {
namespace {

template <typename Int>
std::string Decode(absl::Span<const Int> ids) {
  std::string text;
  text.reserve(ids.size());
  for (Int id : ids) {
    text.push_back(id >= 0 && id < kByteVocabSize ? static_cast<char>(static_cast<unsigned char>(id))
                                                  : kByteReplacementChar);
  }
  return text;
}

}  // namespace

std::vector<int32_t> EncodeBytes(std::string_view text) {
  std::vector<int32_t> ids(text.size());
  for (size_t i = 0; i < text.size(); ++i) ids[i] = static_cast<unsigned char>(text[i]);
  return ids;
}

std::string DecodeBytes(absl::Span<const int32_t> ids) { return Decode(ids); }
std::string DecodeBytes(absl::Span<const int64_t> ids) { return Decode(ids); }

}  // namespace zt::data
