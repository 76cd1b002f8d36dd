// ParamCoordinator: the life cycle of stage-3 parameters. Each sharding unit
// (zero/unit.h) owns chunks (zero/unit_plan.h); every rank keeps only its
// shard of each chunk, and the coordinator gathers a unit's chunks when the
// unit needs them and frees them when it is done:
//
//   forward   unit starts  -> gather (or wait for the prefetch in flight),
//                             issue the next units' gathers (prefetch)
//             unit returns -> release, unless the trace says the unit is
//                             needed again within stage3_max_reuse_distance
//   backward  the node that produced the unit's results is about to run
//             (a pre-hook)  -> gather again, prefetch the next units
//             a chunk's gradients are all accumulated (reducer hook)
//                          -> its gradients are reduce-scattered, it is freed
//             the node that produced its arguments runs -> frozen chunks freed
//   end of backward (autograd callback and Engine::Backward) -> wait for
//             every gather, free every chunk, the observed order becomes the
//             trace for the next micro-step.
//
// "Free" means the parameters' storage gives its memory up; the buffer goes
// to a pool that the next gather reuses (zero/storage.h), so the memory held
// for gathered parameters never exceeds the most gathered at once, and
// ReleaseCache() returns it to the allocator.
//
// With parameter offload to NVMe (OffloadShards), most shards live in a swap
// file instead of memory: a gather first brings the shard into a buffer of a
// bounded pool (offload/param_swapper.h) and gives the buffer back once the
// all-gather has landed; after the prefetch window, the shards of the units
// that come next in the trace are read ahead into free buffers, so a gather
// rarely waits for the disk. The optimizer reaches the shards through
// shard_access().
//
// Prefetch follows the order recorded in the previous micro-step (UnitTrace),
// bounded by stage3_prefetch_bucket_size (elements gathered ahead of use) and
// stage3_max_live_parameters (elements gathered at once, the unit in use
// excepted). When the order departs from the trace it logs once, stops
// prefetching until the micro-step ends and re-records; a gather always names
// the unit that asked, so a wrong guess costs memory and bandwidth, never
// correctness.
//
// Contract:
//  * Every rank must run the same units in the same order within a
//    micro-step (as with FSDP and DeepSpeed): each request may issue
//    collectives. All decisions derive from that order and the config, never
//    from timing, so ranks issue identical collective sequences.
//  * Calls come from the training thread and, during backward, from
//    autograd's thread (the same thread for CPU graphs); mu_ serializes them
//    (the annotations below are checked by clang's -Wthread-safety,
//    scripts/thread_safety.sh). The gradient reducer calls
//    OnGroupGradsComplete under its own lock, so that lock comes first; the
//    coordinator never calls into the reducer.
//  * Communication failures throw zt::Error naming the unit.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "comm/process_group.h"
#include "comm/two_hop_gather.h"
#include "config/config.h"
#include "offload/io_engine.h"
#include "offload/param_swapper.h"
#include "plan/prefetch_policy.h"
#include "plan/unit_trace.h"
#include "zero/coordinator_stats.h"
#include "zero/flat_group.h"
#include "zero/param_shard_access.h"
#include "zero/pending_update.h"
#include "zero/quantized_weights.h"
#include "zero/storage.h"

namespace zt::zero {

// zero_optimization.offload_param with device "nvme".
struct ParamOffloadOptions {
  // ds_config's offload_param as parsed (its defaults are config/config.h's):
  // nvme_path, buffer_count, buffer_size (elements of the model dtype).
  OffloadParamConfig param;
  std::string file_name;  // the swap file under param.nvme_path
  // aio.block_size: smaller shards stay in memory (plan/param_swap.h).
  int64_t min_swap_bytes = AioConfig().block_size;
};

// ZeRO++ qwZ (zero/quantized_weights.h): which gathers send int8 records.
// Persistent chunks (below stage3_param_persistence_threshold) are gathered
// after each step in full precision: they are small, and always exact.
struct WeightQuantization {
  // zero_quantized_weights: every non-persistent chunk's gathers in forward,
  // backward and evaluation, quantized from the shard at each gather.
  bool all = false;
  // zero_quantized_nontrainable_weights: frozen chunks' gathers, from a
  // record quantized once (at the first gather, again after a load), as
  // frozen parameters never change in a step.
  bool frozen = false;
  ops::QuantFormat format = kWeightQuantFormat;
};

// Where OffloadShards put the non-persistent chunks' shards.
struct ParamSwapPlacement {
  int swapped_chunks = 0;
  int64_t swapped_bytes = 0;
  int kept_chunks = 0;  // below min_swap_bytes: kept in memory
  int64_t kept_bytes = 0;
};

class ParamCoordinator {
 public:
  struct Chunk {
    FlatGroup* group = nullptr;
    int unit = 0;
    bool trainable = true;
    bool persistent = false;
  };
  struct Unit {
    std::string name;         // module path ("" for the root)
    std::vector<int> chunks;  // indices into the chunk list
  };

