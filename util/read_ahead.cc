// Implementation of util/read_ahead.h.
#include "util/read_ahead.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace zt {

ReadAhead::ReadAhead(std::vector<Piece> pieces, size_t lead_bytes, size_t slots)
    : pieces_(std::move(pieces)), lead_bytes_(lead_bytes), slots_(std::max<size_t>(slots, 2)) {
  reader_ = std::thread([this] { ReadAll(); });
}

ReadAhead::~ReadAhead() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  cv_.SignalAll();
  reader_.join();
}

absl::StatusOr<absl::Span<const char>> ReadAhead::Next() {
  absl::ReleasableMutexLock lock(&mu_);
  if (next_ >= pieces_.size()) {
    return absl::OutOfRangeError(absl::StrCat("read-ahead: all ", pieces_.size(), " pieces were handed out"));
  }
  while (!(read_ > next_ || !error_.ok())) cv_.Wait(&mu_);
  if (read_ <= next_) return error_;
  const size_t i = next_++;  // frees the slot of the piece handed out before
  lock.Release();
  cv_.SignalAll();
  const std::vector<char>& slot = slots_[i % slots_.size()];
  return absl::Span<const char>(slot.data(), pieces_[i].bytes);
}

// Piece i's slot was last used by piece i - slots, which must be before
// the one the consumer holds (next_ - 1); and the pieces read but not yet
// handed out hold fewer than lead_bytes_, unless i is the one the consumer
// needs next.
bool ReadAhead::MayRead(size_t i) const {
  if (i + 1 >= next_ + slots_.size()) return false;
  if (i == next_) return true;
  size_t ahead = 0;
  for (size_t k = next_; k < i; ++k) ahead += pieces_[k].bytes;
  return ahead < lead_bytes_;
}

void ReadAhead::ReadAll() {
  for (size_t i = 0; i < pieces_.size(); ++i) {
    {
      absl::MutexLock lock(&mu_);
      while (!(stop_ || MayRead(i))) cv_.Wait(&mu_);
      if (stop_) return;
    }
    std::vector<char>& slot = slots_[i % slots_.size()];
    if (slot.size() < pieces_[i].bytes) slot.resize(pieces_[i].bytes);
    absl::Status st = pieces_[i].read(slot.data());
    const bool ok = st.ok();
    {
      absl::MutexLock lock(&mu_);
      if (ok) {
        read_ = i + 1;
      } else {
        error_ = std::move(st);
      }
    }
    cv_.SignalAll();
    if (!ok) return;
  }
}

}  // namespace zt
