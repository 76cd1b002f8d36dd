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

  // Slots: sub-groups in flight. Read-ahead and write-behind each need one
  // more; what the pool cannot hold is dropped, write-behind first.
  const int fit = options.buffer_count / kinds;
  const int want = 1 + (options.pipeline_read ? 1 : 0) + (options.pipeline_write ? 1 : 0);
  sw->slots_ = std::min(fit, want);
  sw->read_ahead_ = options.pipeline_read && sw->slots_ >= 2;
  sw->write_behind_ = options.pipeline_write && sw->slots_ >= (sw->read_ahead_ ? 3 : 2);
  sw->slots_ = 1 + (sw->read_ahead_ ? 1 : 0) + (sw->write_behind_ ? 1 : 0);

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
  return absl::StrFormat("%d sub-group%s of up to %d elements x %d kinds (%s) in %s on disk; %s, %d x %d buffers of %s",
                         num_sub_groups_, num_sub_groups_ == 1 ? "" : "s", sub_group_numel_, options_.kinds.size(),
                         absl::StrJoin(options_.kinds, ", "), Bytes(file_bytes()), overlap, slots_,
                         options_.kinds.size(), Bytes(pool_ ? pool_->buffer_bytes() : 0));
}

absl::Status OptimizerSwapper::Annotate(const absl::Status& st, const char* what, int s) const {
  if (st.ok()) return st;
  const SubGroup sg = SubGroupAt(s);
  return absl::Status(st.code(), absl::StrFormat("%s optimizer state sub-group %d (elements %d..%d): %s", what, s,
                                                 sg.begin, sg.end, st.message()));
}

absl::Status OptimizerSwapper::Run(Access access, const Visitor& visit) {
  const int n = num_sub_groups_;
  if (n == 0) return absl::OkStatus();
  const int kinds = static_cast<int>(options_.kinds.size());
  const bool reads = access != Access::kWrite;
  const bool writes = access != Access::kRead;
  const int ahead = reads && read_ahead_ ? 1 : 0;
  const bool behind = writes && write_behind_;

  // pending[j]: transfers in flight on slot j's buffers (one sub-group's
  // reads, or its writes); the slot is free once they are waited for.
  std::vector<std::vector<IoTicket>> pending(static_cast<size_t>(slots_));
  std::vector<int> occupant(static_cast<size_t>(slots_), -1);
  std::vector<float*> data(static_cast<size_t>(kinds));
  absl::Status first;
  auto wait_slot = [&](int j) {
    const auto t0 = std::chrono::steady_clock::now();
    for (IoTicket t : pending[static_cast<size_t>(j)]) {
      absl::Status st = io_->Wait(t);
      if (first.ok() && !st.ok()) first = Annotate(st, "swapping", occupant[static_cast<size_t>(j)]);
    }
    pending[static_cast<size_t>(j)].clear();
    stats_.wait_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  auto buffer = [&](int j, int k) { return pool_->data(j * kinds + k); };
  auto issue = [&](int s, bool write) {
    const int j = s % slots_;
    const SubGroup sg = SubGroupAt(s);
    const uint64_t offset = static_cast<uint64_t>(sg.begin) * sizeof(float);
    const uint64_t bytes = IoBytes(sg);
    occupant[static_cast<size_t>(j)] = s;
    for (int k = 0; k < kinds; ++k) {
      const SwapFile& f = files_[static_cast<size_t>(k)];
      pending[static_cast<size_t>(j)].push_back(write ? io_->Write(f, offset, buffer(j, k), bytes)
                                                      : io_->Read(f, offset, buffer(j, k), bytes));
      if (write) {
        stats_.bytes_written += bytes;
      } else {
        stats_.bytes_read += bytes;
      }
    }
  };

  int next_read = 0;  // first sub-group whose read is not issued yet
  for (int s = 0; s < n && first.ok(); ++s) {
    const int j = s % slots_;
    if (reads) {
      for (; next_read <= std::min(n - 1, s + ahead) && first.ok(); ++next_read) {
        wait_slot(next_read % slots_);  // the previous occupant's write
        if (first.ok()) issue(next_read, /*write=*/false);
      }
    }
    wait_slot(j);  // s's reads (or, writing only, the previous occupant's write)
    if (!first.ok()) break;
    const SubGroup sg = SubGroupAt(s);
    for (int k = 0; k < kinds; ++k) data[static_cast<size_t>(k)] = static_cast<float*>(buffer(j, k));
    // Padding past the state's end inside the last block stays as read
    // (zeros from the reservation, or what was written there before).
    absl::Status st = visit(sg, data.data());
    if (!st.ok()) {
      first = st;
      break;
    }
    if (writes) {
      issue(s, /*write=*/true);
      if (!behind) wait_slot(j);
    }
  }
  for (int j = 0; j < slots_; ++j) wait_slot(j);
  return first;
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
