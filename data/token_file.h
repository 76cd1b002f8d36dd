// Pre-tokenized token files, memory-mapped read-only: llm.c's format (a
// header of 256 int32: magic 20240520, version 1 = uint16 / 2 = uint32
// tokens, token count; then the tokens) and nanoGPT's raw arrays (train.bin:
// uint16, no header; raw uint32 when asked). Limits: little-endian hosts
// only (as both writers); the file must not change while it is mapped.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "data/token_source.h"

namespace zt::data {

inline constexpr int32_t kLlmcMagic = 20240520;
inline constexpr int kLlmcHeaderInts = 256;  // header bytes: 1024
inline constexpr int32_t kLlmcVersionUInt16 = 1;
inline constexpr int32_t kLlmcVersionUInt32 = 2;

// kAuto: an llm.c header decides; without one the file is raw uint16
// (nanoGPT). kUInt16 / kUInt32: the token width; a file with an llm.c header
// must then agree with it.
enum class TokenDType { kAuto, kUInt16, kUInt32 };

const char* TokenDTypeName(TokenDType dtype);  // "auto", "uint16", "uint32"
// Parses "auto", "uint16"/"u16", "uint32"/"u32" (e.g. a --data-dtype flag).
absl::StatusOr<TokenDType> ParseTokenDType(const std::string& name);

// An open token file. Owns the read-only mapping (unmapped on destruction);
// movable, not copyable. Thread-safe for concurrent reads.
class TokenFile final : public TokenSource {
 public:
  TokenFile(TokenFile&& other) noexcept;
  TokenFile& operator=(TokenFile&& other) noexcept;
  TokenFile(const TokenFile&) = delete;
  TokenFile& operator=(const TokenFile&) = delete;
  ~TokenFile() override;

  int64_t size() const override { return size_; }
  void Copy(int64_t begin, int64_t count, int32_t* out) const override;
  // Token i (checked: 0 <= i < size()).
  int32_t at(int64_t i) const;

  // The resolved width (kUInt16 or kUInt32, never kAuto).
  TokenDType dtype() const { return dtype_; }
  bool has_llmc_header() const { return has_header_; }
  const std::string& path() const { return path_; }

  // The largest token id (computed by scanning the whole file).
  int64_t MaxToken() const;
  // OK when every token is < vocab_size; otherwise an error naming the file,
  // the first offending token id, its index and vocab_size.
  absl::Status CheckVocab(int64_t vocab_size) const;

 private:
  friend absl::StatusOr<TokenFile> OpenTokenFile(const std::string& path, TokenDType dtype);
  TokenFile() = default;
  void Unmap();

  std::string path_;
  void* map_ = nullptr;
  size_t map_bytes_ = 0;
  const unsigned char* tokens_ = nullptr;  // first token inside the mapping
  int64_t size_ = 0;
  TokenDType dtype_ = TokenDType::kUInt16;
  bool has_header_ = false;
};

// Maps `path` and validates it. Errors name the file and what is wrong:
// missing/unreadable, empty, a size that is not a whole number of tokens, a
// header whose count disagrees with the file size (truncated or trailing
// bytes), an unknown header version, a header shorter than 1024 bytes, a
// dtype that contradicts the header.
absl::StatusOr<TokenFile> OpenTokenFile(const std::string& path, TokenDType dtype = TokenDType::kAuto);

// Writes `tokens` to `path` atomically (a temporary, fsynced and renamed).
// dtype kAuto picks uint16 when every token fits, else uint32. With
// `llmc_header` the file gets llm.c's header (version 1 for uint16, 2 for
// uint32); without it, raw little-endian tokens (nanoGPT's train.bin for
// uint16). Errors: a token that does not fit the dtype (named with its
// index), I/O errors naming the path.
absl::Status WriteTokenFile(const std::string& path, absl::Span<const int32_t> tokens,
                            TokenDType dtype = TokenDType::kAuto, bool llmc_header = true);

}  // namespace zt::data
