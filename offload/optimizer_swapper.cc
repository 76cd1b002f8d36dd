// Implementation of offload/optimizer_swapper.h: the sub-group walk with
// read-ahead and write-behind over fixed buffer slots, and bounce-buffered
// range copies for checkpoints.
#include "offload/optimizer_swapper.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "offload/host_memory.h"
#include "util/status.h"
#include "util/strings.h"

namespace zt::offload {
namespace {

constexpr int64_t kElemsPerBlock = static_cast<int64_t>(kIoAlignment / sizeof(float));

int64_t RoundUpElems(int64_t n) { return (n + kElemsPerBlock - 1) / kElemsPerBlock * kElemsPerBlock; }

std::string Bytes(uint64_t n) { return HumanBytes(static_cast<double>(n)); }

}  // namespace

absl::StatusOr<std::unique_ptr<OptimizerSwapper>> OptimizerSwapper::Create(const OptimizerSwapOptions& options,
                                                                           IoEngine* io) {
  if (io == nullptr) return absl::InvalidArgumentError("OptimizerSwapper needs an I/O engine");
  if (options.kinds.empty()) return absl::InvalidArgumentError("OptimizerSwapper needs at least one state kind");
  if (options.total_numel < 0 || options.sub_group_numel <= 0) {
    return absl::InvalidArgumentError(absl::StrFormat("OptimizerSwapper: bad sizes (total %d, sub-group %d)",
                                                      options.total_numel, options.sub_group_numel));
  }
  const int kinds = static_cast<int>(options.kinds.size());
  if (options.buffer_count < kinds) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "zero_optimization.offload_optimizer.buffer_count is %d, but one sub-group of this optimizer's state needs "
        "%d buffers (%s); set it to at least %d (%d to overlap reads and writes with the update: pipeline_read and "
        "pipeline_write)",
        options.buffer_count, kinds, absl::StrJoin(options.kinds, ", "), kinds, 3 * kinds));
  }

  std::unique_ptr<OptimizerSwapper> sw(new OptimizerSwapper());
  sw->options_ = options;
  sw->io_ = io;
  // A sub-group never exceeds the state itself: small models get small buffers.
  sw->sub_group_numel_ = std::max<int64_t>(
      kElemsPerBlock, std::min(RoundUpElems(options.sub_group_numel), RoundUpElems(options.total_numel)));
  sw->num_sub_groups_ = static_cast<int>((options.total_numel + sw->sub_group_numel_ - 1) / sw->sub_group_numel_);

  // Slots: every sub-group the pool holds, but no more than there are.
  // Read-ahead needs a second one.
  sw->slots_ = std::max(1, std::min(options.buffer_count / kinds, sw->num_sub_groups_));
  sw->read_ahead_ = options.pipeline_read && sw->slots_ >= 2;
  sw->write_behind_ = options.pipeline_write;
  sw->slot_.resize(static_cast<size_t>(sw->slots_));

  const uint64_t file_bytes = static_cast<uint64_t>(sw->num_sub_groups_) * sw->sub_group_numel_ * sizeof(float);
  if (file_bytes > 0) {
    const uint64_t need = file_bytes * static_cast<uint64_t>(kinds);
    auto free = FreeBytes(options.dir);
    if (free.ok() && *free < need) {
      return absl::ResourceExhaustedError(absl::StrFormat(
          "zero_optimization.offload_optimizer.nvme_path '%s': this rank needs %s for its optimizer state (%d files "
          "of %s: %s) but %s is free; free space there, point nvme_path at a larger drive, or shard over more ranks",
          options.dir, Bytes(need), kinds, Bytes(file_bytes), absl::StrJoin(options.kinds, ", "), Bytes(*free)));
    }
    for (const std::string& kind : options.kinds) {
      auto file = SwapFile::Create(options.dir, absl::StrCat(options.file_prefix, ".", kind, ".swp"), file_bytes);
      if (!file.ok()) {
        return absl::Status(file.status().code(),
                            absl::StrCat("zero_optimization.offload_optimizer.nvme_path: ", file.status().message()));
      }
      sw->files_.push_back(std::move(*file));
    }
  }
  const uint64_t pool_bytes = static_cast<uint64_t>(sw->slots_) * kinds * sw->sub_group_numel_ * sizeof(float);
  ZT_RETURN_IF_ERROR(CheckPoolFits(
      pool_bytes,
      absl::StrFormat("the optimizer swap buffers (%d x %s: %d sub-group%s of %d elements x %d kinds)",
                      sw->slots_ * kinds, Bytes(static_cast<uint64_t>(sw->sub_group_numel_) * sizeof(float)),
                      sw->slots_, sw->slots_ == 1 ? "" : "s", sw->sub_group_numel_, kinds),
      "lower zero_optimization.sub_group_size or offload_optimizer.buffer_count"));
  ZT_ASSIGN_OR_RETURN(
      sw->pool_, BufferPool::Create(sw->slots_ * kinds, static_cast<size_t>(sw->sub_group_numel_) * sizeof(float)));
  sw->pool_->RegisterWith(*io);
  // Slot j owns buffers [j * kinds, (j + 1) * kinds) for good.
  for (int b = 0; b < sw->slots_ * kinds; ++b) {
    const int got = sw->pool_->TryAcquire();
    if (got != b) return absl::InternalError("OptimizerSwapper: buffer pool handed out an unexpected buffer");
  }
  return sw;
}

