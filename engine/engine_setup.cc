// EngineImpl's setup (engine/engine_impl.h): Engine::Create validates the
// config against the world, one of two builders fills the parameters and
// their flat groups (stages 0-2: buckets of whole parameters, each rank
// owning a slice at stages 1-2; stage 3: the units' chunks, sharded), and
// one tail both share adds gradient buffers, the optimizer, the reducer, the
// schedule and the loss scaler.
#include <torch/torch.h>
#include <unistd.h>

#include <map>
#include <unordered_map>
#include <unordered_set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "comm/agreement.h"
#include "comm/broadcast_in_place.h"
#include "comm/shard_groups.h"
#include "comm/two_hop_gather.h"
#include "engine/engine_impl.h"
#include "launch/rank_env.h"
#include "monitor/from_config.h"
#include "ops/kernels.h"
#include "plan/layout.h"
#include "util/error.h"
#include "util/file_io.h"
#include "util/log.h"
#include "util/status.h"
#include "util/strings.h"
#include "util/system_info.h"
#include "zero/activation_checkpoint.h"
#include "zero/quantized_gradients.h"
#include "zero/sharded_init.h"
#include "zero/stage3_setup.h"
#include "zero/unit.h"

namespace zt {
namespace {

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

// What every rank must build alike: each parameter and buffer by name, in
// registration order, with its shape, dtype and whether it trains, then the
// ds_config settings a job shares (ConfigSharedSettings). Values are not
// compared: rank 0's are broadcast at setup.
comm::Description SharedSetup(torch::nn::Module& model, const Config& config,
                              const std::vector<ParamGroupOptions>& param_groups) {
  comm::Description items;
  const auto shape = [](const at::Tensor& t) {
    return t.defined() ? absl::StrCat("[", absl::StrJoin(t.sizes(), ", "), "] ", c10::toString(t.scalar_type()))
                       : std::string("undefined");
  };
  for (const auto& p : model.named_parameters(/*recurse=*/true)) {
    items.emplace_back(absl::StrCat("parameter ", p.key()),
                       absl::StrCat(shape(p.value()), p.value().requires_grad() ? " trainable" : " frozen"));
  }
  for (const auto& b : model.named_buffers(/*recurse=*/true)) {
    items.emplace_back(absl::StrCat("buffer ", b.key()), shape(b.value()));
  }
  for (auto& [key, value] : ConfigSharedSettings(config)) {
    items.emplace_back(absl::StrCat("config ", key), std::move(value));
  }
  // The param groups as given (resolved alike from the same model).
  const auto opt = [](const auto& v) { return v ? absl::StrCat(*v) : std::string("-"); };
  for (size_t k = 0; k < param_groups.size(); ++k) {
    const ParamGroupOptions& g = param_groups[k];
    items.emplace_back(
        absl::StrCat("optimizer param group ", k),
        absl::StrCat("'", g.name, "' lr ", opt(g.lr), ", weight_decay ", opt(g.weight_decay), ", eps ", opt(g.eps),
                     ", betas ", g.betas ? absl::StrCat("[", (*g.betas)[0], ", ", (*g.betas)[1], "]") : "-", "; ",
                     absl::StrJoin(g.params, ", ")));
  }
  return items;
}

constexpr char kNoTrainable[] = "the model has no trainable parameters (requires_grad is false everywhere)";

// Units held in a torch::nn::ModuleList invite LibTorch's
// `list[i]->as<BlockImpl>()->forward(x)`, which runs the inner module past
// the unit's gather. A unit around the caller names the unit when that fails
// (zero/unit.h); with no unit at the root nothing can, so say it up front.
void WarnAboutUnitsInModuleLists(torch::nn::Module& model) {
  if (AsUnit(model) != nullptr) return;
  std::vector<std::string> names;
  std::string type;
  for (const auto& item : model.named_modules()) {
    if (dynamic_cast<torch::nn::ModuleListImpl*>(item.value().get()) == nullptr) continue;
    for (const auto& child : item.value()->named_children()) {
      if (AsUnit(*child.value()) == nullptr) continue;
      names.push_back(item.key().empty() ? child.key() : absl::StrCat(item.key(), ".", child.key()));
      if (type.empty()) type = child.value()->name();
    }
  }
  if (names.empty()) return;
  ZT_LOG(WARNING) << absl::StrFormat(
      "%d zt::Unit(s) sit in a torch::nn::ModuleList ('%s'%s): call each through its unit, "
      "`list[i]->as<%s>()->forward(x)`, not `list[i]->as<BlockImpl>()`, which skips the unit's gather and fails "
      "with ATen's \"storage of size 0\" error; the model's root is no zt::Unit, so zerotorch cannot name the unit "
      "at that point",
      names.size(), names.front(), names.size() > 1 ? absl::StrCat(" ... '", names.back(), "'") : "", type);
}

}  // namespace

// What a stage's builder reports for the start-up line.
struct EngineImpl::SetupSummary {
  std::string shape;  // parameters, groups or units and chunks
};

absl::StatusOr<std::unique_ptr<Engine>> Engine::Create(std::shared_ptr<torch::nn::Module> model, Config config,
                                                       std::shared_ptr<comm::ProcessGroup> group,
                                                       EngineOptions options) {
  return CreateTunedEngine(std::move(model), std::move(config), std::move(group), std::move(options), EngineTuning());
}

absl::StatusOr<std::unique_ptr<Engine>> CreateTunedEngine(std::shared_ptr<torch::nn::Module> model, Config config,
                                                          std::shared_ptr<comm::ProcessGroup> group,
                                                          EngineOptions options, EngineTuning tuning) {
  auto engine = std::make_unique<EngineImpl>();
  try {
    ZT_RETURN_IF_ERROR(engine->Init(std::move(model), std::move(config), std::move(group), options, tuning));
  } catch (const Error& e) {
    return e.status();
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat("Engine::Create: LibTorch error: ", e.what_without_backtrace()));
  }
  return std::unique_ptr<Engine>(std::move(engine));
}

