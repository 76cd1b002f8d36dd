// Implementation of zero/param_coordinator.h.
#include "zero/param_coordinator.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/engine.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/str_format.h"
#include "comm/collective_label.h"
#include "plan/param_swap.h"
#include "util/error.h"
#include "util/log.h"
#include "util/status.h"
#include "zero/activation_checkpoint.h"
#include "zero/storage.h"

namespace zt::zero {
namespace {

std::string UnitLabel(const std::string& name) { return name.empty() ? "<root>" : name; }

}  // namespace

ParamCoordinator::ParamCoordinator(std::vector<Unit> units, std::vector<Chunk> chunks,
                                   std::vector<int> trainable_chunk_of_group, std::shared_ptr<comm::ProcessGroup> pg,
                                   std::shared_ptr<comm::ProcessGroup> world, plan::PrefetchLimits limits)
    : units_(std::move(units)),
      chunks_(std::move(chunks)),
      trainable_chunk_of_group_(std::move(trainable_chunk_of_group)),
      pg_(std::move(pg)),
      world_(std::move(world)),
      limits_(limits),
      chunk_state_(chunks_.size()),
      unit_state_(units_.size()) {
  group_of_chunk_.assign(chunks_.size(), -1);
  for (size_t g = 0; g < trainable_chunk_of_group_.size(); ++g) {
    group_of_chunk_[static_cast<size_t>(trainable_chunk_of_group_[g])] = static_cast<int>(g);
  }
  for (size_t c = 0; c < chunks_.size(); ++c) {
    const Chunk& chunk = chunks_[c];
    ZT_CHECK(chunk.group != nullptr && chunk.unit >= 0 && chunk.unit < static_cast<int>(units_.size()));
    if (chunk.persistent) {
      chunk_state_[c].state = State::kReady;
    } else {
      // Sharded chunks arrive released (zero/stage3_setup.h ShardChunk).
      ZT_CHECK(chunk.group->param_residency == ParamResidency::kShardOnly && !HasStorage(chunk.group->params));
      unit_state_[static_cast<size_t>(chunk.unit)].sharded_numel += chunk.group->layout.padded_numel;
    }
  }
}

ParamCoordinator::~ParamCoordinator() {
  // Gathers still in flight write into our buffers: let them land first
  // (bounded by the process group's timeout).
  for (ChunkState& s : chunk_state_) {
    if (s.work) (void)s.work->Wait();
  }
  // Shards on loan from the swap pool must not outlive it.
  for (size_t c = 0; c < chunk_state_.size(); ++c) {
    if (chunk_state_[c].borrows > 0) FreeStorage(chunks_[c].group->param_shard);
  }
}

CoordinatorStats ParamCoordinator::stats() const {
  absl::MutexLock lock(&mu_);
  CoordinatorStats s = stats_;
  s.trace_mismatches = trace_.mismatches();
  s.cached_bytes = pool_.held_bytes();
  if (swapper_) {
    for (size_t c = 0; c < chunks_.size(); ++c) {
      const FlatGroup& g = *chunks_[c].group;
      if (chunk_state_[c].swap_slot >= 0) {
        s.swapped_shard_bytes += static_cast<int64_t>(g.param_shard.nbytes());
        ++s.swapped_shards;
      } else if (!chunks_[c].persistent && g.param_residency == ParamResidency::kShardOnly) {
        s.kept_shard_bytes += static_cast<int64_t>(g.param_shard.nbytes());
      }
    }
    s.swap_buffer_bytes = static_cast<int64_t>(swapper_->buffer_bytes());
    s.swap = swapper_->stats();
  }
  return s;
}

void ParamCoordinator::ReleaseCache() {
  absl::MutexLock lock(&mu_);
  pool_.Clear();
}

void ParamCoordinator::ResetPeak() {
  absl::MutexLock lock(&mu_);
  stats_.peak_gathered_bytes = stats_.gathered_bytes;
}

bool ParamCoordinator::UnitGatheredLocked(int unit) const {
  for (int c : units_[static_cast<size_t>(unit)].chunks) {
    if (chunk_state_[static_cast<size_t>(c)].state == State::kReleased) return false;
  }
  return true;
}

void ParamCoordinator::GatherChunkLocked(int chunk) {
  ChunkState& s = chunk_state_[static_cast<size_t>(chunk)];
  if (s.state != State::kReleased) return;
  FlatGroup& g = *chunks_[static_cast<size_t>(chunk)].group;
  ZT_CHECK_MSG(pending_ == nullptr || !pending_->open() ||
                   group_of_chunk_[static_cast<size_t>(chunk)] < pending_->updated_groups(),
               "stage 3: a gather of parameters whose deferred update is still pending");
  // GatheredParameters gathers exactly, from the primary shards or an
  // unquantized secondary shard; every other gather of a quantized chunk
  // sends records. All of it follows from the config and the order of
  // calls, so every rank takes the same path.
  const bool exact = std::strcmp(phase_, "GatheredParameters") == 0;
  const bool quantized = !exact && QuantizedLocked(chunk);
  const bool secondary =
      secondary_ != nullptr && s.secondary_valid && (!exact || s.secondary_form == SecondaryForm::kValues);
  // Records cross the wire: quantized from the shard, or kept by hpZ.
  const bool records = secondary ? s.secondary_form == SecondaryForm::kRecords : quantized;
  // A frozen chunk's kept record needs no shard (hpZ, the other source
  // without one, is refused with NVMe offload).
  const bool needs_shard = !secondary && !(records && s.frozen_record.defined());
  if (needs_shard && SwappedLocked(chunk)) {
    // The shard lives on NVMe: into a swap buffer for the gather's input,
    // given back once the gather has landed (WaitChunkLocked), or once it
    // is quantized. The gather only reads it, so a write-back still running
    // need not finish first.
    AcquireShardLocked(chunk, offload::ParamSwapper::Access::kRead);
    s.gather_hold = ++gather_seq_;
  }
  pool_.Fill(g.params);
  comm::CollectiveLabel label(absl::StrCat(
      "parameters of unit '", UnitLabel(units_[static_cast<size_t>(chunks_[static_cast<size_t>(chunk)].unit)].name),
      "' (", phase_, secondary ? ", from the hpZ secondary shards" : "", records ? ", int8" : "", ")"));
  if (records) {
    const int ranks = pg_->size();
    s.wire =
        at::empty({ranks * QuantRecordBytes(g.layout.shard_numel, quant_.format)}, g.params.options().dtype(at::kByte));
    s.wire_ranks = ranks;
    if (secondary) {
      s.work = secondary_->AllGather(s.secondary, s.wire);
      ++stats_.secondary_gathers;
    } else {
      const at::Tensor record = OwnRecordLocked(chunk);
      // The record is all the gather reads: a swapped shard's buffer can go
      // back at once.
      if (s.gather_hold > 0) {
        s.gather_hold = 0;
        ReleaseShardLocked(chunk, /*dirty=*/false);
      }
      s.work = two_hop_ ? two_hop_->AllGather(record, s.wire) : pg_->AllGather(record, s.wire);
    }
    ++stats_.quantized_gathers;
    stats_.gathered_bytes += static_cast<int64_t>(s.wire.nbytes());
  } else if (secondary) {
    s.work = secondary_->AllGather(s.secondary, g.params);
    ++stats_.secondary_gathers;
  } else {
    s.work = two_hop_ ? two_hop_->AllGather(g.param_shard, g.params) : pg_->AllGather(g.param_shard, g.params);
  }
  s.dequantized = secondary ? s.secondary_form != SecondaryForm::kValues : quantized;
  s.state = State::kInFlight;
  live_numel_ += g.layout.padded_numel;
  stats_.gathered_bytes += static_cast<int64_t>(g.params.nbytes());
  stats_.peak_gathered_bytes = std::max(stats_.peak_gathered_bytes, stats_.gathered_bytes);
  ++stats_.gathers;
}

void ParamCoordinator::WaitChunkLocked(int chunk) {
  ChunkState& s = chunk_state_[static_cast<size_t>(chunk)];
  if (s.state != State::kInFlight) return;
  absl::Status st = s.work->Wait();
  s.work.reset();
  if (s.gather_hold > 0) {
    s.gather_hold = 0;
    ReleaseShardLocked(chunk, /*dirty=*/false);
    // A buffer may be free now: the read-ahead that found none when this
    // unit began gets another chance here, a unit's compute before its read
    // would otherwise be waited for.
    if (trace_.following()) ReadAheadLocked(trace_.position());
  }
  if (!st.ok()) {
    const Chunk& c = chunks_[static_cast<size_t>(chunk)];
    if (s.wire.defined()) {
      stats_.gathered_bytes -= static_cast<int64_t>(s.wire.nbytes());
      s.wire.reset();
    }
    // The chunk holds nothing usable: back to released (the failed group
    // writes no buffer after the error), so a later call neither waits on a
    // work that is gone nor computes with a half-gathered buffer.
    pool_.Drain(c.group->params);
    s.state = State::kReleased;
    s.dequantized = false;
    live_numel_ -= c.group->layout.padded_numel;
    stats_.gathered_bytes -= static_cast<int64_t>(c.group->params.nbytes());
    throw Error(absl::Status(
        st.code(), absl::StrFormat("all-gathering the parameters of unit '%s' (chunk %d, %d elements) failed: %s",
                                   UnitLabel(units_[static_cast<size_t>(c.unit)].name), chunk,
                                   c.group->layout.padded_numel, st.message())));
  }
  if (s.wire.defined()) {
    // qwZ: the records landed; every rank dequantizes all of them.
    FlatGroup& g = *chunks_[static_cast<size_t>(chunk)].group;
    DequantizeRecords(s.wire, s.wire_ranks, g.layout.shard_numel, quant_.format, g.params);
    // hpZ: this rank's slice of ranks keeps its records, so backward's
    // gather sends them again instead of quantizing the rounded values.
    // Needs whole records per slice (the hpZ group divides the shard group).
    if (secondary_ != nullptr && !s.secondary_valid && s.wire_ranks % secondary_->size() == 0) {
      const int64_t per = s.wire.numel() / secondary_->size();
      KeepSecondaryLocked(s, s.wire.narrow(0, per * secondary_->rank(), per));
      s.secondary_valid = true;
      s.secondary_form = SecondaryForm::kRecords;
    }
    stats_.gathered_bytes -= static_cast<int64_t>(s.wire.nbytes());
    s.wire.reset();
  }
  s.state = State::kReady;
}

bool ParamCoordinator::QuantizedLocked(int chunk) const {
  const Chunk& c = chunks_[static_cast<size_t>(chunk)];
  if (c.persistent) return false;
  return quant_.all || (quant_.frozen && !c.trainable);
}

at::Tensor ParamCoordinator::OwnRecordLocked(int chunk) {
  const Chunk& c = chunks_[static_cast<size_t>(chunk)];
  ChunkState& s = chunk_state_[static_cast<size_t>(chunk)];
  const bool keep = quant_.frozen && !c.trainable;
  if (keep && s.frozen_record.defined()) return s.frozen_record;
  FlatGroup& g = *c.group;
  at::Tensor record =
      at::empty({QuantRecordBytes(g.layout.shard_numel, quant_.format)}, g.param_shard.options().dtype(at::kByte));
  // GatherChunkLocked acquired a swapped shard for the gather.
  QuantizeRecord(g.param_shard, quant_.format, record);
  if (keep) {
    s.frozen_record = record;
    stats_.frozen_record_bytes += static_cast<int64_t>(record.nbytes());
  }
  return record;
}

void ParamCoordinator::KeepSecondaryLocked(ChunkState& s, const at::Tensor& src) {
  if (!s.secondary.defined() || s.secondary.numel() != src.numel() || s.secondary.scalar_type() != src.scalar_type()) {
    if (s.secondary.defined()) stats_.secondary_bytes -= static_cast<int64_t>(s.secondary.nbytes());
    s.secondary = at::empty({src.numel()}, src.options());
    stats_.secondary_bytes += static_cast<int64_t>(s.secondary.nbytes());
  }
  s.secondary.copy_(src);
}

void ParamCoordinator::RegatherExactLocked(int chunk) {
  ChunkState& s = chunk_state_[static_cast<size_t>(chunk)];
  FlatGroup& g = *chunks_[static_cast<size_t>(chunk)].group;
  const bool from_secondary = secondary_ != nullptr && s.secondary_valid && s.secondary_form == SecondaryForm::kValues;
  comm::CollectiveLabel label(absl::StrCat(
      "parameters of unit '", UnitLabel(units_[static_cast<size_t>(chunks_[static_cast<size_t>(chunk)].unit)].name),
      "' (GatheredParameters, exact values in place of the int8 gather's)"));
  absl::Status st;
  if (from_secondary) {
    st = secondary_->AllGather(s.secondary, g.params)->Wait();
  } else {
    const at::Tensor shard = AcquireShardLocked(chunk, offload::ParamSwapper::Access::kRead);
    st = (two_hop_ ? two_hop_->AllGather(shard, g.params) : pg_->AllGather(shard, g.params))->Wait();
    ReleaseShardLocked(chunk, /*dirty=*/false);
  }
  if (!st.ok()) {
    throw Error(absl::Status(
        st.code(),
        absl::StrFormat("all-gathering the exact parameters of unit '%s' for GatheredParameters failed: %s",
                        UnitLabel(units_[static_cast<size_t>(chunks_[static_cast<size_t>(chunk)].unit)].name),
                        st.message())));
  }
  s.dequantized = false;
  ++stats_.exact_regathers;
}

void ParamCoordinator::ReleaseChunkLocked(int chunk) {
  const Chunk& c = chunks_[static_cast<size_t>(chunk)];
  ChunkState& s = chunk_state_[static_cast<size_t>(chunk)];
  if (c.persistent || s.pins > 0 || s.state == State::kReleased) return;
  // Never free memory a collective may still write into.
  WaitChunkLocked(chunk);
  if (secondary_ != nullptr && !s.secondary_valid) {
    // hpZ: keep this rank's slice of the full values for the next gathers
    // (a quantized gather kept its records when it landed instead).
    const int64_t n = c.group->layout.padded_numel / secondary_->size();
    KeepSecondaryLocked(s, c.group->params.narrow(0, n * secondary_->rank(), n));
    s.secondary_valid = true;
    s.secondary_form = s.dequantized ? SecondaryForm::kRoundedValues : SecondaryForm::kValues;
  }
  pool_.Drain(c.group->params);
  s.state = State::kReleased;
  live_numel_ -= c.group->layout.padded_numel;
  stats_.gathered_bytes -= static_cast<int64_t>(c.group->params.nbytes());
}

std::vector<int> ParamCoordinator::GatherUnitLocked(int unit) {
  std::vector<int> issued;
  for (int c : units_[static_cast<size_t>(unit)].chunks) {
    if (chunk_state_[static_cast<size_t>(c)].state == State::kReleased) {
      GatherChunkLocked(c);
      issued.push_back(c);
    }
  }
  return issued;
}

void ParamCoordinator::ObserveLocked(int unit) {
  const plan::UnitTrace::Observation obs = trace_.Observe(unit);
  if (obs == plan::UnitTrace::Observation::kMismatch && !logged_mismatch_) {
    logged_mismatch_ = true;
    const int expected = trace_.last_expected();
    ZT_LOG(WARNING) << absl::StrFormat(
        "stage 3: the order of units changed: the recorded order expected %s next, but unit '%s' asked for its "
        "parameters; prefetching pauses until the end of this micro-step and the new order is recorded "
        "(logged once; later changes are only counted)",
        expected < 0 ? std::string("no more units")
                     : absl::StrFormat("unit '%s'", UnitLabel(units_[static_cast<size_t>(expected)].name)),
        UnitLabel(units_[static_cast<size_t>(unit)].name));
  }
  UnitState& u = unit_state_[static_cast<size_t>(unit)];
  if (u.prefetched_ahead) {
    u.prefetched_ahead = false;
    window_numel_ -= u.sharded_numel;
  }
  GatherUnitLocked(unit);
  if (trace_.following()) PrefetchLocked();
  for (int c : units_[static_cast<size_t>(unit)].chunks) WaitChunkLocked(c);
}

void ParamCoordinator::PrefetchLocked() {
  const std::vector<int>& order = trace_.order();
  // Shards on NVMe first: their reads overlap each other and the compute
  // ahead, and a gather below then waits only for what is still in flight.
  if (swapper_) ReadAheadLocked(trace_.position());
  size_t i = trace_.position();
  for (; i < order.size(); ++i) {
    const int v = order[i];
    UnitState& u = unit_state_[static_cast<size_t>(v)];
    if (u.sharded_numel == 0 || UnitGatheredLocked(v)) continue;
    if (!plan::FitsPrefetch(window_numel_, live_numel_, u.sharded_numel, limits_)) break;
    // Its parameters are not updated yet (the update at gather): its own
    // forward updates and gathers them.
    if (UnitPendingLocked(v)) break;
    // Gathers ahead hold swap buffers until used: at most half the pool, so
    // the read-ahead keeps room to bring the next shards in. (Counted in
    // holds, never in what the disk has delivered: every rank must decide
    // alike, as the gathers are collectives.)
    if (swapper_ && HeldAheadLocked() + SwappedReleasedLocked(v) > swapper_->buffer_count() / 2) break;
    GatherUnitLocked(v);
    u.prefetched_ahead = true;
    window_numel_ += u.sharded_numel;
    ++stats_.prefetched_units;
  }
}

void ParamCoordinator::ReadAheadLocked(size_t position) {
  const std::vector<int>& order = trace_.order();
  // Shards here that are needed before the one read next: never evicted for
  // it. Gathered chunks among them (released before their next use, unless
  // the reuse distance keeps them) are not read ahead, but their copies here
  // are kept: evicting them would only read them again.
  std::vector<int> sooner;
  for (size_t i = position; i < order.size(); ++i) {
    for (int c : units_[static_cast<size_t>(order[i])].chunks) {
      const ChunkState& s = chunk_state_[static_cast<size_t>(c)];
      if (s.swap_slot < 0) continue;
      // A frozen chunk's kept record is what its gathers send: its shard is
      // read only by GatheredParameters, which reads it when it comes.
      if (s.frozen_record.defined() && QuantizedLocked(c)) continue;
      if (s.state == State::kReleased) {
        // A shard already here is kept for its gather. The swapper keeps a
        // buffer for a gather that was not foreseen.
        if (!swapper_->TryReadAhead(s.swap_slot, sooner)) return;
      }
      if (swapper_->resident(s.swap_slot)) sooner.push_back(s.swap_slot);
    }
  }
}

int ParamCoordinator::HeldAheadLocked() const {
  int n = 0;
  for (size_t c = 0; c < chunks_.size(); ++c) {
    if (chunk_state_[c].gather_hold > 0 && unit_state_[static_cast<size_t>(chunks_[c].unit)].prefetched_ahead) ++n;
  }
  return n;
}

int ParamCoordinator::SwappedReleasedLocked(int unit) const {
  int n = 0;
  for (int c : units_[static_cast<size_t>(unit)].chunks) {
    const ChunkState& s = chunk_state_[static_cast<size_t>(c)];
    if (s.swap_slot >= 0 && s.state == State::kReleased) ++n;
  }
  return n;
}

bool ParamCoordinator::UnitPendingLocked(int unit) const {
  if (pending_ == nullptr || !pending_->open()) return false;
  const int updated = pending_->updated_groups();
  for (int c : units_[static_cast<size_t>(unit)].chunks) {
    if (group_of_chunk_[static_cast<size_t>(c)] >= updated) return true;
  }
  return false;
}

int ParamCoordinator::DeferredTargetLocked(int unit, bool training) const {
  int target = -1;
  auto add = [&](int v) {
    for (int c : units_[static_cast<size_t>(v)].chunks)
      target = std::max(target, group_of_chunk_[static_cast<size_t>(c)]);
  };
  add(unit);
  if (!training || !trace_.following()) return target;
  // The first unit after this one that PrefetchLocked would gather, were it
  // updated: updating it now lets its gather overlap this unit's compute.
  // A guess from the recorded order; a wrong one costs time, not values.
  const std::vector<int>& order = trace_.order();
  size_t i = trace_.position();
  if (i < order.size() && order[i] == unit) ++i;
  const UnitState& self = unit_state_[static_cast<size_t>(unit)];
  const int64_t window = window_numel_ - (self.prefetched_ahead ? self.sharded_numel : 0);
  const int64_t live = live_numel_ + (UnitGatheredLocked(unit) ? 0 : self.sharded_numel);
  for (; i < order.size(); ++i) {
    const int v = order[i];
    const UnitState& u = unit_state_[static_cast<size_t>(v)];
    if (v == unit || u.sharded_numel == 0 || UnitGatheredLocked(v)) continue;
    if (!plan::FitsPrefetch(window, live, u.sharded_numel, limits_)) break;
    if (UnitPendingLocked(v)) {
      add(v);
      break;
    }
  }
  return target;
}

void ParamCoordinator::RefreshStaleLocked(const std::vector<int>* chunks) {
  // Every forward of every unit passes here: nothing to do unless an
  // update at gather left persistent chunks behind.
  if (stale_chunks_ == 0) return;
  const int updated = pending_ == nullptr ? 0 : pending_->updated_groups();
  std::vector<std::pair<int, std::unique_ptr<comm::Work>>> works;
  comm::CollectiveLabel label("persistent parameters updated at gather");
  const int n = chunks != nullptr ? static_cast<int>(chunks->size()) : static_cast<int>(chunks_.size());
  for (int i = 0; i < n; ++i) {
    const int c = chunks != nullptr ? (*chunks)[static_cast<size_t>(i)] : i;
    ChunkState& s = chunk_state_[static_cast<size_t>(c)];
    if (!s.stale_full || group_of_chunk_[static_cast<size_t>(c)] >= updated) continue;
    s.stale_full = false;
    --stale_chunks_;
    ++stats_.late_persistent_gathers;
    FlatGroup& g = *chunks_[static_cast<size_t>(c)].group;
    works.emplace_back(
        c, two_hop_ ? two_hop_->AllGather(g.OwnedParams(), g.params) : pg_->AllGather(g.OwnedParams(), g.params));
  }
  for (auto& [c, work] : works) {
    const absl::Status st = work->Wait();
    if (!st.ok()) {
      throw Error(absl::Status(
          st.code(), absl::StrFormat("all-gathering the updated persistent parameters of unit '%s' "
                                     "failed: %s",
                                     UnitLabel(units_[static_cast<size_t>(chunks_[static_cast<size_t>(c)].unit)].name),
                                     st.message())));
    }
  }
}

void ParamCoordinator::SetPendingUpdate(PendingUpdate* pending) { pending_ = pending; }

int ParamCoordinator::FirstDeferrableGroup() const {
  absl::MutexLock lock(&mu_);
  const int groups = static_cast<int>(trainable_chunk_of_group_.size());
  int first = groups;
  int swapped = 0;
  for (size_t c = 0; c < chunks_.size(); ++c) {
    if (chunk_state_[c].swap_slot < 0) continue;
    ++swapped;
    if (group_of_chunk_[c] >= 0) first = std::min(first, group_of_chunk_[c]);
  }
  // A pool with a buffer for every swapped shard keeps each one resident
  // from use to use: the step reads none of them, so there is no read to save.
  if (swapper_ == nullptr || swapped <= swapper_->buffer_count()) return groups;
  for (size_t c = 0; c < chunks_.size(); ++c) {
    if (chunks_[c].unit == 0 && group_of_chunk_[c] >= first) return groups;
  }
  return first;
}

void ParamCoordinator::OnDeferredStepBegun() {
  absl::MutexLock lock(&mu_);
  if (pending_ == nullptr || !pending_->open()) return;
  const int updated = pending_->updated_groups();
  for (size_t c = 0; c < chunks_.size(); ++c) {
    if (chunks_[c].persistent && group_of_chunk_[c] >= updated && !chunk_state_[c].stale_full) {
      chunk_state_[c].stale_full = true;
      ++stale_chunks_;
    }
  }
}

void ParamCoordinator::RefreshStale() {
  absl::MutexLock lock(&mu_);
  RefreshStaleLocked(nullptr);
}

void ParamCoordinator::PreForward(int unit, bool training) {
  if (pending_ != nullptr && pending_->open()) {
    int target = -1;
    {
      absl::MutexLock lock(&mu_);
      target = DeferredTargetLocked(unit, training);
    }
    // Outside the lock: the optimizer acquires the shards it updates.
    if (target >= pending_->updated_groups()) pending_->UpdateThrough(target);
  }
  absl::MutexLock lock(&mu_);
  RefreshStaleLocked(&units_[static_cast<size_t>(unit)].chunks);
  UnitState& u = unit_state_[static_cast<size_t>(unit)];
  phase_ = training ? "forward" : "evaluation";
  if (training) {
    ObserveLocked(unit);
  } else {
    // Evaluation (or a checkpoint's first, gradient-free run): gather what
    // is missing and release exactly that afterwards. A chunk may already be
    // in flight (prefetched for a later request): wait for every chunk.
    std::vector<int> issued = GatherUnitLocked(unit);
    for (int c : units_[static_cast<size_t>(unit)].chunks) WaitChunkLocked(c);
    u.eval_gathered.insert(u.eval_gathered.end(), issued.begin(), issued.end());
  }
  ++u.active;
}

void ParamCoordinator::PostForward(int unit, bool training) {
  absl::MutexLock lock(&mu_);
  UnitState& u = unit_state_[static_cast<size_t>(unit)];
  --u.active;
  if (!training) {
    if (u.active == 0) {
      for (int c : u.eval_gathered) ReleaseChunkLocked(c);
      u.eval_gathered.clear();
    }
    return;
  }
  if (u.active > 0) return;
  // ReuseDistance calls the lambda right away, with mu_ still held.
  const std::optional<int64_t> distance = trace_.ReuseDistance(unit, [this](int v) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return unit_state_[static_cast<size_t>(v)].sharded_numel;
  });
  if (plan::KeepAfterForward(distance, live_numel_, limits_)) return;
  for (int c : units_[static_cast<size_t>(unit)].chunks) ReleaseChunkLocked(c);
}

