// OptimizerSwapper: one rank's fp32 optimizer state (the master weights when
// they are a copy, exp_avg, exp_avg_sq, ...) kept in swap files on NVMe and
// streamed through a bounded pool of host buffers, one sub-group at a time.
// This is ZeRO-Infinity's optimizer offload; the update itself is the
// caller's (zero/optimizer_state.h runs the CPU kernels on the buffers).
//
// The state is `kinds` arrays of `total_numel` fp32 elements, each the
// concatenation of this rank's owned shards. Sub-group s covers elements
// [s * S, min((s + 1) * S, total_numel)) of every kind, S = sub_group_numel
// rounded up to a multiple of 1024 elements (4 KiB, the O_DIRECT unit).
// Each kind has its own file, sub-group s at byte s * S * 4, so a sub-group
// is `kinds` sequential transfers.
//
//   auto sw = OptimizerSwapper::Create(options, io);
//   sw->Run(OptimizerSwapper::Access::kReadWrite, [&](const SubGroup& sg, float* const* data) {
//     // data[k] holds elements [sg.begin, sg.end) of kind k; update in place.
//     return absl::OkStatus();
//   });
//
// Buffers are kept between walks (the swap-file analogue of a write-back
// cache): the pool holds P = buffer_count / kinds sub-groups, and what a walk
// leaves in them is used by the next one without a read. Walks alternate
// direction (0..n-1, then n-1..0, ...), so the sub-groups the last walk
// visited last are the ones the next walk visits first: per optimizer step
// only n - P sub-groups are read, and only the first n - P visited in a walk
// are written back during it (their buffers are needed for the misses); the
// last P stay dirty in their buffers, to be updated again first by the next
// walk. When the pool holds the whole state (n <= P) a step moves nothing.
// The I/O that remains is overlapped (DeepSpeed's pipeline_read /
// pipeline_write): with read-ahead, the misses are read into buffers as soon
// as they are free (a finished write-back), as far ahead as the pool allows;
// with write-behind, a write-back is left in flight while the walk goes on
// and a write still in flight when the walk ends completes behind the
// training that follows (the next forward and backward). Without them each
// transfer is waited for when issued. Memory is bounded by the pool, never
// by the model.
//
// The files are current only after Flush() (ReadRange and WriteRange flush
// first, so checkpoints see the current state). Nothing outlives the
// process either way: the files are unlinked once open.
//
// Contract: not thread-safe; one caller (the training thread). Errors are
// Statuses naming the swap file, the sub-group and the offset; a failed
// write-back is reported by the call that finds it (the next Run, ReadRange,
// WriteRange or Flush), and every later call reports it again: after an
// error the state may be partly updated and the caller stops training.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "offload/aligned_buffer.h"
#include "offload/io_engine.h"
#include "offload/swap_file.h"

namespace zt::offload {

struct OptimizerSwapOptions {
  std::string dir;                        // offload_optimizer.nvme_path
  std::string file_prefix = "optimizer";  // files: <dir>/<prefix>.<kind>.swp (unlinked once open)
  std::vector<std::string> kinds;         // e.g. {"master", "exp_avg", "exp_avg_sq"}
  int64_t total_numel = 0;                // elements per kind
  // The config's values, passed as they are: their defaults are written once,
  // in config/config.h (ZeroConfig, OffloadOptimizerConfig), not here.
  int64_t sub_group_numel = 0;  // zero_optimization.sub_group_size; must be > 0
  int buffer_count = 0;         // offload_optimizer.buffer_count; at least kinds.size()
  bool pipeline_read = false;   // offload_optimizer.pipeline_read
  bool pipeline_write = false;  // offload_optimizer.pipeline_write
};

class OptimizerSwapper {
 public:
  // Creates and reserves the files (every SwapFile check applies; the
  // message says how much this rank needs in all) and the buffer pool.
  // InvalidArgument when buffer_count cannot hold one sub-group of every
  // kind (names offload_optimizer.buffer_count and the minimum).
  static absl::StatusOr<std::unique_ptr<OptimizerSwapper>> Create(const OptimizerSwapOptions& options, IoEngine* io);
  // Waits for transfers still in flight: they use the pool's buffers.
  ~OptimizerSwapper();
  OptimizerSwapper(const OptimizerSwapper&) = delete;
  OptimizerSwapper& operator=(const OptimizerSwapper&) = delete;

