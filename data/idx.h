// IDX files, the format of MNIST and Fashion-MNIST: two zero bytes, a dtype
// byte, a byte with the number of dimensions, one big-endian int32 per
// dimension, then the data in row-major order. Plain or gzip-compressed
// (detected by gzip's magic 1f 8b). Limits: only dtype 0x08 (uint8), which is
// what every MNIST-family file uses; whole arrays are read into memory.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace zt::data {

inline constexpr uint8_t kIdxUInt8 = 0x08;

struct IdxArray {
  std::vector<int64_t> dims;  // e.g. {10000, 28, 28} for images, {10000} for labels
  std::vector<uint8_t> data;  // product(dims) bytes, row-major
};

// Reads the IDX file at `path`. Errors name the file: missing/unreadable,
// corrupt gzip stream, a header that is not IDX (nonzero first bytes, zero
// dimensions), a dtype other than uint8 (named, with its IDX meaning),
// truncated data (how many bytes were expected and found), trailing bytes.
absl::StatusOr<IdxArray> ReadIdx(const std::string& path);

// The dimensions of the IDX file at `path` from its header alone (the
// launcher's checks before it starts ranks: no data is decoded). The same
// header errors as ReadIdx; a truncated body is ReadIdx's to find.
absl::StatusOr<std::vector<int64_t>> ReadIdxDims(const std::string& path);

}  // namespace zt::data
