// IDX reader over zlib's gzFile (which also reads uncompressed files), with
// the gzFile owned by a unique_ptr and every short read reported.
#include "data/idx.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "util/status.h"

namespace zt::data {
namespace {

struct GzCloser {
  void operator()(gzFile f) const { gzclose(f); }
};
using GzFile = std::unique_ptr<gzFile_s, GzCloser>;

// Largest array we accept (a corrupt header must not make us allocate TBs).
constexpr int64_t kMaxIdxBytes = int64_t{1} << 34;

const char* IdxTypeName(uint8_t t) {
  switch (t) {
    case 0x08: return "unsigned byte";
    case 0x09: return "signed byte";
    case 0x0B: return "int16";
    case 0x0C: return "int32";
    case 0x0D: return "float32";
    case 0x0E: return "float64";
    default: return "unknown";
  }
}

class Reader {
 public:
  Reader(std::string path, gzFile f, bool gzip) : path_(std::move(path)), file_(f), gzip_(gzip) {}

  // Reads up to n bytes; returns how many were read, or an error for a
  // corrupt stream.
  absl::StatusOr<size_t> Read(void* dst, size_t n) {
    size_t done = 0;
    auto* p = static_cast<unsigned char*>(dst);
    while (done < n) {
      const unsigned chunk = static_cast<unsigned>(std::min<size_t>(n - done, 1u << 30));
      int got = gzread(file_.get(), p + done, chunk);
      if (got < 0) {
        int errnum = 0;
        const char* msg = gzerror(file_.get(), &errnum);
        std::string text = errnum == Z_ERRNO ? std::strerror(errno) : (msg ? msg : "unknown zlib error");
        return absl::DataLossError(
            absl::StrCat("IDX file '", path_, "': ", gzip_ ? "gzip stream is corrupt: " : "read failed: ", text));
      }
      if (got == 0) break;
      done += static_cast<size_t>(got);
    }
    return done;
  }

  bool gzip() const { return gzip_; }
  // "IDX file '<path>'", and " (gzip)" for a compressed one: how errors
  // past the open name the file.
  std::string Name() const { return absl::StrCat("IDX file '", path_, "'", gzip_ ? " (gzip)" : ""); }

 private:
  std::string path_;
  GzFile file_;
  bool gzip_;
};

// Whether the file at `path` starts with gzip's magic bytes.
absl::StatusOr<bool> IsGzip(const std::string& path, const std::string& what) {
  std::FILE* probe = std::fopen(path.c_str(), "rb");
  if (probe == nullptr) {
    int err = errno;
    return absl::Status(absl::ErrnoToStatusCode(err), absl::StrCat("cannot open ", what, ": ", std::strerror(err)));
  }
  unsigned char magic[2] = {0, 0};
  const size_t n = std::fread(magic, 1, 2, probe);
  std::fclose(probe);
  return n == 2 && magic[0] == 0x1f && magic[1] == 0x8b;
}

// Reads the 4-byte IDX magic (00 00, dtype, ndims) and returns the number
// of dimensions; only unsigned bytes are supported.
absl::StatusOr<int> ReadMagic(Reader& reader) {
  const std::string name = reader.Name();
  unsigned char head[4];
  ZT_ASSIGN_OR_RETURN(size_t got, reader.Read(head, 4));
  if (got < 4) {
    return absl::DataLossError(absl::StrCat(name, " is ", got, " bytes, shorter than the 4-byte IDX header"));
  }
  if (head[0] != 0 || head[1] != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s is not an IDX file: it starts with bytes %02x %02x, IDX files start with 00 00", name, head[0], head[1]));
  }
  if (head[2] != kIdxUInt8) {
    return absl::UnimplementedError(
        absl::StrFormat("%s has IDX dtype 0x%02x (%s); only 0x08 (unsigned byte, as in MNIST) is supported", name,
                        head[2], IdxTypeName(head[2])));
  }
  const int ndims = head[3];
  if (ndims == 0) return absl::InvalidArgumentError(absl::StrCat(name, " has 0 dimensions"));
  return ndims;
}

// Reads `ndims` big-endian dimensions into array.dims and returns their
// product, the data's size in bytes (at most kMaxIdxBytes).
absl::StatusOr<int64_t> ReadDims(Reader& reader, int ndims, IdxArray& array) {
  const std::string name = reader.Name();
  int64_t total = 1;
  for (int d = 0; d < ndims; ++d) {
    unsigned char be[4];
    ZT_ASSIGN_OR_RETURN(size_t n, reader.Read(be, 4));
    if (n < 4) {
      return absl::DataLossError(
          absl::StrCat(name, " is truncated inside its header (dimension ", d, " of ", ndims, ")"));
    }
    const uint32_t dim = (uint32_t{be[0]} << 24) | (uint32_t{be[1]} << 16) | (uint32_t{be[2]} << 8) | be[3];
    if (dim > static_cast<uint32_t>(INT32_MAX)) {
      return absl::InvalidArgumentError(absl::StrCat(name, ": dimension ", d, " is ", dim, ", not a valid size"));
    }
    array.dims.push_back(dim);
    if (dim != 0 && total > kMaxIdxBytes / static_cast<int64_t>(dim)) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, ": dimensions make more than ", kMaxIdxBytes, " bytes; the header is corrupt"));
    }
    total *= dim;
  }
  return total;
}

