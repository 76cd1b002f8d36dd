// The WordPiece model of Hugging Face tokenizers (tokenizer.json "model":
// {"type": "WordPiece"}, BERT's): a word is cut greedily, longest match
// first, into vocabulary pieces; every piece after the first is looked up
// with the continuing-subword prefix ("##"). A word with more characters than
// max_input_chars_per_word, or with a rest no piece matches, is the single
// unknown token -- as the `tokenizers` library's models::wordpiece does.
//
// Contract: immutable after construction; Encode is thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"

namespace zt::data {

class WordPiece {
 public:
  // Errors: a negative id, an unk_token that is not in the vocabulary.
  static absl::StatusOr<WordPiece> Create(absl::flat_hash_map<std::string, int32_t> vocab, std::string unk_token,
                                          std::string continuing_subword_prefix, int max_input_chars_per_word);

  // Appends the ids of one pre-tokenized word (non-empty), as code points.
  void Encode(std::u32string_view word, std::vector<int32_t>* ids) const;

  // The id of a token string, or -1.
  int32_t Id(std::string_view token) const;
  const std::string& Token(int32_t id) const { return tokens_[static_cast<size_t>(id)]; }
  int32_t vocab_size() const { return static_cast<int32_t>(tokens_.size()); }
  const std::string& prefix() const { return prefix_; }

 private:
  WordPiece() = default;

  absl::flat_hash_map<std::string, int32_t> vocab_;
  std::vector<std::string> tokens_;  // id -> string ("" for ids the vocabulary skips)
  std::string prefix_;
  int32_t unk_id_ = -1;
  int max_chars_ = 100;
};

}  // namespace zt::data
