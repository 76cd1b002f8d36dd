// TokenSource: a read-only sequence of token ids that datasets copy windows
// from, whether it lives in memory (a tokenized text corpus) or in a
// memory-mapped token file. Implementations are immutable after creation, so
// concurrent Copy calls from several threads are safe.
#pragma once

#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "util/status.h"

namespace zt::data {

class TokenSource {
 public:
  virtual ~TokenSource() = default;
  // Number of tokens.
  virtual int64_t size() const = 0;
  // Writes tokens [begin, begin + count) to out[0 .. count). The range must
  // lie inside [0, size()) (checked; a bad range is a caller bug).
  virtual void Copy(int64_t begin, int64_t count, int32_t* out) const = 0;
};

// Tokens held in a vector (e.g. LoadTextCorpus's result).
class InMemoryTokens final : public TokenSource {
 public:
  explicit InMemoryTokens(std::vector<int32_t> tokens) : tokens_(std::move(tokens)) {}
  int64_t size() const override { return static_cast<int64_t>(tokens_.size()); }
  void Copy(int64_t begin, int64_t count, int32_t* out) const override {
    ZT_CHECK(begin >= 0 && count >= 0 && begin + count <= size());
    if (count > 0) std::memcpy(out, tokens_.data() + begin, static_cast<size_t>(count) * sizeof(int32_t));
  }
  const std::vector<int32_t>& tokens() const { return tokens_; }

 private:
  std::vector<int32_t> tokens_;
};

}  // namespace zt::data
