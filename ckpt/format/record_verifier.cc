// Implementation of ckpt/format/record_verifier.h.
#include "ckpt/format/record_verifier.h"

#include <algorithm>

#include "absl/strings/str_format.h"
#include "ckpt/format/crc32.h"
#include "util/status.h"

namespace zt::ckpt {

absl::Status RecordVerifier::Consumed(const PtReader& file, const TensorRef& t, uint64_t offset, const void* data,
                                      uint64_t n) {
  const Key key{&file, t.record};
  uint64_t from = 0;
  uint32_t crc = 0;
  {
    absl::MutexLock lock(&mu_);
    Progress& p = records_[key];
    p.size = t.storage_nbytes;
    // Nothing to add: checked already, another thread is hashing, a gap
    // before these bytes, or bytes the CRC covers already.
    if (p.checked || p.hashing || offset > p.hashed || offset + n <= p.hashed) return absl::OkStatus();
    p.hashing = true;
    from = p.hashed;
    crc = p.crc;
  }
  const uint64_t end = offset + n;
  crc = Crc32(crc, static_cast<const char*>(data) + (from - offset), static_cast<size_t>(end - from));
  absl::MutexLock lock(&mu_);
  Progress& p = records_[key];
  p.hashing = false;
  p.hashed = end;
  p.crc = crc;
  if (end < p.size) return absl::OkStatus();
  p.checked = true;
  if (crc != t.crc32) {
    p.error = absl::DataLossError(absl::StrFormat(
        "checkpoint file '%s': record '%s' CRC-32 mismatch (file corrupted?): the directory says %08x, its %d bytes "
        "hash to %08x",
        file.path(), t.record, t.crc32, p.size, crc));
  }
  return p.error;
}

void RecordVerifier::Checked(const PtReader& file, const TensorRef& t) {
  absl::MutexLock lock(&mu_);
  Progress& p = records_[{&file, t.record}];
  p.size = t.storage_nbytes;
  p.checked = true;
}

bool RecordVerifier::IsChecked(const PtReader& file, const std::string& record) const {
  absl::MutexLock lock(&mu_);
  auto it = records_.find({&file, record});
  return it != records_.end() && it->second.checked;
}

absl::Status RecordVerifier::Finish() {
  absl::MutexLock lock(&mu_);
  for (auto& [key, p] : records_) {
    ZT_RETURN_IF_ERROR(p.error);
    if (p.checked) continue;
    // Under the lock: Finish runs after the reads it covers, never beside them.
    p.error = key.first->VerifyRecordFrom(key.second, p.hashed, p.crc);
    p.checked = true;
    ZT_RETURN_IF_ERROR(p.error);
  }
  return absl::OkStatus();
}

}  // namespace zt::ckpt