void ParamCoordinator::PreBackward(int unit) {
  absl::MutexLock lock(&mu_);
  // Safety net: whatever backward skipped is released when the graph task
  // ends, even if the caller never reaches Engine::Backward's epilogue. Not
  // from a checkpoint's recomputation: its backward is a graph task of its
  // own, which ends long before the real one.
  if (!callback_queued_ && !InCheckpointRecompute()) {
    callback_queued_ = true;
    torch::autograd::Engine::get_default_engine().queue_callback([this] { EndBackward(); });
  }
  phase_ = "backward";
  ObserveLocked(unit);
}

void ParamCoordinator::AddInputNodes(int unit, int count) {
  absl::MutexLock lock(&mu_);
  unit_state_[static_cast<size_t>(unit)].pending_inputs += count;
}

void ParamCoordinator::PostBackward(int unit) {
  absl::MutexLock lock(&mu_);
  UnitState& u = unit_state_[static_cast<size_t>(unit)];
  if (u.pending_inputs > 0) --u.pending_inputs;
  if (u.pending_inputs > 0) return;
  // Every call's backward reached its inputs: nothing in this unit needs its
  // frozen parameters any more. Trainable chunks wait for their gradients
  // (a tied parameter can still be in use elsewhere).
  for (int c : units_[static_cast<size_t>(unit)].chunks) {
    if (!chunks_[static_cast<size_t>(c)].trainable) ReleaseChunkLocked(c);
  }
}