OptimizerSwapper::SubGroup OptimizerSwapper::SubGroupAt(int s) const {
  SubGroup sg;
  sg.index = s;
  sg.begin = static_cast<int64_t>(s) * sub_group_numel_;
  sg.end = std::min(options_.total_numel, sg.begin + sub_group_numel_);
  return sg;
}

uint64_t OptimizerSwapper::IoBytes(const SubGroup& sg) const {
  return AlignUp(static_cast<uint64_t>(sg.end - sg.begin) * sizeof(float));
}

uint64_t OptimizerSwapper::file_bytes() const {
  uint64_t n = 0;
  for (const SwapFile& f : files_) n += f.size();
  return n;
}

uint64_t OptimizerSwapper::buffer_bytes() const { return pool_ ? pool_->total_bytes() : 0; }

std::string OptimizerSwapper::Describe() const {
  const char* overlap = read_ahead_ && write_behind_ ? "read-ahead and write-behind"
                        : read_ahead_                ? "read-ahead"
                        : write_behind_              ? "write-behind"
                                                     : "no overlap";
  const int kept = std::min(slots_, num_sub_groups_);
  return absl::StrFormat(
      "%d sub-group%s of up to %d elements x %d kinds (%s) in %s on disk; %s, %d x %d buffers of %s; %d sub-group%s "
      "in buffers between steps, %d read and written per step",
      num_sub_groups_, num_sub_groups_ == 1 ? "" : "s", sub_group_numel_, options_.kinds.size(),
      absl::StrJoin(options_.kinds, ", "), Bytes(file_bytes()), overlap, slots_, options_.kinds.size(),
      Bytes(pool_ ? pool_->buffer_bytes() : 0), kept, kept == 1 ? "" : "s", num_sub_groups_ - kept);
}

absl::Status OptimizerSwapper::Annotate(const absl::Status& st, const char* what, int s) const {
  if (st.ok() || s < 0) return st;
  const SubGroup sg = SubGroupAt(s);
  return absl::Status(st.code(), absl::StrFormat("%s optimizer state sub-group %d (elements %d..%d): %s", what, s,
                                                 sg.begin, sg.end, st.message()));
}

OptimizerSwapper::~OptimizerSwapper() {
  for (Slot& slot : slot_) {
    for (IoTicket t : slot.pending) (void)io_->Wait(t);
  }
}

int OptimizerSwapper::SlotOf(int s) const {
  for (int j = 0; j < slots_; ++j) {
    if (slot_[static_cast<size_t>(j)].occupant == s) return j;
  }
  return -1;
}

void OptimizerSwapper::Issue(int j, bool write) {
  Slot& slot = slot_[static_cast<size_t>(j)];
  const int kinds = static_cast<int>(options_.kinds.size());
  const SubGroup sg = SubGroupAt(slot.occupant);
  const uint64_t offset = static_cast<uint64_t>(sg.begin) * sizeof(float);
  const uint64_t bytes = IoBytes(sg);
  for (int k = 0; k < kinds; ++k) {
    const SwapFile& f = files_[static_cast<size_t>(k)];
    void* buf = pool_->data(j * kinds + k);
    slot.pending.push_back(write ? io_->Write(f, offset, buf, bytes) : io_->Read(f, offset, buf, bytes));
    (write ? stats_.bytes_written : stats_.bytes_read) += bytes;
  }
  slot.pending_write = write;
  if (write) slot.dirty = false;
  if (!write) slot.read_in = walk_;
}

