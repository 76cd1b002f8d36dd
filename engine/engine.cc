// Implementation of engine/engine.h: wires the config, the flat parameter
// groups, the gradient reducer, the sharded optimizer, the scheduler and the
// loss scaler into DeepSpeed's training-step semantics.
#include "engine/engine.h"

#include <torch/torch.h>
#include <unistd.h>

#include <cmath>
#include <unordered_set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "comm/agreement.h"
#include "comm/collective_label.h"
#include "offload/io_engine.h"
#include "ops/kernels.h"
#include "plan/layout.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/log.h"
#include "util/status.h"
#include "util/strings.h"
#include "util/system_info.h"
#include "zero/activation_checkpoint.h"
#include "zero/flat_group.h"
#include "zero/grad_reducer.h"
#include "zero/sharded_init.h"
#include "zero/sharded_optimizer.h"
#include "zero/stage3_setup.h"
#include "zero/unit.h"
#include "zero/unit_hook.h"

namespace zt {
namespace {

using Clock = std::chrono::steady_clock;

std::optional<at::ScalarType> ToScalarType(const std::optional<DType>& d) {
  if (!d) return std::nullopt;
  switch (*d) {
    case DType::kFloat32: return at::kFloat;
    case DType::kFloat16: return at::kHalf;
    case DType::kBFloat16: return at::kBFloat16;
  }
  return std::nullopt;
}

// The CPU kernel variant the optimizer runs (ops/kernels.h), for the log.
const char* KernelsName() { return ops::kernels::IsaName(ops::kernels::ActiveIsa()); }

}  // namespace

Engine::Engine() = default;

Engine::~Engine() {
  // Units outlive the engine (the user owns the model): detach them first, so
  // a later forward is a clear error instead of a dangling call.
  if (link_) link_->coordinator.store(nullptr);
  reducer_.reset();
  coordinator_.reset();
}

absl::StatusOr<std::unique_ptr<Engine>> Engine::Create(std::shared_ptr<torch::nn::Module> model, Config config,
                                                       std::shared_ptr<comm::ProcessGroup> group,
                                                       EngineOptions options) {
  std::unique_ptr<Engine> engine(new Engine());
  try {
    ZT_RETURN_IF_ERROR(engine->Init(std::move(model), std::move(config), std::move(group), options));
  } catch (const Error& e) {
    return e.status();
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat("Engine::Create: LibTorch error: ", e.what_without_backtrace()));
  }
  return engine;
}