absl::Status EngineImpl::Init(std::shared_ptr<torch::nn::Module> model, Config config,
                              std::shared_ptr<comm::ProcessGroup> pg, EngineOptions options, EngineTuning tuning) {
  if (model == nullptr) return absl::InvalidArgumentError("Engine::Create: the model is null");
  if (pg == nullptr) return absl::InvalidArgumentError("Engine::Create: the process group is null");
  core_.module = std::move(model);
  core_.config = std::move(config);
  core_.pg = std::move(pg);
  for (const auto& [name, contents] : options.checkpoint_files) {
    if (name.empty() || name.find('/') != std::string::npos || name == "." || name == ".." ||
        absl::EndsWith(name, ".pt") || name == "latest") {
      return absl::InvalidArgumentError(
          absl::StrCat("EngineOptions::checkpoint_files: '", name,
                       "' is not a plain file name the checkpoint may hold (no '/', not a .pt file, not 'latest')"));
    }
  }
  core_.options = options;
  core_.tuning = tuning;
  core_.sharding = plan::StageSharding(core_.config.zero.stage);

  absl::Status batch = ResolveBatch(core_.config.batch, core_.pg->size());
  // Before any check that could fail on one rank only: the ranks must build
  // the same model with the same settings (DDP's parameter-shape check, and
  // the config too, which neither DDP nor DeepSpeed compares).
  ZT_RETURN_IF_ERROR(comm::AgreeOnDescription(
      *core_.pg, SharedSetup(*core_.module, core_.config, core_.options.param_groups), "model and ds_config settings"));
  // A config parsed with run-time "auto" values allowed (zt config check's
  // mode) must have had them filled before it trains.
  ZT_RETURN_IF_ERROR(CheckAutosResolved(core_.config));
  if (!batch.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("the config's batch sizes do not fit a data-parallel world of ",
                                                   core_.pg->size(), " ranks: ", batch.message()));
  }
  if (!core_.config.optimizer.present) {
    return absl::InvalidArgumentError(
        "the config has no \"optimizer\" block; add one, e.g. "
        "\"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 1e-3}}");
  }
  // Every rank agreed on the config above, so every rank makes the same
  // sub-groups in the same order here.
  ZT_RETURN_IF_ERROR(SetupShardGroups());

  if (core_.options.log_config_notes && core_.pg->rank() == 0) {
    // Legacy spellings, what each "auto" became, keys this build ignores:
    // what DeepSpeed would print as warnings.
    for (const std::string& note : core_.config.notes) ZT_LOG(INFO) << "config: " << note;
  }
  const at::ScalarType dtype = core_.config.fp16.enabled   ? at::kHalf
                               : core_.config.bf16.enabled ? at::kBFloat16
                                                           : at::kFloat;
  if (dtype == at::kBFloat16) {
    const plan::Bf16ComputeChoice choice = plan::ResolveBf16Compute(core_.options.bf16_compute, DetectCpuBf16Support());
    if (choice.compute == Bf16Compute::kFp32) fp32_compute_.emplace();
    if (core_.pg->rank() == 0) {
      ZT_LOG(INFO) << "engine: " << choice.reason;
    }
  } else if (core_.options.bf16_compute != Bf16Compute::kAuto && core_.pg->rank() == 0) {
    ZT_LOG(WARNING) << "engine: EngineOptions::bf16_compute " << plan::Bf16ComputeName(core_.options.bf16_compute)
                    << " has no effect: the model trains in " << c10::toString(dtype) << ", not bf16";
  }
  ConfigureActivationCheckpointing(core_.config.activation_checkpointing);
  ZT_RETURN_IF_ERROR(InitOffload());
  SetupSummary summary;
  ZT_RETURN_IF_ERROR(core_.sharding.parameters() ? SetupStage3(dtype, &summary) : SetupStages0To2(dtype, &summary));
  return FinishSetup(dtype, summary);
}

