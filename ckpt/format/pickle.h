// Internal: Python pickle (protocol 2) for ckpt::Value trees, the way
// torch.save pickles them. The writer emits only opcodes every torch.load
// accepts (including torch 2.x's weights_only unpickler for plain trees;
// Global, Call and Object values -- DeepSpeed's torch.Size, set, ZeroStageEnum
// and record objects -- become GLOBAL + REDUCE and NEWOBJ + BUILD, which
// weights_only refuses for classes it does not know); the reader accepts
// what Python's pickler emits for such trees (protocols 2-4), plus what
// DeepSpeed's checkpoint files hold (torch.Size as a tuple, set as a list,
// ZeroStageEnum as its int, loss scalers and fragment_address as dicts with
// a "__class__" entry), and refuses any other global by name.
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ckpt/format/value.h"

namespace zt::ckpt {

// Nesting depth beyond which a pickled tree is refused, reading or writing:
// no checkpoint nests this deep, and a deeper tree is almost surely cyclic.
inline constexpr int kPickleMaxDepth = 1000;
// The values a pickle may expand to (memo-shared objects counted each time
// they appear) and the objects on the unpickler's stack are bounded too:
// util/limits.h (Limit::kPickleValues, kPickleStack), settable.

// Called once per tensor, in tree order: returns the key of the storage the
// tensor is written to (the same key for tensors sharing a storage).
using StorageKeyFn = std::function<absl::StatusOr<std::string>(const TensorRef&)>;

// Pickles `root`. Tensors become torch._utils._rebuild_tensor_v2 over a
// persistent storage ('storage', torch.<Type>Storage, key, 'cpu', numel).
absl::StatusOr<std::string> PickleValue(const Value& root, const StorageKeyFn& storage_key);

// A persistent storage id as torch.save writes it.
struct PickledStorage {
  std::string key;  // record "data/<key>"
  DType dtype;
  int64_t numel = 0;     // elements
  std::string location;  // "cpu", "cuda:0", ... (ignored: bytes are bytes)
};
// Resolves a storage to a TensorRef carrying its dtype and record fields
// (record, file_offset, storage_nbytes, crc32); the unpickler adds the view.
using StorageLoadFn = std::function<absl::StatusOr<TensorRef>(const PickledStorage&)>;

// Unpickles `data`. `where` prefixes every error message (e.g.
// "checkpoint file 'x.pt', record 'archive/data.pkl'").
absl::StatusOr<Value> UnpickleValue(std::string_view data, const std::string& where, const StorageLoadFn& load);

}  // namespace zt::ckpt
