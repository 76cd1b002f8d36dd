// EngineImpl's training half (engine/engine_impl.h): DeepSpeed's step
// semantics over the flat groups -- backward with loss scaling and
// accumulation, overflow check, clipping, the sharded optimizer step, the
// gather of updated parameters -- plus memory accounting and the log line.
// Setup is engine/engine_setup.cc; checkpoints are engine/checkpointer.cc.
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <string>
#include <unordered_set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "comm/broadcast_in_place.h"
#include "comm/collective_label.h"
#include "engine/checkpointer.h"
#include "engine/engine_impl.h"
#include "offload/io_engine.h"
#include "plan/layout.h"
#include "plan/offload_note.h"
#include "plan/update_schedule.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/heap_retention.h"
#include "util/log.h"
#include "util/status.h"
#include "util/strings.h"
#include "zero/activation_checkpoint.h"

namespace zt {
namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

EngineImpl::~EngineImpl() {
  if (pending_save_) {
    // Its files are finished, but publishing needs every rank: the previous
    // checkpoint stays `latest`.
    const absl::Status written = pending_save_->Join();
    if (core_.pg->rank() == 0) {
      ZT_LOG(WARNING) << "the engine was destroyed with the asynchronous save of '" << pending_save_->prepared().folder
                      << "' in flight (" << (written.ok() ? "written" : written.message())
                      << "); it was not published: `latest` names the previous checkpoint. Call "
                         "WaitForPendingSave() before the end of training";
    }
    pending_save_.reset();
  }
  if (monitors_) monitors_->Flush().IgnoreError();
  // Units outlive the engine (the user owns the model): detach them first, so
  // a later forward is a clear error instead of a dangling call.
  if (core_.link) core_.link->coordinator.store(nullptr);
  core_.reducer.reset();
  core_.coordinator.reset();
}

CommTraffic EngineImpl::comm_traffic() const {
  CommTraffic t;
  const comm::CommStats shard = core_.shard_pg->stats();
  t.shard_sent = shard.total_bytes_sent();
  t.shard_received = shard.total_bytes_received();
  t.shard_wait = shard.wait_seconds;
  if (core_.two_hop) {
    // The two hops of the shard group's gathers travel on sub-groups of it.
    const comm::CommStats hops = core_.two_hop->stats();
    t.shard_sent += hops.total_bytes_sent();
    t.shard_received += hops.total_bytes_received();
    t.shard_wait += hops.wait_seconds;
  }
  if (core_.replica_pg) {
    t.hierarchical = true;
    const comm::CommStats replica = core_.replica_pg->stats();
    t.replica_sent = replica.total_bytes_sent();
    t.replica_received = replica.total_bytes_received();
    t.replica_wait = replica.wait_seconds;
  }
  if (core_.hpz_pg) {
    const comm::CommStats hpz = core_.hpz_pg->stats();
    t.hpz_sent = hpz.total_bytes_sent();
    t.hpz_received = hpz.total_bytes_received();
    t.hpz_wait = hpz.wait_seconds;
  }
  if (core_.shard_pg != core_.pg) {
    const comm::CommStats world = core_.pg->stats();
    t.world_sent = world.total_bytes_sent();
    t.world_received = world.total_bytes_received();
    t.world_wait = world.wait_seconds;
  }
  return t;
}

OffloadStats EngineImpl::offload_stats() const {
  OffloadStats o;
  if (core_.optimizer) {
    const offload::OptimizerSwapper::Stats s = core_.optimizer->swap_stats();
    o.optimizer_read_bytes = s.bytes_read;
    o.optimizer_written_bytes = s.bytes_written;
    o.optimizer_wait_seconds = s.wait_seconds;
    o.optimizer_elements_updated = static_cast<uint64_t>(core_.optimizer->elements_updated());
    o.optimizer_elements_in_backward = static_cast<uint64_t>(core_.optimizer->elements_updated_in_backward());
    o.optimizer_elements_at_gather = static_cast<uint64_t>(core_.optimizer->elements_updated_at_gather());
  }
  if (core_.coordinator) {
    const offload::ParamSwapper::Stats s = core_.coordinator->stats().swap;
    o.param_read_bytes = s.read_bytes;
    o.param_written_bytes = s.write_bytes;
    o.param_reads_ahead = s.read_ahead;
    o.param_hits = s.hits;
    o.param_wait_seconds = s.wait_seconds;
  }
  if (core_.io) {
    o.io_bytes_registered = core_.io->bytes_registered();
    o.io_pieces_fixed = core_.io->pieces_fixed();
  }
  o.heap_trim_threshold = heap_trim_threshold_;
  return o;
}

void EngineImpl::RetainStepHeapOnce() {
  if (heap_planned_) return;
  heap_planned_ = true;
  if (!core_.options.retain_step_heap || core_.config.zero.offload_param.device != OffloadDevice::kNvme) return;
  // The forward's activations are all alive now: the heap is at about the
  // size every step needs.
  const HeapRetentionPlan plan = PlanHeapRetention(MainHeapBytes(), [](const char* n) { return std::getenv(n); });
  const bool applied = ApplyHeapRetention(plan);
  if (applied) heap_trim_threshold_ = static_cast<uint64_t>(plan.trim_threshold);
  if (core_.pg->rank() != 0) return;
  if (applied) {
    ZT_LOG(INFO) << absl::StrFormat(
        "host heap: up to %s of freed heap stays mapped between steps (glibc trim threshold; mmap threshold %s), so "
        "each forward reuses the memory the last backward freed instead of faulting it in again "
        "(EngineOptions::retain_step_heap = false, or MALLOC_TRIM_THRESHOLD_ in the environment, keeps glibc's own)",
        HumanBytes(static_cast<double>(plan.trim_threshold)), HumanBytes(static_cast<double>(plan.mmap_threshold)));
  } else if (!plan.reason.empty()) {
    ZT_LOG(INFO) << "host heap: glibc's own trim policy: " << plan.reason;
  }
}

std::string EngineImpl::OffloadSummary() const {
  std::vector<std::string> parts;
  const ModelStateBytes m = memory();
  if (core_.optimizer && core_.optimizer->disk_bytes() > 0) {
    parts.push_back(absl::StrCat("optimizer state on NVMe under '", core_.config.zero.offload_optimizer.nvme_path,
                                 "': ", core_.optimizer->Describe()));
  } else if (core_.config.zero.offload_optimizer.device == OffloadDevice::kCpu) {
    parts.push_back("optimizer state in host memory (offload_optimizer \"cpu\")");
  }
  if (core_.coordinator) {
    const zero::CoordinatorStats st = core_.coordinator->stats();
    if (st.swap_buffer_bytes > 0) {
      parts.push_back(absl::StrFormat(
          "parameter shards on NVMe under '%s': %s (%d buffers of up to %d elements, %s)",
          core_.config.zero.offload_param.nvme_path, HumanBytes(static_cast<double>(st.swapped_shard_bytes)),
          core_.config.zero.offload_param.buffer_count, core_.config.zero.offload_param.buffer_size,
          HumanBytes(static_cast<double>(st.swap_buffer_bytes))));
    }
  }
  if (parts.empty()) return "";
  if (const std::string schedule = plan::DescribeUpdateSchedule(update_->schedule()); !schedule.empty()) {
    parts.push_back(schedule);
  }
  if (core_.io) {
    const uint64_t fixed = core_.io->bytes_registered();
    parts.push_back(absl::StrFormat(
        "%s in host memory for swap buffers, %s on disk; I/O through %s%s",
        HumanBytes(static_cast<double>(m.swap_buffers)), HumanBytes(static_cast<double>(m.nvme)),
        offload::IoBackendName(core_.io->backend()),
        fixed > 0
            ? absl::StrCat(", ", HumanBytes(static_cast<double>(fixed)), " of the buffers registered (pinned once)")
            : std::string()));
  }
  return absl::StrJoin(parts, "; ");
}

std::vector<std::string> EngineImpl::OffloadNotes() const {
  std::vector<std::string> notes;
  if (core_.optimizer && core_.optimizer->disk_bytes() > 0) {
    notes.push_back(
        plan::NvmeOffloadNote("optimizer state", core_.optimizer->disk_bytes(), core_.optimizer->buffer_bytes()));
  }
  if (core_.coordinator) {
    const zero::CoordinatorStats st = core_.coordinator->stats();
    notes.push_back(plan::NvmeOffloadNote("parameter shards", static_cast<int64_t>(st.swapped_shard_bytes),
                                          static_cast<int64_t>(st.swap_buffer_bytes)));
  }
  // Said only where a step moves state through the disk at all.
  if (core_.optimizer && core_.optimizer->sub_groups_moved_per_step() > 0 &&
      update_->schedule() == plan::UpdateSchedule::kInStep && core_.tuning.update_during_backward) {
    notes.push_back(absl::StrCat(
        "the optimizer update runs in the step, after backward, so the swap reads and writes it needs are not "
        "hidden behind backward's compute (",
        plan::InStepReason(update_facts_), ")"));
  }
  notes.erase(std::remove(notes.begin(), notes.end(), std::string()), notes.end());
  return notes;
}

std::optional<zero::CoordinatorStats> EngineImpl::stage3_stats() const {
  if (!core_.coordinator) return std::nullopt;
  return core_.coordinator->stats();
}

void EngineImpl::ResetGatheredPeak() {
  if (core_.coordinator) core_.coordinator->ResetPeak();
}

void EngineImpl::ReleaseCachedMemory() {
  if (core_.coordinator) core_.coordinator->ReleaseCache();
}

std::vector<int> EngineImpl::ChunksOf(const std::vector<at::Tensor>& params) const {
  std::vector<int> out;
  if (!core_.coordinator) return out;
  const auto& chunks = core_.coordinator->chunks();
  if (params.empty()) {
    for (size_t c = 0; c < chunks.size(); ++c) out.push_back(static_cast<int>(c));
    return out;
  }
  std::unordered_set<const void*> wanted;
  for (const at::Tensor& p : params) wanted.insert(p.unsafeGetTensorImpl());
  for (size_t c = 0; c < chunks.size(); ++c) {
    const bool trainable = chunks[c].trainable;
    for (const plan::ParamSlot& slot : chunks[c].group->layout.slots) {
      const at::Tensor& p = trainable
                                ? core_.params[static_cast<size_t>(slot.param_index)]
                                : core_.frozen_params[static_cast<size_t>(slot.param_index) - core_.params.size()];
      if (wanted.count(p.unsafeGetTensorImpl()) != 0) {
        out.push_back(static_cast<int>(c));
        break;
      }
    }
  }
  return out;
}

void EngineImpl::PinChunks(const std::vector<int>& chunks) {
  update_->Finish();
  // A modifier rank writes the live parameters inside the scope (before
  // UnpinChunks): the save's copy of them must be done first.
  WaitForStagedSave();
  if (core_.coordinator) core_.coordinator->Pin(chunks);
}

void EngineImpl::UnpinChunks(const std::vector<int>& chunks, std::optional<int> modifier_rank) {
  if (core_.coordinator) {
    core_.coordinator->Unpin(chunks, modifier_rank);
  } else if (modifier_rank.has_value()) {
    // Stages 0-2 keep full parameters everywhere: share the modifier's.
    std::vector<at::Tensor> modified;
    for (zero::FlatGroup& g : core_.groups) modified.push_back(g.params);
    for (const auto& p : core_.module->named_parameters(/*recurse=*/true)) {
      if (!p.value().requires_grad()) modified.push_back(p.value());
    }
    ThrowIfError(
        comm::BroadcastInPlace(*core_.pg, modified, *modifier_rank, "the modified parameters (GatheredParameters)"));
  }
  if (modifier_rank.has_value()) core_.optimizer->RefreshMaster();
}

bool EngineImpl::IsAccumulationBoundary() const {
  return (core_.micro_steps + 1) % core_.config.batch.accumulation_steps == 0;
}

double EngineImpl::lr() const { return core_.scheduler->Lr(core_.global_steps - core_.skipped_steps); }

void EngineImpl::Backward(const at::Tensor& loss) {
  if (!loss.defined() || loss.numel() != 1) {
    throw Error(absl::InvalidArgumentError(absl::StrCat(
        "EngineImpl::Backward needs a scalar loss, got ",
        loss.defined() ? absl::StrCat("a tensor of shape ", c10::str(loss.sizes())) : "an undefined tensor")));
  }
  if (!loss.requires_grad()) {
    throw Error(absl::InvalidArgumentError(
        "EngineImpl::Backward: the loss does not require grad (computed under NoGradGuard, or detached?)"));
  }
  const auto t0 = Clock::now();
  timers_.forward += Seconds(last_event_, t0);
  {
    // Kept on the loss's device: reading it here would sync every micro-step.
    at::NoGradGuard no_grad;
    at::Tensor value = loss.detach().reshape({}).to(at::kDouble);
    window_loss_sum_ = window_loss_sum_.defined() ? window_loss_sum_ + value : value;
    ++window_loss_count_;
    if (monitors_) {
      step_loss_sum_ = step_loss_sum_.defined() ? step_loss_sum_ + value : value;
      ++step_loss_count_;
    }
  }

  update_->ThrowIfFailed();
  RetainStepHeapOnce();
  // This backward's reduction overwrites the gradients a pending update
  // still reads, and a unit the forward skipped was never updated.
  update_->Finish();
  const bool boundary = IsAccumulationBoundary();
  // Where the update starts in this backward, the save's copy must be done
  // first; otherwise it may go on until Step.
  if (boundary && plan::UpdatesDuringBackward(update_->schedule())) WaitForStagedSave();
  update_->CheckBackwardMayStart();
  core_.reducer->BeginBackward(boundary);
  update_->OpenInBackward(
      boundary, [this] { return GradMultiplier(); }, StepHyperNow());
  const double factor = core_.scaler.scale() / static_cast<double>(core_.config.batch.accumulation_steps);
  auto t1 = t0;
  try {
    try {
      at::Tensor scaled = factor == 1.0 ? loss : loss * factor;
      scaled.backward();
    } catch (const Error&) {
      throw;
    } catch (const std::exception& e) {
      throw Error(absl::InternalError(absl::StrCat("backward failed: ", e.what())));
    }
    t1 = Clock::now();
    core_.reducer->FinishBackward();
  } catch (const Error& e) {
    update_->OnBackwardFailed(e.status());
    throw;
  }
  if (core_.coordinator) core_.coordinator->EndBackward();
  // Swapped parameter shards the step updates first start coming in now,
  // behind whatever the caller does before Step.
  // (With a split update, those the next forward applies its increments to.)
  update_->AfterBackward(boundary);
  const auto t2 = Clock::now();
  timers_.backward += Seconds(t0, t1);
  timers_.reduce += Seconds(t1, t2);
  last_event_ = t2;
}

ops::StepHyper EngineImpl::StepHyperNow() const {
  const int64_t applied = core_.global_steps - core_.skipped_steps;
  ops::StepHyper hyper;
  hyper.lr = core_.scheduler->Lr(applied);
  // DeepSpeed's OneCycle cycles momentum through the optimizer's betas, so
  // only optimizers with betas see it.
  const OptimizerType type = core_.config.optimizer.type;
  if (type == OptimizerType::kAdam || type == OptimizerType::kAdamW || type == OptimizerType::kLion) {
    hyper.momentum = core_.scheduler->Momentum(applied);
    hyper.beta2 = core_.scheduler->Beta2(applied);
  }
  return hyper;
}

void EngineImpl::Step() {
  update_->ThrowIfFailed();
  const auto t0 = Clock::now();
  if (!IsAccumulationBoundary()) {
    ++core_.micro_steps;
    last_event_ = Clock::now();
    return;
  }
  // A gradient that reached a parameter outside Engine::Backward was never
  // averaged across ranks (nor scaled): at stages 0/1 it sits in the flat
  // buffer like a reduced one, so the reducer's record is what tells them apart.
  if (std::optional<std::string> name = core_.reducer->GradientOutsideBackward()) {
    throw Error(absl::FailedPreconditionError(absl::StrCat(
        "parameter '", *name, "' received a gradient outside engine.Backward (a plain loss.backward()?): ZeRO stage ",
        core_.sharding.stage(),
        " never averaged it across ranks; call engine.Backward(loss) instead of loss.backward()")));
  }
  if (core_.sharding.gradients()) {
    for (size_t i = 0; i < core_.params.size(); ++i) {
      if (core_.params[i].grad().defined()) {
        throw Error(absl::FailedPreconditionError(
            absl::StrCat("parameter '", core_.param_names[i],
                         "' holds a gradient the engine never reduced: call engine.Backward(loss) instead of "
                         "loss.backward()")));
      }
    }
  }
  WaitForStagedSave();           // the update below changes what a save in flight still copies
  const double lr = this->lr();  // the rate this step applies
  update_->Finish();             // a no-op after Backward, which finished it
  OptimizerStep();
  ++core_.micro_steps;
  if (monitors_) WriteMonitorEvents(lr);
  if (pending_save_) ThrowIfError(FinishPendingSave(/*wait=*/false));
  const auto t1 = Clock::now();
  timers_.step += Seconds(t0, t1);
  last_event_ = t1;
  MaybeLog();
}

bool EngineImpl::AnyRankOverflowed() {
  // Every rank must agree, even at stage 0 where reduced gradients are
  // identical: the check is cheap and a rank-local inf must not split ranks.
  const bool local = core_.optimizer->LocalHasNonFinite();
  if (core_.pg->size() == 1) return local;
  at::Tensor flag = at::full({1}, local ? 1.0f : 0.0f, at::kFloat);
  comm::CollectiveLabel label("the fp16 overflow check");
  CheckWork(core_.pg->AllReduce(flag, comm::ReduceOp::kMax), "agreeing on fp16 overflow");
  return flag.item<float>() > 0.0f;
}

double EngineImpl::GradMultiplier() {
  double multiplier = 1.0 / core_.scaler.scale();
  if (core_.config.gradient_clipping <= 0.0) return multiplier;
  double sq = core_.optimizer->LocalGradSquaredNorm();
  // Over the shard group: its shards cover every gradient once (replicas
  // hold the same shards, bit for bit, so they compute the same norm).
  if (core_.sharding.optimizer_state() && core_.shard_pg->size() > 1) {
    at::Tensor t = at::full({1}, sq, at::kDouble);
    comm::CollectiveLabel label("the gradient norm");
    CheckWork(core_.shard_pg->AllReduce(t, comm::ReduceOp::kSum), "computing the global gradient norm");
    sq = t.item<double>();
  }
  const double norm = std::sqrt(sq) / core_.scaler.scale();
  last_grad_norm_ = norm;
  const double coef = core_.config.gradient_clipping / (norm + 1e-6);
  if (coef < 1.0) multiplier *= coef;
  return multiplier;
}

void EngineImpl::OptimizerStep() {
  if (core_.scaler.enabled() && AnyRankOverflowed()) {
    const double old_scale = core_.scaler.scale();
    ++core_.skipped_steps;
    core_.reducer->ZeroGrads();
    core_.reducer->ClearErrorFeedback();  // LoCo's errors hold this backward's non-finite values
    ThrowIfError(core_.scaler.Update(true));
    if (core_.pg->rank() == 0) {
      ZT_LOG(WARNING) << absl::StrFormat(
          "step %d: fp16 gradient overflow, skipping the step (loss scale %g -> %g, %d skipped so far)",
          core_.global_steps + 1, old_scale, core_.scaler.scale(), core_.skipped_steps);
    }
  } else {
    if (core_.hpz_pg) core_.coordinator->InvalidateCopies(/*frozen_too=*/false);  // the step changes the parameters
    const bool deferred = update_->RunStep([this] { return GradMultiplier(); }, StepHyperNow());
    if (core_.sharding.optimizer_state() && core_.shard_pg->size() > 1) core_.GatherParams();
    update_->AfterStepGather(deferred);
    // Pending groups keep their gradients until they are updated.
    core_.reducer->ZeroGrads(deferred ? core_.optimizer->updated_groups() : -1);
    const double old_scale = core_.scaler.scale();
    ThrowIfError(core_.scaler.Update(false));
    // LoCo's errors are in loss-scaled units: they follow the scale.
    if (core_.scaler.scale() != old_scale) core_.reducer->ScaleErrorFeedback(core_.scaler.scale() / old_scale);
  }
  ++core_.global_steps;
  core_.global_samples += core_.config.batch.train_batch;
  log_window_samples_ += core_.config.batch.train_batch;
}

double EngineImpl::TrainBatch(const std::function<at::Tensor(int64_t)>& micro_loss) {
  const int64_t gas = core_.config.batch.accumulation_steps;
  at::Tensor sum;
  for (int64_t i = 0; i < gas; ++i) {
    at::Tensor loss = micro_loss(i);
    Backward(loss);
    at::Tensor value = loss.detach().reshape({}).to(at::kDouble);
    sum = sum.defined() ? sum + value : value;
    Step();
  }
  return sum.item<double>() / static_cast<double>(gas);
}

ModelStateBytes EngineImpl::memory() const {
  ModelStateBytes m;
  auto param_bytes = [](const zero::FlatGroup& g) {
    return static_cast<int64_t>(g.param_residency == zero::ParamResidency::kShardOnly ? g.param_shard.nbytes()
                                                                                      : g.params.nbytes());
  };
  for (const zero::FlatGroup& g : core_.frozen_groups) m.params += param_bytes(g);
  for (const zero::FlatGroup& g : core_.groups) {
    m.params += param_bytes(g);
    switch (g.grad_residency) {
      case zero::GradResidency::kNone: break;
      case zero::GradResidency::kFullFlat:
      case zero::GradResidency::kFullFlatOwnedSlice: m.grads += static_cast<int64_t>(g.grads.nbytes()); break;
      case zero::GradResidency::kShardOnly: m.grads += static_cast<int64_t>(g.grad_shard.nbytes()); break;
    }
  }
  if (core_.optimizer) {
    m.master = core_.optimizer->master_bytes();
    m.optimizer_state = core_.optimizer->state_bytes();
    m.nvme += core_.optimizer->disk_bytes();
    m.swap_buffers += core_.optimizer->buffer_bytes();
  }
  if (core_.reducer) {
    m.peak_buckets = core_.reducer->peak_bucket_bytes();
    m.error_feedback = core_.reducer->error_feedback_bytes();
  }
  if (core_.coordinator) {
    const zero::CoordinatorStats s = core_.coordinator->stats();
    m.peak_gathered = s.peak_gathered_bytes;
    m.hpz_secondary = s.secondary_bytes;
    m.quantized_frozen = s.frozen_record_bytes;
    m.gather_cache = s.cached_bytes;
    // Swapped shards keep their tensors' shapes but no memory.
    m.params -= s.swapped_shard_bytes;
    m.nvme += s.swapped_shard_bytes;
    m.swap_buffers += s.swap_buffer_bytes;
  }
  return m;
}

void EngineImpl::WriteMonitorEvents(double lr) {
  const double loss =
      step_loss_count_ > 0 ? step_loss_sum_.item<double>() / static_cast<double>(step_loss_count_) : 0.0;
  step_loss_sum_ = at::Tensor();
  step_loss_count_ = 0;
  const int64_t x = core_.global_samples;
  std::vector<monitor::Event> events = {{monitor::tags::kTrainLoss, loss, x},
                                        {monitor::tags::kLr, lr, x},
                                        {monitor::tags::kLossScale, core_.scaler.scale(), x}};
  absl::Status st = monitors_->Write(events);
  if (st.ok() && (core_.config.steps_per_print <= 0 || core_.global_steps % core_.config.steps_per_print == 0)) {
    st = monitors_->Flush();
  }
  if (!st.ok()) {
    // Losing a metric must not stop training: say so once and stop writing.
    ZT_LOG(ERROR) << "monitor events are no longer written: " << st.message();
    monitors_.reset();
  }
}

void EngineImpl::MaybeLog() {
  if (core_.pg->rank() != 0 || core_.config.steps_per_print <= 0 ||
      core_.global_steps % core_.config.steps_per_print != 0)
    return;
  const auto now = Clock::now();
  const double elapsed = Seconds(log_window_start_, now);
  const double loss =
      window_loss_count_ > 0 ? window_loss_sum_.item<double>() / static_cast<double>(window_loss_count_) : 0.0;
  const ModelStateBytes m = memory();
  std::string line = absl::StrFormat(
      "step %d | loss %.6g | lr %.4g | loss scale %g | %.1f samples/s | model states %s "
      "(params %s, grads %s, master %s, optimizer %s)",
      core_.global_steps, loss, core_.scheduler->Lr(std::max<int64_t>(0, core_.global_steps - core_.skipped_steps - 1)),
      core_.scaler.scale(), elapsed > 0 ? static_cast<double>(log_window_samples_) / elapsed : 0.0,
      HumanBytes(static_cast<double>(m.model_states())), HumanBytes(static_cast<double>(m.params)),
      HumanBytes(static_cast<double>(m.grads)), HumanBytes(static_cast<double>(m.master)),
      HumanBytes(static_cast<double>(m.optimizer_state)));
  if (core_.skipped_steps > 0) absl::StrAppend(&line, absl::StrFormat(" | skipped %d", core_.skipped_steps));
  if (core_.coordinator) {
    // Stage 3: the most parameter bytes gathered at once since the last line.
    const zero::CoordinatorStats st = core_.coordinator->stats();
    absl::StrAppend(&line, absl::StrFormat(" | gathered peak %s, %d units prefetched%s",
                                           HumanBytes(static_cast<double>(st.peak_gathered_bytes)), st.prefetched_units,
                                           st.trace_mismatches > 0
                                               ? absl::StrFormat(", unit order changed %d times", st.trace_mismatches)
                                               : std::string()));
    core_.coordinator->ResetPeak();
  }
  if (core_.io != nullptr) {
    // NVMe traffic per step since the last line, and the time the step spent
    // waiting for it (what the pipelining did not hide).
    const OffloadStats o = offload_stats();
    const double n = static_cast<double>(core_.config.steps_per_print);
    absl::StrAppend(
        &line,
        absl::StrFormat(" | NVMe per step: read %s, written %s, waited %.1f ms",
                        HumanBytes((o.optimizer_read_bytes + o.param_read_bytes - logged_offload_.optimizer_read_bytes -
                                    logged_offload_.param_read_bytes) /
                                   n),
                        HumanBytes((o.optimizer_written_bytes + o.param_written_bytes -
                                    logged_offload_.optimizer_written_bytes - logged_offload_.param_written_bytes) /
                                   n),
                        1e3 *
                            (o.optimizer_wait_seconds + o.param_wait_seconds - logged_offload_.optimizer_wait_seconds -
                             logged_offload_.param_wait_seconds) /
                            n));
    logged_offload_ = o;
  }
  {
    // What this rank sent per step since the last line, by group.
    // (A caller's ResetStats between two lines counts as nothing sent.)
    const CommTraffic c = comm_traffic();
    const double n = static_cast<double>(core_.config.steps_per_print);
    auto per_step = [n](int64_t now, int64_t then) {
      return HumanBytes(static_cast<double>(std::max<int64_t>(0, now - then)) / n);
    };
    auto waited = [n](double now, double then) {
      return absl::StrFormat("%.1f ms", 1e3 * std::max(0.0, now - then) / n);
    };
    if (c.hierarchical) {
      absl::StrAppend(&line, absl::StrFormat(" | sent per step: %s in the shard group, %s across replicas, %s world",
                                             per_step(c.shard_sent, logged_comm_.shard_sent),
                                             per_step(c.replica_sent, logged_comm_.replica_sent),
                                             per_step(c.world_sent, logged_comm_.world_sent)));
      absl::StrAppend(&line, absl::StrFormat(" | waited per step: %s in the shard group, %s across replicas, %s world",
                                             waited(c.shard_wait, logged_comm_.shard_wait),
                                             waited(c.replica_wait, logged_comm_.replica_wait),
                                             waited(c.world_wait, logged_comm_.world_wait)));
    } else if (core_.hpz_pg) {
      absl::StrAppend(&line, " | sent per step ", per_step(c.shard_sent, logged_comm_.shard_sent), ", hpZ ",
                      per_step(c.hpz_sent, logged_comm_.hpz_sent), " inside its group");
      absl::StrAppend(&line, " | waited per step ", waited(c.shard_wait, logged_comm_.shard_wait), ", hpZ ",
                      waited(c.hpz_wait, logged_comm_.hpz_wait));
    } else if (core_.pg->size() > 1) {
      absl::StrAppend(&line, " | sent per step ", per_step(c.shard_sent, logged_comm_.shard_sent), ", waited ",
                      waited(c.shard_wait, logged_comm_.shard_wait));
    }
    logged_comm_ = c;
  }
  if (core_.config.activation_checkpointing.profile) {
    const CheckpointProfile p = TakeCheckpointProfile();
    const double n = static_cast<double>(core_.config.steps_per_print);
    absl::StrAppend(&line, absl::StrFormat(" | checkpoints per step: %.1f, forward %.1f ms, recompute %.1f ms",
                                           static_cast<double>(p.calls) / n, p.forward_ms / n, p.recompute_ms / n));
  }
  if (core_.config.wall_clock_breakdown) {
    const double n = static_cast<double>(core_.config.steps_per_print);
    absl::StrAppend(&line,
                    absl::StrFormat(" | per step: forward %.1f ms, backward %.1f ms, reduce %.1f ms, step %.1f ms",
                                    1e3 * timers_.forward / n, 1e3 * timers_.backward / n, 1e3 * timers_.reduce / n,
                                    1e3 * timers_.step / n));
  }
  ZT_LOG(INFO) << line;
  timers_ = Timers();
  window_loss_sum_ = at::Tensor();
  window_loss_count_ = 0;
  log_window_samples_ = 0;
  log_window_start_ = now;
}

absl::Status EngineImpl::SaveCheckpoint(const std::string& dir, const std::string& tag,
                                        const ckpt::Value& client_state) {
  ZT_RETURN_IF_ERROR(update_->FinishStatus());
  ZT_RETURN_IF_ERROR(FinishPendingSave(/*wait=*/true));  // at most one in flight
  if (!core_.config.checkpoint.async_save) return Checkpointer(core_).Save(dir, tag, client_state);
  ZT_ASSIGN_OR_RETURN(Checkpointer::PreparedSave prepared, Checkpointer(core_).Prepare(dir, tag, client_state));
  const uint64_t arena_before = save_arena_.bytes();
  pending_save_ = BackgroundSave::Start(std::move(prepared), save_arena_);
  staged_wait_at_save_ = staged_wait_seconds_;
  if (core_.pg->rank() == 0) {
    ZT_LOG(INFO) << absl::StrFormat(
        "checkpoint '%s': %.3f s to stage, copying and writing in the background%s", pending_save_->prepared().folder,
        pending_save_->snapshot_seconds(),
        save_arena_.bytes() > arena_before
            ? absl::StrCat(" (staging memory ", HumanBytes(static_cast<double>(save_arena_.bytes())),
                           " per rank, kept for the next save)")
            : std::string());
  }
  return absl::OkStatus();
}

absl::Status EngineImpl::WaitForPendingSave() { return FinishPendingSave(/*wait=*/true); }

absl::Status EngineImpl::FinishPendingSave(bool wait) {
  if (!pending_save_) return absl::OkStatus();
  if (!wait && core_.pg->size() > 1) {
    // Every rank decides the same: commit only when all writers are done.
    at::Tensor done = at::full({1}, pending_save_->done() ? 1.0f : 0.0f, at::kFloat);
    comm::CollectiveLabel label("the asynchronous checkpoint's progress");
    ZT_RETURN_IF_ERROR(core_.pg->AllReduce(done, comm::ReduceOp::kMin)->Wait());
    if (done.item<float>() < 1.0f) return absl::OkStatus();
  } else if (!wait && !pending_save_->done()) {
    return absl::OkStatus();
  }
  std::unique_ptr<BackgroundSave> save = std::move(pending_save_);
  const absl::Status written = save->Join();
  const absl::Status committed = Checkpointer(core_).Commit(save->prepared(), written);
  if (committed.ok() && core_.pg->rank() == 0) {
    ZT_LOG(INFO) << absl::StrFormat(
        "checkpoint '%s' written in the background in %.2f s (training waited %.3f s for its copy)",
        save->prepared().folder, save->write_seconds(), staged_wait_seconds_ - staged_wait_at_save_);
  }
  return committed;
}

absl::StatusOr<ckpt::Value> EngineImpl::LoadCheckpoint(const std::string& dir, const std::string& tag) {
  ZT_RETURN_IF_ERROR(update_->FinishStatus());
  ZT_RETURN_IF_ERROR(FinishPendingSave(/*wait=*/true));
  absl::StatusOr<ckpt::Value> client = Checkpointer(core_).Load(dir, tag);
  if (core_.coordinator) core_.coordinator->InvalidateCopies(/*frozen_too=*/true);
  // The log's rates start over from the loaded step.
  if (client.ok()) log_window_start_ = last_event_ = Clock::now();
  return client;
}

absl::Status EngineImpl::LoadWeights(const std::string& path, const std::vector<std::string>& new_parameters) {
  ZT_RETURN_IF_ERROR(update_->FinishStatus());
  ZT_RETURN_IF_ERROR(FinishPendingSave(/*wait=*/true));
  const absl::Status loaded = Checkpointer(core_).LoadWeights(path, new_parameters);
  if (core_.coordinator) core_.coordinator->InvalidateCopies(/*frozen_too=*/true);
  return loaded;
}

absl::Status EngineImpl::ExportWeights(const std::string& path) {
  ZT_RETURN_IF_ERROR(update_->FinishStatus());
  ZT_RETURN_IF_ERROR(FinishPendingSave(/*wait=*/true));
  return Checkpointer(core_).ExportWeights(path);
}

}  // namespace zt
