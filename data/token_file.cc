// Token files: mmap owner, llm.c header detection and validation, vocab
// scans, atomic writer (through AtomicFile).
#include "data/token_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "util/file_io.h"
#include "util/unique_fd.h"

namespace zt::data {
namespace {

constexpr size_t kHeaderBytes = kLlmcHeaderInts * sizeof(int32_t);

size_t TokenBytes(TokenDType dtype) { return dtype == TokenDType::kUInt32 ? 4 : 2; }

// Applies `fn(index, token)` to tokens [begin, end) until it returns false.
template <typename Fn>
void ForEachToken(const unsigned char* base, TokenDType dtype, int64_t begin, int64_t end, Fn fn) {
  if (dtype == TokenDType::kUInt16) {
    for (int64_t i = begin; i < end; ++i) {
      uint16_t v;
      std::memcpy(&v, base + 2 * i, 2);
      if (!fn(i, static_cast<int64_t>(v))) return;
    }
  } else {
    for (int64_t i = begin; i < end; ++i) {
      uint32_t v;
      std::memcpy(&v, base + 4 * i, 4);
      if (!fn(i, static_cast<int64_t>(v))) return;
    }
  }
}

// Where a token file's tokens start and how they are stored.
struct TokenLayout {
  size_t offset = 0;  // bytes before the first token (the llm.c header)
  int64_t count = 0;
  TokenDType dtype = TokenDType::kUInt16;
  bool has_header = false;
};

// The size of the open file `fd`, which must be a regular, non-empty file.
// `what` names it in errors.
absl::StatusOr<size_t> RegularFileBytes(int fd, const std::string& what) {
  struct stat sb;
  if (::fstat(fd, &sb) != 0) {
    int err = errno;
    return ErrnoError(err, absl::StrCat("cannot stat ", what));
  }
  if (!S_ISREG(sb.st_mode)) return absl::InvalidArgumentError(absl::StrCat(what, " is not a regular file"));
  const size_t file_bytes = static_cast<size_t>(sb.st_size);
  if (file_bytes == 0) {
    return absl::InvalidArgumentError(absl::StrCat(what, " is empty; it holds no tokens"));
  }
  return file_bytes;
}

// The tokens behind an llm.c header (the file starts with kLlmcMagic): the
// header's version gives the dtype, which `dtype` (unless kAuto) must
// match, and its count must match the bytes that follow.
absl::StatusOr<TokenLayout> LlmcLayout(const unsigned char* bytes, size_t file_bytes, TokenDType dtype,
                                       const std::string& what) {
  if (file_bytes < kHeaderBytes) {
    return absl::DataLossError(absl::StrCat(what, " starts with llm.c's magic ", kLlmcMagic, " but is only ",
                                            file_bytes, " bytes, shorter than its ", kHeaderBytes,
                                            "-byte header: the file is truncated"));
  }
  int32_t header[3];
  std::memcpy(header, bytes, sizeof(header));
  TokenDType header_dtype;
  if (header[1] == kLlmcVersionUInt16) {
    header_dtype = TokenDType::kUInt16;
  } else if (header[1] == kLlmcVersionUInt32) {
    header_dtype = TokenDType::kUInt32;
  } else {
    return absl::InvalidArgumentError(absl::StrCat(what, " has llm.c's magic but header version ", header[1],
                                                   "; supported: ", kLlmcVersionUInt16, " (uint16 tokens) and ",
                                                   kLlmcVersionUInt32, " (uint32 tokens)"));
  }
  if (dtype != TokenDType::kAuto && dtype != header_dtype) {
    return absl::InvalidArgumentError(absl::StrCat(what, " has an llm.c header saying ", TokenDTypeName(header_dtype),
                                                   " tokens, but ", TokenDTypeName(dtype),
                                                   " was asked for; drop the dtype option (auto)"));
  }
  const int64_t count = header[2];
  const size_t width = TokenBytes(header_dtype);
  const size_t body = file_bytes - kHeaderBytes;
  if (count < 0) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": llm.c header says ", count, " tokens"));
  }
  if (body != static_cast<size_t>(count) * width) {
    const bool truncated = body < static_cast<size_t>(count) * width;
    return absl::DataLossError(absl::StrCat(what, ": llm.c header says ", count, " ", TokenDTypeName(header_dtype),
                                            " tokens (", static_cast<size_t>(count) * width, " bytes) but ", body,
                                            " bytes follow the header",
                                            truncated ? ": the file is truncated" : ": the file has trailing bytes"));
  }
  if (count == 0) return absl::InvalidArgumentError(absl::StrCat(what, ": llm.c header says 0 tokens"));
  return TokenLayout{kHeaderBytes, count, header_dtype, true};
}

