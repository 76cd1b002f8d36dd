// Implementation of tokenizer/bpe.h: merges by repeated leftmost-lowest-rank
// search (words are short; pre-tokenizers cut text into words first).
#include "tokenizer/bpe.h"

#include <array>
#include <limits>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "tokenizer/pretokenize.h"
#include "tokenizer/vocab_table.h"
#include "util/limits.h"
#include "util/status.h"

namespace zt::data {

std::string Bpe::PairKey(std::string_view a, std::string_view b) {
  std::string key;
  key.reserve(a.size() + b.size() + 1);
  key.append(a);
  key.push_back('\0');  // no token holds a NUL byte: byte-level maps byte 0 to U+0100
  key.append(b);
  return key;
}

absl::StatusOr<Bpe> Bpe::Create(absl::flat_hash_map<std::string, int32_t> vocab,
                                const std::vector<std::pair<std::string, std::string>>& merges, BpeOptions options) {
  Bpe bpe;
  if (static_cast<int64_t>(merges.size()) > LimitValue(Limit::kTokenizerMerges)) {
    return absl::InvalidArgumentError(absl::StrCat(merges.size(), " merges; ", LimitNote(Limit::kTokenizerMerges)));
  }
  ZT_ASSIGN_OR_RETURN(bpe.tokens_, TokensById(vocab));
  bpe.ranks_.reserve(merges.size());
  for (size_t r = 0; r < merges.size(); ++r) {
    const auto& [a, b] = merges[r];
    if (!vocab.contains(a) || !vocab.contains(b) || !vocab.contains(a + b)) {
      return absl::InvalidArgumentError(
          absl::StrFormat("merge %d ('%s' '%s') names a token the vocabulary does not have", r, a, b));
    }
    bpe.ranks_.try_emplace(PairKey(a, b), static_cast<int32_t>(r));  // a repeated merge keeps its first rank
  }
  if (options.unk_token.has_value()) {
    auto it = vocab.find(*options.unk_token);
    if (it == vocab.end()) {
      return absl::InvalidArgumentError(absl::StrCat("unk_token '", *options.unk_token, "' is not in the vocabulary"));
    }
    bpe.unk_id_ = it->second;
  }
  if (options.byte_fallback) {
    for (int b = 0; b < 256; ++b) {
      auto it = vocab.find(absl::StrFormat("<0x%02X>", b));
      if (it == vocab.end()) {
        return absl::InvalidArgumentError(
            absl::StrFormat("byte_fallback is on but the vocabulary has no '<0x%02X>' token", b));
      }
      bpe.byte_ids_[b] = it->second;
    }
  }
  bpe.vocab_ = std::move(vocab);
  bpe.options_ = std::move(options);
  return bpe;
}

int32_t Bpe::Id(std::string_view token) const {
  auto it = vocab_.find(absl::string_view(token.data(), token.size()));
  return it == vocab_.end() ? -1 : it->second;
}

void Bpe::Encode(const std::vector<std::string>& chars, std::vector<int32_t>* ids) const {
  if (chars.empty()) return;
  if (options_.ignore_merges) {
    std::string word;
    for (const std::string& c : chars) word += c;
    if (int32_t id = Id(word); id >= 0) {
      ids->push_back(id);
      return;
    }
  }
  std::vector<std::string> symbols = chars;
  for (;;) {
    int32_t best = std::numeric_limits<int32_t>::max();
    size_t at = 0;
    for (size_t i = 0; i + 1 < symbols.size(); ++i) {
      auto it = ranks_.find(PairKey(symbols[i], symbols[i + 1]));
      if (it != ranks_.end() && it->second < best) {
        best = it->second;
        at = i;
      }
    }
    if (best == std::numeric_limits<int32_t>::max()) break;
    symbols[at] += symbols[at + 1];
    symbols.erase(symbols.begin() + static_cast<std::ptrdiff_t>(at) + 1);
  }
  bool last_unk = false;
  for (const std::string& s : symbols) {
    if (int32_t id = Id(s); id >= 0) {
      ids->push_back(id);
      last_unk = false;
    } else if (options_.byte_fallback) {
      for (unsigned char b : s) ids->push_back(byte_ids_[b]);
      last_unk = false;
    } else if (unk_id_ >= 0) {
      if (!(options_.fuse_unk && last_unk)) ids->push_back(unk_id_);
      last_unk = true;
    }
    // No unk token and no fallback: the symbol is dropped, as Hugging Face does.
  }
}

const std::vector<std::string>& ByteToUnicode() {
  static const std::vector<std::string> table = [] {
    // Printable bytes map to themselves; the others, in order, to U+0100 on.
    std::vector<std::string> t(256);
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      const char32_t c = printable ? static_cast<char32_t>(b) : next++;
      t[static_cast<size_t>(b)] = EncodeUtf8(std::u32string(1, c));
    }
    return t;
  }();
  return table;
}

int UnicodeToByte(char32_t c) {
  static const std::array<int, 512> back = [] {
    std::array<int, 512> a;
    a.fill(-1);
    const std::vector<std::string>& t = ByteToUnicode();
    for (int b = 0; b < 256; ++b) {
      auto cps = DecodeUtf8(t[static_cast<size_t>(b)]);
      a[static_cast<size_t>((*cps)[0])] = b;
    }
    return a;
  }();
  return c < 512 ? back[c] : -1;
}

}  // namespace zt::data