  // `trainable_chunk_of_group[g]` is the chunk holding the reducer's flat
  // group g; `pg` is the group the shards are split over (the data-parallel
  // world, or the shard group of hierarchical sharding) and `world` every
  // data-parallel rank (Unpin's broadcast reaches all of them).
  ParamCoordinator(std::vector<Unit> units, std::vector<Chunk> chunks, std::vector<int> trainable_chunk_of_group,
                   std::shared_ptr<comm::ProcessGroup> pg, std::shared_ptr<comm::ProcessGroup> world,
                   plan::PrefetchLimits limits);
  ~ParamCoordinator();
  ParamCoordinator(const ParamCoordinator&) = delete;
  ParamCoordinator& operator=(const ParamCoordinator&) = delete;

  // From zt::Unit's forward. `training`: grad mode was on (the request is part
  // of a training micro-step; otherwise it is an evaluation forward, which
  // gathers, runs and releases without touching the trace).
  void PreForward(int unit, bool training) ABSL_LOCKS_EXCLUDED(mu_);
  void PostForward(int unit, bool training) ABSL_LOCKS_EXCLUDED(mu_);
  // From the autograd hooks (zero/unit.cc): the unit's results' gradients
  // are about to flow into it / one call's backward has passed through it.
  void PreBackward(int unit) ABSL_LOCKS_EXCLUDED(mu_);
  void PostBackward(int unit) ABSL_LOCKS_EXCLUDED(mu_);
  // The forward call hooked `count` argument-producing nodes for `unit`.
  void AddInputNodes(int unit, int count) ABSL_LOCKS_EXCLUDED(mu_);
  // From the gradient reducer (under its lock): every gradient of flat
  // group `g` was accumulated.
  void OnGroupGradsComplete(int g) ABSL_LOCKS_EXCLUDED(mu_);
  // Waits for every gather, frees every non-persistent chunk that is not
  // pinned, ends the micro-step. Idempotent.
  void EndBackward() ABSL_LOCKS_EXCLUDED(mu_);

  // GatheredParameters support. Pin gathers `chunks` (collective: same list,
  // same order on every rank) and keeps them gathered until Unpin; Unpin with
  // a modifier rank first broadcasts that rank's full values and writes them
  // back into every rank's shard.
  void Pin(const std::vector<int>& chunks) ABSL_LOCKS_EXCLUDED(mu_);
  void Unpin(const std::vector<int>& chunks, std::optional<int> modifier_rank) ABSL_LOCKS_EXCLUDED(mu_);

  // Parameter offload to NVMe: every non-persistent chunk's shard of at
  // least `min_swap_bytes` (plan/param_swap.h) moves to a swap file under
  // options.dir, and its memory is freed; `placement` (optional) says what
  // went where. Call once, before training.
  // Errors: the swap file's (missing directory, no room, ...) and a
  // buffer_size smaller than the largest shard (naming the unit).
  absl::Status OffloadShards(const ParamOffloadOptions& options, offload::IoEngine* io,
                             ParamSwapPlacement* placement = nullptr) ABSL_LOCKS_EXCLUDED(mu_);
  // Whether chunk `chunk`'s shard lives in the swap file.
  bool swapped(int chunk) const ABSL_LOCKS_EXCLUDED(mu_);
  // Chunk c's owned shard, resident until ReleaseShard (for swapped chunks a
  // pool buffer: with `read` it holds the shard, else the caller overwrites
  // it all); `dirty` writes it back. Unswapped chunks: their param_shard.
  // Throws zt::Error on I/O failure or when every swap buffer stays pinned.
  at::Tensor AcquireShard(int chunk, bool read) ABSL_LOCKS_EXCLUDED(mu_);
  void ReleaseShard(int chunk, bool dirty) ABSL_LOCKS_EXCLUDED(mu_);
  // A hint that chunk c's shard is acquired soon (ParamSwapper::TryReadAhead:
  // starts its read, or keeps the copy already here). False when the pool
  // has no room for it now; true otherwise (also for unswapped chunks).
  // During the update at gather (a deferred update open, the trace being
  // followed) it reads ahead along the trace instead, which orders updates
  // and gathers alike, and returns false: that walk already went as far as
  // the pool allows.
  bool PrefetchShard(int chunk) ABSL_LOCKS_EXCLUDED(mu_);
  // The optimizer's view: trainable group g -> its chunk's shard.
  ParamShardAccess* shard_access() { return &shard_access_; }

