// The BPE model of Hugging Face tokenizers (tokenizer.json "model": {"type":
// "BPE"}): a vocabulary of symbol strings and a ranked list of merges. A word
// starts as one symbol per character; the adjacent pair with the lowest merge
// rank (leftmost on ties) is merged until no ranked pair is left, and each
// symbol becomes its id. Options as tokenizer.json has them:
//   ignore_merges  a word that is itself in the vocabulary is one token (LLaMA-3)
//   byte_fallback  a symbol not in the vocabulary becomes its UTF-8 bytes as
//                  "<0xAB>" tokens (LLaMA-2, Mistral)
//   unk / fuse_unk otherwise the unknown token, consecutive ones fused
//
// Byte-level tokenizers (GPT-2, LLaMA-3, Qwen2) first map every byte to a
// printable character (ByteToUnicode, GPT-2's table), so their symbols are
// strings of those characters.
//
// Contract: immutable after construction; Encode is thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace zt::data {

struct BpeOptions {
  bool ignore_merges = false;
  bool byte_fallback = false;
  std::optional<std::string> unk_token;
  bool fuse_unk = false;
};

class Bpe {
 public:
  // merges: pairs of symbol strings, rank = position. Errors: a merge whose
  // parts or result are not in the vocabulary, an unk_token that is not.
  static absl::StatusOr<Bpe> Create(absl::flat_hash_map<std::string, int32_t> vocab,
                                    const std::vector<std::pair<std::string, std::string>>& merges, BpeOptions options);

  // Appends the ids of one word, given as its characters' UTF-8 strings.
  void Encode(const std::vector<std::string>& chars, std::vector<int32_t>* ids) const;

  // The id of a token string, or -1.
  int32_t Id(std::string_view token) const;
  const std::string& Token(int32_t id) const { return tokens_[static_cast<size_t>(id)]; }
  int32_t vocab_size() const { return static_cast<int32_t>(tokens_.size()); }

 private:
  Bpe() = default;
  // Key of the pair (a, b) in ranks_.
  static std::string PairKey(std::string_view a, std::string_view b);

  absl::flat_hash_map<std::string, int32_t> vocab_;
  std::vector<std::string> tokens_;  // id -> string ("" for ids the vocabulary skips)
  absl::flat_hash_map<std::string, int32_t> ranks_;
  BpeOptions options_;
  int32_t unk_id_ = -1;
  int32_t byte_ids_[256] = {};  // "<0xAB>" ids when byte_fallback
};

// GPT-2's byte -> printable character table, as UTF-8 strings, and back.
const std::vector<std::string>& ByteToUnicode();
// The byte of a mapped character (its code point), or -1.
int UnicodeToByte(char32_t c);

}  // namespace zt::data
