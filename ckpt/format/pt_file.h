// PyTorch .pt files (the zip format torch.save writes since 1.6), written
// and read without LibTorch:
//
//   <archive>/data.pkl      pickle (protocol 2) of the Value tree; tensors are
//                           torch._utils._rebuild_tensor_v2 over persistent
//                           storages ('storage', torch.<Type>Storage, key, 'cpu', numel)
//   <archive>/data/<key>    each storage's raw bytes (little-endian), stored
//                           uncompressed and 64-byte aligned
//   <archive>/version       "3\n"
//
// Python's torch.load (1.13 and 2.x) opens what WritePtFile writes, and
// ReadPt opens what torch.save writes when its tree stays inside Value
// (dicts, OrderedDicts, lists, tuples, scalars, str, None, tensors).
//
// Streaming: WritePtFile writes each tensor straight from its memory
// (computing CRC-32 on the way), never building the file in memory; ZIP64
// when the file or a record passes 4 GiB. Every record's CRC-32 lives in the
// zip directory: a truncated or corrupted file is an error naming the file
// and the record, at open (missing directory) or on read/verify.
#pragma once

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ckpt/format/value.h"
#include "util/file_io.h"

namespace zt::ckpt {

struct PtWriteOptions {
  std::string archive = "archive";  // the top-level folder inside the zip
  // Tensors with a `source`: read the next chunk on a second thread while
  // one is written (ZipWriterOptions::read_ahead; the source must allow it).
  bool read_ahead = false;
  // Large files reach the disk with O_DIRECT past kStreamingDirectAfter
  // bytes (AtomicFileOptions): for the conversion tools, which write
  // gigabytes once (util/direct_io.h says why).
  bool direct_io = false;
};

// Writes `root` to `path` atomically (temporary name, fsync, rename).
// Tensors with the same `data` pointer and shape are stored once.
absl::Status WritePtFile(const std::string& path, const Value& root, const PtWriteOptions& options = {});

class PtReader {
 public:
  // Parses the zip directory and the pickle; tensor bytes stay on disk.
  // With options.direct_min, large tensor reads bypass the page cache.
  static absl::StatusOr<std::unique_ptr<PtReader>> Open(const std::string& path, const ReadFileOptions& options = {});

  const Value& root() const { return root_; }
  const std::string& path() const { return file_.path(); }

  // Copies the tensor's elements (its view of the storage; must be
  // row-major, at any storage_offset -- a transposed view is an error) into
  // dst (t.nbytes() bytes). With verify, the whole storage record's CRC-32
  // is checked (in bounded 8 MiB chunks; in the same pass as the copy when
  // the tensor is the whole record, else in an extra pass first).
  absl::Status Read(const TensorRef& t, void* dst, bool verify = true) const;
  // Copies elements [begin, end) of a row-major tensor (flattened) into
  // dst: a partial read, for streaming consolidation and resharding. No
  // CRC check (RecordVerifier checks pieces as they stream by; VerifyAll or
  // Read with verify check whole records).
  absl::Status ReadElements(const TensorRef& t, int64_t begin, int64_t end, void* dst) const;
  // Checks one record's CRC-32 (in bounded chunks), e.g. the storage behind a
  // TensorRef before ReadElements reads parts of it.
  absl::Status VerifyRecord(const std::string& record) const;
  // The same for a record whose bytes before `from` were hashed already
  // (their CRC-32 is `crc`): reads and hashes only the rest.
  absl::Status VerifyRecordFrom(const std::string& record, uint64_t from, uint32_t crc) const;
  // Checks every record's CRC-32 and size against the zip directory.
  absl::Status VerifyAll() const;

 private:
  PtReader() = default;
  ReadFile file_;
  Value root_;
  struct Records;  // the zip directory, by name (pt_file.cc)
  std::shared_ptr<const Records> records_;
};

}  // namespace zt::ckpt