absl::Status Engine::Init(std::shared_ptr<torch::nn::Module> model, Config config,
                          std::shared_ptr<comm::ProcessGroup> group, EngineOptions options) {
  if (model == nullptr) return absl::InvalidArgumentError("Engine::Create: the model is null");
  if (group == nullptr) return absl::InvalidArgumentError("Engine::Create: the process group is null");
  module_ = std::move(model);
  config_ = std::move(config);
  pg_ = std::move(group);
  options_ = options;
  stage_ = config_.zero.stage;

  absl::Status batch = ResolveBatch(config_.batch, pg_->size());
  if (!batch.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("the config's batch sizes do not fit a data-parallel world of ",
                                                   pg_->size(), " ranks: ", batch.message()));
  }
  if (!config_.optimizer.present) {
    return absl::InvalidArgumentError(
        "the config has no \"optimizer\" block; add one, e.g. "
        "\"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 1e-3}}");
  }

  const at::ScalarType dtype = config_.fp16.enabled ? at::kHalf : config_.bf16.enabled ? at::kBFloat16 : at::kFloat;
  ConfigureActivationCheckpointing(config_.activation_checkpointing);
  ZT_RETURN_IF_ERROR(InitOffload());
  if (stage_ == 3) return InitStage3(dtype);
  if (dtype != at::kFloat) module_->to(dtype);

  // Trainable parameters, each once (tied weights appear under several names).
  std::unordered_set<const void*> seen;
  std::vector<plan::ParamInfo> infos;
  for (const auto& item : module_->named_parameters(/*recurse=*/true)) {
    const at::Tensor& p = item.value();
    if (!p.requires_grad()) continue;
    if (!seen.insert(p.unsafeGetTensorImpl()).second) continue;
    if (!p.device().is_cpu()) {
      return absl::UnimplementedError(
          absl::StrCat("parameter '", item.key(), "' is on ", p.device().str(),
                       "; this build trains CPU parameters over Gloo (CUDA/NCCL support comes with a CUDA build)"));
    }
    if (!at::isFloatingType(p.scalar_type())) {
      return absl::InvalidArgumentError(absl::StrCat("parameter '", item.key(), "' is not floating point"));
    }
    params_.push_back(p);
    param_names_.push_back(item.key());
    plan::ParamInfo info;
    info.name = item.key();
    info.shape = p.sizes().vec();
    info.numel = p.numel();
    infos.push_back(std::move(info));
  }
  if (params_.empty()) {
    return absl::InvalidArgumentError("the model has no trainable parameters (requires_grad is false everywhere)");
  }

  const int partitions = stage_ >= 1 ? pg_->size() : 1;
  const int partition = stage_ >= 1 ? pg_->rank() : 0;
  plan::Layout layout = plan::PlanLayout(infos, config_.zero.reduce_bucket_size, partitions);
  for (const plan::GroupLayout& gl : layout.groups) {
    groups_.push_back(zero::FlattenParams(gl, params_, partition, /*sharded=*/stage_ >= 1));
  }
  ZT_RETURN_IF_ERROR(BroadcastInitialState());

  const at::ScalarType grad_dtype = ToScalarType(config_.grad_accum_dtype).value_or(dtype);
  for (zero::FlatGroup& g : groups_) {
    if (stage_ <= 1) {
      zero::AttachFlatGrads(g, params_);
      if (stage_ == 1) g.grad_shard = g.grads.narrow(0, g.owned_begin(), g.owned_end() - g.owned_begin());
    } else {
      g.grad_shard = at::zeros({g.layout.shard_numel}, g.params.options().dtype(grad_dtype));
    }
  }

  ZT_RETURN_IF_ERROR(MakeOptimizer());

  reducer_ = std::make_unique<zero::GradReducer>(groups_, params_, pg_, ReducerOptions());
  InitScheduleAndScaler();
  if (pg_->rank() == 0) {
    const ModelStateBytes m = memory();
    ZT_LOG(INFO) << absl::StrFormat(
        "engine: ZeRO stage %d, %d ranks, %s, %d parameters in %d groups (%d elements), batch %d = "
        "micro %d x accumulation %d x ranks %d; model states per rank %s; optimizer kernels %s",
        stage_, pg_->size(), c10::toString(dtype), params_.size(), groups_.size(), layout.total_numel(),
        config_.batch.train_batch, config_.batch.micro_batch, config_.batch.accumulation_steps, pg_->size(),
        HumanBytes(static_cast<double>(m.model_states())), KernelsName());
    if (io_ != nullptr || config_.zero.offload_optimizer.device != OffloadDevice::kNone) {
      ZT_LOG(INFO) << "engine: " << OffloadSummary();
    }
  }
  return absl::OkStatus();
}

zero::GradReducerOptions Engine::ReducerOptions() const {
  zero::GradReducerOptions ro;
  ro.param_names = param_names_;
  ro.stage = stage_;
  ro.overlap_comm = config_.zero.overlap_comm;
  ro.prescale_gradients = config_.prescale_gradients;
  ro.gradient_predivide_factor = config_.gradient_predivide_factor;
  ro.comm_dtype = ToScalarType(config_.communication_data_type);
  return ro;
}

void Engine::InitScheduleAndScaler() {
  scheduler_ = MakeLrScheduler(config_.scheduler, config_.optimizer.lr);
  scaler_ = config_.fp16.enabled ? LossScaler(config_.fp16) : LossScaler::Disabled();
  last_event_ = log_window_start_ = Clock::now();
}

