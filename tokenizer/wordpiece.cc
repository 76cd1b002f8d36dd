// Implementation of tokenizer/wordpiece.h.
#include "tokenizer/wordpiece.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tokenizer/pretokenize.h"
#include "tokenizer/vocab_table.h"
#include "util/status.h"

namespace zt::data {

absl::StatusOr<WordPiece> WordPiece::Create(absl::flat_hash_map<std::string, int32_t> vocab, std::string unk_token,
                                            std::string continuing_subword_prefix, int max_input_chars_per_word) {
  WordPiece wp;
  ZT_ASSIGN_OR_RETURN(wp.tokens_, TokensById(vocab));
  auto it = vocab.find(unk_token);
  if (it == vocab.end()) {
    return absl::InvalidArgumentError(absl::StrCat("unk_token '", unk_token, "' is not in the vocabulary"));
  }
  wp.unk_id_ = it->second;
  wp.vocab_ = std::move(vocab);
  wp.prefix_ = std::move(continuing_subword_prefix);
  wp.max_chars_ = max_input_chars_per_word;
  return wp;
}

int32_t WordPiece::Id(std::string_view token) const {
  auto it = vocab_.find(absl::string_view(token.data(), token.size()));
  return it == vocab_.end() ? -1 : it->second;
}

void WordPiece::Encode(std::u32string_view word, std::vector<int32_t>* ids) const {
  if (word.empty()) return;
  if (static_cast<int64_t>(word.size()) > max_chars_) {
    ids->push_back(unk_id_);
    return;
  }
  const size_t first = ids->size();
  std::string piece;
  for (size_t start = 0; start < word.size();) {
    // Longest match first: shrink the end one character at a time.
    int32_t id = -1;
    size_t end = word.size();
    for (; end > start; --end) {
      piece = start > 0 ? prefix_ : std::string();
      piece += EncodeUtf8(word.substr(start, end - start));
      if ((id = Id(piece)) >= 0) break;
    }
    if (id < 0) {  // no piece matches here: the whole word is unknown
      ids->resize(first);
      ids->push_back(unk_id_);
      return;
    }
    ids->push_back(id);
    start = end;
  }
}

}  // namespace zt::data
