// Implementation of zero/storage.h.
#include "zero/storage.h"

#include <c10/core/Allocator.h>
#include <c10/core/StorageImpl.h>

#include "util/status.h"

namespace zt::zero {
namespace {

c10::StorageImpl* StorageOf(const at::Tensor& flat) {
  ZT_CHECK(flat.defined() && flat.has_storage());
  ZT_CHECK_MSG(flat.storage_offset() == 0 && flat.is_contiguous(),
               "a flat parameter buffer must be contiguous at offset 0");
  return flat.storage().unsafeGetStorageImpl();
}

c10::Allocator* AllocatorOf(c10::StorageImpl* storage, const at::Tensor& flat) {
  // The allocator the storage was created with (the counting allocator in
  // tests, the caching allocator on CUDA), else the device's current one.
  c10::Allocator* allocator = storage->allocator();
  return allocator != nullptr ? allocator : c10::GetAllocator(flat.device().type());
}

}  // namespace

bool HasStorage(const at::Tensor& flat) {
  return StorageOf(flat)->nbytes() >= flat.nbytes() && (flat.nbytes() == 0 || StorageOf(flat)->data() != nullptr);
}

void FreeStorage(const at::Tensor& flat) {
  c10::StorageImpl* storage = StorageOf(flat);
  if (storage->nbytes() == 0) return;
  storage->set_data_ptr_noswap(at::DataPtr(nullptr, flat.device()));
  storage->set_nbytes(0);
}

void BorrowStorage(const at::Tensor& flat, void* data) {
  c10::StorageImpl* storage = StorageOf(flat);
  ZT_CHECK_MSG(storage->nbytes() == 0, "BorrowStorage on a storage that still holds memory");
  // A null deleter context: freeing the loan does nothing to the lender.
  storage->set_data_ptr_noswap(at::DataPtr(data, flat.device()));
  storage->set_nbytes(flat.nbytes());
}

void StoragePool::Fill(const at::Tensor& flat) {
  if (HasStorage(flat)) return;
  c10::StorageImpl* storage = StorageOf(flat);
  const size_t bytes = flat.nbytes();
  size_t best = free_.size();
  for (size_t i = 0; i < free_.size(); ++i) {
    const Buffer& b = free_[i];
    if (b.data.device() != flat.device() || b.capacity < bytes || b.capacity > 2 * bytes) continue;
    if (best == free_.size() || b.capacity < free_[best].capacity) best = i;
  }
  size_t capacity = bytes;
  if (best < free_.size()) {
    capacity = free_[best].capacity;
    held_bytes_ -= static_cast<int64_t>(capacity);
    storage->set_data_ptr_noswap(std::move(free_[best].data));
    free_.erase(free_.begin() + static_cast<std::ptrdiff_t>(best));
  } else {
    storage->set_data_ptr_noswap(AllocatorOf(storage, flat)->allocate(bytes));
  }
  storage->set_nbytes(bytes);
  capacity_.emplace_back(storage, capacity);
}

void StoragePool::Drain(const at::Tensor& flat) {
  c10::StorageImpl* storage = StorageOf(flat);
  if (storage->nbytes() == 0) return;
  size_t capacity = storage->nbytes();
  for (size_t i = 0; i < capacity_.size(); ++i) {
    if (capacity_[i].first == storage) {
      capacity = capacity_[i].second;
      capacity_.erase(capacity_.begin() + static_cast<std::ptrdiff_t>(i));
      break;
    }
  }
  Buffer b;
  b.capacity = capacity;
  b.data = storage->set_data_ptr(at::DataPtr(nullptr, flat.device()));
  storage->set_nbytes(0);
  held_bytes_ += static_cast<int64_t>(capacity);
  free_.push_back(std::move(b));
}

void StoragePool::Clear() {
  free_.clear();
  held_bytes_ = 0;
}

}  // namespace zt::zero