absl::Status EngineImpl::SetupTwoHopGather() {
  // Hosts from the launch layout (LOCAL_WORLD_SIZE); every rank must see the
  // same, or the groups below would differ between ranks.
  absl::StatusOr<comm::RankEnv> env = comm::ReadRankEnv();
  const int per_host = env.ok() ? env->local_world_size : core_.pg->size();
  ZT_RETURN_IF_ERROR(comm::AgreeOnDescription(*core_.pg,
                                              {{"ranks per host (LOCAL_WORLD_SIZE)", absl::StrCat(per_host)}},
                                              "launch layout, for mics_hierarchical_params_gather"));
  const int k = core_.shard_pg->size();
  if (per_host >= k) {
    if (core_.pg->rank() == 0) {
      ZT_LOG(INFO) << "engine: zero_optimization.mics_hierarchical_params_gather has no effect: the shard group of "
                   << k << " ranks lies inside a host of " << per_host << " ranks";
    }
    return absl::OkStatus();
  }
  if (k % per_host != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("zero_optimization.mics_hierarchical_params_gather: the shard group of ", k,
                     " ranks is not a whole number of hosts of ", per_host,
                     " ranks (LOCAL_WORLD_SIZE); choose mics_shard_size as a multiple of the ranks per host"));
  }
  ZT_ASSIGN_OR_RETURN(core_.two_hop, comm::TwoHopGather::Create(core_.shard_pg, per_host));
  core_.coordinator->SetTwoHopGather(core_.two_hop);
  if (core_.pg->rank() == 0) {
    ZT_LOG(INFO) << "engine: hierarchical gather (mics_hierarchical_params_gather): stage 3 gathers its shard group of "
                 << k << " ranks in two hops, across " << k / per_host << " hosts, then inside each host of "
                 << per_host;
  }
  return absl::OkStatus();
}

absl::Status EngineImpl::SetupShardGroups() {
  const int k = core_.config.zero.mics_shard_size;
  if (k > 0 && k != core_.pg->size() && !core_.sharding.optimizer_state()) {
    return absl::InvalidArgumentError(
        absl::StrCat("zero_optimization.mics_shard_size is ", k,
                     " at ZeRO stage 0, which shards nothing: use stage 1, 2 or 3, or leave mics_shard_size at -1"));
  }
  ZT_ASSIGN_OR_RETURN(comm::ShardGroups shards,
                      comm::MakeShardGroups(core_.pg, k, "zero_optimization.mics_shard_size"));
  core_.shard_pg = std::move(shards.shard);
  core_.replica_pg = std::move(shards.replica);
  // H larger than the world, or not dividing it, is refused by MakeShardGroups;
  // H equal to the world is flat stage 3 already.
  if (const int h = core_.config.zero.hpz_partition_size; h > 1 && h != core_.pg->size()) {
    if (!core_.sharding.parameters() || core_.replica_pg ||
        core_.config.zero.offload_param.device == OffloadDevice::kNvme) {
      return absl::InvalidArgumentError(
          absl::StrCat("zero_optimization.zero_hpz_partition_size is ", h,
                       ": hpZ needs ZeRO stage 3, without mics_shard_size and without parameter offload to NVMe"));
    }
    ZT_ASSIGN_OR_RETURN(
        comm::ShardGroups hpz,
        comm::MakeShardGroups(core_.pg, h, "zero_optimization.zero_hpz_partition_size", /*replicas=*/false));
    core_.hpz_pg = std::move(hpz.shard);
  }
  if (core_.replica_pg && core_.pg->rank() == 0) {
    ZT_LOG(INFO) << "engine: hierarchical sharding (mics_shard_size " << core_.shard_pg->size()
                 << "): " << core_.pg->size() / core_.shard_pg->size() << " shard groups of " << core_.shard_pg->size()
                 << " consecutive ranks, gradients all-reduced across them";
  }
  return absl::OkStatus();
}

