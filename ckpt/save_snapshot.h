// A copy of what one rank's checkpoint files reference, taken at the moment
// of the save, so that the files can be written while training goes on and
// changes the live buffers (asynchronous saves, `checkpoint.async_save`).
//
// Contract
//  - Snapshot() gives every tensor a RankShards and a module dict reference
//    (views of live state, and tensors produced by a `source`, e.g. state
//    kept on NVMe, read in bounded chunks) a place in one arena and points
//    each TensorRef at it (`data` set, `source` cleared). The references'
//    dtypes and shapes are unchanged, so the files written from them are
//    byte for byte the files a synchronous save writes.
//  - What is copied when: sources and the module entries named in
//    `copy_now` (state that changes outside an optimizer step, e.g. buffers
//    a forward updates) are copied by Snapshot() itself; with `defer` the
//    other tensors (`data` references) are copied by CopyDeferred(), which
//    must finish before the live tensors change (the engine's next
//    optimizer update) and before the references are read. Without `defer`
//    everything is copied by Snapshot().
//  - The arena is reused from save to save: it grows when a save needs more
//    (tensors are placed at 64-byte aligned offsets) and never shrinks, so
//    steady-state saves touch no new pages. bytes() is what it holds.
//  - An error (a failed source read, an arena that cannot be allocated)
//    names the tensor; the references are then in an unspecified state and
//    must not be written.
//  - Not thread-safe: one snapshot at a time; the arena must outlive the
//    write that reads from it, and no snapshot may start while one is read.
#pragma once

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "ckpt/format/value.h"
#include "ckpt/zero_checkpoint.h"

namespace zt::ckpt {

class SnapshotArena {
 public:
  SnapshotArena() = default;
  SnapshotArena(const SnapshotArena&) = delete;
  SnapshotArena& operator=(const SnapshotArena&) = delete;

  // Places (and copies, see above) the referenced tensors of `shards` and
  // of `module`'s values (tensor values at any depth), repointing the
  // references.
  absl::Status Snapshot(RankShards* shards, Dict* module, bool defer = false,
                        const std::set<std::string>& copy_now = {});
  // The copies Snapshot(defer = true) left; any thread, once.
  void CopyDeferred();

  uint64_t bytes() const { return capacity_; }

 private:
  struct Copy {
    const void* from;
    char* to;
    uint64_t bytes;
  };
  std::vector<Copy> deferred_;
  struct Free {
    void operator()(char* p) const;
  };
  std::unique_ptr<char, Free> memory_;
  uint64_t capacity_ = 0;
};

}  // namespace zt::ckpt