void OptimizerSwapper::WaitSlot(int j) {
  Slot& slot = slot_[static_cast<size_t>(j)];
  if (slot.pending.empty()) return;
  const auto t0 = std::chrono::steady_clock::now();
  absl::Status first;
  for (IoTicket t : slot.pending) {
    absl::Status st = io_->Wait(t);
    if (first.ok() && !st.ok()) first = st;
  }
  slot.pending.clear();
  stats_.wait_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!first.ok()) {
    if (error_.ok()) error_ = Annotate(first, slot.pending_write ? "writing back" : "reading", slot.occupant);
    if (!slot.pending_write) slot.occupant = -1;  // the buffer holds no valid copy
  }
}

bool OptimizerSwapper::Idle(int j) {
  Slot& slot = slot_[static_cast<size_t>(j)];
  for (IoTicket t : slot.pending) {
    if (!io_->Ready(t)) return false;
  }
  WaitSlot(j);  // collects without blocking
  return true;
}

void OptimizerSwapper::Drop(int j) {
  WaitSlot(j);
  Slot& slot = slot_[static_cast<size_t>(j)];
  slot.occupant = -1;
  slot.dirty = false;
  slot.visited = -1;
  slot.read_in = -1;
}

int OptimizerSwapper::Victim(int64_t pos, const std::vector<char>* claimed) const {
  const int n = num_sub_groups_;
  int best = -1;
  int best_class = 3;
  int64_t best_key = 0;
  for (int j = 0; j < slots_; ++j) {
    if (claimed != nullptr && (*claimed)[static_cast<size_t>(j)]) continue;
    const Slot& slot = slot_[static_cast<size_t>(j)];
    int cls;
    int64_t key;
    if (slot.occupant < 0) {
      cls = 0;
      key = 0;
    } else if (slot.visited >= walk_begin_) {
      cls = 1;
      key = slot.visited;
    } else {
      cls = 2;
      const int64_t p = reverse_ ? n - 1 - slot.occupant : slot.occupant;
      if (p <= pos) continue;  // needed no later than the sub-group at `pos`
      key = -p;
    }
    if (cls < best_class || (cls == best_class && key < best_key)) {
      best = j;
      best_class = cls;
      best_key = key;
    }
  }
  return best;
}

int OptimizerSwapper::TakeSlot(int64_t pos) {
  const int best = Victim(pos);
  if (best < 0) return -1;
  Slot& slot = slot_[static_cast<size_t>(best)];
  if (slot.dirty) {
    WaitSlot(best);
    Issue(best, /*write=*/true);
  }
  Drop(best);
  return error_.ok() ? best : -1;
}

int OptimizerSwapper::FreeSlotNow() {
  int best = -1;
  int64_t best_key = 0;
  for (int j = 0; j < slots_; ++j) {
    const Slot& slot = slot_[static_cast<size_t>(j)];
    const bool done_with = slot.occupant < 0 || slot.visited >= walk_begin_;
    if (!done_with || slot.dirty) continue;
    const int64_t key = slot.occupant < 0 ? -1 : slot.visited;
    if (best >= 0 && key >= best_key) continue;
    if (!Idle(j)) continue;
    best = j;
    best_key = key;
  }
  if (best >= 0) Drop(best);
  return best;
}

void OptimizerSwapper::ReadAhead(int64_t from, int64_t to, bool evict) {
  // Each position claims its own victim, so one call starts the transfers
  // of several: write-backs of dirty victims, reads into free ones.
  std::vector<char> claimed(static_cast<size_t>(slots_), 0);
  for (int64_t p = from; p < std::min<int64_t>(to, num_sub_groups_) && error_.ok(); ++p) {
    const int s = At(p);
    if (SlotOf(s) >= 0) continue;
    int f;
    if (evict) {
      f = Victim(p, &claimed);
      if (f < 0) return;
      claimed[static_cast<size_t>(f)] = 1;
      if (!Idle(f)) continue;  // a later call takes it
      if (slot_[static_cast<size_t>(f)].dirty) {
        Issue(f, /*write=*/true);
        continue;
      }
      Drop(f);
    } else {
      f = FreeSlotNow();
      if (f < 0) return;
    }
    slot_[static_cast<size_t>(f)].occupant = s;
    Issue(f, /*write=*/false);
  }
}

absl::Status OptimizerSwapper::CheckNoWalk(const char* what) const {
  if (!walk_open_) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "optimizer state swap: ", what, " while an optimizer update is in progress (walk at sub-group position ",
      walk_pos_, " of ", num_sub_groups_, "); finish the step first"));
}