absl::Status Engine::InitStage3(at::ScalarType dtype) {
  const zero::Stage3Options options = zero::Stage3OptionsFromConfig(config_);
  ZT_ASSIGN_OR_RETURN(zero::Stage3Build b, zero::BuildStage3(*module_, *pg_, options));
  if (b.num_trainable == 0) {
    return absl::InvalidArgumentError("the model has no trainable parameters (requires_grad is false everywhere)");
  }
  params_.assign(b.params.begin(), b.params.begin() + b.num_trainable);
  param_names_.assign(b.names.begin(), b.names.begin() + b.num_trainable);
  frozen_params_.assign(b.params.begin() + b.num_trainable, b.params.end());
  frozen_names_.assign(b.names.begin() + b.num_trainable, b.names.end());
  groups_ = std::move(b.trainable_chunks);
  frozen_groups_ = std::move(b.frozen_chunks);
  ZT_RETURN_IF_ERROR(ConvertAndBroadcastBuffers(dtype));

  std::vector<zero::ParamCoordinator::Unit> units(b.unit_names.size());
  for (size_t u = 0; u < units.size(); ++u) {
    units[u].name = b.unit_names[u];
    units[u].chunks = b.unit_chunks[u];
  }
  std::vector<zero::ParamCoordinator::Chunk> chunks;
  std::vector<int> chunk_of_group(groups_.size(), -1);
  int persistent = 0;
  int64_t persistent_numel = 0;
  for (size_t c = 0; c < b.chunks.size(); ++c) {
    const zero::Stage3Build::ChunkRef& ref = b.chunks[c];
    zero::ParamCoordinator::Chunk chunk;
    chunk.group =
        ref.trainable ? &groups_[static_cast<size_t>(ref.index)] : &frozen_groups_[static_cast<size_t>(ref.index)];
    chunk.unit = ref.unit;
    chunk.trainable = ref.trainable;
    chunk.persistent = ref.persistent;
    if (ref.trainable) chunk_of_group[static_cast<size_t>(ref.index)] = static_cast<int>(c);
    if (ref.persistent) {
      ++persistent;
      persistent_numel += chunk.group->layout.numel;
    }
    chunks.push_back(chunk);
  }
  plan::PrefetchLimits co;
  co.prefetch_bucket_numel = config_.zero.prefetch_bucket_size;
  co.max_live_numel = config_.zero.max_live_parameters;
  co.max_reuse_distance = config_.zero.max_reuse_distance;
  coordinator_ =
      std::make_unique<zero::ParamCoordinator>(std::move(units), std::move(chunks), std::move(chunk_of_group), pg_, co);
  if (config_.zero.offload_param.device == OffloadDevice::kNvme) {
    // Shards leave memory before gradients and the optimizer state arrive,
    // so the peak is one copy of the shards, not two.
    const OffloadParamConfig& op = config_.zero.offload_param;
    zero::ParamOffloadOptions po;
    po.dir = op.nvme_path;
    po.file_name = absl::StrFormat("zerotorch-%d-rank%d-params.swp", static_cast<int>(::getpid()), pg_->rank());
    po.buffer_count = op.buffer_count;
    po.buffer_numel = op.buffer_size;
    po.max_in_cpu = op.max_in_cpu;
    ZT_RETURN_IF_ERROR(comm::AgreeAcrossRanks(*pg_, coordinator_->OffloadShards(po, io_.get()),
                                              "moving the parameter shards to offload_param.nvme_path"));
    // Building the model and sharding it freed gigabytes in pieces small
    // enough to stay in the C heap: give them back before the gradients come.
    ReturnFreedHeapMemory();
  }
  const at::ScalarType grad_dtype = ToScalarType(config_.grad_accum_dtype).value_or(dtype);
  for (zero::FlatGroup& g : groups_) {
    g.grad_shard = at::zeros({g.layout.shard_numel}, g.params.options().dtype(grad_dtype));
  }
  ZT_RETURN_IF_ERROR(MakeOptimizer());

  link_ = std::make_shared<zero::CoordinatorLink>();
  link_->coordinator.store(coordinator_.get());
  for (size_t u = 0; u < b.unit_bases.size(); ++u) {
    if (b.unit_bases[u] == nullptr) continue;
    b.unit_bases[u]->set_unit_hook(std::make_shared<zero::UnitHook>(link_, static_cast<int>(u), b.unit_names[u]));
  }

  zero::GradReducerOptions ro = ReducerOptions();
  zero::ParamCoordinator* coordinator = coordinator_.get();
  ro.on_group_complete = [coordinator](int g) { coordinator->OnGroupGradsComplete(g); };
  reducer_ = std::make_unique<zero::GradReducer>(groups_, params_, pg_, ro);
  InitScheduleAndScaler();
  if (pg_->rank() == 0) {
    const ModelStateBytes m = memory();
    int64_t total = 0;
    for (const at::Tensor& p : b.params) total += p.numel();
    ZT_LOG(INFO) << absl::StrFormat(
        "engine: ZeRO stage 3, %d ranks, %s, %d parameters (%d elements, %d frozen tensors) in %d units and %d "
        "chunks, %d persistent (%d elements%s); batch %d = micro %d x accumulation %d x ranks %d; model states "
        "per rank %s; optimizer kernels %s",
        pg_->size(), c10::toString(dtype), b.params.size(), total, frozen_params_.size(), b.unit_names.size() - 1,
        b.chunks.size(), persistent, persistent_numel,
        b.root_numel > 0 ? absl::StrFormat(", of which %d outside every zt::Unit", b.root_numel) : "",
        config_.batch.train_batch, config_.batch.micro_batch, config_.batch.accumulation_steps, pg_->size(),
        HumanBytes(static_cast<double>(m.model_states())), KernelsName());
    const std::string offload = OffloadSummary();
    if (!offload.empty()) {
      ZT_LOG(INFO) << "engine: " << offload;
    }
  }
  return absl::OkStatus();
}