  // The update at gather (plan/update_schedule.h): while `pending` is open,
  // each unit's forward first has it update the unit's groups, and those of
  // the next unit the prefetch would gather, so a gather never reads
  // parameters older than the last step; the prefetch stops at a unit whose
  // groups are still pending. A persistent chunk updated that way has its
  // full parameters all-gathered again before its unit runs. `pending`
  // outlives the coordinator's use of it (the engine owns both); set once,
  // before training.
  void SetPendingUpdate(PendingUpdate* pending);
  // The smallest trainable group whose update may wait for the forward:
  // that of the first swapped chunk, or the group count (nothing may wait)
  // when no chunk is swapped, when the swap pool has a buffer for every
  // swapped shard (they stay resident, so the step reads none of them), or
  // when a chunk outside every zt::Unit (the root, which has no forward
  // hook) lies at or after it.
  int FirstDeferrableGroup() const ABSL_LOCKS_EXCLUDED(mu_);
  // After the step opened an update at gather (and gathered the persistent
  // chunks): marks the persistent chunks whose groups are pending, to be
  // all-gathered again once updated.
  void OnDeferredStepBegun() ABSL_LOCKS_EXCLUDED(mu_);
  // After the pending update finished every group: all-gathers the
  // persistent chunks it updated that no forward has refreshed yet.
  // Collective where such chunks exist: every rank calls it at the same
  // point (the engine does, before anything that reads parameters or the
  // optimizer state other than a forward).
  void RefreshStale() ABSL_LOCKS_EXCLUDED(mu_);

  // ZeRO++ hpZ: `group` is this rank's group of H consecutive ranks (H
  // divides the world). Once a non-persistent chunk has been gathered, its
  // release keeps this rank's 1/H slice of the full parameters (a secondary
  // shard, allocated once), and the chunk's next gathers all-gather those
  // slices over `group` instead of the primary shards over every rank, until
  // InvalidateSecondary. Every rank releases and gathers the same chunks in
  // the same order, so all take the same path. Set once, before training;
  // not with parameter offload to NVMe.
  void SetSecondaryGroup(std::shared_ptr<comm::ProcessGroup> group) ABSL_LOCKS_EXCLUDED(mu_);
  // MiCS's hierarchical gather (mics_hierarchical_params_gather): gathers
  // from the primary shards go in two hops, across hosts then inside each
  // (comm/two_hop_gather.h), bitwise the one-hop gather. Set once, before
  // training.
  void SetTwoHopGather(std::shared_ptr<comm::TwoHopGather> gather) ABSL_LOCKS_EXCLUDED(mu_);
  // ZeRO++ qwZ: the gathers `q` names all-gather int8 records
  // (zero/quantized_weights.h) instead of the shards, and every rank
  // dequantizes them into the parameters, so the compute copy is rounded
  // (within the format's bound) and the shards are not. With hpZ, a chunk's
  // secondary shard keeps the records of its slice of ranks, so backward's
  // gathers send the same records again (values bitwise those of forward's
  // gather). GatheredParameters (Pin) always gathers exactly: a chunk whose
  // parameters hold dequantized values is gathered again in full precision
  // before Pin returns, so a modifier never writes rounded values back.
  // (Outside GatheredParameters' contract, a Pin while the chunk's unit is
  // between its forward and backward changes the values backward sees from
  // the rounded ones to the exact ones.) A frozen chunk's kept record is
  // gathered without reading its shard (with NVMe offload: no disk read;
  // the read-ahead still brings such shards in, a cost, not a result).
  // Set once, before training; composes with the two-hop gather and
  // parameter offload.
  void SetWeightQuantization(const WeightQuantization& q) ABSL_LOCKS_EXCLUDED(mu_);
  // The parameters changed: after an optimizer step (`frozen_too` false)
  // the hpZ secondary shards are stale; after a load (`frozen_too` true)
  // the frozen chunks' quantized records too. The next gather of each
  // chunk is from the primary shards. Collective in effect (every rank
  // calls it at the same point).
  void InvalidateCopies(bool frozen_too) ABSL_LOCKS_EXCLUDED(mu_);

