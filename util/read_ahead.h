// ReadAhead: a sequence of reads done in order on one background thread,
// ahead of a consumer that takes their bytes one piece at a time (the
// conversion and consolidation tools: read a piece of a checkpoint, hash
// it, write it to another file).
//
// Why one thread and a lead counted in bytes:
// - The disk should always have the next read to do while the consumer
//   hashes and writes; starting each read only when the consumer asks for
//   the piece before it leaves both the disk and the reader idle for the
//   consumer's CPU work (a 4 GB conversion spent 2.2 of its 8.9 s with no
//   I/O in flight at all).
// - Reads run one after another, never side by side: parallel reads take
//   the disk from the consumer's writes (a 1 GB export ran 40% slower).
// - The lead is bytes, not pieces: small pieces (biases, norms) between
//   large ones would use up a piece-counted lead, and the consumer would
//   then wait for a whole large read at every such boundary.
#pragma once

#include <cstddef>
#include <functional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"

namespace zt {

class ReadAhead {
 public:
  // Reads the piece's `bytes` into `dst` (which holds that many). Runs on
  // the reader thread, one call at a time, in piece order.
  using ReadFn = std::function<absl::Status(char* dst)>;
  struct Piece {
    size_t bytes = 0;
    ReadFn read;
  };

  // Starts reading at once. Pieces past the one the consumer holds are read
  // while they hold fewer than `lead_bytes` (the piece the consumer waits
  // for is always read) and at most `slots - 1` pieces are buffered. Each
  // slot keeps the largest piece it held (no allocation per piece), so
  // memory is at most `slots` times the largest piece: with 4 slots, room
  // for a lead of two large pieces with small ones between them.
  ReadAhead(std::vector<Piece> pieces, size_t lead_bytes, size_t slots = 4);
  // Stops the reader after the read in progress (if any).
  ~ReadAhead() ABSL_LOCKS_EXCLUDED(mu_);
  ReadAhead(const ReadAhead&) = delete;
  ReadAhead& operator=(const ReadAhead&) = delete;

  // The next piece's bytes, valid until the following call. After the
  // last piece, or once a read failed, returns an error (the read's own
  // status for the piece that failed).
  absl::StatusOr<absl::Span<const char>> Next() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  bool MayRead(size_t i) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ReadAll() ABSL_LOCKS_EXCLUDED(mu_);

  const std::vector<Piece> pieces_;
  const size_t lead_bytes_;
  std::vector<std::vector<char>> slots_;  // piece i reads into slots_[i % slots_.size()]
  absl::Mutex mu_;
  absl::CondVar cv_;
  size_t next_ ABSL_GUARDED_BY(mu_) = 0;     // the piece Next hands out next; next_ - 1 is held
  size_t read_ ABSL_GUARDED_BY(mu_) = 0;     // pieces [0, read_) are read
  absl::Status error_ ABSL_GUARDED_BY(mu_);  // the reader's error; it stops there
  bool stop_ ABSL_GUARDED_BY(mu_) = false;   // the destructor asked the reader to stop
  std::thread reader_;                       // declared last: started after the rest, joined first
};

}  // namespace zt
