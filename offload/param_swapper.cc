// Implementation of offload/param_swapper.h: slot states over one swap file
// and an LRU of pool buffers.
#include "offload/param_swapper.h"

#include <algorithm>
#include <chrono>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "offload/host_memory.h"
#include "util/status.h"
#include "util/strings.h"

namespace zt::offload {
namespace {

double Since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

absl::StatusOr<std::unique_ptr<ParamSwapper>> ParamSwapper::Create(const ParamSwapOptions& options, IoEngine* io) {
  if (io == nullptr) return absl::InvalidArgumentError("ParamSwapper needs an I/O engine");
  if (options.buffer_count < 1) {
    return absl::InvalidArgumentError(absl::StrCat("zero_optimization.offload_param.buffer_count is ",
                                                   options.buffer_count, "; it must be at least 1"));
  }
  std::unique_ptr<ParamSwapper> sw(new ParamSwapper());
  sw->options_ = options;
  sw->io_ = io;
  const uint64_t buffer_bytes = AlignUp(options.buffer_bytes);
  uint64_t offset = 0;
  for (size_t s = 0; s < options.slot_bytes.size(); ++s) {
    Slot slot;
    slot.offset = offset;
    slot.bytes = options.slot_bytes[s];
    if (AlignUp(slot.bytes) > buffer_bytes) {
      return absl::InvalidArgumentError(
          absl::StrFormat("zero_optimization.offload_param.buffer_size: a swap buffer holds %s but %s needs %s",
                          HumanBytes(static_cast<double>(buffer_bytes)),
                          s < options.slot_names.size() ? options.slot_names[s] : absl::StrCat("parameter shard ", s),
                          HumanBytes(static_cast<double>(slot.bytes))));
    }
    offset += AlignUp(slot.bytes);
    sw->slots_.push_back(slot);
  }
  if (offset > 0) {
    auto file = SwapFile::Create(options.dir, options.file_name, offset);
    if (!file.ok()) {
      return absl::Status(file.status().code(),
                          absl::StrCat("zero_optimization.offload_param.nvme_path: ", file.status().message()));
    }
    sw->file_ = std::make_unique<SwapFile>(std::move(*file));
  }
  ZT_RETURN_IF_ERROR(CheckPoolFits(buffer_bytes * static_cast<uint64_t>(options.buffer_count),
                                   absl::StrFormat("the parameter swap buffers (%d x %s)", options.buffer_count,
                                                   HumanBytes(static_cast<double>(buffer_bytes))),
                                   "lower zero_optimization.offload_param.buffer_count or buffer_size"));
  ZT_ASSIGN_OR_RETURN(sw->pool_, BufferPool::Create(options.buffer_count, static_cast<size_t>(buffer_bytes)));
  sw->pool_->RegisterWith(*io);
  return sw;
}

ParamSwapper::~ParamSwapper() {
  for (Slot& slot : slots_) {
    if (slot.state == State::kReading || slot.state == State::kWriting) (void)io_->Wait(slot.ticket);
  }
}

absl::Status ParamSwapper::Annotate(const absl::Status& st, int s, const char* what) const {
  if (st.ok()) return st;
  const std::string name = static_cast<size_t>(s) < options_.slot_names.size()
                               ? options_.slot_names[static_cast<size_t>(s)]
                               : absl::StrCat("parameter shard ", s);
  return absl::Status(st.code(), absl::StrCat(what, " ", name, ": ", st.message()));
}

void ParamSwapper::Touch(int s) {
  lru_.remove(s);
  lru_.push_back(s);
}

bool ParamSwapper::resident(int s) const { return slots_[static_cast<size_t>(s)].state != State::kDisk; }

absl::Status ParamSwapper::WaitSlot(int s) {
  Slot& slot = slots_[static_cast<size_t>(s)];
  if (slot.state != State::kReading && slot.state != State::kWriting) return absl::OkStatus();
  const bool reading = slot.state == State::kReading;
  const auto t0 = std::chrono::steady_clock::now();
  absl::Status st = io_->Wait(slot.ticket);
  stats_.wait_seconds += Since(t0);
  slot.ticket = 0;
  if (!st.ok() && reading) {
    // The buffer's bytes are not the slot's: drop them.
    pool_->Release(Detach(s));
    return Annotate(st, s, "reading the parameters of");
  }
  // A failed write leaves the current bytes resident (and the file stale):
  // the caller stops training on the error. They are never evicted.
  slot.state = State::kResident;
  if (!reading) slot.write_failed = !st.ok();
  return Annotate(st, s, "writing the parameters of");
}

int ParamSwapper::Detach(int s) {
  Slot& slot = slots_[static_cast<size_t>(s)];
  const int b = slot.buffer;
  slot.buffer = -1;
  slot.state = State::kDisk;
  if (slot.ahead) {
    slot.ahead = false;
    --ahead_count_;
  }
  lru_.remove(s);
  return b;
}

int ParamSwapper::Evict(int s) {
  ++stats_.evictions;
  return Detach(s);
}

int ParamSwapper::TakeIdleBuffer(const std::vector<int>& keep) {
  const int b = pool_->TryAcquire();
  if (b >= 0) return b;
  for (int s : lru_) {
    Slot& slot = slots_[static_cast<size_t>(s)];
    if (slot.pins > 0 || slot.ahead || std::find(keep.begin(), keep.end(), s) != keep.end()) continue;
    // An idle copy whose write-back still runs is waited for: which buffer
    // is taken, and so what is read again later, must not depend on how
    // fast the disk is. (In a pass that write began a unit or more ago.)
    if (slot.state == State::kWriting) {
      absl::Status st = WaitSlot(s);
      if (!st.ok()) {
        // The bytes stay (the file is stale); the next Acquire or Flush
        // reports the failure.
        if (deferred_error_.ok()) deferred_error_ = st;
        continue;
      }
    }
    if (slot.state == State::kResident && !slot.write_failed) return Evict(s);
  }
  return -1;
}

absl::Status ParamSwapper::TakeDeferredError() { return std::exchange(deferred_error_, absl::OkStatus()); }

int ParamSwapper::TakeBuffer(absl::Status* error) {
  int b = TakeIdleBuffer({});
  if (b >= 0) return b;
  // Then copies read ahead, finished writes, reads in flight: each is waited
  // for first (a transfer into or out of the buffer may still run).
  for (State wanted : {State::kResident, State::kWriting, State::kReading}) {
    const std::vector<int> order(lru_.begin(), lru_.end());  // WaitSlot may edit lru_
    for (int s : order) {
      Slot& slot = slots_[static_cast<size_t>(s)];
      if (slot.pins > 0 || slot.state != wanted || slot.write_failed) continue;
      absl::Status st = WaitSlot(s);
      if (!st.ok() && error->ok()) *error = st;
      // A failed write leaves the bytes resident (reported above, and kept);
      // a failed read already gave its buffer back to the pool.
      if (slot.state == State::kResident && slot.pins == 0 && !slot.write_failed) return Evict(s);
      b = pool_->TryAcquire();
      if (b >= 0) return b;
    }
  }
  return -1;
}

absl::StatusOr<void*> ParamSwapper::Acquire(int s, Access access) {
  ZT_RETURN_IF_ERROR(TakeDeferredError());
  Slot& slot = slots_[static_cast<size_t>(s)];
  if (slot.ahead) {
    slot.ahead = false;
    --ahead_count_;
  }
  if (slot.state != State::kDisk) {
    ++stats_.hits;
    // A read lands; a write finishes before anyone may modify the bytes,
    // while a reader shares them with the write still running.
    if (slot.state == State::kReading || access != Access::kRead) {
      absl::Status st = WaitSlot(s);
      if (!st.ok()) return st;
    }
  }
  if (slot.state == State::kDisk) {
    absl::Status error;
    const int b = TakeBuffer(&error);
    ZT_RETURN_IF_ERROR(error);
    if (b < 0) {
      return absl::ResourceExhaustedError(absl::StrFormat(
          "all %d parameter swap buffers are in use (zero_optimization.offload_param.buffer_count)", pool_->count()));
    }
    slot.buffer = b;
    if (access != Access::kOverwrite) {
      slot.ticket = io_->Read(*file_, slot.offset, pool_->data(b), AlignUp(slot.bytes), IoPriority::kUrgent);
      slot.state = State::kReading;
      ++stats_.reads;
      stats_.read_bytes += AlignUp(slot.bytes);
      ZT_RETURN_IF_ERROR(WaitSlot(s));
    } else {
      slot.state = State::kResident;
    }
  }
  ++slot.pins;
  Touch(s);
  return pool_->data(slot.buffer);
}

absl::Status ParamSwapper::Release(int s, bool dirty) {
  Slot& slot = slots_[static_cast<size_t>(s)];
  if (slot.pins <= 0 || slot.buffer < 0) {
    return absl::InternalError(absl::StrCat("ParamSwapper::Release of slot ", s, " that is not acquired"));
  }
  --slot.pins;
  if (dirty) {
    ZT_RETURN_IF_ERROR(WaitSlot(s));  // an earlier write of the same bytes
    slot.ticket = io_->Write(*file_, slot.offset, pool_->data(slot.buffer), AlignUp(slot.bytes));
    slot.state = State::kWriting;
    slot.write_failed = false;
    ++stats_.writes;
    stats_.write_bytes += AlignUp(slot.bytes);
  }
  Touch(s);
  return absl::OkStatus();
}

bool ParamSwapper::TryReadAhead(int s, const std::vector<int>& keep) {
  Slot& slot = slots_[static_cast<size_t>(s)];
  const bool here = slot.state != State::kDisk;
  if (here && (slot.ahead || slot.pins > 0)) return true;
  if (ahead_count_ >= pool_->count() - 1) return false;
  if (here) {
    // Here or coming already: keep it until it is used, so that reading
    // the slots after it does not evict it first.
    slot.ahead = true;
    ++ahead_count_;
    Touch(s);
    return true;
  }
  const int b = TakeIdleBuffer(keep);
  if (b < 0) return false;
  slot.buffer = b;
  slot.ahead = true;
  ++ahead_count_;
  slot.ticket = io_->Read(*file_, slot.offset, pool_->data(b), AlignUp(slot.bytes), IoPriority::kUrgent);
  slot.state = State::kReading;
  ++stats_.reads;
  ++stats_.read_ahead;
  stats_.read_bytes += AlignUp(slot.bytes);
  Touch(s);
  return true;
}

absl::Status ParamSwapper::Flush() {
  absl::Status first = TakeDeferredError();
  for (size_t s = 0; s < slots_.size(); ++s) {
    if (slots_[s].state != State::kWriting) continue;
    absl::Status st = WaitSlot(static_cast<int>(s));
    if (first.ok()) first = st;
  }
  return first;
}

}  // namespace zt::offload
