// Where a ShardedOptimizer's fp32 state lives: the master copy of the owned
// parameters (when it is a copy) and the optimizer's state tensors, for every
// group. Two stores share one interface:
//  * ResidentState: tensors in host memory (no offload, offload to "cpu");
//  * SwappedState: files on NVMe through offload::OptimizerSwapper, visited
//    one sub-group at a time with bounded buffers (offload to "nvme").
//
// Elements are addressed per group as [b, e) of the group's owned range
// (the rank's shard at stages 1-3). Kinds are indices into kinds(): "master"
// first when the store holds one, then the optimizer's state names in
// torch.optim's spelling.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "offload/optimizer_swapper.h"

namespace zt::zero {

class OptimizerState {
 public:
  virtual ~OptimizerState() = default;

  // Visits every group's owned range once, in group order, possibly cut into
  // pieces (sub-groups): piece(g, b, e, data) with data[k] pointing at element
  // b of kind k. kWrite pieces hold garbage and must be filled entirely.
  using Access = offload::OptimizerSwapper::Access;
  using PieceFn = std::function<absl::Status(int g, int64_t b, int64_t e, float* const* data)>;
  virtual absl::Status ForEachPiece(Access access, const PieceFn& piece) = 0;
  // Whether the next ForEachPiece visits the groups from the last to the
  // first (a swapped store alternates; a resident one always ascends).
  virtual bool NextWalkDescending() const { return false; }

  // An update (kReadWrite) driven from outside, a group at a time as each
  // becomes ready: while backward runs (the update during backward, from
  // the last group down, a group ready once its gradients are final), or
  // ahead of the next forward (the update at gather, from the first group
  // up, a group ready once the forward is about to use it). BeginWalk opens
  // the walk; AdvanceWalk visits the groups that are ready: descending,
  // those >= bound; ascending, those < bound. A swapped store visits a
  // descending walk's sub-group in parts where it reaches into groups not
  // ready yet, and how long it waits for I/O is `wait`
  // (OptimizerSwapper::Advance): kNever starts the transfers the next
  // pieces need and returns, kForReady visits everything ready, kToEnd
  // finishes the walk (bound 0 descending, num_groups() ascending). A
  // resident store never waits. Pieces come in the walk's group order,
  // those of one group consecutive.
  using Wait = offload::OptimizerSwapper::Wait;
  virtual absl::Status BeginWalk(bool descending) = 0;
  virtual absl::Status AdvanceWalk(int bound, Wait wait, const PieceFn& piece) = 0;
  // Whether a walk begun by BeginWalk has pieces left (false once
  // AdvanceWalk visited the last one, or failed).
  virtual bool walk_open() const = 0;
  // Whether a walk runs ahead of its use: its I/O overlaps what the caller
  // does meanwhile (a swapped store; a resident one has no I/O to hide).
  virtual bool CanWalkAhead() const { return false; }

  // Synchronous copies of [b, e) of group g's kind k.
  virtual absl::Status Read(int kind, int g, int64_t b, int64_t e, float* dst) = 0;
  virtual absl::Status Write(int kind, int g, int64_t b, int64_t e, const float* src) = 0;
  // The kind's memory for group g when it is resident, else nullptr.
  virtual const float* Resident(int kind, int g) const = 0;

  const std::vector<std::string>& kinds() const { return kinds_; }
  int KindIndex(const std::string& name) const;  // -1 when absent
  int num_groups() const { return static_cast<int>(owned_numel_.size()); }
  int64_t owned_numel(int g) const { return owned_numel_[static_cast<size_t>(g)]; }
  // Host bytes of the state itself (buffers excluded) and bytes on disk.
  virtual int64_t resident_bytes(int kind) const = 0;
  virtual int64_t disk_bytes() const { return 0; }
  virtual int64_t buffer_bytes() const { return 0; }
  // One line for the engine's start-up log ("" when resident).
  virtual std::string Describe() const { return ""; }
  // Sub-groups that do not fit the swap buffers, read and written per
  // optimizer step (0 when resident, or when the buffers hold it all).
  virtual int sub_groups_moved_per_step() const { return 0; }
  // Swap traffic so far (zeros when resident).
  virtual offload::OptimizerSwapper::Stats swap_stats() const { return {}; }

 protected:
  OptimizerState(std::vector<std::string> kinds, std::vector<int64_t> owned_numel)
      : kinds_(std::move(kinds)), owned_numel_(std::move(owned_numel)) {}
  std::vector<std::string> kinds_;
  std::vector<int64_t> owned_numel_;
};

// Zero-filled tensors in host memory. `tensor(k, g)` gives direct access.
std::unique_ptr<OptimizerState> MakeResidentState(std::vector<std::string> kinds, std::vector<int64_t> owned_numel);

// Files under options.dir (kinds and total_numel come from the arguments),
// zero-filled (the reserved space reads as zeros). Fails with the swapper's
// errors (missing directory, no room, too few buffers, ...).
absl::StatusOr<std::unique_ptr<OptimizerState>> MakeSwappedState(std::vector<std::string> kinds,
                                                                 std::vector<int64_t> owned_numel,
                                                                 offload::OptimizerSwapOptions options,
                                                                 offload::IoEngine* io);

// The tensor behind a resident store (ResidentState only; aborts otherwise).
at::Tensor ResidentTensor(OptimizerState& state, int kind, int g);

}  // namespace zt::zero
