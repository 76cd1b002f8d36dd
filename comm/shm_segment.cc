// Implementation of comm/shm_segment.h.
#include "comm/shm_segment.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <fstream>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "comm/transport.h"

namespace zt::comm {

namespace {
constexpr uint64_t kMagic = 0x7a74'73686d'0001ULL;  // "zt shm", layout version 1
constexpr int kReasonBytes = 1024;
constexpr int64_t kAlign = 64;

int64_t RoundUp(int64_t v) { return (v + kAlign - 1) / kAlign * kAlign; }

// The barrier words each live on a cache line of their own: ranks spin on
// `generation` while others add to `arrived`.
}  // namespace

struct ShmControl {
  uint64_t magic;
  uint64_t token;
  int64_t ranks;
  int64_t slot_bytes;
  int64_t total_bytes;
  alignas(64) uint32_t arrived;     // ranks in the current barrier
  alignas(64) uint32_t generation;  // barriers completed; the futex word
  alignas(64) uint32_t sleepers;    // ranks inside FUTEX_WAIT: the last arriver wakes only if any
  alignas(64) uint32_t aborted;     // 0, or 1 + the group rank that aborted first
  char reason[kReasonBytes];        // written before `aborted` is raised
};

// One per rank, a cache line each.
struct alignas(64) ShmRankRecord {
  int32_t pid;
  uint32_t entered;       // barriers this rank entered: who is missing, for messages
  uint64_t signature[2];  // per parity: the collective this rank's round belongs to
};

namespace {

int FutexWait(uint32_t* word, uint32_t expected, std::chrono::microseconds timeout) {
  timespec ts{static_cast<time_t>(timeout.count() / 1000000), static_cast<long>(timeout.count() % 1000000) * 1000};
  return static_cast<int>(syscall(SYS_futex, word, FUTEX_WAIT, expected, &ts, nullptr, 0));
}
void FutexWakeAll(uint32_t* word) { syscall(SYS_futex, word, FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0); }

uint32_t Load(const uint32_t* w) { return __atomic_load_n(w, __ATOMIC_SEQ_CST); }

// A process that no longer runs: gone (ESRCH), or a zombie its parent has
// not reaped yet (kill() still succeeds on those).
bool ProcessGone(pid_t pid) {
  if (pid <= 0) return false;
  if (::kill(pid, 0) != 0) return errno == ESRCH;
  std::ifstream stat(absl::StrCat("/proc/", pid, "/stat"));
  std::string line;
  if (!std::getline(stat, line)) return false;
  const size_t close = line.rfind(')');
  if (close == std::string::npos || close + 2 >= line.size()) return false;
  const char state = line[close + 2];
  return state == 'Z' || state == 'X';
}

std::string Errno(int err) { return absl::StrCat(std::strerror(err), " (errno ", err, ")"); }

void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

}  // namespace

int64_t ShmSegmentBytes(int ranks, int64_t slot_bytes) {
  const int64_t control = RoundUp(sizeof(ShmControl));
  const int64_t records = RoundUp(static_cast<int64_t>(sizeof(ShmRankRecord)) * ranks);
  const int64_t headers = RoundUp(int64_t{ShmSegment::kHeaderWords} * 8 * ranks);
  const int64_t area = headers + RoundUp(slot_bytes) * ranks;
  return control + records + 2 * area;
}

ShmSegment::ShmSegment(std::string name, void* base, int64_t total_bytes, int ranks, int64_t slot_bytes, bool owner)
    : name_(std::move(name)),
      base_(static_cast<uint8_t*>(base)),
      total_bytes_(total_bytes),
      ranks_(ranks),
      slot_bytes_(slot_bytes),
      owner_(owner),
      control_(static_cast<ShmControl*>(base)),
      pid_offset_(RoundUp(sizeof(ShmControl))),
      area_offset_(pid_offset_ + RoundUp(static_cast<int64_t>(sizeof(ShmRankRecord)) * ranks)),
      header_bytes_(RoundUp(int64_t{kHeaderWords} * 8 * ranks)) {}

absl::StatusOr<std::unique_ptr<ShmSegment>> ShmSegment::Create(int ranks, int64_t slot_bytes) {
  std::random_device rd;
  const uint64_t token = (uint64_t{rd()} << 32) ^ rd();
  const std::string name = absl::StrFormat("/zt-%d-%016x", static_cast<int>(getpid()), token);
  const int64_t bytes = ShmSegmentBytes(ranks, slot_bytes);
  const int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0) {
    return absl::UnavailableError(
        absl::StrCat("could not create the shared-memory segment ", name, ": ", Errno(errno)));
  }
  auto fail = [&](const std::string& what, absl::StatusCode code = absl::StatusCode::kUnavailable) {
    ::close(fd);
    shm_unlink(name.c_str());
    return absl::Status(code, what);
  };
  // posix_fallocate reserves the pages now: a tmpfs without room says so here
  // (ENOSPC) instead of killing a rank with SIGBUS at its first write.
  if (const int err = posix_fallocate(fd, 0, bytes); err != 0) {
    return fail(absl::StrCat("could not reserve ", bytes >> 20, " MiB of shared memory for ", ranks, " ranks (", name,
                             " in /dev/shm): ", Errno(err),
                             "; enlarge /dev/shm (docker run --shm-size=1g) or set ZT_COMM_BACKEND=gloo"),
                err == ENOSPC ? absl::StatusCode::kResourceExhausted : absl::StatusCode::kUnavailable);
  }
  void* base = mmap(nullptr, static_cast<size_t>(bytes), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED)
    return fail(absl::StrCat("could not map the shared-memory segment ", name, ": ", Errno(errno)));
  ::close(fd);
  std::unique_ptr<ShmSegment> seg(new ShmSegment(name, base, bytes, ranks, slot_bytes, /*owner=*/true));
  ShmControl* c = seg->control_;
  c->token = token;
  c->ranks = ranks;
  c->slot_bytes = slot_bytes;
  c->total_bytes = bytes;
  __atomic_store_n(&c->magic, kMagic, __ATOMIC_RELEASE);
  return seg;
}