absl::Status Engine::InitOffload() {
  const OffloadOptimizerConfig& oo = config_.zero.offload_optimizer;
  const OffloadParamConfig& op = config_.zero.offload_param;
  // The config parser already enforced the stage rules (optimizer offload at
  // stages 1-3, parameter offload at stage 3, nvme_path with "nvme").
  if (oo.device != OffloadDevice::kNone && oo.ratio < 1.0) {
    return absl::UnimplementedError(absl::StrFormat(
        "zero_optimization.offload_optimizer.ratio is %g; partial offload is not implemented: set ratio to 1 "
        "(offload all of the optimizer state) or drop offload_optimizer",
        oo.ratio));
  }
  if (oo.device == OffloadDevice::kNvme || op.device == OffloadDevice::kNvme) {
    offload::IoOptions io;
    io.block_size = config_.aio.block_size;
    io.queue_depth = config_.aio.queue_depth;
    io.threads = config_.aio.intra_op_parallelism;
    io.single_submit = config_.aio.single_submit;
    io.overlap_events = config_.aio.overlap_events;
    auto created = offload::IoEngine::Create(io);
    if (!created.ok()) return created.status();
    io_ = std::move(*created);
  }
  if (pg_->rank() == 0) {
    // Honest about what a setting changes in this build.
    if ((oo.device != OffloadDevice::kNone && oo.pin_memory) || (op.device != OffloadDevice::kNone && op.pin_memory)) {
      ZT_LOG(INFO) << "engine: offload pin_memory has no effect in a CPU-only build (there are no device copies "
                      "to speed up)";
    }
    if (oo.device == OffloadDevice::kCpu || op.device == OffloadDevice::kCpu) {
      ZT_LOG(INFO) << "engine: offload to \"cpu\": this build trains on the CPU, so the offloaded state already "
                      "lives in host memory; the step runs the same fused CPU kernels as without offload";
    }
  }
  return absl::OkStatus();
}

absl::Status Engine::MakeOptimizer() {
  zero::ShardedOptimizerOptions so;
  so.impl = options_.optimizer_impl;
  const OffloadOptimizerConfig& oo = config_.zero.offload_optimizer;
  if (oo.device == OffloadDevice::kNvme) {
    offload::OptimizerSwapOptions swap;
    swap.dir = oo.nvme_path;
    swap.file_prefix = absl::StrFormat("zerotorch-%d-rank%d-optimizer", static_cast<int>(::getpid()), pg_->rank());
    swap.sub_group_numel = config_.zero.sub_group_size;
    swap.buffer_count = oo.buffer_count;
    swap.pipeline_read = oo.pipeline_read;
    swap.pipeline_write = oo.pipeline_write;
    so.swap = swap;
    so.io = io_.get();
  }
  if (coordinator_ && config_.zero.offload_param.device == OffloadDevice::kNvme) {
    so.params = coordinator_->shard_access();
  }
  auto made = zero::ShardedOptimizer::Create(groups_, config_.optimizer, so);
  ZT_RETURN_IF_ERROR(comm::AgreeAcrossRanks(*pg_, made.status(), "setting up the optimizer state"));
  optimizer_ = std::move(*made);
  return absl::OkStatus();
}

OffloadStats Engine::offload_stats() const {
  OffloadStats o;
  if (optimizer_) {
    const offload::OptimizerSwapper::Stats s = optimizer_->swap_stats();
    o.optimizer_read_bytes = s.bytes_read;
    o.optimizer_written_bytes = s.bytes_written;
    o.optimizer_wait_seconds = s.wait_seconds;
  }
  if (coordinator_) {
    const offload::ParamSwapper::Stats s = coordinator_->stats().swap;
    o.param_read_bytes = s.read_bytes;
    o.param_written_bytes = s.write_bytes;
    o.param_reads_ahead = s.read_ahead;
    o.param_hits = s.hits;
    o.param_wait_seconds = s.wait_seconds;
  }
  return o;
}