absl::Status OptimizerSwapper::OpenWalk(Access access, bool descending, bool driven) {
  if (!error_.ok()) return error_;
  ZT_RETURN_IF_ERROR(CheckNoWalk("starting a walk"));
  reverse_ = descending;
  ++walk_;
  walk_begin_ = walk_ * num_sub_groups_;
  walk_pos_ = 0;
  walk_done_ = 0;
  walk_access_ = access;
  walk_open_ = true;
  driven_ = driven;
  return absl::OkStatus();
}

absl::Status OptimizerSwapper::BeginWalk(bool descending) {
  return OpenWalk(Access::kReadWrite, descending, /*driven=*/true);
}

absl::Status OptimizerSwapper::Run(Access access, const Visitor& visit) {
  ZT_RETURN_IF_ERROR(OpenWalk(access, !reverse_, /*driven=*/false));
  return Advance([](const SubGroup& sg) { return sg.end - sg.begin; }, Wait::kToEnd, visit);
}

absl::Status OptimizerSwapper::Advance(const Ready& ready, Wait wait, const Visitor& visit) {
  if (!error_.ok()) {
    walk_open_ = false;
    return error_;
  }
  if (!walk_open_) return absl::FailedPreconditionError("optimizer state swap: Advance without an open walk");
  const int n = num_sub_groups_;
  const int kinds = static_cast<int>(options_.kinds.size());
  const bool reads = walk_access_ != Access::kWrite;
  const bool writes = walk_access_ != Access::kRead;
  const bool read_ahead = read_ahead_ || driven_;
  const bool write_behind = write_behind_ || driven_;
  const bool block = wait != Wait::kNever;
  const bool finish = wait == Wait::kToEnd;

  std::vector<float*> data(static_cast<size_t>(kinds));
  absl::Status first;
  while (walk_pos_ < n && error_.ok()) {
    const int64_t i = walk_pos_;
    const int s = At(i);
    SubGroup sg = SubGroupAt(s);
    sg.reverse = reverse_;
    const int64_t len = sg.end - sg.begin;
    const int64_t ready_n = std::clamp<int64_t>(ready(sg), 0, len);
    if (ready_n <= walk_done_ || (finish && ready_n < len)) {
      if (finish) {
        first = absl::InternalError(
            absl::StrCat("optimizer state swap: sub-group ", s, " was not ready when the walk had to finish"));
        walk_pos_ = n;
        walk_done_ = 0;
      }
      break;
    }
    // A sub-group visited in part keeps its buffer: no victim choice takes
    // the one at walk_pos_.
    int j = SlotOf(s);
    // Without waiting, a miss is left to the read-ahead below: a later call
    // finds it in a buffer.
    if (j < 0 && !block) break;
    if (j < 0) {
      j = TakeSlot(i);
      if (j < 0) break;
      slot_[static_cast<size_t>(j)].occupant = s;
      if (reads) Issue(j, /*write=*/false);
    }
    if (block) {
      // The next misses come in while this one is waited for.
      if (reads && read_ahead) ReadAhead(i + 1, i + slots_, /*evict=*/false);
      WaitSlot(j);  // its read, or a write-back of the buffer still in flight
    } else if (!Idle(j)) {
      break;
    }
    if (!error_.ok()) break;
    Slot& slot = slot_[static_cast<size_t>(j)];
    if (walk_done_ == 0 && slot.read_in != walk_) ++stats_.buffer_hits;
    // The piece: elements [walk_done_, ready_n) of the sub-group counted
    // from the end the walk enters it by.
    SubGroup piece = sg;
    piece.begin = reverse_ ? sg.end - ready_n : sg.begin + walk_done_;
    piece.end = reverse_ ? sg.end - walk_done_ : sg.begin + ready_n;
    for (int k = 0; k < kinds; ++k) {
      data[static_cast<size_t>(k)] = static_cast<float*>(pool_->data(j * kinds + k)) + (piece.begin - sg.begin);
    }
    // Padding past the state's end inside the last block stays as read
    // (zeros from the reservation, or what was written there before).
    absl::Status st = visit(piece, data.data());
    if (writes) slot.dirty = true;  // possibly changed in part, even on error
    if (!st.ok()) {
      slot.visited = walk_begin_ + i;
      first = st;
      walk_pos_ = n;
      walk_done_ = 0;
      break;
    }
    if (ready_n < len) {
      walk_done_ = ready_n;  // the rest when it is ready
      break;
    }
    walk_done_ = 0;
    slot.visited = walk_begin_ + i;
    ++walk_pos_;
    if (writes) {
      // The first n - P visited give their buffers to the misses; the last
      // P stay dirty for the next walk, which visits them first.
      if (i < n - slots_) {
        Issue(j, /*write=*/true);
        if (!write_behind) WaitSlot(j);
      }
    }
  }
  // Not done (a driven walk reads and writes): bring in what the walk needs
  // next, so the next call finds it.
  if (!finish && walk_pos_ < n && error_.ok()) ReadAhead(walk_pos_, walk_pos_ + slots_, /*evict=*/true);
  if (walk_pos_ >= n || !error_.ok()) walk_open_ = false;
  return error_.ok() ? first : error_;
}

