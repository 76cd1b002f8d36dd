// CRC-32 of records that are read in pieces (a consolidation reads a group's
// record parameter by parameter; a reshard reads the ranges a new rank owns).
//
// Checking the whole record before the first partial read costs a second
// pass over the bytes, which made consolidation and conversion read the
// optimizer files twice. Instead the verifier hashes the bytes the caller
// has just read, as long as they continue the record front to back, and
// compares against the zip directory when the record's last byte is in.
// What was skipped or read out of order is read once more by Finish.
//
// Contract for callers: bytes from a partial read may come from a record
// whose CRC is not checked yet. Call Finish() before anything built from
// them is published (a file renamed into place, an engine's state replaced).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "ckpt/format/pt_file.h"
#include "ckpt/format/value.h"

namespace zt::ckpt {

class RecordVerifier {
 public:
  // Bytes [offset, offset + n) of the record behind `t` in `file` were just
  // read into `data`. Extends the record's running CRC-32 when they reach
  // past what it covers and start at or before its end; when the record is
  // complete, compares (a DataLoss error naming the file and record on a
  // mismatch). Bytes that leave a gap are left to Finish. Thread-safe.
  absl::Status Consumed(const PtReader& file, const TensorRef& t, uint64_t offset, const void* data, uint64_t n)
      ABSL_LOCKS_EXCLUDED(mu_);
  // The record was read whole and its CRC checked on the way.
  void Checked(const PtReader& file, const TensorRef& t) ABSL_LOCKS_EXCLUDED(mu_);
  // Whether the record's CRC has been checked.
  bool IsChecked(const PtReader& file, const std::string& record) const ABSL_LOCKS_EXCLUDED(mu_);
  // Reads the unhashed rest of every record a partial read touched and
  // checks it; a mismatch found before is reported again. Records never
  // read are not checked (VerifyAll does that).
  absl::Status Finish() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Progress {
    uint64_t size = 0;     // the record's bytes
    uint64_t hashed = 0;   // the CRC covers [0, hashed)
    uint32_t crc = 0;      // of [0, hashed)
    bool hashing = false;  // a thread is extending it (outside the lock)
    bool checked = false;
    absl::Status error;  // a mismatch found, reported again by Finish
  };
  using Key = std::pair<const PtReader*, std::string>;

  mutable absl::Mutex mu_;
  std::map<Key, Progress> records_ ABSL_GUARDED_BY(mu_);
};

}  // namespace zt::ckpt