// The tokens of a file without a header: raw `dtype` (uint16 for kAuto),
// the whole file.
absl::StatusOr<TokenLayout> RawLayout(size_t file_bytes, TokenDType dtype, const std::string& what) {
  const TokenDType raw_dtype = dtype == TokenDType::kAuto ? TokenDType::kUInt16 : dtype;
  const size_t width = TokenBytes(raw_dtype);
  if (file_bytes % width != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": ", file_bytes, " bytes is not a whole number of ", TokenDTypeName(raw_dtype),
                     " tokens (no llm.c header, so the file is read as raw ", TokenDTypeName(raw_dtype),
                     "); the file may be truncated, or have another format"));
  }
  return TokenLayout{0, static_cast<int64_t>(file_bytes / width), raw_dtype, false};
}

}  // namespace

const char* TokenDTypeName(TokenDType dtype) {
  switch (dtype) {
    case TokenDType::kAuto: return "auto";
    case TokenDType::kUInt16: return "uint16";
    case TokenDType::kUInt32: return "uint32";
  }
  return "?";
}

absl::StatusOr<TokenDType> ParseTokenDType(const std::string& name) {
  if (name == "auto") return TokenDType::kAuto;
  if (name == "uint16" || name == "u16") return TokenDType::kUInt16;
  if (name == "uint32" || name == "u32") return TokenDType::kUInt32;
  return absl::InvalidArgumentError(absl::StrCat("unknown token dtype '", name, "'; use auto, uint16 or uint32"));
}

// ------------------------------------------------------------------ TokenFile

TokenFile::TokenFile(TokenFile&& other) noexcept
    : path_(std::move(other.path_)),
      map_(std::exchange(other.map_, nullptr)),
      map_bytes_(std::exchange(other.map_bytes_, 0)),
      tokens_(std::exchange(other.tokens_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      dtype_(other.dtype_),
      has_header_(other.has_header_) {}

TokenFile& TokenFile::operator=(TokenFile&& other) noexcept {
  if (this != &other) {
    Unmap();
    path_ = std::move(other.path_);
    map_ = std::exchange(other.map_, nullptr);
    map_bytes_ = std::exchange(other.map_bytes_, 0);
    tokens_ = std::exchange(other.tokens_, nullptr);
    size_ = std::exchange(other.size_, 0);
    dtype_ = other.dtype_;
    has_header_ = other.has_header_;
  }
  return *this;
}

TokenFile::~TokenFile() { Unmap(); }

void TokenFile::Unmap() {
  if (map_ != nullptr) ::munmap(map_, map_bytes_);
  map_ = nullptr;
  map_bytes_ = 0;
  tokens_ = nullptr;
  size_ = 0;
}

int32_t TokenFile::at(int64_t i) const {
  ZT_CHECK(i >= 0 && i < size_);
  int32_t v;
  Copy(i, 1, &v);
  return v;
}

void TokenFile::Copy(int64_t begin, int64_t count, int32_t* out) const {
  ZT_CHECK(begin >= 0 && count >= 0 && begin + count <= size_);
  ForEachToken(tokens_, dtype_, begin, begin + count, [&](int64_t i, int64_t v) {
    out[i - begin] = static_cast<int32_t>(v);  // uint32 ids above INT32_MAX wrap; CheckVocab rejects them
    return true;
  });
}

int64_t TokenFile::MaxToken() const {
  int64_t max_token = 0;
  ForEachToken(tokens_, dtype_, 0, size_, [&](int64_t, int64_t v) {
    max_token = std::max(max_token, v);
    return true;
  });
  return max_token;
}

absl::Status TokenFile::CheckVocab(int64_t vocab_size) const {
  int64_t bad_index = -1, bad_token = 0;
  ForEachToken(tokens_, dtype_, 0, size_, [&](int64_t i, int64_t v) {
    if (v < vocab_size) return true;
    bad_index = i;
    bad_token = v;
    return false;
  });
  if (bad_index < 0) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "data file '", path_, "': token ", bad_index, " is ", bad_token, ", outside the model's vocabulary of ",
      vocab_size, " (ids 0..", vocab_size - 1, "); the maximum token in the file is ", MaxToken(),
      "; raise the model's vocab_size or use a file tokenized for this model"));
}