// Reads the `total` data bytes into array.data; the file must end there.
absl::Status ReadData(Reader& reader, int64_t total, IdxArray& array) {
  const std::string name = reader.Name();
  // Read in chunks so a header claiming more than the file holds does not
  // allocate it all up front.
  constexpr size_t kChunk = 1 << 22;
  while (static_cast<int64_t>(array.data.size()) < total) {
    const size_t want = std::min<size_t>(kChunk, static_cast<size_t>(total) - array.data.size());
    const size_t at = array.data.size();
    array.data.resize(at + want);
    ZT_ASSIGN_OR_RETURN(size_t n, reader.Read(array.data.data() + at, want));
    if (n < want) {
      std::string shape;
      for (size_t d = 0; d < array.dims.size(); ++d) absl::StrAppend(&shape, d ? "x" : "", array.dims[d]);
      return absl::DataLossError(absl::StrCat(name, " is truncated: its header says ", shape, " = ", total,
                                              " bytes of data, but only ", at + n, " follow the header"));
    }
  }
  unsigned char extra;
  ZT_ASSIGN_OR_RETURN(size_t trailing, reader.Read(&extra, 1));
  if (trailing != 0) {
    return absl::InvalidArgumentError(absl::StrCat(name, " has bytes after the ", total,
                                                   " bytes its header describes; the header or file is corrupt"));
  }
  return absl::OkStatus();
}

// Opens `path` and reads its header into array.dims; returns the reader,
// positioned at the data, and the data's size in bytes.
absl::StatusOr<std::pair<std::unique_ptr<Reader>, int64_t>> OpenAndReadHeader(const std::string& path,
                                                                              IdxArray& array) {
  const std::string what = absl::StrCat("IDX file '", path, "'");
  ZT_ASSIGN_OR_RETURN(const bool gzip, IsGzip(path, what));
  gzFile raw = gzopen(path.c_str(), "rb");
  if (raw == nullptr) {
    int err = errno;
    return absl::Status(absl::ErrnoToStatusCode(err), absl::StrCat("cannot open ", what, ": ", std::strerror(err)));
  }
  auto reader = std::make_unique<Reader>(path, raw, gzip);
  ZT_ASSIGN_OR_RETURN(const int ndims, ReadMagic(*reader));
  ZT_ASSIGN_OR_RETURN(const int64_t total, ReadDims(*reader, ndims, array));
  return std::make_pair(std::move(reader), total);
}

}  // namespace

absl::StatusOr<IdxArray> ReadIdx(const std::string& path) {
  IdxArray array;
  ZT_ASSIGN_OR_RETURN(auto opened, OpenAndReadHeader(path, array));
  ZT_RETURN_IF_ERROR(ReadData(*opened.first, opened.second, array));
  return array;
}

absl::StatusOr<std::vector<int64_t>> ReadIdxDims(const std::string& path) {
  IdxArray array;
  ZT_RETURN_IF_ERROR(OpenAndReadHeader(path, array).status());
  return array.dims;
}

}  // namespace zt::data