absl::Status EngineImpl::SetupStages0To2(at::ScalarType dtype, SetupSummary* summary) {
  if (dtype != at::kFloat) core_.module->to(dtype);

  // Trainable parameters, each once (tied weights appear under several names).
  std::unordered_set<const void*> seen;
  std::vector<plan::ParamInfo> infos;
  for (const auto& item : core_.module->named_parameters(/*recurse=*/true)) {
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
    core_.params.push_back(p);
    core_.param_names.push_back(item.key());
    plan::ParamInfo info;
    info.name = item.key();
    info.shape = p.sizes().vec();
    info.numel = p.numel();
    infos.push_back(std::move(info));
  }
  if (core_.params.empty()) return absl::InvalidArgumentError(kNoTrainable);

  const int partitions = core_.sharding.optimizer_state() ? core_.shard_pg->size() : 1;
  const int partition = core_.sharding.optimizer_state() ? core_.shard_pg->rank() : 0;
  plan::Layout layout = plan::PlanLayout(infos, core_.config.zero.reduce_bucket_size, partitions);
  for (const plan::GroupLayout& gl : layout.groups) {
    core_.groups.push_back(zero::FlattenParams(
        gl, core_.params, partition,
        core_.sharding.optimizer_state() ? zero::ParamResidency::kOwnsSliceOfFull : zero::ParamResidency::kFull));
  }

  // Rank 0's initial state everywhere: the groups, then buffers and frozen
  // parameters (not in any group) one by one.
  std::vector<at::Tensor> initial;
  for (zero::FlatGroup& g : core_.groups) initial.push_back(g.params);
  for (const auto& b : core_.module->named_buffers(/*recurse=*/true)) initial.push_back(b.value());
  for (const auto& p : core_.module->named_parameters(/*recurse=*/true)) {
    if (!p.value().requires_grad()) initial.push_back(p.value());
  }
  ZT_RETURN_IF_ERROR(comm::BroadcastInPlace(*core_.pg, initial, /*root=*/0, "rank 0's initial state"));

  summary->shape = absl::StrFormat("%d parameters in %d groups (%d elements)", core_.params.size(), core_.groups.size(),
                                   layout.total_numel());
  return absl::OkStatus();
}

