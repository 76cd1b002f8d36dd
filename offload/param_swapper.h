// ParamSwapper: stage-3 parameter shards (bytes of the model's dtype) kept in
// one swap file per rank and brought into a bounded pool of host buffers
// when a gather or the optimizer needs them, or ahead of that (read-ahead
// driven by the stage-3 prefetch plan). ZeRO-Infinity's parameter offload.
//
// Each swapped shard is a "slot" with a fixed place in the file. A slot is
//   on disk   -> no buffer;
//   reading   -> a buffer, a read in flight;
//   resident  -> a buffer holding its current bytes (pinned while acquired,
//                else a clean cached copy that may be evicted at any time);
//   writing   -> a buffer whose bytes are being written back.
// Buffers go, in this order of preference, from: the free list, the least
// recently used idle copy (resident or being written back, not pinned, not
// read ahead; a write-back still running is waited for, so that which copy
// goes never depends on the disk's speed), then, waiting where needed, any unpinned
// resident slot, the oldest write, an unpinned read in flight (waited for,
// then dropped). When every buffer is pinned, Acquire returns
// ResourceExhausted and the caller must release one (the stage-3
// coordinator waits for a gather that holds one). Read-ahead never takes
// the last buffer, never waits for a read and never evicts anything but
// idle copies; a slot it names that is already here is kept for its coming
// use.
// Reads (on demand and ahead) go to the engine as IoPriority::kUrgent: a
// gather waits for them, so they start before the optimizer state's
// transfers queued earlier; write-backs stay background.
//
// Contract: not thread-safe (the coordinator calls it under its mutex).
// Buffers handed out stay valid until Release. I/O errors come back as
// Statuses naming the swap file, the slot and the offset.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "offload/aligned_buffer.h"
#include "offload/io_engine.h"
#include "offload/swap_file.h"
#include "offload/swap_stats.h"

namespace zt::offload {

struct ParamSwapOptions {
  std::string dir;  // offload_param.nvme_path
  std::string file_name = "params.swp";
  std::vector<uint64_t> slot_bytes;     // bytes of each swapped shard
  std::vector<std::string> slot_names;  // for messages ("unit 'h.3' chunk 7")
  int buffer_count = 0;                 // offload_param.buffer_count (at least 1)
  uint64_t buffer_bytes = 0;            // offload_param.buffer_size x element size
};

class ParamSwapper {
 public:
  // Creates and reserves the file and the pool. InvalidArgument when a slot
  // does not fit a buffer (the message names the largest shard and
  // offload_param.buffer_size) or buffer_count < 1.
  static absl::StatusOr<std::unique_ptr<ParamSwapper>> Create(const ParamSwapOptions& options, IoEngine* io);
  // Waits for transfers still in flight: they use the pool's buffers.
  ~ParamSwapper();
  ParamSwapper(const ParamSwapper&) = delete;
  ParamSwapper& operator=(const ParamSwapper&) = delete;

  // What the caller of Acquire does with the slot's bytes.
  enum class Access {
    kOverwrite,  // replaces all of them and reads none: nothing is read from
                 // disk, the buffer's contents are unspecified
    kUpdate,     // reads and changes them (then Release with dirty = true)
    kRead,       // only reads them (Release with dirty = false); a write-back
                 // of the same bytes still running is not waited for
  };
  // Pins slot `s` in a buffer and returns it; except with kOverwrite, the
  // buffer holds the slot's bytes (read from disk unless already here).
  // ResourceExhausted when every buffer is pinned.
  absl::StatusOr<void*> Acquire(int s, Access access);
  // Unpins; `dirty` writes the buffer back (asynchronously; the slot stays
  // resident and readable meanwhile).
  absl::Status Release(int s, bool dirty);
  // A hint that Acquire(s, kRead or kUpdate) comes soon. While fewer than
  // buffer_count - 1 slots are read ahead and unused: starts reading slot
  // `s` if it is on disk and a buffer is free or holds an idle copy, or,
  // when it is here already (resident, reading or being written), marks it
  // read ahead so that later read-aheads do not evict it. True when the
  // slot is (now) here or in flight; false when nothing was done (the caller
  // stops hinting further slots). Waits for nothing but the write-back of the
  // idle copy it replaces. The idle copies of the slots in `keep` (needed
  // before `s`) are not evicted for it.
  bool TryReadAhead(int s, const std::vector<int>& keep = {});
  // Waits for every write (e.g. before a checkpoint reads the file).
  absl::Status Flush();

  bool resident(int s) const;  // in a buffer or on its way there
  int buffer_count() const { return pool_ ? pool_->count() : 0; }
  uint64_t buffer_bytes() const { return pool_ ? pool_->total_bytes() : 0; }

  using Stats = ParamSwapStats;
  const Stats& stats() const { return stats_; }

 private:
  enum class State { kDisk, kReading, kResident, kWriting };
  struct Slot {
    uint64_t offset = 0;
    uint64_t bytes = 0;
    State state = State::kDisk;
    int buffer = -1;
    int pins = 0;
    bool ahead = false;         // read ahead and not acquired since
    bool write_failed = false;  // its last write-back failed: the file is stale, the bytes stay
    IoTicket ticket = 0;        // the read or write in flight
  };

  ParamSwapper() = default;
  // A buffer for a new occupant, evicting as described above; -1 when every
  // buffer is pinned. `error` receives an I/O failure met on the way.
  int TakeBuffer(absl::Status* error);
  // A free buffer, or one taken from an idle (resident or being written back,
  // unpinned, not read ahead, not in `keep`) cached copy; -1 otherwise.
  // Waits only for that copy's write-back.
  int TakeIdleBuffer(const std::vector<int>& keep);
  // A write-back failure met where no caller could be told (TakeIdleBuffer),
  // handed to the next Acquire or Flush; cleared once returned.
  absl::Status TakeDeferredError();
  // Takes a slot's buffer away (the slot goes back to disk) and returns it;
  // Evict counts it as an eviction.
  int Detach(int s);
  int Evict(int s);
  absl::Status WaitSlot(int s);  // finishes the slot's read or write
  void Touch(int s);             // most recently used
  absl::Status Annotate(const absl::Status& st, int s, const char* what) const;

  ParamSwapOptions options_;
  IoEngine* io_ = nullptr;
  std::unique_ptr<SwapFile> file_;
  std::unique_ptr<BufferPool> pool_;
  std::vector<Slot> slots_;
  std::list<int> lru_;   // resident, reading or writing slots, least recent first
  int ahead_count_ = 0;  // slots with `ahead` set
  absl::Status deferred_error_;
  Stats stats_;
};

}  // namespace zt::offload