void ParamCoordinator::OnGroupGradsComplete(int g) {
  absl::MutexLock lock(&mu_);
  ReleaseChunkLocked(trainable_chunk_of_group_[static_cast<size_t>(g)]);
}

void ParamCoordinator::EndBackward() {
  absl::MutexLock lock(&mu_);
  for (size_t c = 0; c < chunks_.size(); ++c) WaitChunkLocked(static_cast<int>(c));
  for (size_t c = 0; c < chunks_.size(); ++c) {
    // A unit whose forward is still running (a backward nested inside a
    // forward, e.g. torch::autograd::grad in a loss term) keeps its chunks.
    if (unit_state_[static_cast<size_t>(chunks_[c].unit)].active == 0) ReleaseChunkLocked(static_cast<int>(c));
  }
  for (UnitState& u : unit_state_) {
    u.prefetched_ahead = false;
    u.pending_inputs = 0;
  }
  window_numel_ = 0;
  callback_queued_ = false;
  trace_.EndMicroStep();
}

void ParamCoordinator::Pin(const std::vector<int>& chunks) {
  absl::MutexLock lock(&mu_);
  phase_ = "GatheredParameters";
  size_t pinned = 0;
  try {
    for (int c : chunks) GatherChunkLocked(c);
    for (int c : chunks) {
      WaitChunkLocked(c);
      // Gathered earlier by a quantized gather (the unit is running, or the
      // reuse distance kept it): the caller gets the exact values.
      if (chunk_state_[static_cast<size_t>(c)].dequantized) RegatherExactLocked(c);
      ++chunk_state_[static_cast<size_t>(c)].pins;
      ++pinned;
    }
  } catch (...) {
    // A failed gather (the group is gone): give back the pins this call took
    // and settle the gathers still in flight, so nothing stays pinned or
    // waits on a dead collective; the first error goes to the caller.
    for (size_t i = 0; i < pinned; ++i) --chunk_state_[static_cast<size_t>(chunks[i])].pins;
    for (int c : chunks) {
      try {
        WaitChunkLocked(c);
      } catch (...) {  // the same failure, already reported
      }
    }
    throw;
  }
}

