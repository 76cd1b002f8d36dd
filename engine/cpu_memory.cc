// Implementation of engine/cpu_memory.h. Each DataPtr handed out carries its
// data pointer as context; a side table maps it to the size and the wrapped
// allocator's context and deleter, so both DataPtr and raw deletion work.
#include "engine/cpu_memory.h"

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>

#include <algorithm>
#include <unordered_map>

#include "absl/base/const_init.h"
#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace zt {
namespace {

class CountingAllocator final : public c10::Allocator {
 public:
  explicit CountingAllocator(c10::Allocator* base) : base_(base) {}

  c10::DataPtr allocate(size_t n) const override ABSL_LOCKS_EXCLUDED(mu_) {
    c10::DataPtr inner = base_->allocate(n);
    void* data = inner.get();
    c10::DeleterFnPtr inner_deleter = inner.get_deleter();
    void* inner_ctx = inner.release_context();
    if (data == nullptr) {
      // Zero-byte allocations: nothing to count; hand back what we got.
      return c10::DataPtr(nullptr, inner_ctx, inner_deleter, c10::Device(c10::DeviceType::CPU));
    }
    {
      absl::MutexLock lock(&mu_);
      entries_[data] = Entry{static_cast<int64_t>(n), inner_ctx, inner_deleter};
      current_ += static_cast<int64_t>(n);
      peak_ = std::max(peak_, current_);
      ++allocations_;
    }
    return c10::DataPtr(data, data, &CountingAllocator::Delete, c10::Device(c10::DeviceType::CPU));
  }

  c10::DeleterFnPtr raw_deleter() const override { return &CountingAllocator::Delete; }

  // Newer LibTorch declares this pure virtual; older versions ignore it.
  void copy_data(void* dest, const void* src, std::size_t count) const {
    std::copy_n(static_cast<const char*>(src), count, static_cast<char*>(dest));
  }

  static void Delete(void* data) { Instance()->Free(data); }

  void Free(void* data) const ABSL_LOCKS_EXCLUDED(mu_) {
    Entry e;
    {
      absl::MutexLock lock(&mu_);
      auto it = entries_.find(data);
      if (it == entries_.end()) return;  // not ours (cannot happen: only we hand out Delete)
      e = it->second;
      entries_.erase(it);
      current_ -= e.bytes;
    }
    if (e.deleter != nullptr) e.deleter(e.ctx);
  }

  CpuMemoryCounters Counters() const ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    return {current_, peak_, allocations_};
  }
  void ResetPeak() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    peak_ = current_;
  }

  static CountingAllocator*& Instance() {
    static CountingAllocator* instance = nullptr;
    return instance;
  }

 private:
  struct Entry {
    int64_t bytes = 0;
    void* ctx = nullptr;
    c10::DeleterFnPtr deleter = nullptr;
  };
  c10::Allocator* base_;
  mutable absl::Mutex mu_;
  mutable std::unordered_map<void*, Entry> entries_ ABSL_GUARDED_BY(mu_);
  mutable int64_t current_ ABSL_GUARDED_BY(mu_) = 0;
  mutable int64_t peak_ ABSL_GUARDED_BY(mu_) = 0;
  mutable int64_t allocations_ ABSL_GUARDED_BY(mu_) = 0;
};

// Serializes installing (CountingAllocator::Instance() is read without it).
ABSL_CONST_INIT absl::Mutex g_install_mu(absl::kConstInit);

}  // namespace

bool InstallCountingCpuAllocator() {
  absl::MutexLock lock(&g_install_mu);
  CountingAllocator*& instance = CountingAllocator::Instance();
  if (instance != nullptr) return c10::GetCPUAllocator() == instance;
  // Never freed: tensors allocated through it may outlive any scope.
  instance = new CountingAllocator(c10::GetCPUAllocator());
  c10::SetCPUAllocator(instance, /*priority=*/1);
  return c10::GetCPUAllocator() == instance;
}

CpuMemoryCounters CpuMemory() {
  CountingAllocator* instance = CountingAllocator::Instance();
  return instance ? instance->Counters() : CpuMemoryCounters{};
}

void ResetCpuMemoryPeak() {
  if (CountingAllocator* instance = CountingAllocator::Instance()) instance->ResetPeak();
}

}  // namespace zt
