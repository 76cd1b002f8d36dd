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

void AllocateStorage(const at::Tensor& flat) {
  if (HasStorage(flat)) return;
  c10::StorageImpl* storage = StorageOf(flat);
  const size_t bytes = flat.nbytes();
  // The allocator the storage was created with (the counting allocator in
  // tests, the caching allocator on CUDA), else the device's current one.
  c10::Allocator* allocator = storage->allocator();
  if (allocator == nullptr) allocator = c10::GetAllocator(flat.device().type());
  storage->set_data_ptr_noswap(allocator->allocate(bytes));
  storage->set_nbytes(bytes);
}

}  // namespace zt::zero