void ParamCoordinator::SetWeightQuantization(const WeightQuantization& q) {
  absl::MutexLock lock(&mu_);
  const std::string bad = ops::CheckQuantFormat(q.format);
  if (!bad.empty()) throw Error(absl::InvalidArgumentError(absl::StrCat("qwZ: ", bad)));
  quant_ = q;
}

void ParamCoordinator::SetTwoHopGather(std::shared_ptr<comm::TwoHopGather> gather) {
  absl::MutexLock lock(&mu_);
  two_hop_ = std::move(gather);
}

void ParamCoordinator::SetSecondaryGroup(std::shared_ptr<comm::ProcessGroup> group) {
  absl::MutexLock lock(&mu_);
  ZT_CHECK_MSG(swapper_ == nullptr, "hpZ secondary shards with parameter offload to NVMe");
  for (const Chunk& c : chunks_) {
    ZT_CHECK_MSG(c.group->layout.padded_numel % group->size() == 0,
                 "a chunk's padded size does not divide by the hpZ group's ranks");
  }
  secondary_ = std::move(group);
}

void ParamCoordinator::InvalidateCopies(bool frozen_too) {
  absl::MutexLock lock(&mu_);
  for (ChunkState& s : chunk_state_) {
    s.secondary_valid = false;
    if (frozen_too && s.frozen_record.defined()) {
      stats_.frozen_record_bytes -= static_cast<int64_t>(s.frozen_record.nbytes());
      s.frozen_record.reset();
    }
  }
}

