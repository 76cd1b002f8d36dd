// llama2.c's tokenizer (tokenizer.bin / tok512.bin, written by llama2.c's
// tokenizer.py from a SentencePiece model), encoding and decoding as its
// run.c does, so that ids match the model's own reference implementation.
//
// File: int32 max_token_length, then per token: float32 score, int32 byte
// length, the bytes (no NUL). Ids 0/1/2 are <unk>, BOS and EOS; ids 3..258
// the byte-fallback tokens <0x00>..<0xFF>; a space in a piece stands for
// SentencePiece's "▁".
//
// Encode (run.c's encode): BOS if asked; a dummy-prefix " " token when the
// text is not empty; each UTF-8 code point (a lead byte and at most three
// continuation bytes) as its piece, or its bytes as byte-fallback ids
// (byte + 3) where no piece has it; then, repeatedly, the adjacent pair
// whose concatenation is a piece with the highest score is merged (the
// leftmost on a tie) until no pair is a piece; EOS if asked.
// Decode (run.c's decode): a piece after BOS loses its leading space; a
// byte-fallback piece is its byte.
//
//   auto tok = zt::data::Llama2cTokenizer::Open("tok512.bin");
//   std::vector<int32_t> ids = tok->Encode("Once upon a time", /*bos=*/true, /*eos=*/false);
//
// No LibTorch. Errors name the file and the token: a truncated file, a
// length out of range, a piece given twice (run.c's lookup would be
// ambiguous), fewer than 259 tokens (no byte fallback).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"

namespace zt::data {

class Llama2cTokenizer {
 public:
  static absl::StatusOr<Llama2cTokenizer> Open(const std::string& path);

  std::vector<int32_t> Encode(std::string_view text, bool bos, bool eos) const;
  // The text of `token` following `prev` (run.c's decode).
  std::string Decode(int32_t prev, int32_t token) const;
  // The text of `ids` in order (ids out of range are skipped).
  std::string Decode(const std::vector<int32_t>& ids) const;

  // The id of piece `s` (a space for SentencePiece's "▁"), or -1.
  int32_t Id(const std::string& s) const { return Lookup(s); }
  int64_t vocab_size() const { return static_cast<int64_t>(pieces_.size()); }
  const std::string& piece(int32_t id) const { return pieces_[static_cast<size_t>(id)]; }
  float score(int32_t id) const { return scores_[static_cast<size_t>(id)]; }
  static constexpr int32_t kBos = 1;
  static constexpr int32_t kEos = 2;

 private:
  int32_t Lookup(const std::string& s) const;
  std::vector<std::string> pieces_;
  std::vector<float> scores_;
  std::unordered_map<std::string, int32_t> ids_;  // piece -> id (pieces are unique)
  int32_t max_token_length_ = 0;
};

}  // namespace zt::data