std::string Engine::OffloadSummary() const {
  std::vector<std::string> parts;
  const ModelStateBytes m = memory();
  if (optimizer_ && optimizer_->disk_bytes() > 0) {
    parts.push_back(absl::StrCat("optimizer state on NVMe under '", config_.zero.offload_optimizer.nvme_path,
                                 "': ", optimizer_->Describe()));
  } else if (config_.zero.offload_optimizer.device == OffloadDevice::kCpu) {
    parts.push_back("optimizer state in host memory (offload_optimizer \"cpu\")");
  }
  if (coordinator_) {
    const zero::CoordinatorStats st = coordinator_->stats();
    if (st.swap_buffer_bytes > 0) {
      parts.push_back(absl::StrFormat("parameter shards on NVMe under '%s': %s (%d buffers of up to %d elements, %s)",
                                      config_.zero.offload_param.nvme_path,
                                      HumanBytes(static_cast<double>(st.swapped_shard_bytes)),
                                      config_.zero.offload_param.buffer_count, config_.zero.offload_param.buffer_size,
                                      HumanBytes(static_cast<double>(st.swap_buffer_bytes))));
    }
  }
  if (parts.empty()) return "";
  if (io_) {
    parts.push_back(absl::StrFormat("%s in host memory for swap buffers, %s on disk; I/O through %s",
                                    HumanBytes(static_cast<double>(m.swap_buffers)),
                                    HumanBytes(static_cast<double>(m.nvme)), offload::IoBackendName(io_->backend())));
  }
  return absl::StrJoin(parts, "; ");
}

absl::Status Engine::ConvertAndBroadcastBuffers(at::ScalarType dtype) {
  at::NoGradGuard no_grad;
  std::vector<at::Tensor> buffers;
  for (const auto& item : module_->named_buffers(/*recurse=*/true)) {
    at::Tensor b = item.value();
    if (!b.defined() || b.numel() == 0) continue;
    if (at::isFloatingType(b.scalar_type()) && b.scalar_type() != dtype) b.set_data(b.to(dtype));
    if (!b.is_contiguous()) b.set_data(b.contiguous());
    buffers.push_back(b);
  }
  if (pg_->size() == 1) return absl::OkStatus();
  std::vector<std::unique_ptr<comm::Work>> works;
  comm::CollectiveLabel label("module buffers from rank 0");
  for (const at::Tensor& b : buffers) works.push_back(pg_->Broadcast(b, 0));
  for (auto& w : works) {
    absl::Status st = w->Wait();
    if (!st.ok()) {
      return absl::Status(st.code(), absl::StrCat("broadcasting rank 0's buffers failed: ", st.message()));
    }
  }
  return absl::OkStatus();
}

std::optional<zero::CoordinatorStats> Engine::stage3_stats() const {
  if (!coordinator_) return std::nullopt;
  return coordinator_->stats();
}

void Engine::ResetGatheredPeak() {
  if (coordinator_) coordinator_->ResetPeak();
}

void Engine::ReleaseCachedMemory() {
  if (coordinator_) coordinator_->ReleaseCache();
}

std::vector<int> Engine::ChunksOf(const std::vector<at::Tensor>& params) const {
  std::vector<int> out;
  if (!coordinator_) return out;
  const auto& chunks = coordinator_->chunks();
  if (params.empty()) {
    for (size_t c = 0; c < chunks.size(); ++c) out.push_back(static_cast<int>(c));
    return out;
  }
  std::unordered_set<const void*> wanted;
  for (const at::Tensor& p : params) wanted.insert(p.unsafeGetTensorImpl());
  for (size_t c = 0; c < chunks.size(); ++c) {
    const bool trainable = chunks[c].trainable;
    for (const plan::ParamSlot& slot : chunks[c].group->layout.slots) {
      const at::Tensor& p = trainable ? params_[static_cast<size_t>(slot.param_index)]
                                      : frozen_params_[static_cast<size_t>(slot.param_index) - params_.size()];
      if (wanted.count(p.unsafeGetTensorImpl()) != 0) {
        out.push_back(static_cast<int>(c));
        break;
      }
    }
  }
  return out;
}

void Engine::PinChunks(const std::vector<int>& chunks) {
  if (coordinator_) coordinator_->Pin(chunks);
}