void ParamCoordinator::Unpin(const std::vector<int>& chunks, std::optional<int> modifier_rank) {
  absl::MutexLock lock(&mu_);
  if (modifier_rank.has_value()) {
    // The modifier's values replace everyone's: the secondary slices and
    // kept records of these chunks are stale.
    for (int c : chunks) {
      ChunkState& s = chunk_state_[static_cast<size_t>(c)];
      s.secondary_valid = false;
      if (s.frozen_record.defined()) {
        stats_.frozen_record_bytes -= static_cast<int64_t>(s.frozen_record.nbytes());
        s.frozen_record.reset();
      }
    }
    at::NoGradGuard no_grad;
    std::vector<std::unique_ptr<comm::Work>> works;
    comm::CollectiveLabel label("modified parameters (GatheredParameters)");
    for (int c : chunks)
      works.push_back(world_->Broadcast(chunks_[static_cast<size_t>(c)].group->params, *modifier_rank));
    for (size_t i = 0; i < works.size(); ++i) {
      absl::Status st = works[i]->Wait();
      if (!st.ok()) {
        const Chunk& c = chunks_[static_cast<size_t>(chunks[i])];
        throw Error(absl::Status(
            st.code(),
            absl::StrFormat("broadcasting rank %d's modified parameters of unit '%s' "
                            "failed: %s",
                            *modifier_rank, UnitLabel(units_[static_cast<size_t>(c.unit)].name), st.message())));
      }
    }
    for (int c : chunks) {
      FlatGroup& g = *chunks_[static_cast<size_t>(c)].group;
      // Persistent chunks own a view of `params`: already up to date.
      if (g.param_residency != ParamResidency::kShardOnly) continue;
      at::Tensor shard = AcquireShardLocked(c, offload::ParamSwapper::Access::kOverwrite);
      shard.copy_(g.params.narrow(0, g.owned_begin(), g.layout.shard_numel));
      ReleaseShardLocked(c, /*dirty=*/true);
    }
  }
  for (int c : chunks) {
    ChunkState& s = chunk_state_[static_cast<size_t>(c)];
    if (s.pins > 0) --s.pins;
    if (s.pins == 0 && unit_state_[static_cast<size_t>(chunks_[static_cast<size_t>(c)].unit)].active == 0) {
      ReleaseChunkLocked(c);
    }
  }
}

}  // namespace zt::zero