  // Chunks of all units, in chunk order.
  const std::vector<Chunk>& chunks() const { return chunks_; }
  const std::vector<Unit>& units() const { return units_; }
  CoordinatorStats stats() const ABSL_LOCKS_EXCLUDED(mu_);
  void ResetPeak() ABSL_LOCKS_EXCLUDED(mu_);
  // Returns the idle gather buffers to the allocator.
  void ReleaseCache() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // A chunk's gathered parameters (`params` of its group).
  enum class State { kReleased, kInFlight, kReady };
  enum class SecondaryForm { kValues, kRoundedValues, kRecords };
  // What changes about one chunk (chunks_ holds what does not), per chunk.
  struct ChunkState {
    State state = State::kReleased;
    std::unique_ptr<comm::Work> work;  // the all-gather while kInFlight
    int pins = 0;                      // GatheredParameters holding it gathered
    // Parameter offload (OffloadShards); the defaults mean "in memory".
    int swap_slot = -1;       // the shard's slot in the swap file; -1: it stays in memory
    int borrows = 0;          // holders of the swap buffer param_shard borrows
    int64_t gather_hold = 0;  // > 0 (an issue number) while its gather holds the shard's buffer
    // A persistent chunk whose full parameters predate its deferred update.
    bool stale_full = false;
    // hpZ: this rank's 1/H slice of the gathered parameters, and whether it
    // holds the current values.
    // What `secondary` holds: the exact values; values rounded by a
    // quantized gather that kept no records (an exact gather must not use
    // them); or, with qwZ, the records of those ranks (uint8).
    at::Tensor secondary;
    bool secondary_valid = false;
    SecondaryForm secondary_form = SecondaryForm::kValues;
    // qwZ: the records a quantized gather fills while kInFlight (the
    // parameters get their values when it lands), whether the parameters
    // hold dequantized values now, and a frozen chunk's own record
    // (WeightQuantization::frozen), kept from gather to gather.
    at::Tensor wire;
    int wire_ranks = 0;
    bool dequantized = false;
    at::Tensor frozen_record;
  };
  // What changes about one unit (units_ holds what does not), per unit.
  struct UnitState {
    int64_t sharded_numel = 0;  // padded numel of its non-persistent chunks (fixed at construction)
    int active = 0;             // forward calls running
    int pending_inputs = 0;     // hooked argument nodes not yet reached in backward
    bool prefetched_ahead = false;
    std::vector<int> eval_gathered;  // chunks an evaluation forward gathered
  };