  struct SubGroup {
    int index = 0;
    int64_t begin = 0;  // first element (of every kind)
    int64_t end = 0;
    bool reverse = false;  // this walk goes from the last sub-group to the first
  };
  enum class Access {
    kReadWrite,  // read, visit, write back (the optimizer step)
    kRead,       // read, visit (saving a checkpoint)
    kWrite,      // visit fills the buffers, write (initialization, loading)
  };
  // The visitor gets data[k] = the sub-group's elements of kind k. With
  // kWrite the buffers hold garbage on entry and the visitor must fill
  // every element. Every sub-group is visited once, in ascending or (every
  // other walk) descending order: see sg.reverse. A visitor error stops the
  // walk and is returned as is (the state is then partly updated).
  using Visitor = std::function<absl::Status(const SubGroup& sg, float* const* data)>;
  absl::Status Run(Access access, const Visitor& visit);

  // An update walk (kReadWrite) driven from outside, for an optimizer
  // update that runs while backward still produces gradients: BeginWalk
  // opens it (descending: n-1..0), and each Advance visits, in the walk's
  // order, what `ready` accepts. ready(sg) returns how many of the
  // sub-group's elements, counted from the end the walk enters it by
  // (sg.end when descending, sg.begin ascending), may be visited now; a
  // sub-group partly ready is visited in pieces, each once and in the
  // walk's order, and the visitor's `sg` then spans the piece ([begin,
  // end) and data[k] at its first element). How long Advance waits:
  //  * kNever: it stops where nothing more is ready or the data is not in a
  //    buffer yet;
  //  * kForReady: it waits for the data of what is ready, visits all of it,
  //    and stops where nothing more is ready;
  //  * kToEnd: it finishes the walk as Run does (`ready` must then accept
  //    everything left).
  // Unless finished, it then issues the transfers that bring the next
  // sub-groups in (evicting what the walk needs last, written back first
  // when dirty), so a later call finds them there. Run opens a walk in the
  // alternate direction and makes one kToEnd Advance, visiting whole
  // sub-groups. While a walk is open, Run, Flush and the range copies fail
  // with FailedPrecondition.
  using Ready = std::function<int64_t(const SubGroup& sg)>;
  enum class Wait { kNever, kForReady, kToEnd };
  absl::Status BeginWalk(bool descending);
  absl::Status Advance(const Ready& ready, Wait wait, const Visitor& visit);
  bool walk_open() const { return walk_open_; }
  // The direction of the next Run (it alternates).
  bool next_walk_descending() const { return !reverse_; }

  // Writes back what the buffers hold newer than the files and waits for
  // every transfer; the buffers keep their (now clean) contents.
  absl::Status Flush();

  // Synchronous copies of elements [begin, end) of one kind, at any
  // alignment (through a bounce buffer from the pool): checkpoint I/O.
  absl::Status ReadRange(int kind, int64_t begin, int64_t end, float* dst);
  absl::Status WriteRange(int kind, int64_t begin, int64_t end, const float* src);

  const std::vector<std::string>& kinds() const { return options_.kinds; }
  // "read-ahead + write-behind, 3 sub-groups of 3 x 24 MiB buffers" etc.
  std::string Describe() const;
  uint64_t file_bytes() const;    // reserved on disk, all kinds
  uint64_t buffer_bytes() const;  // host memory of the pool

  struct Stats {
    uint64_t bytes_read = 0;
    uint64_t bytes_written = 0;
    double wait_seconds = 0;   // time Run spent blocked on I/O (not overlapped)
    uint64_t buffer_hits = 0;  // sub-group visits served by a buffer without a read
  };
  int slots() const { return slots_; }  // sub-groups the pool holds
  int num_sub_groups() const { return num_sub_groups_; }
  const Stats& stats() const { return stats_; }