absl::StatusOr<TokenFile> OpenTokenFile(const std::string& path, TokenDType dtype) {
  const std::string what = absl::StrCat("data file '", path, "'");
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) {
    int err = errno;
    return ErrnoError(err, absl::StrCat("cannot open ", what));
  }
  ZT_ASSIGN_OR_RETURN(const size_t file_bytes, RegularFileBytes(fd.get(), what));

  TokenFile file;
  file.path_ = path;
  void* map = ::mmap(nullptr, file_bytes, PROT_READ, MAP_PRIVATE, fd.get(), 0);
  if (map == MAP_FAILED) {
    int err = errno;
    return ErrnoError(err, absl::StrCat("cannot memory-map ", what, " (", file_bytes, " bytes)"));
  }
  file.map_ = map;
  file.map_bytes_ = file_bytes;
  const auto* bytes = static_cast<const unsigned char*>(map);

  int32_t first = 0;
  if (file_bytes >= sizeof(int32_t)) std::memcpy(&first, bytes, sizeof(first));
  ZT_ASSIGN_OR_RETURN(const TokenLayout layout, first == kLlmcMagic ? LlmcLayout(bytes, file_bytes, dtype, what)
                                                                    : RawLayout(file_bytes, dtype, what));
  file.tokens_ = bytes + layout.offset;
  file.size_ = layout.count;
  file.dtype_ = layout.dtype;
  file.has_header_ = layout.has_header;
  return file;
}

absl::Status WriteTokenFile(const std::string& path, absl::Span<const int32_t> tokens, TokenDType dtype,
                            bool llmc_header) {
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("writing '", path, "': token ", i, " is negative (", tokens[i], ")"));
    }
  }
  if (dtype == TokenDType::kAuto) {
    const bool fits16 = std::all_of(tokens.begin(), tokens.end(), [](int32_t t) { return t <= 0xFFFF; });
    dtype = fits16 ? TokenDType::kUInt16 : TokenDType::kUInt32;
  }
  if (dtype == TokenDType::kUInt16) {
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (tokens[i] > 0xFFFF) {
        return absl::InvalidArgumentError(absl::StrCat("writing '", path, "' as uint16: token ", i, " is ", tokens[i],
                                                       ", above 65535; write uint32 tokens"));
      }
    }
  }
  if (llmc_header && tokens.size() > static_cast<size_t>(INT32_MAX)) {
    return absl::InvalidArgumentError(
        absl::StrCat("writing '", path, "': ", tokens.size(), " tokens do not fit llm.c's int32 token count"));
  }
  ZT_ASSIGN_OR_RETURN(AtomicFile out, AtomicFile::Create(path));
  if (llmc_header) {
    std::vector<int32_t> header(kLlmcHeaderInts, 0);
    header[0] = kLlmcMagic;
    header[1] = dtype == TokenDType::kUInt16 ? kLlmcVersionUInt16 : kLlmcVersionUInt32;
    header[2] = static_cast<int32_t>(tokens.size());
    ZT_RETURN_IF_ERROR(out.Append(header.data(), kHeaderBytes));
  }
  constexpr size_t kChunk = 1 << 16;
  std::vector<unsigned char> buf;
  const size_t width = TokenBytes(dtype);
  for (size_t begin = 0; begin < tokens.size(); begin += kChunk) {
    const size_t n = std::min(kChunk, tokens.size() - begin);
    buf.resize(n * width);
    for (size_t i = 0; i < n; ++i) {
      if (width == 2) {
        const uint16_t v = static_cast<uint16_t>(tokens[begin + i]);
        std::memcpy(buf.data() + 2 * i, &v, 2);
      } else {
        const uint32_t v = static_cast<uint32_t>(tokens[begin + i]);
        std::memcpy(buf.data() + 4 * i, &v, 4);
      }
    }
    ZT_RETURN_IF_ERROR(out.Append(buf.data(), buf.size()));
  }
  return out.Commit();
}

}  // namespace zt::data