void Engine::UnpinChunks(const std::vector<int>& chunks, std::optional<int> modifier_rank) {
  if (coordinator_) {
    coordinator_->Unpin(chunks, modifier_rank);
  } else if (modifier_rank.has_value() && pg_->size() > 1) {
    // Stages 0-2 keep full parameters everywhere: share the modifier's.
    at::NoGradGuard no_grad;
    std::vector<std::unique_ptr<comm::Work>> works;
    comm::CollectiveLabel label("modified parameters (GatheredParameters)");
    for (zero::FlatGroup& g : groups_) works.push_back(pg_->Broadcast(g.params, *modifier_rank));
    std::vector<std::pair<at::Tensor, at::Tensor>> copies;
    for (const auto& p : module_->named_parameters(/*recurse=*/true)) {
      if (p.value().requires_grad()) continue;
      at::Tensor c = p.value().is_contiguous() ? p.value() : p.value().contiguous();
      works.push_back(pg_->Broadcast(c, *modifier_rank));
      if (!c.is_same(p.value())) copies.emplace_back(p.value(), c);
    }
    for (auto& w : works) CheckWork(std::move(w), "broadcasting the modified parameters");
    for (auto& [orig, c] : copies) {
      at::Tensor o = orig;
      o.copy_(c);
    }
  }
  if (modifier_rank.has_value()) optimizer_->RefreshMaster();
}

void Engine::CheckWork(std::unique_ptr<comm::Work> work, const char* what) {
  absl::Status st = work->Wait();
  if (!st.ok()) throw Error(absl::Status(st.code(), absl::StrCat(what, ": ", st.message())));
}

absl::Status Engine::BroadcastInitialState() {
  if (pg_->size() == 1) return absl::OkStatus();
  at::NoGradGuard no_grad;
  std::vector<std::unique_ptr<comm::Work>> works;
  comm::CollectiveLabel label("the initial state from rank 0");
  for (zero::FlatGroup& g : groups_) works.push_back(pg_->Broadcast(g.params, 0));
  // Buffers and frozen parameters are not in any group: send them one by one.
  std::vector<std::pair<at::Tensor, at::Tensor>> copies;  // (original, contiguous copy)
  auto send = [&](const at::Tensor& t) {
    if (!t.defined() || t.numel() == 0) return;
    at::Tensor c = t.is_contiguous() ? t : t.contiguous();
    works.push_back(pg_->Broadcast(c, 0));
    if (!c.is_same(t)) copies.emplace_back(t, c);
  };
  for (const auto& b : module_->named_buffers(/*recurse=*/true)) send(b.value());
  for (const auto& p : module_->named_parameters(/*recurse=*/true)) {
    if (!p.value().requires_grad()) send(p.value());
  }
  for (auto& w : works) {
    absl::Status st = w->Wait();
    if (!st.ok()) {
      return absl::Status(st.code(), absl::StrCat("broadcasting rank 0's initial parameters failed: ", st.message()));
    }
  }
  for (auto& [orig, c] : copies) {
    at::Tensor o = orig;
    o.copy_(c);
  }
  return absl::OkStatus();
}

bool Engine::IsAccumulationBoundary() const { return (micro_steps_ + 1) % config_.batch.accumulation_steps == 0; }

double Engine::lr() const { return scheduler_->Lr(global_steps_ - skipped_steps_); }

void Engine::Backward(const at::Tensor& loss) {
  if (!loss.defined() || loss.numel() != 1) {
    throw Error(absl::InvalidArgumentError(absl::StrCat(
        "Engine::Backward needs a scalar loss, got ",
        loss.defined() ? absl::StrCat("a tensor of shape ", c10::str(loss.sizes())) : "an undefined tensor")));
  }
  if (!loss.requires_grad()) {
    throw Error(absl::InvalidArgumentError(
        "Engine::Backward: the loss does not require grad (computed under NoGradGuard, or detached?)"));
  }
  const auto t0 = Clock::now();
  timers_.forward += Seconds(last_event_, t0);
  {
    // Kept on the loss's device: reading it here would sync every micro-step.
    at::NoGradGuard no_grad;
    at::Tensor value = loss.detach().reshape({}).to(at::kDouble);
    window_loss_sum_ = window_loss_sum_.defined() ? window_loss_sum_ + value : value;
    ++window_loss_count_;
  }

  reducer_->BeginBackward(IsAccumulationBoundary());
  const double factor = scaler_.scale() / static_cast<double>(config_.batch.accumulation_steps);
  try {
    at::Tensor scaled = factor == 1.0 ? loss : loss * factor;
    scaled.backward();
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw Error(absl::InternalError(absl::StrCat("backward failed: ", e.what())));
  }
  const auto t1 = Clock::now();
  reducer_->FinishBackward();
  if (coordinator_) coordinator_->EndBackward();
  const auto t2 = Clock::now();
  timers_.backward += Seconds(t0, t1);
  timers_.reduce += Seconds(t1, t2);
  last_event_ = t2;
}