namespace zt::zero {

std::string ParamCoordinator::ChunkLabel(int chunk) const {
  const Chunk& c = chunks_[static_cast<size_t>(chunk)];
  return absl::StrFormat("unit '%s' (chunk %d, %d elements per rank)",
                         UnitLabel(units_[static_cast<size_t>(c.unit)].name), chunk, c.group->layout.shard_numel);
}

absl::Status ParamCoordinator::OffloadShards(const ParamOffloadOptions& options, offload::IoEngine* io,
                                             ParamSwapPlacement* placement) {
  absl::MutexLock lock(&mu_);
  if (swapper_) return absl::FailedPreconditionError("parameter shards are already offloaded");
  // Until the swapper exists, every shard stays in memory (swap_slot -1).
  auto keep_all_in_memory = [](std::vector<ChunkState>& states) {
    for (ChunkState& s : states) s.swap_slot = -1;
  };
  offload::ParamSwapOptions so;
  so.dir = options.param.nvme_path;
  so.file_name = options.file_name;
  so.buffer_count = options.param.buffer_count;
  ParamSwapPlacement where;
  int64_t largest = 0;
  int largest_chunk = -1;
  std::vector<int> order;
  for (size_t c = 0; c < chunks_.size(); ++c) {
    const FlatGroup& g = *chunks_[c].group;
    if (chunks_[c].persistent || g.param_residency != ParamResidency::kShardOnly) continue;
    const int64_t n = g.layout.shard_numel;
    const auto bytes = static_cast<int64_t>(g.param_shard.nbytes());
    if (!plan::ParamShardGoesToSwap(bytes, options.min_swap_bytes)) {
      ++where.kept_chunks;
      where.kept_bytes += bytes;
      continue;
    }
    ++where.swapped_chunks;
    where.swapped_bytes += bytes;
    chunk_state_[c].swap_slot = static_cast<int>(so.slot_bytes.size());
    so.slot_bytes.push_back(static_cast<uint64_t>(bytes));
    so.slot_names.push_back(ChunkLabel(static_cast<int>(c)));
    order.push_back(static_cast<int>(c));
    if (n > largest) {
      largest = n;
      largest_chunk = static_cast<int>(c);
    }
  }
  if (placement != nullptr) *placement = where;
  if (order.empty()) {
    keep_all_in_memory(chunk_state_);
    return absl::OkStatus();
  }
  if (largest > options.param.buffer_size) {
    keep_all_in_memory(chunk_state_);
    return absl::InvalidArgumentError(absl::StrFormat(
        "zero_optimization.offload_param.buffer_size is %d elements, but the shard of %s has %d; raise buffer_size "
        "to at least %d (a chunk holds up to reduce_bucket_size elements, or one larger parameter)",
        options.param.buffer_size, ChunkLabel(largest_chunk), largest, largest));
  }
  const int64_t elem = chunks_[static_cast<size_t>(order.front())].group->param_shard.element_size();
  so.buffer_bytes = static_cast<uint64_t>(std::min(options.param.buffer_size, largest) * elem);
  auto created = offload::ParamSwapper::Create(so, io);
  if (!created.ok()) {
    keep_all_in_memory(chunk_state_);
    return created.status();
  }
  swapper_ = std::move(*created);
  // Write every shard out, then let its memory go.
  for (int c : order) {
    FlatGroup& g = *chunks_[static_cast<size_t>(c)].group;
    at::Tensor resident = g.param_shard;
    const int slot = chunk_state_[static_cast<size_t>(c)].swap_slot;
    auto buffer = swapper_->Acquire(slot, offload::ParamSwapper::Access::kOverwrite);
    if (!buffer.ok()) return buffer.status();
    std::memcpy(*buffer, resident.data_ptr(), resident.nbytes());
    ZT_RETURN_IF_ERROR(swapper_->Release(slot, /*dirty=*/true));
    FreeStorage(g.param_shard);
  }
  return swapper_->Flush();
}

bool ParamCoordinator::SwappedLocked(int chunk) const {
  return chunk_state_[static_cast<size_t>(chunk)].swap_slot >= 0;
}

bool ParamCoordinator::swapped(int chunk) const {
  absl::MutexLock lock(&mu_);
  return SwappedLocked(chunk);
}

at::Tensor ParamCoordinator::AcquireShardLocked(int chunk, offload::ParamSwapper::Access access) {
  FlatGroup& g = *chunks_[static_cast<size_t>(chunk)].group;
  if (!SwappedLocked(chunk)) return g.OwnedParams();
  const int slot = chunk_state_[static_cast<size_t>(chunk)].swap_slot;
  for (;;) {
    absl::StatusOr<void*> buffer = swapper_->Acquire(slot, access);
    if (buffer.ok()) {
      if (chunk_state_[static_cast<size_t>(chunk)].borrows++ == 0) BorrowStorage(g.param_shard, *buffer);
      return g.param_shard;
    }
    if (!absl::IsResourceExhausted(buffer.status())) {
      throw Error(absl::Status(buffer.status().code(), absl::StrCat("parameter offload: ", buffer.status().message())));
    }
    // Every buffer is pinned: the oldest gather still holding its shard
    // gives one back once it lands.
    int oldest = -1;
    for (size_t c = 0; c < chunk_state_.size(); ++c) {
      const int64_t hold = chunk_state_[c].gather_hold;
      if (hold > 0 && (oldest < 0 || hold < chunk_state_[static_cast<size_t>(oldest)].gather_hold)) {
        oldest = static_cast<int>(c);
      }
    }
    if (oldest < 0) {
      throw Error(absl::ResourceExhaustedError(
          absl::StrFormat("parameter offload: %s needs a swap buffer but all %d are pinned; raise "
                          "zero_optimization.offload_param.buffer_count",
                          ChunkLabel(chunk), swapper_->buffer_count())));
    }
    WaitChunkLocked(oldest);
  }
}

void ParamCoordinator::ReleaseShardLocked(int chunk, bool dirty) {
  if (!SwappedLocked(chunk)) return;
  FlatGroup& g = *chunks_[static_cast<size_t>(chunk)].group;
  ChunkState& s = chunk_state_[static_cast<size_t>(chunk)];
  if (--s.borrows == 0) FreeStorage(g.param_shard);
  absl::Status st = swapper_->Release(s.swap_slot, dirty);
  if (!st.ok()) throw Error(absl::Status(st.code(), absl::StrCat("parameter offload: ", st.message())));
}

at::Tensor ParamCoordinator::AcquireShard(int chunk, bool read) {
  absl::MutexLock lock(&mu_);
  return AcquireShardLocked(chunk,
                            read ? offload::ParamSwapper::Access::kUpdate : offload::ParamSwapper::Access::kOverwrite);
}

void ParamCoordinator::ReleaseShard(int chunk, bool dirty) {
  absl::MutexLock lock(&mu_);
  ReleaseShardLocked(chunk, dirty);
}

bool ParamCoordinator::PrefetchShard(int chunk) {
  absl::MutexLock lock(&mu_);
  if (!SwappedLocked(chunk)) return true;
  // The update at gather runs inside the forward, whose order the trace
  // knows for gathers and updates alike: read ahead by it, so that the
  // optimizer's look-ahead (group after group) never evicts a shard the next
  // gather needs first.
  if (pending_ != nullptr && pending_->open() && trace_.following()) {
    ReadAheadLocked(trace_.position());
    return false;  // that walk went as far as the pool allows
  }
  return swapper_->TryReadAhead(chunk_state_[static_cast<size_t>(chunk)].swap_slot);
}

at::Tensor ParamCoordinator::TrainableShards::Acquire(int g, bool read) {
  return c_->AcquireShard(c_->trainable_chunk_of_group_[static_cast<size_t>(g)], read);
}

void ParamCoordinator::TrainableShards::Release(int g, bool dirty) {
  c_->ReleaseShard(c_->trainable_chunk_of_group_[static_cast<size_t>(g)], dirty);
}

bool ParamCoordinator::TrainableShards::Prefetch(int g) {
  return c_->PrefetchShard(c_->trainable_chunk_of_group_[static_cast<size_t>(g)]);
}

}  // namespace zt::zero