absl::Status EngineImpl::SetupStage3(at::ScalarType dtype, SetupSummary* summary) {
  const zero::Stage3Options options = zero::Stage3OptionsFromConfig(core_.config);
  ZT_ASSIGN_OR_RETURN(zero::Stage3Build b, zero::BuildStage3(*core_.module, *core_.shard_pg, *core_.pg, options));
  if (b.num_trainable == 0) return absl::InvalidArgumentError(kNoTrainable);
  core_.params.assign(b.params.begin(), b.params.begin() + b.num_trainable);
  core_.param_names.assign(b.names.begin(), b.names.begin() + b.num_trainable);
  core_.frozen_params.assign(b.params.begin() + b.num_trainable, b.params.end());
  core_.frozen_names.assign(b.names.begin() + b.num_trainable, b.names.end());
  core_.groups = std::move(b.trainable_chunks);
  core_.frozen_groups = std::move(b.frozen_chunks);
  ZT_RETURN_IF_ERROR(ConvertAndBroadcastBuffers(dtype));

  std::vector<zero::ParamCoordinator::Unit> units(b.units.size());
  for (size_t u = 0; u < units.size(); ++u) {
    units[u].name = b.units[u].name;
    units[u].chunks = b.units[u].chunks;
  }
  std::vector<zero::ParamCoordinator::Chunk> chunks;
  std::vector<int> chunk_of_group(core_.groups.size(), -1);
  int persistent = 0;
  int64_t persistent_numel = 0;
  for (size_t c = 0; c < b.chunks.size(); ++c) {
    const zero::Stage3Build::ChunkRef& ref = b.chunks[c];
    zero::ParamCoordinator::Chunk chunk;
    chunk.group = ref.trainable ? &core_.groups[static_cast<size_t>(ref.index)]
                                : &core_.frozen_groups[static_cast<size_t>(ref.index)];
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
  plan::PrefetchLimits limits;
  limits.prefetch_bucket_numel = core_.config.zero.prefetch_bucket_size;
  limits.max_live_numel = core_.config.zero.max_live_parameters;
  limits.max_reuse_distance = core_.config.zero.max_reuse_distance;
  core_.coordinator = std::make_unique<zero::ParamCoordinator>(
      std::move(units), std::move(chunks), std::move(chunk_of_group), core_.shard_pg, core_.pg, limits);
  if (core_.config.zero.offload_param.device == OffloadDevice::kNvme) ZT_RETURN_IF_ERROR(OffloadParamShards());
  if (core_.config.zero.mics_hierarchical_params_gather) ZT_RETURN_IF_ERROR(SetupTwoHopGather());
  if (core_.config.zero.quantized_weights || core_.config.zero.quantized_nontrainable_weights) {
    zero::WeightQuantization q;
    q.all = core_.config.zero.quantized_weights;
    q.frozen = core_.config.zero.quantized_nontrainable_weights;
    core_.coordinator->SetWeightQuantization(q);
    if (core_.pg->rank() == 0) {
      ZT_LOG(INFO) << "engine: quantized weights (ZeRO++ qwZ): stage 3 gathers "
                   << (q.all ? "every non-persistent parameter chunk" : "the frozen parameter chunks")
                   << " as int8 blocks of " << q.format.block << " elements with a scale each"
                   << (q.frozen ? " (frozen chunks quantized once)" : "")
                   << "; master weights, optimizer state and checkpoints stay exact";
    }
  }
  if (core_.hpz_pg) {
    core_.coordinator->SetSecondaryGroup(core_.hpz_pg);
    if (core_.pg->rank() == 0) {
      int64_t secondary = 0;
      for (const zero::ParamCoordinator::Chunk& c : core_.coordinator->chunks()) {
        if (!c.persistent) secondary += c.group->layout.padded_numel / core_.hpz_pg->size();
      }
      ZT_LOG(INFO) << "engine: hpZ (zero_hpz_partition_size " << core_.hpz_pg->size()
                   << "): backward gathers from secondary shards over " << core_.hpz_pg->size()
                   << " consecutive ranks; they take "
                   << HumanBytes(static_cast<double>(secondary * static_cast<int64_t>(c10::elementSize(dtype))))
                   << " per rank";
    }
  }

  // The units' forward now reaches the coordinator through the link, which
  // ~EngineImpl clears (the user's model outlives the engine).
  core_.link = std::make_shared<zero::CoordinatorLink>();
  core_.link->coordinator.store(core_.coordinator.get());
  for (size_t u = 0; u < b.units.size(); ++u) {
    const zero::Stage3Build::Unit& unit = b.units[u];
    if (unit.base == nullptr) continue;
    unit.base->set_unit_hook(std::make_shared<zero::UnitHook>(core_.link, static_cast<int>(u), unit.name));
  }

  if (core_.pg->rank() == 0) WarnAboutUnitsInModuleLists(*core_.module);
  int64_t total = 0;
  for (const at::Tensor& p : b.params) total += p.numel();
  if (b.root_numel == total && core_.pg->size() > 1 && core_.pg->rank() == 0) {
    // Stage 3 shards what zt::Unit marks; without units every parameter is
    // the root's, gathered for good on every rank.
    const int64_t bytes = total * static_cast<int64_t>(c10::elementSize(dtype));
    ZT_LOG(WARNING) << absl::StrFormat(
        "stage 3 without any zt::Unit in the model: all %d parameters stay whole on every rank (%s each, %s more "
        "than sharded over %d ranks); only gradients and optimizer state are sharded. Wrap the repeated blocks in "
        "zt::Unit<BlockImpl> (docs/stage3.md) to shard the parameters too",
        total, HumanBytes(static_cast<double>(bytes)),
        HumanBytes(static_cast<double>(bytes - bytes / core_.pg->size())), core_.pg->size());
  }
  summary->shape = absl::StrFormat(
      "%d parameters (%d elements, %d frozen tensors) in %d units and %d chunks, %d persistent (%d elements%s)",
      b.params.size(), total, core_.frozen_params.size(), b.units.size() - 1, b.chunks.size(), persistent,
      persistent_numel, b.root_numel > 0 ? absl::StrFormat(", of which %d outside every zt::Unit", b.root_numel) : "");
  return absl::OkStatus();
}

absl::Status EngineImpl::OffloadParamShards() {
  // Shards leave memory before gradients and the optimizer state arrive,
  // so the peak is one copy of the shards, not two.
  const OffloadParamConfig& op = core_.config.zero.offload_param;
  zero::ParamOffloadOptions po;
  po.param = op;
  po.file_name = absl::StrFormat("zerotorch-%d-rank%d-params.swp", static_cast<int>(::getpid()), core_.pg->rank());
  po.min_swap_bytes = core_.config.aio.block_size;
  zero::ParamSwapPlacement placement;
  ZT_RETURN_IF_ERROR(comm::AgreeAcrossRanks(*core_.pg, core_.coordinator->OffloadShards(po, core_.io.get(), &placement),
                                            "moving the parameter shards to offload_param.nvme_path"));
  if (core_.pg->rank() == 0) {
    // What DeepSpeed's rule decided (plan/param_swap.h), so a model whose
    // shards are all small does not silently run without parameter offload.
    const std::string line = absl::StrFormat(
        "offload_param: %d chunk shards (%s per rank) in the swap file; %d smaller than aio.block_size (%d bytes) stay "
        "in memory (%s)%s",
        placement.swapped_chunks, HumanBytes(static_cast<double>(placement.swapped_bytes)), placement.kept_chunks,
        core_.config.aio.block_size, HumanBytes(static_cast<double>(placement.kept_bytes)),
        placement.swapped_chunks == 0 && placement.kept_chunks > 0
            ? "; no parameter is offloaded: lower aio.block_size to move smaller shards"
            : "");
    if (placement.swapped_chunks == 0) {
      ZT_LOG(WARNING) << line;
    } else {
      ZT_LOG(INFO) << line;
    }
  }
  // Building the model and sharding it freed gigabytes in pieces small
  // enough to stay in the C heap: give them back before the gradients come.
  ReturnFreedHeapMemory();
  return absl::OkStatus();
}

absl::Status EngineImpl::FinishSetup(at::ScalarType dtype, const SetupSummary& summary) {
  // Gradients: full flat buffers at stages 0/1 (stage 1 steps on its slice),
  // only this rank's shard at stages 2/3 (zero::GradResidency).
  const at::ScalarType grad_dtype = ToScalarType(core_.config.grad_accum_dtype).value_or(dtype);
  const zero::GradResidency residency = zero::GradResidencyFor(core_.sharding);
  for (zero::FlatGroup& g : core_.groups) {
    if (residency == zero::GradResidency::kShardOnly) {
      g.grad_shard = at::zeros({g.layout.shard_numel}, g.params.options().dtype(grad_dtype));
      g.grad_residency = residency;
      continue;
    }
    zero::AttachFlatGrads(g, core_.params);
    if (residency == zero::GradResidency::kFullFlatOwnedSlice) {
      g.grad_shard = g.grads.narrow(0, g.owned_begin(), g.owned_end() - g.owned_begin());
      g.grad_residency = residency;
    }
  }
  ZT_RETURN_IF_ERROR(MakeOptimizer());

  zero::GradReducerOptions ro = ReducerOptions();
  // Stage 2: one bucket reduced while the next fills (DeepSpeed's two IPG
  // buffers), so its peak is the model states plus two buckets.
  if (core_.sharding.gradients() && !core_.sharding.parameters()) {
    ro.max_inflight_groups = 1;
    ro.wait_before_launch = true;
  }
  if (zero::ParamCoordinator* coordinator = core_.coordinator.get()) {
    ro.on_group_complete = [coordinator](int g) { coordinator->OnGroupGradsComplete(g); };
  }
  MakeUpdateInFlight();
  if (plan::UpdatesDuringBackward(update_->schedule())) {
    UpdateInFlight* update = update_.get();
    ro.on_group_reduced = [update](int g) { update->OnGroupReduced(g); };
  }
  ro.replica = core_.replica_pg;
  core_.reducer = std::make_unique<zero::GradReducer>(core_.groups, core_.params, core_.shard_pg, ro);
  if (ro.quantized_gradients && core_.shard_pg->size() > 1 && core_.pg->rank() == 0) {
    ZT_LOG(INFO) << "engine: quantized gradients (ZeRO++ qgZ): each gradient bucket is reduced over "
                 << core_.shard_pg->size() << " ranks by one all-to-all of int" << ro.quantized_gradients->bits
                 << " blocks of " << ro.quantized_gradients->block << " elements with a scale each, summed in fp32"
                 << (core_.replica_pg ? ", then all-reduced exactly across the replicas" : "")
                 << (ro.error_feedback ? absl::StrFormat("; LoCo error feedback (err_beta %g, reset_T %d)",
                                                         ro.error_feedback->err_beta, ro.error_feedback->reset_t)
                                       : std::string())
                 << (ro.comm_dtype ? "; communication_data_type does not apply to these buckets (int8 on the wire, "
                                     "summed in fp32)"
                                   : "");
  }
  core_.scheduler = MakeLrScheduler(core_.config.scheduler, core_.config.optimizer.lr);
  core_.scaler = core_.config.fp16.enabled ? LossScaler(core_.config.fp16) : LossScaler::Disabled();
  last_event_ = log_window_start_ = std::chrono::steady_clock::now();
  logged_comm_ = comm_traffic();  // the first log line counts training, not setup

  // The monitors, on rank 0; every rank learns whether they could be made
  // (a rank that went on alone would wait in its first collective).
  const bool wants_monitors = core_.config.csv_monitor.enabled || core_.config.tensorboard.enabled;
  if (core_.options.write_monitors && wants_monitors) {
    absl::Status made = absl::OkStatus();
    if (core_.pg->rank() == 0) {
      auto set = monitor::MonitorsFromConfig(core_.config, /*default_dir=*/"");
      if (set.ok()) {
        monitors_ = *std::move(set);
      } else {
        made = set.status();
      }
    }
    ZT_RETURN_IF_ERROR(comm::AgreeAcrossRanks(*core_.pg, made, "creating the config's monitors"));
  }

  if (core_.pg->rank() == 0) {
    const Config& c = core_.config;
    ZT_LOG(INFO) << absl::StrFormat(
        "engine: ZeRO stage %d, %d ranks, %s, %s; batch %d = micro %d x accumulation %d x ranks %d; model states "
        "per rank %s; optimizer kernels %s",
        core_.sharding.stage(), core_.pg->size(), c10::toString(dtype), summary.shape, c.batch.train_batch,
        c.batch.micro_batch, c.batch.accumulation_steps, core_.pg->size(),
        HumanBytes(static_cast<double>(memory().model_states())), KernelsName());
    const std::string offload = OffloadSummary();
    if (!offload.empty()) {
      ZT_LOG(INFO) << "engine: " << offload;
    }
    for (const std::string& note : OffloadNotes()) ZT_LOG(WARNING) << "engine: " << note;
  }
  return absl::OkStatus();
}

zero::GradReducerOptions EngineImpl::ReducerOptions() const {
  zero::GradReducerOptions ro;
  ro.param_names = core_.param_names;
  ro.sharding = core_.sharding;
  ro.overlap_comm = core_.config.zero.overlap_comm;
  ro.prescale_gradients = core_.config.prescale_gradients;
  ro.gradient_predivide_factor = core_.config.gradient_predivide_factor;
  ro.comm_dtype = ToScalarType(core_.config.communication_data_type);
  const ZeroConfig& z = core_.config.zero;
  if (z.quantized_gradients) {
    ro.quantized_gradients = ops::QuantFormat{z.quantized_gradients_bits, zero::kGradientQuantFormat.block};
    if (z.loco) ro.error_feedback = zero::ErrorFeedbackOptions{z.loco_err_beta, z.loco_reset_t};
  }
  return ro;
}

absl::Status EngineImpl::InitOffload() {
  const OffloadOptimizerConfig& oo = core_.config.zero.offload_optimizer;
  const OffloadParamConfig& op = core_.config.zero.offload_param;
  // The config parser already enforced the stage rules (optimizer offload at
  // stages 1-3, parameter offload at stage 3, nvme_path with "nvme").
  if (oo.device != OffloadDevice::kNone && oo.ratio < 1.0) {
    return absl::UnimplementedError(absl::StrFormat(
        "zero_optimization.offload_optimizer.ratio is %g; partial offload is not implemented: set ratio to 1 "
        "(offload all of the optimizer state) or drop offload_optimizer",
        oo.ratio));
  }
  // DeepSpeed creates a missing nvme_path; so do we (the swap files' own
  // checks -- a directory, writable, room enough -- follow).
  const std::pair<bool, std::pair<const char*, const std::string*>> paths[] = {
      {oo.device == OffloadDevice::kNvme, {"zero_optimization.offload_optimizer.nvme_path", &oo.nvme_path}},
      {op.device == OffloadDevice::kNvme, {"zero_optimization.offload_param.nvme_path", &op.nvme_path}}};
  for (const auto& [used, key_path] : paths) {
    if (!used || key_path.second->empty()) continue;
    if (absl::Status made = MakeDirs(*key_path.second); !made.ok()) {
      return absl::Status(made.code(), absl::StrCat(key_path.first, ": ", made.message()));
    }
  }
  if (oo.device == OffloadDevice::kNvme || op.device == OffloadDevice::kNvme) {
    offload::IoOptions io;
    io.block_size = core_.config.aio.block_size;
    io.queue_depth = core_.config.aio.queue_depth;
    io.threads = core_.config.aio.intra_op_parallelism;
    io.single_submit = core_.config.aio.single_submit;
    io.overlap_events = core_.config.aio.overlap_events;
    io.priorities = core_.tuning.io_priority;
    io.fixed_buffers = core_.tuning.io_fixed_buffers;
    auto created = offload::IoEngine::Create(io);
    if (!created.ok()) return created.status();
    core_.io = std::move(*created);
  }
  if (core_.pg->rank() == 0) {
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

absl::Status EngineImpl::ResolveParamGroupsOf() {
  // Every name the module registers a parameter under, and which trainable
  // parameter (in the module's order) it is; frozen: -1.
  std::unordered_map<const void*, int> index_of;
  std::unordered_set<std::string> trainable_set(core_.param_names.begin(), core_.param_names.end());
  std::map<std::string, int> names;
  std::vector<std::string> trainable;
  for (const auto& item : core_.module->named_parameters(/*recurse=*/true)) {
    const void* impl = item.value().unsafeGetTensorImpl();
    auto it = index_of.find(impl);
    if (it == index_of.end()) {
      int index = -1;
      if (trainable_set.count(item.key()) != 0) {
        index = static_cast<int>(trainable.size());
        trainable.push_back(item.key());
      }
      it = index_of.emplace(impl, index).first;
    }
    names[item.key()] = it->second;
  }
  if (trainable.size() != core_.param_names.size()) {
    return absl::InternalError("engine: the trainable parameters' names do not match the module's");
  }
  ZT_ASSIGN_OR_RETURN(core_.param_groups,
                      ResolveParamGroups(core_.options.param_groups, names, trainable, core_.config.optimizer,
                                         core_.config.scheduler.type != SchedulerType::kNone));
  return absl::OkStatus();
}

void EngineImpl::MakeUpdateInFlight() {
  // Every rank decides alike: the config, the model and the swap placement
  // are the same on all of them.
  plan::UpdateScheduleFacts& f = update_facts_;
  const zero::ShardedOptimizer& opt = *core_.optimizer;
  f.sharding = core_.sharding;
  f.gradient_clipping = core_.config.gradient_clipping > 0.0;
  f.fp16 = core_.config.fp16.enabled;
  f.state_walks_ahead = opt.state_walks_ahead();
  f.params_swapped = opt.params_swapped();
  f.master_is_params = opt.master_is_params();
  f.optimizer_splits = opt.splits_update();
  f.fp32_grads = opt.fp32_grads();
  f.group_count = static_cast<int>(core_.groups.size());
  f.first_deferrable_group = core_.coordinator ? core_.coordinator->FirstDeferrableGroup() : f.group_count;
  f.allow_during_backward = core_.tuning.update_during_backward;
  f.allow_at_gather = core_.tuning.update_at_gather;
  update_ = std::make_unique<UpdateInFlight>(plan::ChooseUpdateSchedule(f), f.first_deferrable_group, *core_.optimizer,
                                             core_.coordinator.get());
  update_->Attach();
}

absl::Status EngineImpl::MakeOptimizer() {
  zero::ShardedOptimizerOptions so;
  so.impl = core_.tuning.optimizer_impl;
  so.early_step_waits = core_.tuning.update_during_backward_waits;
  const OffloadOptimizerConfig& oo = core_.config.zero.offload_optimizer;
  if (oo.device == OffloadDevice::kNvme) {
    offload::OptimizerSwapOptions swap;
    swap.dir = oo.nvme_path;
    swap.file_prefix = absl::StrFormat("zerotorch-%d-rank%d-optimizer", static_cast<int>(::getpid()), core_.pg->rank());
    swap.sub_group_numel = core_.config.zero.sub_group_size;
    swap.buffer_count = oo.buffer_count;
    swap.pipeline_read = oo.pipeline_read;
    swap.pipeline_write = oo.pipeline_write;
    so.swap = swap;
    so.io = core_.io.get();
  }
  if (core_.coordinator && core_.config.zero.offload_param.device == OffloadDevice::kNvme) {
    so.params = core_.coordinator->shard_access();
  }
  ZT_RETURN_IF_ERROR(ResolveParamGroupsOf());
  // group_of indexed like core_.params (stage 3 orders them by unit).
  auto made =
      zero::ShardedOptimizer::Create(core_.groups, ReindexParamGroups(core_.param_groups, core_.param_names), so);
  ZT_RETURN_IF_ERROR(comm::AgreeAcrossRanks(*core_.pg, made.status(), "setting up the optimizer state"));
  core_.optimizer = std::move(*made);
  return absl::OkStatus();
}

absl::Status EngineImpl::ConvertAndBroadcastBuffers(at::ScalarType dtype) {
  at::NoGradGuard no_grad;
  std::vector<at::Tensor> buffers;
  for (const auto& item : core_.module->named_buffers(/*recurse=*/true)) {
    at::Tensor b = item.value();
    if (!b.defined() || b.numel() == 0) continue;
    if (at::isFloatingType(b.scalar_type()) && b.scalar_type() != dtype) b.set_data(b.to(dtype));
    if (!b.is_contiguous()) b.set_data(b.contiguous());
    buffers.push_back(b);
  }
  return comm::BroadcastInPlace(*core_.pg, buffers, /*root=*/0, "rank 0's module buffers");
}

}  // namespace zt
