// Internal: the subset of the zip format .pt files use. Records are STORED
// (never compressed), 64-byte aligned through the local header's extra field
// (id 0x4246 "FB", as PyTorch's writer pads), ZIP64 where a size or offset
// reaches the threshold (0xFFFFFFFF unless a test lowers it).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "util/file_io.h"

namespace zt::ckpt {

struct ZipWriterOptions {
  // Sizes and offsets >= this go through ZIP64 fields (tests lower it to
  // exercise ZIP64 without writing 4 GiB; 0 makes every field ZIP64).
  uint64_t zip64_threshold = 0xFFFFFFFFu;
  uint32_t alignment = 64;        // record data starts at a multiple of this
  size_t chunk_bytes = 4u << 20;  // write (and CRC) granularity
  // AddRecordFrom(s): pull the next chunks from the sources on a second
  // thread while this one is hashed and written, so reading and writing overlap.
  // Only for sources that may run on another thread (one call at a time,
  // in order): the conversion tools' reads of checkpoint files.
  bool read_ahead = false;
};

// Appends records to an AtomicFile and closes the archive with Finish().
// The caller commits the file afterwards. Not thread-safe.
class ZipWriter {
 public:
  explicit ZipWriter(AtomicFile* file, ZipWriterOptions options = {});
  // Writes one record straight from `data` (n bytes, which must stay valid
  // for the call): a local header with a placeholder CRC, the bytes in
  // chunks while computing their CRC-32, then the CRC patched in place.
  absl::Status AddRecord(const std::string& name, const void* data, uint64_t n);
  // The same, pulling the n bytes from `source` (offset, destination, count)
  // in order, chunk_bytes at a time, through one scratch buffer: data that is
  // not in memory (optimizer state on NVMe). With read_ahead, a record larger
  // than one chunk goes through AddRecordsFrom instead.
  using Source = std::function<absl::Status(uint64_t offset, void* dst, uint64_t n)>;
  absl::Status AddRecordFrom(const std::string& name, uint64_t n, const Source& source);
  // Several records pulled from sources, written in order. With read_ahead,
  // one reader thread (util/read_ahead.h) runs up to two chunks ahead of the
  // writes across record boundaries too, so the disk always has the next
  // read to do. The sources must stay valid for the call.
  struct SourcedRecord {
    std::string name;
    uint64_t n = 0;
    Source source;
  };
  absl::Status AddRecordsFrom(const std::vector<SourcedRecord>& records);
  // Central directory plus (ZIP64 end record and locator when needed) the
  // end-of-central-directory record.
  absl::Status Finish();

 private:
  struct Entry {
    std::string name;
    uint64_t header_offset = 0;
    uint64_t size = 0;
    uint32_t crc32 = 0;
  };
  bool Big(uint64_t v) const { return v >= options_.zip64_threshold; }
  absl::Status AddRecordImpl(const std::string& name, uint64_t n, const void* data, const Source* source);
  // The record's local header (with `crc`, or 0 to be patched); returns its offset.
  absl::StatusOr<uint64_t> WriteLocalHeader(const std::string& name, uint64_t n, uint32_t crc);
  absl::Status PatchCrc(uint64_t header_offset, uint32_t crc);
  static constexpr size_t kLeadChunks = 2;  // read-ahead lead, in chunk_bytes

  AtomicFile* file_;
  ZipWriterOptions options_;
  std::vector<Entry> entries_;
};

// One record of an archive, as its central directory describes it.
struct ZipEntry {
  std::string name;
  uint64_t header_offset = 0;
  uint64_t data_offset = 0;  // absolute offset of the first data byte
  uint64_t size = 0;
  uint32_t crc32 = 0;
};

// Reads the central directory (ZIP64 aware) and each record's local header.
// Errors start with "checkpoint file '<path>': ". Only stored, unencrypted
// records are accepted; every record must lie inside the file.
absl::StatusOr<std::vector<ZipEntry>> ReadZipDirectory(const ReadFile& file);

// Little-endian field helpers shared by the writer and the reader.
namespace zip_internal {
constexpr uint32_t kLocalHeaderSig = 0x04034b50;
constexpr uint32_t kCentralHeaderSig = 0x02014b50;
constexpr uint32_t kEndSig = 0x06054b50;
constexpr uint32_t kZip64EndSig = 0x06064b50;
constexpr uint32_t kZip64LocatorSig = 0x07064b50;
constexpr uint16_t kZip64ExtraId = 0x0001;
constexpr uint16_t kPaddingExtraId = 0x4246;  // "FB": PyTorch's alignment padding
constexpr size_t kLocalHeaderSize = 30;
constexpr size_t kCentralHeaderSize = 46;
constexpr size_t kEndSize = 22;
constexpr size_t kZip64EndSize = 56;
constexpr size_t kZip64LocatorSize = 20;

inline void Put16(std::string& s, uint16_t v) {
  s.push_back(static_cast<char>(v & 0xFF));
  s.push_back(static_cast<char>(v >> 8));
}
inline void Put32(std::string& s, uint32_t v) {
  for (int i = 0; i < 4; ++i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}
inline void Put64(std::string& s, uint64_t v) {
  for (int i = 0; i < 8; ++i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}
inline uint16_t Get16(const char* p) {
  const auto* u = reinterpret_cast<const unsigned char*>(p);
  return static_cast<uint16_t>(u[0] | (u[1] << 8));
}
inline uint32_t Get32(const char* p) {
  const auto* u = reinterpret_cast<const unsigned char*>(p);
  return static_cast<uint32_t>(u[0]) | (static_cast<uint32_t>(u[1]) << 8) | (static_cast<uint32_t>(u[2]) << 16) |
         (static_cast<uint32_t>(u[3]) << 24);
}
inline uint64_t Get64(const char* p) { return Get32(p) | (static_cast<uint64_t>(Get32(p + 4)) << 32); }
}  // namespace zip_internal

}  // namespace zt::ckpt
