// Implementation of tokenizer/llama2c_tokenizer.h.
#include "tokenizer/llama2c_tokenizer.h"

#include <cstdio>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "util/file_io.h"
#include "util/status.h"

namespace zt::data {

absl::StatusOr<Llama2cTokenizer> Llama2cTokenizer::Open(const std::string& path) {
  ZT_ASSIGN_OR_RETURN(ReadFile f, ReadFile::Open(path));
  Llama2cTokenizer t;
  uint64_t at = 0;
  auto read = [&](void* dst, size_t n, const std::string& what) -> absl::Status {
    if (at + n > f.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": ends at byte ", f.size(), " inside ", what, " (is this a llama2.c tokenizer file?)"));
    }
    ZT_RETURN_IF_ERROR(f.PRead(dst, n, at));
    at += n;
    return absl::OkStatus();
  };
  ZT_RETURN_IF_ERROR(read(&t.max_token_length_, 4, "the header"));
  if (t.max_token_length_ <= 0 || t.max_token_length_ > 4096) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": max_token_length is ", t.max_token_length_, ", not a llama2.c tokenizer file"));
  }
  while (at < f.size()) {
    const std::string what = absl::StrCat("token ", t.pieces_.size());
    float score = 0;
    int32_t len = 0;
    ZT_RETURN_IF_ERROR(read(&score, 4, what));
    ZT_RETURN_IF_ERROR(read(&len, 4, what));
    if (len < 0 || len > t.max_token_length_) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": ", what, " has length ", len, ", outside 0..max_token_length ", t.max_token_length_));
    }
    std::string piece(static_cast<size_t>(len), '\0');
    ZT_RETURN_IF_ERROR(read(piece.data(), piece.size(), what));
    // run.c finds pieces by binary search, so with a piece twice it could
    // take either id: refuse rather than pick one silently.
    if (!t.ids_.emplace(piece, static_cast<int32_t>(t.pieces_.size())).second) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": ", what, " repeats the piece of token ", t.ids_.at(piece),
                                                     "; llama2.c's lookup would be ambiguous"));
    }
    t.pieces_.push_back(std::move(piece));
    t.scores_.push_back(score);
  }
  if (t.pieces_.size() < 259) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", t.pieces_.size(),
                                                   " tokens; llama2.c's tokenizers have <unk>, BOS, EOS and 256 "
                                                   "byte tokens first (at least 259)"));
  }
  return t;
}

int32_t Llama2cTokenizer::Lookup(const std::string& s) const {
  auto it = ids_.find(s);
  return it == ids_.end() ? -1 : it->second;
}

std::vector<int32_t> Llama2cTokenizer::Encode(std::string_view text, bool bos, bool eos) const {
  std::vector<int32_t> tokens;
  if (bos) tokens.push_back(kBos);
  if (!text.empty()) {
    const int32_t space = Lookup(" ");
    if (space >= 0) tokens.push_back(space);
  }
  // Code point by code point: a lead byte and up to three continuation bytes.
  std::string cp;
  for (size_t i = 0; i < text.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if ((c & 0xC0) != 0x80) cp.clear();
    cp.push_back(static_cast<char>(c));
    const bool more = i + 1 < text.size() && (static_cast<unsigned char>(text[i + 1]) & 0xC0) == 0x80;
    if (more && cp.size() < 4) continue;
    const int32_t id = Lookup(cp);
    if (id >= 0) {
      tokens.push_back(id);
    } else {
      for (char b : cp) tokens.push_back(static_cast<int32_t>(static_cast<unsigned char>(b)) + 3);
    }
    cp.clear();
  }
  // Merge the best-scoring adjacent pair until none is a piece (BOS takes
  // part, as in run.c; its piece merges with nothing).
  while (true) {
    float best_score = -1e10f;
    int32_t best_id = -1;
    size_t best_idx = 0;
    for (size_t i = 0; i + 1 < tokens.size(); ++i) {
      const int32_t id = Lookup(pieces_[static_cast<size_t>(tokens[i])] + pieces_[static_cast<size_t>(tokens[i + 1])]);
      if (id >= 0 && scores_[static_cast<size_t>(id)] > best_score) {
        best_score = scores_[static_cast<size_t>(id)];
        best_id = id;
        best_idx = i;
      }
    }
    if (best_id < 0) break;
    tokens[best_idx] = best_id;
    tokens.erase(tokens.begin() + static_cast<std::ptrdiff_t>(best_idx) + 1);
  }
  if (eos) tokens.push_back(kEos);
  return tokens;
}

std::string Llama2cTokenizer::Decode(int32_t prev, int32_t token) const {
  if (token < 0 || token >= static_cast<int32_t>(pieces_.size())) return "";
  std::string_view piece = pieces_[static_cast<size_t>(token)];
  if (prev == kBos && !piece.empty() && piece[0] == ' ') piece.remove_prefix(1);
  unsigned int byte = 0;
  char tail = 0;
  // "<0xAB>": the byte itself.
  if (piece.size() == 6 && std::sscanf(std::string(piece).c_str(), "<0x%02X%c", &byte, &tail) == 2 && tail == '>') {
    return std::string(1, static_cast<char>(byte));
  }
  return std::string(piece);
}

std::string Llama2cTokenizer::Decode(const std::vector<int32_t>& ids) const {
  std::string out;
  int32_t prev = -1;
  for (int32_t id : ids) {
    out += Decode(prev, id);
    prev = id;
  }
  return out;
}

}  // namespace zt::data