void Engine::Step() {
  const auto t0 = Clock::now();
  if (!IsAccumulationBoundary()) {
    ++micro_steps_;
    last_event_ = Clock::now();
    return;
  }
  if (stage_ >= 2) {
    for (size_t i = 0; i < params_.size(); ++i) {
      if (params_[i].grad().defined()) {
        throw Error(absl::FailedPreconditionError(
            absl::StrCat("parameter '", param_names_[i],
                         "' holds a gradient the engine never reduced: call engine.Backward(loss) instead of "
                         "loss.backward()")));
      }
    }
  }
  OptimizerStep();
  ++micro_steps_;
  const auto t1 = Clock::now();
  timers_.step += Seconds(t0, t1);
  last_event_ = t1;
  MaybeLog();
}

void Engine::OptimizerStep() {
  const bool sharded = stage_ >= 1 && pg_->size() > 1;
  bool overflow = false;
  if (scaler_.enabled()) {
    // Every rank must agree, even at stage 0 where reduced gradients are
    // identical: the check is cheap and a rank-local inf must not split ranks.
    const bool local = optimizer_->LocalHasNonFinite();
    if (pg_->size() > 1) {
      at::Tensor flag = at::full({1}, local ? 1.0f : 0.0f, at::kFloat);
      comm::CollectiveLabel label("the fp16 overflow check");
      CheckWork(pg_->AllReduce(flag, comm::ReduceOp::kMax), "agreeing on fp16 overflow");
      overflow = flag.item<float>() > 0.0f;
    } else {
      overflow = local;
    }
  }

  if (overflow) {
    const double old_scale = scaler_.scale();
    ++skipped_steps_;
    reducer_->ZeroGrads();
    ThrowIfError(scaler_.Update(true));
    if (pg_->rank() == 0) {
      ZT_LOG(WARNING) << absl::StrFormat(
          "step %d: fp16 gradient overflow, skipping the step (loss scale %g -> %g, %d skipped so far)",
          global_steps_ + 1, old_scale, scaler_.scale(), skipped_steps_);
    }
  } else {
    double multiplier = 1.0 / scaler_.scale();
    if (config_.gradient_clipping > 0.0) {
      double sq = optimizer_->LocalGradSquaredNorm();
      if (sharded) {
        at::Tensor t = at::full({1}, sq, at::kDouble);
        comm::CollectiveLabel label("the gradient norm");
        CheckWork(pg_->AllReduce(t, comm::ReduceOp::kSum), "computing the global gradient norm");
        sq = t.item<double>();
      }
      const double norm = std::sqrt(sq) / scaler_.scale();
      last_grad_norm_ = norm;
      const double coef = config_.gradient_clipping / (norm + 1e-6);
      if (coef < 1.0) multiplier *= coef;
    }
    const int64_t applied = global_steps_ - skipped_steps_;
    ops::StepHyper hyper;
    hyper.lr = scheduler_->Lr(applied);
    // DeepSpeed's OneCycle cycles momentum through the optimizer's betas, so
    // only optimizers with betas see it.
    const OptimizerType type = config_.optimizer.type;
    if (type == OptimizerType::kAdam || type == OptimizerType::kAdamW || type == OptimizerType::kLion) {
      hyper.momentum = scheduler_->Momentum(applied);
      hyper.beta2 = scheduler_->Beta2(applied);
    }
    optimizer_->Step(multiplier, hyper);
    if (sharded) GatherParams();
    reducer_->ZeroGrads();
    ThrowIfError(scaler_.Update(false));
  }
  ++global_steps_;
  global_samples_ += config_.batch.train_batch;
  log_window_samples_ += config_.batch.train_batch;
}

void Engine::GatherParams() {
  std::vector<std::unique_ptr<comm::Work>> works;
  works.reserve(groups_.size());
  comm::CollectiveLabel label("updated parameters after the optimizer step");
  for (zero::FlatGroup& g : groups_) {
    // Stage 3 gathers sharded chunks on demand; only persistent ones (which
    // own a slice of their live buffer) are refreshed here.
    if (g.param_shard.defined()) continue;
    works.push_back(pg_->AllGather(g.OwnedParams(), g.params));
  }
  for (auto& w : works) CheckWork(std::move(w), "all-gathering updated parameters");
}