 private:
  OptimizerSwapper() = default;
  // One sub-group's worth of buffers (one per kind), fixed for good.
  struct Slot {
    int occupant = -1;              // sub-group held, -1: none
    std::vector<IoTicket> pending;  // its read or write-back in flight
    bool pending_write = false;
    bool dirty = false;    // newer than the files, no write-back issued
    int64_t visited = -1;  // walk * n + position of the last visit, -1: never
    int64_t read_in = -1;  // the walk that read it in, -1: none
  };
  SubGroup SubGroupAt(int s) const;
  int SlotOf(int s) const;
  // Issues slot j's transfers for its occupant (all kinds).
  void Issue(int j, bool write);
  // Waits for slot j's transfers; errors become sticky.
  void WaitSlot(int j);
  // True when slot j has nothing in flight (collecting what finished).
  bool Idle(int j);
  // The slot to give the sub-group at `pos` of the current walk, among
  // those not `claimed`: empty; else visited this walk, earliest visit
  // first (its write-back is likeliest done); else an occupant the walk
  // visits after `pos`, the one furthest ahead. -1 when none qualifies.
  int Victim(int64_t pos, const std::vector<char>* claimed = nullptr) const;
  // Victim(pos), emptied: blocking (writes back a dirty one and waits). -1
  // only after an error.
  int TakeSlot(int64_t pos);
  // A slot free right now for read-ahead (empty, or visited this walk and
  // clean with nothing in flight); -1 when none.
  int FreeSlotNow();
  // Non-blocking reads of the walk's sub-groups at positions [from, to)
  // that no buffer holds, in order, as long as the pool has a slot now;
  // with `evict` also into each position's Victim, issuing its write-back
  // first where it is dirty (a later call then reads into it).
  void ReadAhead(int64_t from, int64_t to, bool evict);
  int At(int64_t pos) const { return static_cast<int>(reverse_ ? num_sub_groups_ - 1 - pos : pos); }
  absl::Status CheckNoWalk(const char* what) const;
  // Opens a walk of `access` (Run, or BeginWalk with `driven`).
  absl::Status OpenWalk(Access access, bool descending, bool driven);
  // Drops slot j's contents (waits for its transfers first).
  void Drop(int j);
  uint64_t IoBytes(const SubGroup& sg) const;  // aligned transfer size per kind
  // Copies [begin, end) of one kind through the bounce buffer, a buffer-sized
  // aligned window at a time: into `read_into`, or from `write_from`
  // (read-modify-write of partially covered blocks).
  absl::Status BounceRange(int kind, int64_t begin, int64_t end, float* read_into, const float* write_from);
  absl::Status Annotate(const absl::Status& st, const char* what, int s) const;

  OptimizerSwapOptions options_;
  IoEngine* io_ = nullptr;
  std::vector<SwapFile> files_;  // one per kind
  std::unique_ptr<BufferPool> pool_;
  int64_t sub_group_numel_ = 0;
  int num_sub_groups_ = 0;
  int slots_ = 1;
  bool read_ahead_ = false;
  bool write_behind_ = false;
  std::vector<Slot> slot_;
  int64_t walk_ = 0;        // walks started
  int64_t walk_begin_ = 0;  // walk_ * n: Slot::visited at or above this is this walk's
  bool reverse_ = true;     // direction of the last walk (the first goes up)
  bool walk_open_ = false;  // BeginWalk .. the Advance that visits the last sub-group (or fails)
  Access walk_access_ = Access::kReadWrite;
  bool driven_ = false;    // the open walk came from BeginWalk: it always overlaps its I/O
  int64_t walk_pos_ = 0;   // the open walk's next position
  int64_t walk_done_ = 0;  // elements of the sub-group at walk_pos_ visited already (a partly ready one)
  absl::Status error_;     // sticky: the first I/O failure
  Stats stats_;
};

}  // namespace zt::offload