absl::StatusOr<std::unique_ptr<ShmSegment>> ShmSegment::CreateFitting(int ranks, int64_t slot_bytes,
                                                                      int64_t min_slot_bytes) {
  absl::StatusOr<std::unique_ptr<ShmSegment>> made = Create(ranks, slot_bytes);
  while (!made.ok() && made.status().code() == absl::StatusCode::kResourceExhausted &&
         slot_bytes / 2 >= min_slot_bytes) {
    slot_bytes /= 2;
    made = Create(ranks, slot_bytes);
  }
  return made;
}

absl::StatusOr<std::unique_ptr<ShmSegment>> ShmSegment::Open(const std::string& name, uint64_t token, int ranks,
                                                             int64_t slot_bytes) {
  const int64_t bytes = ShmSegmentBytes(ranks, slot_bytes);
  const int fd = shm_open(name.c_str(), O_RDWR, 0);
  if (fd < 0) {
    return absl::UnavailableError(absl::StrCat("could not open the shared-memory segment ", name,
                                               " that rank 0 created: ", Errno(errno),
                                               " (the ranks are not on one host, or do not share /dev/shm)"));
  }
  struct stat st {};
  if (fstat(fd, &st) != 0 || st.st_size != bytes) {
    ::close(fd);
    return absl::InvalidArgumentError(absl::StrCat("the shared-memory segment ", name, " has ",
                                                   static_cast<int64_t>(st.st_size), " bytes, not the ", bytes,
                                                   " expected for ", ranks, " ranks"));
  }
  void* base = mmap(nullptr, static_cast<size_t>(bytes), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (base == MAP_FAILED) {
    return absl::UnavailableError(absl::StrCat("could not map the shared-memory segment ", name, ": ", Errno(errno)));
  }
  std::unique_ptr<ShmSegment> seg(new ShmSegment(name, base, bytes, ranks, slot_bytes, /*owner=*/false));
  const ShmControl* c = seg->control_;
  if (__atomic_load_n(&c->magic, __ATOMIC_ACQUIRE) != kMagic || c->token != token || c->ranks != ranks ||
      c->slot_bytes != slot_bytes || c->total_bytes != bytes) {
    return absl::InvalidArgumentError(absl::StrCat("the shared-memory segment ", name,
                                                   " is not the one rank 0 announced (token, rank count or "
                                                   "slot size differ)"));
  }
  return seg;
}

ShmSegment::~ShmSegment() {
  if (owner_) Unlink();
  munmap(base_, static_cast<size_t>(total_bytes_));
}

void ShmSegment::Unlink() {
  if (unlinked_ || !owner_) return;
  shm_unlink(name_.c_str());
  unlinked_ = true;
}

uint64_t ShmSegment::token() const { return control_->token; }

uint8_t* ShmSegment::slot(int parity, int rank) const {
  const int64_t area = header_bytes_ + RoundUp(slot_bytes_) * ranks_;
  return base_ + area_offset_ + parity * area + header_bytes_ + RoundUp(slot_bytes_) * rank;
}

int64_t* ShmSegment::header(int parity, int rank) const {
  const int64_t area = header_bytes_ + RoundUp(slot_bytes_) * ranks_;
  return reinterpret_cast<int64_t*>(base_ + area_offset_ + parity * area + int64_t{kHeaderWords} * 8 * rank);
}

void ShmSegment::SetPid(int rank, pid_t pid) {
  auto* rec = reinterpret_cast<ShmRankRecord*>(base_ + pid_offset_) + rank;
  __atomic_store_n(&rec->pid, static_cast<int32_t>(pid), __ATOMIC_RELEASE);
}

void ShmSegment::CheckPeers(int rank, const std::vector<int>& world_ranks, bool check_pids) const {
  const uint32_t aborted = Load(&control_->aborted);
  // UINT32_MAX: a rank is writing its reason; the next check reads it.
  if (aborted != 0 && aborted != UINT32_MAX) {
    const int who = static_cast<int>(aborted) - 1;
    const std::string reason(control_->reason, strnlen(control_->reason, kReasonBytes));
    throw TransportError(absl::StatusCode::kUnavailable,
                         who == rank ? absl::StrCat("this rank aborted the group: ", reason)
                                     : absl::StrCat("rank ", world_ranks[who], " aborted the group: ", reason));
  }
  if (!check_pids) return;
  const auto* recs = reinterpret_cast<const ShmRankRecord*>(base_ + pid_offset_);
  for (int r = 0; r < ranks_; ++r) {
    if (r == rank) continue;
    const pid_t pid = __atomic_load_n(&recs[r].pid, __ATOMIC_ACQUIRE);
    if (ProcessGone(pid)) {
      throw TransportError(absl::StatusCode::kUnavailable,
                           absl::StrCat("peer rank ", world_ranks[r], " (pid ", pid,
                                        ") exited while this rank waited for it in shared memory"));
    }
  }
}

void ShmSegment::Barrier(int rank, int parity, uint64_t signature, Clock::time_point deadline,
                         const std::vector<int>& world_ranks, std::chrono::milliseconds budget) {
  auto* recs = reinterpret_cast<ShmRankRecord*>(base_ + pid_offset_);
  __atomic_store_n(&recs[rank].signature[parity], signature, __ATOMIC_RELAXED);
  Wait(rank, deadline, world_ranks, budget);
  // Every rank wrote its signature before arriving (the barrier orders it);
  // none can write this parity's again before this rank's next barrier.
  for (int r = 0; r < ranks_; ++r) {
    const uint64_t theirs = __atomic_load_n(&recs[r].signature[parity], __ATOMIC_RELAXED);
    if (theirs != signature) {
      throw TransportError(absl::StatusCode::kFailedPrecondition,
                           absl::StrCat("ranks disagree in shared memory: rank ", world_ranks[r], " is in collective #",
                                        theirs >> 32, " while rank ", world_ranks[rank], " is in #", signature >> 32,
                                        signature >> 32 == theirs >> 32 ? " of another kind or size" : "",
                                        ": every rank must issue the same collectives in the same order"));
    }
  }
}

void ShmSegment::Wait(int rank, Clock::time_point deadline, const std::vector<int>& world_ranks,
                      std::chrono::milliseconds budget) {
  ShmControl* c = control_;
  auto* recs = reinterpret_cast<ShmRankRecord*>(base_ + pid_offset_);
  const uint32_t gen = Load(&c->generation);
  __atomic_store_n(&recs[rank].entered, gen + 1, __ATOMIC_RELAXED);
  if (__atomic_add_fetch(&c->arrived, 1, __ATOMIC_SEQ_CST) == static_cast<uint32_t>(ranks_)) {
    __atomic_store_n(&c->arrived, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&c->generation, gen + 1, __ATOMIC_SEQ_CST);
    if (Load(&c->sleepers) != 0) FutexWakeAll(&c->generation);
    return;
  }
  // A short spin covers peers that are a few microseconds behind without a
  // system call; then sleep on the futex in slices, checking the abort flag,
  // the deadline and the peers' processes between them.
  const auto spin_end = Clock::now() + std::chrono::microseconds(30);
  for (int i = 0;; ++i) {
    if (Load(&c->generation) != gen) return;
    CpuRelax();
    if ((i & 63) == 63 && Clock::now() > spin_end) break;
  }
  auto next_pid_check = Clock::now() + std::chrono::milliseconds(100);
  for (;;) {
    __atomic_add_fetch(&c->sleepers, 1, __ATOMIC_SEQ_CST);
    FutexWait(&c->generation, gen, std::chrono::milliseconds(20));
    __atomic_sub_fetch(&c->sleepers, 1, __ATOMIC_SEQ_CST);
    if (Load(&c->generation) != gen) return;
    const auto now = Clock::now();
    const bool check_pids = now >= next_pid_check;
    if (check_pids) next_pid_check = now + std::chrono::milliseconds(100);
    CheckPeers(rank, world_ranks, check_pids);
    if (now >= deadline) {
      std::vector<int> missing;
      for (int r = 0; r < ranks_; ++r) {
        if (__atomic_load_n(&recs[r].entered, __ATOMIC_RELAXED) != gen + 1) missing.push_back(world_ranks[r]);
      }
      throw TransportError(
          absl::StatusCode::kDeadlineExceeded,
          absl::StrCat("Timed out after ", budget.count(), "ms (collective deadline) in shared memory",
                       missing.empty() ? std::string()
                                       : absl::StrCat(" waiting for ranks [", absl::StrJoin(missing, ", "), "]")));
    }
  }
}

void ShmSegment::Abort(int rank, const std::string& reason) {
  ShmControl* c = control_;
  // The reason is written before the flag, by whoever wins a claim on it.
  uint32_t expected = 0;
  static_assert(sizeof(uint32_t) == 4);
  if (__atomic_load_n(&c->aborted, __ATOMIC_SEQ_CST) == 0) {
    // Claim with a value no rank uses (UINT32_MAX) while the reason is copied.
    if (__atomic_compare_exchange_n(&c->aborted, &expected, UINT32_MAX, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
      const size_t n = std::min(reason.size(), static_cast<size_t>(kReasonBytes - 1));
      std::memcpy(c->reason, reason.data(), n);
      c->reason[n] = '\0';
      __atomic_store_n(&c->aborted, static_cast<uint32_t>(rank + 1), __ATOMIC_SEQ_CST);
    }
  }
  FutexWakeAll(&c->generation);
}

}  // namespace zt::comm