double Engine::TrainBatch(const std::function<at::Tensor(int64_t)>& micro_loss) {
  const int64_t gas = config_.batch.accumulation_steps;
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

ModelStateBytes Engine::memory() const {
  ModelStateBytes m;
  auto param_bytes = [](const zero::FlatGroup& g) {
    return static_cast<int64_t>(g.param_shard.defined() ? g.param_shard.nbytes() : g.params.nbytes());
  };
  for (const zero::FlatGroup& g : frozen_groups_) m.params += param_bytes(g);
  for (const zero::FlatGroup& g : groups_) {
    m.params += param_bytes(g);
    if (g.grads.defined()) {
      m.grads += static_cast<int64_t>(g.grads.nbytes());
    } else if (g.grad_shard.defined()) {
      m.grads += static_cast<int64_t>(g.grad_shard.nbytes());
    }
  }
  if (optimizer_) {
    m.master = optimizer_->master_bytes();
    m.optimizer_state = optimizer_->state_bytes();
    m.nvme += optimizer_->disk_bytes();
    m.swap_buffers += optimizer_->buffer_bytes();
  }
  if (reducer_) m.peak_buckets = reducer_->peak_bucket_bytes();
  if (coordinator_) {
    const zero::CoordinatorStats s = coordinator_->stats();
    m.peak_gathered = s.peak_gathered_bytes;
    m.gather_cache = s.cached_bytes;
    // Swapped shards keep their tensors' shapes but no memory.
    m.params -= s.swapped_shard_bytes;
    m.nvme += s.swapped_shard_bytes;
    m.swap_buffers += s.swap_buffer_bytes;
  }
  return m;
}

void Engine::MaybeLog() {
  if (pg_->rank() != 0 || config_.steps_per_print <= 0 || global_steps_ % config_.steps_per_print != 0) return;
  const auto now = Clock::now();
  const double elapsed = Seconds(log_window_start_, now);
  const double loss =
      window_loss_count_ > 0 ? window_loss_sum_.item<double>() / static_cast<double>(window_loss_count_) : 0.0;
  const ModelStateBytes m = memory();
  std::string line = absl::StrFormat(
      "step %d | loss %.6g | lr %.4g | loss scale %g | %.1f samples/s | model states %s "
      "(params %s, grads %s, master %s, optimizer %s)",
      global_steps_, loss, scheduler_->Lr(std::max<int64_t>(0, global_steps_ - skipped_steps_ - 1)), scaler_.scale(),
      elapsed > 0 ? static_cast<double>(log_window_samples_) / elapsed : 0.0,
      HumanBytes(static_cast<double>(m.model_states())), HumanBytes(static_cast<double>(m.params)),
      HumanBytes(static_cast<double>(m.grads)), HumanBytes(static_cast<double>(m.master)),
      HumanBytes(static_cast<double>(m.optimizer_state)));
  if (skipped_steps_ > 0) absl::StrAppend(&line, absl::StrFormat(" | skipped %d", skipped_steps_));
  if (coordinator_) {
    // Stage 3: the most parameter bytes gathered at once since the last line.
    const zero::CoordinatorStats st = coordinator_->stats();
    absl::StrAppend(&line, absl::StrFormat(" | gathered peak %s, %d units prefetched%s",
                                           HumanBytes(static_cast<double>(st.peak_gathered_bytes)), st.prefetched_units,
                                           st.trace_mismatches > 0
                                               ? absl::StrFormat(", unit order changed %d times", st.trace_mismatches)
                                               : std::string()));
    coordinator_->ResetPeak();
  }
  if (io_ != nullptr) {
    // NVMe traffic per step since the last line, and the time the step spent
    // waiting for it (what the pipelining did not hide).
    const OffloadStats o = offload_stats();
    const double n = static_cast<double>(config_.steps_per_print);
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
  if (config_.activation_checkpointing.profile) {
    const CheckpointProfile p = TakeCheckpointProfile();
    const double n = static_cast<double>(config_.steps_per_print);
    absl::StrAppend(&line, absl::StrFormat(" | checkpoints per step: %.1f, forward %.1f ms, recompute %.1f ms",
                                           static_cast<double>(p.calls) / n, p.forward_ms / n, p.recompute_ms / n));
  }
  if (config_.wall_clock_breakdown) {
    const double n = static_cast<double>(config_.steps_per_print);
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

}  // namespace zt