  void ObserveLocked(int unit) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The update at gather: the highest group the forward of `unit` needs
  // updated now (its own, and the next pending unit's that the prefetch
  // would gather); -1 when none. Whether any group of `unit` is pending.
  int DeferredTargetLocked(int unit, bool training) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool UnitPendingLocked(int unit) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // All-gathers the full parameters of the persistent chunks among `chunks`
  // (nullptr: all) that are stale and updated now (synchronously;
  // collective). Returns at once when none is stale.
  void RefreshStaleLocked(const std::vector<int>* chunks) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void PrefetchLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Issues the all-gathers of `unit`'s released non-persistent chunks;
  // returns the chunks it issued.
  std::vector<int> GatherUnitLocked(int unit) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void GatherChunkLocked(int chunk) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // qwZ: whether the gathers of `chunk` are quantized; this rank's record
  // of it (quantized now, or the frozen chunk's kept one).
  bool QuantizedLocked(int chunk) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  at::Tensor OwnRecordLocked(int chunk) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // GatheredParameters: all-gathers a ready chunk's parameters again in
  // full precision (synchronously; collective).
  void RegatherExactLocked(int chunk) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // hpZ: makes `s.secondary` a copy of `src` (reallocated when its size or
  // dtype changes, with secondary_bytes kept current).
  void KeepSecondaryLocked(ChunkState& s, const at::Tensor& src) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void WaitChunkLocked(int chunk) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ReleaseChunkLocked(int chunk) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool UnitGatheredLocked(int unit) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool SwappedLocked(int chunk) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  at::Tensor AcquireShardLocked(int chunk, offload::ParamSwapper::Access access) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ReleaseShardLocked(int chunk, bool dirty) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Reads ahead the swapped shards of the units at trace positions from
  // `position` on, while the pool has more than one free buffer.
  void ReadAheadLocked(size_t position) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The swapped shards a gather of `unit` would acquire now, and those that
  // gathers of units prefetched ahead still hold.
  int SwappedReleasedLocked(int unit) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  int HeldAheadLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::string ChunkLabel(int chunk) const;

  class TrainableShards final : public ParamShardAccess {
   public:
    explicit TrainableShards(ParamCoordinator* c) : c_(c) {}
    at::Tensor Acquire(int g, bool read) override;
    void Release(int g, bool dirty) override;
    bool Prefetch(int g) override;

   private:
    ParamCoordinator* c_;
  };

  // Fixed at construction, read without the lock. Descriptions (units_,
  // chunks_) and state (unit_state_, chunk_state_) are separate vectors with
  // the same index because only the state is guarded: chunks() hands the
  // descriptions out.
  const std::vector<Unit> units_;
  const std::vector<Chunk> chunks_;
  const std::vector<int> trainable_chunk_of_group_;
  std::vector<int> group_of_chunk_;  // the inverse (-1: frozen); fixed at construction
  const std::shared_ptr<comm::ProcessGroup> pg_;
  const std::shared_ptr<comm::ProcessGroup> world_;
  const plan::PrefetchLimits limits_;

  mutable absl::Mutex mu_;
  std::vector<ChunkState> chunk_state_ ABSL_GUARDED_BY(mu_);  // per chunk (chunks_ order)
  std::vector<UnitState> unit_state_ ABSL_GUARDED_BY(mu_);    // per unit (units_ order)
  plan::UnitTrace trace_ ABSL_GUARDED_BY(mu_);
  int64_t window_numel_ ABSL_GUARDED_BY(mu_) = 0;  // gathered ahead of use, not yet requested
  int64_t live_numel_ ABSL_GUARDED_BY(mu_) = 0;    // non-persistent chunk elements gathered or in flight
  StoragePool pool_ ABSL_GUARDED_BY(mu_);
  bool callback_queued_ ABSL_GUARDED_BY(mu_) = false;
  bool logged_mismatch_ ABSL_GUARDED_BY(mu_) = false;
  // Why gathers are issued right now ("forward", "backward", "evaluation",
  // "GatheredParameters"), for their collective labels: every rank issues
  // the same gathers in the same phases, so a rank in another phase (one
  // rank evaluating alone) is named at its first gather.
  const char* phase_ ABSL_GUARDED_BY(mu_) = "forward";
  CoordinatorStats stats_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<comm::ProcessGroup> secondary_ ABSL_GUARDED_BY(mu_);  // hpZ's group; null: off
  std::shared_ptr<comm::TwoHopGather> two_hop_ ABSL_GUARDED_BY(mu_);    // null: one-hop gathers
  WeightQuantization quant_ ABSL_GUARDED_BY(mu_);                       // qwZ; off by default

  // Parameter offload (null without it; the per-chunk part is in ChunkState).
  std::unique_ptr<offload::ParamSwapper> swapper_ ABSL_GUARDED_BY(mu_);
  int64_t gather_seq_ ABSL_GUARDED_BY(mu_) = 0;
  TrainableShards shard_access_{this};

  // The update at gather (null without it). Called without mu_ held: the
  // optimizer acquires shards through shard_access().
  PendingUpdate* pending_ = nullptr;
  int stale_chunks_ ABSL_GUARDED_BY(mu_) = 0;  // chunks with ChunkState::stale_full set
};

}  // namespace zt::zero
