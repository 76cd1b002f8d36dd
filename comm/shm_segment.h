// A POSIX shared-memory segment the ranks of one host map to exchange
// collective data, with a futex barrier between them. POSIX only (Linux
// futexes); no LibTorch.
//
// Layout: a control block (identity, barrier words, the abort flag and its
// reason, each rank's pid), then two areas ("parities") that alternate
// between rounds, each with a small header record and a data slot of
// `slot_bytes` per rank. A round is: every rank writes its slot of parity p,
// Barrier(), every rank reads the slots it needs of parity p; the next round
// uses the other parity. A rank that passes round k+1's barrier knows every
// rank finished reading round k, so one barrier per round is enough, also
// between consecutive collectives.
//
// Identity: rank 0 creates the segment under a fresh name with a random
// token, the others open it by name and check the token, the rank count and
// the slot size, so a rank can only join the segment it was told about.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace zt::comm {

struct ShmControl;  // comm/shm_segment.cc

class ShmSegment {
 public:
  using Clock = std::chrono::steady_clock;

  // A new segment for `ranks` ranks (name "/zt-<pid>-<random>"); its memory
  // is reserved at once, so a full /dev/shm is an error here (ResourceExhausted,
  // naming the size and what to change), never a SIGBUS later.
  static absl::StatusOr<std::unique_ptr<ShmSegment>> Create(int ranks, int64_t slot_bytes);
  // Create with `slot_bytes`, halved while /dev/shm has no room, down to
  // `min_slot_bytes` (then Create's error); slot_bytes() says what it got.
  static absl::StatusOr<std::unique_ptr<ShmSegment>> CreateFitting(int ranks, int64_t slot_bytes,
                                                                   int64_t min_slot_bytes);
  // Maps the segment `name`; InvalidArgument unless its token, rank count and
  // slot size are the ones given.
  static absl::StatusOr<std::unique_ptr<ShmSegment>> Open(const std::string& name, uint64_t token, int ranks,
                                                          int64_t slot_bytes);
  ~ShmSegment();  // unmaps; the creator also unlinks the name if still there

  // Removes the name (the mapping stays): once every rank mapped it, nothing
  // is left behind in /dev/shm however the processes end.
  void Unlink();

  const std::string& name() const { return name_; }
  uint64_t token() const;
  int ranks() const { return ranks_; }
  int64_t slot_bytes() const { return slot_bytes_; }
  int64_t total_bytes() const { return total_bytes_; }

  uint8_t* slot(int parity, int rank) const;
  int64_t* header(int parity, int rank) const;  // kHeaderWords int64 per rank
  static constexpr int kHeaderWords = 16;

  // Records this rank's pid, so peers can tell that it died.
  void SetPid(int rank, pid_t pid);

  // Waits until every rank entered this barrier. Throws TransportError:
  // kUnavailable when a peer aborted (its reason) or its process is gone,
  // kDeadlineExceeded at `deadline` (naming the ranks that had not arrived),
  // kFailedPrecondition when a peer entered it with another `signature`
  // (the collective and its size: ranks in different collectives would
  // otherwise read each other's slots as their own, silently). `parity`: the
  // round's (a signature lives per parity, so a peer already in the next
  // round cannot overwrite the one being compared). `world_ranks[r]` names
  // group rank r in messages.
  void Barrier(int rank, int parity, uint64_t signature, Clock::time_point deadline,
               const std::vector<int>& world_ranks, std::chrono::milliseconds budget);

  // Raises the abort flag with `reason` (the first reason wins) and wakes
  // every waiter: their barriers throw at once. Thread-safe.
  void Abort(int rank, const std::string& reason);

 private:
  ShmSegment(std::string name, void* base, int64_t total_bytes, int ranks, int64_t slot_bytes, bool owner);
  // The barrier itself, without the signature check.
  void Wait(int rank, Clock::time_point deadline, const std::vector<int>& world_ranks,
            std::chrono::milliseconds budget);
  // Throws when the flag is up or a peer's process is gone.
  void CheckPeers(int rank, const std::vector<int>& world_ranks, bool check_pids) const;

  std::string name_;
  uint8_t* base_;
  int64_t total_bytes_;
  int ranks_;
  int64_t slot_bytes_;
  bool owner_;
  bool unlinked_ = false;
  ShmControl* control_;
  int64_t pid_offset_, area_offset_, header_bytes_;
};

// The bytes a segment for `ranks` ranks with `slot_bytes` slots occupies.
int64_t ShmSegmentBytes(int ranks, int64_t slot_bytes);

}  // namespace zt::comm