absl::Status OptimizerSwapper::Flush() {
  if (!error_.ok()) return error_;
  ZT_RETURN_IF_ERROR(CheckNoWalk("flushing the buffers"));
  for (int j = 0; j < slots_; ++j) {
    Slot& slot = slot_[static_cast<size_t>(j)];
    if (!slot.dirty) continue;
    WaitSlot(j);
    Issue(j, /*write=*/true);
  }
  for (int j = 0; j < slots_; ++j) WaitSlot(j);
  return error_;
}

absl::Status OptimizerSwapper::BounceRange(int kind, int64_t begin, int64_t end, float* read_into,
                                           const float* write_from) {
  const bool write = write_from != nullptr;
  if (kind < 0 || kind >= static_cast<int>(files_.size()) || begin < 0 || end > options_.total_numel || begin > end) {
    return absl::OutOfRangeError(
        absl::StrFormat("optimizer state range %d..%d of kind %d is outside the state "
                        "(%d elements, %d kinds)",
                        begin, end, kind, options_.total_numel, options_.kinds.size()));
  }
  ZT_RETURN_IF_ERROR(CheckNoWalk("copying a range"));
  // The files must be current, and the bounce buffer is slot 0's first
  // buffer; a write makes the copies of the range in buffers stale.
  ZT_RETURN_IF_ERROR(Flush());
  Drop(0);
  if (write) {
    for (int j = 0; j < slots_; ++j) {
      const int occ = slot_[static_cast<size_t>(j)].occupant;
      if (occ < 0) continue;
      const SubGroup sg = SubGroupAt(occ);
      if (sg.begin < end && begin < sg.end) Drop(j);
    }
  }
  const SwapFile& f = files_[static_cast<size_t>(kind)];
  char* bounce = static_cast<char*>(pool_->data(0));
  const uint64_t window = pool_->buffer_bytes();
  uint64_t pos = static_cast<uint64_t>(begin) * sizeof(float);
  const uint64_t stop = static_cast<uint64_t>(end) * sizeof(float);
  char* out = reinterpret_cast<char*>(read_into);
  const char* in = reinterpret_cast<const char*>(write_from);
  while (pos < stop) {
    const uint64_t w_begin = pos / kIoAlignment * kIoAlignment;
    const uint64_t w_end = std::min({w_begin + window, AlignUp(stop), f.size()});
    const uint64_t take = std::min(stop, w_end) - pos;
    const bool whole = pos == w_begin && (pos + take) % kIoAlignment == 0;
    if (!write || !whole) {
      absl::Status st = io_->ReadSync(f, w_begin, bounce, w_end - w_begin);
      if (!st.ok())
        return absl::Status(st.code(), absl::StrCat("reading optimizer state '",
                                                    options_.kinds[static_cast<size_t>(kind)], "': ", st.message()));
      stats_.bytes_read += w_end - w_begin;
    }
    if (write) {
      std::memcpy(bounce + (pos - w_begin), in, take);
      in += take;
      absl::Status st = io_->WriteSync(f, w_begin, bounce, w_end - w_begin);
      if (!st.ok())
        return absl::Status(st.code(), absl::StrCat("writing optimizer state '",
                                                    options_.kinds[static_cast<size_t>(kind)], "': ", st.message()));
      stats_.bytes_written += w_end - w_begin;
    } else {
      std::memcpy(out, bounce + (pos - w_begin), take);
      out += take;
    }
    pos += take;
  }
  return absl::OkStatus();
}

absl::Status OptimizerSwapper::ReadRange(int kind, int64_t begin, int64_t end, float* dst) {
  return BounceRange(kind, begin, end, dst, nullptr);
}

absl::Status OptimizerSwapper::WriteRange(int kind, int64_t begin, int64_t end, const float* src) {
  return BounceRange(kind, begin, end, nullptr, src);
}

}  // namespace zt::offload
