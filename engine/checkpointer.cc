// Implementation of engine/checkpointer.h.
#include "engine/checkpointer.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "ckpt/export.h"
#include "ckpt/format/crc32.h"
#include "ckpt/format/pt_file.h"
#include "ckpt/format/safetensors.h"
#include "comm/agreement.h"
#include "comm/collective_label.h"
#include "config/lora_options.h"
#include "engine/tensor_ref.h"
#include "launch/rank_env.h"
#include "plan/layout.h"
#include "util/error.h"
#include "util/file_io.h"
#include "util/fnv1a.h"
#include "util/log.h"
#include "util/publish_folder.h"
#include "util/status.h"
#include "util/strings.h"
#include "zero/optimizer_state.h"

namespace zt {
namespace {

// A fresh [e - b] fp32 buffer for elements [b, e) of a group: every element
// before the group's padding is read into it, so only the padding is zeroed
// (filling gigabytes with zeros first would cost as much as reading them).
at::Tensor OwnedBuffer(const zero::FlatGroup& g, int64_t b, int64_t e) {
  at::Tensor t = at::empty({e - b}, at::kFloat);
  const int64_t pad = std::max(b, std::min(e, g.layout.numel));
  if (pad < e) t.narrow(0, pad - b, e - pad).zero_();
  return t;
}

bool HasTensor(const ckpt::Value& v) {
  if (v.is_tensor()) return true;
  if (v.is_list() || v.is_tuple()) {
    for (const ckpt::Value& x : v.AsList()) {
      if (HasTensor(x)) return true;
    }
  }
  if (v.is_dict()) {
    for (const auto& [k, x] : v.AsDict().items) {
      if (HasTensor(x)) return true;
    }
  }
  return false;
}

int64_t TagHash(const std::string& tag) {
  Fnv1a64 h;
  h.AddString(tag);
  return static_cast<int64_t>(h.value() >> 1);
}

at::Tensor CpuRngState() {
  at::Generator gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  return gen.get_state().contiguous();
}

void SetCpuRngState(const at::Tensor& state) {
  at::Generator gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_state(state);
}

// Name of every parameter registered under more than one name -> the name
// the engine (and the checkpoint layout) uses for it: the first one.
std::map<std::string, std::string> TiedAliases(torch::nn::Module& module) {
  std::map<std::string, std::string> aliases;
  std::unordered_map<const void*, std::string> first;
  for (const auto& item : module.named_parameters(/*recurse=*/true)) {
    auto [it, inserted] = first.emplace(item.value().unsafeGetTensorImpl(), item.key());
    if (!inserted) aliases[item.key()] = it->second;
  }
  return aliases;
}

}  // namespace

absl::Status Checkpointer::ReadAndAgree(const std::function<absl::Status()>& read, const std::string& what) {
  absl::Status local;
  try {
    local = read();
  } catch (const std::exception& e) {
    local = absl::InternalError(absl::StrCat(what, ": ", e.what()));
  }
  if (!local.ok()) {
    ZT_LOG(ERROR) << local.message();
  }
  return comm::AgreeAcrossRanks(*core_.pg, local, what);
}

void Checkpointer::CommitFrozenAndBuffers(Staged& staged) {
  CommitFrozen(staged.frozen);
  at::NoGradGuard no_grad;
  for (auto& [dst, tmp] : staged.buffers) {
    at::Tensor d = dst;
    d.copy_(tmp.view(d.sizes()));
  }
}

// ---------------------------------------------------------------------------
// Save

absl::Status Checkpointer::Save(const std::string& dir, const std::string& tag, const ckpt::Value& client_state) {
  ZT_ASSIGN_OR_RETURN(PreparedSave p, Prepare(dir, tag, client_state));
  return Commit(p, p.replicas_agree.ok() ? WriteFiles(p) : p.replicas_agree);
}

absl::StatusOr<Checkpointer::PreparedSave> Checkpointer::Prepare(const std::string& dir, const std::string& tag_in,
                                                                 const ckpt::Value& client_state) {
  const int64_t accumulation = core_.config.batch.accumulation_steps;
  if (core_.micro_steps % accumulation != 0) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "SaveCheckpoint in the middle of gradient accumulation (micro-step %d of %d): save after the Step() that "
        "ends an accumulation boundary",
        core_.micro_steps % accumulation, accumulation));
  }
  if (!client_state.is_none() && (!client_state.is_dict() || HasTensor(client_state))) {
    return absl::InvalidArgumentError(
        "SaveCheckpoint: client_state must be a dict of numbers, strings, lists and dicts (no tensors)");
  }
  PreparedSave p;
  p.dir = dir;
  p.tag = tag_in.empty() ? absl::StrCat("global_step", core_.global_steps) : tag_in;
  ZT_RETURN_IF_ERROR(CheckTagAgreement(p.tag));
  if (NeighbourCopies* copies = keep_memory_copies_ ? Copies() : nullptr) copies->BeforeSave(p.tag);
  // Files are numbered by the place in the shard group. Under hierarchical
  // sharding the replicas hold the same shards: the first shard group (its
  // replica rank 0) writes a checkpoint of shard-group size, which loads at
  // any world size and layout like any other; the others only agree.
  p.file_rank = core_.shard_pg->rank();
  p.writes = core_.replica_pg == nullptr || core_.replica_pg->rank() == 0;
  p.folder = dir + "/" + p.tag;

  p.layout = CurrentLayout();
  p.shards = CurrentShards(p.layout, &p.keep);
  p.ts = CurrentTrainingState();
  // Nothing is created before this point, so every rank judges the same tree.
  ZT_RETURN_IF_ERROR(AgreeOnSaveId(p.folder, &p.ts, &p.replacing));
  // A tag that exists (a second run into the same save dir, or a tag saved
  // twice) is written beside it and swapped in only once every rank's files
  // are complete: a save that fails on one rank leaves the old tag whole.
  p.staging = p.replacing ? absl::StrFormat("%s.saving.%x", p.folder, p.ts.save_id) : p.folder;
  p.write_model_states = p.writes && (core_.sharding.parameters() || p.file_rank == 0);
  if (p.write_model_states) p.module = ModuleStateDict(&p.keep, &p.buffer_names);
  p.client_state = client_state;
  if (p.writes && p.file_rank == 0) p.extra_files = core_.options.checkpoint_files;
  p.replicas_agree = CheckReplicasAgree();
  return p;
}

absl::Status Checkpointer::WriteFiles(const PreparedSave& p) {
  if (!p.writes) return absl::OkStatus();
  ZT_RETURN_IF_ERROR(MakeDirs(p.staging));
  try {
    ZT_RETURN_IF_ERROR(ckpt::WritePtFile(p.staging + "/" + ckpt::OptimStatesFile(p.file_rank, p.layout.model_dtype),
                                         ckpt::MakeOptimStates(p.layout, p.file_rank, p.shards, p.ts)));
    if (p.write_model_states) {
      ZT_RETURN_IF_ERROR(ckpt::WritePtFile(
          p.staging + "/" + ckpt::ModelStatesFile(p.layout.stage, p.file_rank),
          ckpt::MakeModelStates(p.layout, p.file_rank, p.ts, p.module, p.buffer_names, p.shards, p.client_state)));
    }
    for (const auto& [name, contents] : p.extra_files) {
      ZT_RETURN_IF_ERROR(WriteFileAtomically(p.staging + "/" + name, contents));
    }
  } catch (const Error& e) {
    return e.status();
  }
  return absl::OkStatus();
}

absl::Status Checkpointer::Commit(const PreparedSave& p, const absl::Status& local) {
  const int rank = core_.pg->rank();
  const std::string& folder = p.folder;
  if (!local.ok()) {
    ZT_LOG(ERROR) << "saving checkpoint '" << folder << "': " << local.message();
  }
  absl::Status agreed = comm::AgreeAcrossRanks(*core_.pg, local, absl::StrCat("saving checkpoint '", folder, "'"));
  if (!agreed.ok()) {
    if (p.replacing && rank == 0) {
      std::error_code ec;
      std::filesystem::remove_all(p.staging, ec);  // the old tag stays as it was
    }
    return agreed;
  }

  // Every rank's files are in place: only now does `latest` move.
  const absl::Status done = rank == 0 ? Publish(p.dir, p.tag, p.staging, p.layout, p.ts.save_id) : absl::OkStatus();
  ZT_RETURN_IF_ERROR(comm::AgreeAcrossRanks(*core_.pg, done, absl::StrCat("finishing checkpoint '", folder, "'")));
  if (rank == 0) {
    ZT_LOG(INFO) << "saved checkpoint '" << folder << "' (step " << p.ts.global_steps << ")";
  }
  if (NeighbourCopies* copies = keep_memory_copies_ ? Copies() : nullptr) {
    // The save stands whatever happens here: without a copy a restart reads
    // the disk. The copy is made in the background (engine/neighbour_copies.h).
    absl::Status kept = copies->KeepSaved(folder, ckpt::CanonicalSaveDir(p.dir), p.tag, OwnFiles(p));
    if (!kept.ok()) {
      ZT_LOG(WARNING) << "checkpoint '" << folder << "' is saved, but no memory copy of it is kept (" << kept.message()
                      << "); a restart reads it from the disk";
    }
  }
  return absl::OkStatus();
}

std::vector<std::string> Checkpointer::OwnFiles(const PreparedSave& p) {
  std::vector<std::string> own;
  if (!p.writes) return own;
  own.push_back(ckpt::OptimStatesFile(p.file_rank, p.layout.model_dtype));
  if (p.write_model_states) own.push_back(ckpt::ModelStatesFile(p.layout.stage, p.file_rank));
  for (const auto& [name, contents] : p.extra_files) own.push_back(name);
  return own;
}

NeighbourCopies* Checkpointer::Copies() {
  if (!core_.memory_copies_checked) {
    core_.memory_copies_checked = true;
    std::optional<ckpt::MemoryCopies> memory = ckpt::MemoryCopies::FromEnv(core_.pg->rank());
    // Nodes are LOCAL_WORLD_SIZE ranks each; without it, one node.
    absl::StatusOr<comm::RankEnv> env = comm::ReadRankEnv();
    const int64_t local = env.ok() ? env->local_world_size : core_.pg->size();
    // Every rank must agree (an exchange needs both of its pair): copies on
    // everywhere or nowhere, with one node size. Max of (on, off, L, -L).
    at::Tensor facts = at::tensor(std::vector<int64_t>{memory ? 1 : 0, memory ? 0 : 1, local, -local}, at::kLong);
    absl::Status agreed;
    {
      comm::CollectiveLabel label("whether memory copies are on");
      agreed = core_.pg->AllReduce(facts, comm::ReduceOp::kMax)->Wait();
    }
    const int64_t* f = facts.data_ptr<int64_t>();
    const bool mixed = f[0] == 1 && f[1] == 1, sizes_differ = f[2] != -f[3];
    if (memory && agreed.ok() && !mixed && !sizes_differ) {
      core_.memory_copies = std::make_shared<NeighbourCopies>(*core_.pg, static_cast<int>(local), std::move(*memory));
    } else if (memory || mixed) {
      ZT_LOG(WARNING) << "memory copies are off: "
                      << (!agreed.ok() ? std::string(agreed.message())
                          : mixed      ? absl::StrCat(ckpt::kMemoryCopiesEnv, " is set on some ranks only")
                                       : std::string("the ranks disagree on LOCAL_WORLD_SIZE"))
                      << " (start every node's launcher with --memory-copies)";
    }
  }
  return core_.memory_copies.get();
}

ckpt::Dict Checkpointer::ModuleStateDict(std::vector<at::Tensor>* keep, std::vector<std::string>* buffer_names) {
  ckpt::Dict module;
  module.ordered = true;
  if (!core_.sharding.parameters()) {
    for (const auto& item : core_.module->named_parameters(/*recurse=*/true)) {
      keep->push_back(item.value().detach().contiguous());
      module.Set(item.key(), Ref(keep->back()));
    }
  }
  for (const auto& item : core_.module->named_buffers(/*recurse=*/true)) {
    if (!item.value().defined()) continue;
    keep->push_back(item.value().detach().contiguous());
    module.Set(item.key(), Ref(keep->back()));
    buffer_names->push_back(item.key());
  }
  return module;
}

ckpt::SavedLayout Checkpointer::CurrentLayout() const {
  // Every group with its parameters' names and places.
  ckpt::SavedLayout layout;
  layout.stage = core_.sharding.stage();
  layout.world_size = core_.shard_pg->size();  // the shard group's under hierarchical sharding (Save)
  layout.model_dtype = ToCkpt(core_.params.front().scalar_type());
  layout.rule = core_.sharding.optimizer_state() ? ckpt::PartitionRule::kEven : ckpt::PartitionRule::kCeil;
  auto saved_group = [](const zero::FlatGroup& g, const std::vector<std::string>& names,
                        const std::vector<at::Tensor>& params, int first_index) {
    ckpt::SavedGroup sg;
    sg.padded_numel = g.layout.padded_numel;
    sg.numel = g.layout.numel;
    for (const plan::ParamSlot& s : g.layout.slots) {
      const size_t i = static_cast<size_t>(s.param_index - first_index);
      sg.params.push_back({names[i], params[i].sizes().vec(), s.offset, s.numel});
    }
    return sg;
  };
  // Frozen chunks number their parameters after the trainable ones.
  const int t = static_cast<int>(core_.params.size());
  for (const zero::FlatGroup& g : core_.groups) {
    layout.groups.push_back(saved_group(g, core_.param_names, core_.params, 0));
  }
  for (const zero::FlatGroup& g : core_.frozen_groups) {
    layout.frozen.push_back(saved_group(g, core_.frozen_names, core_.frozen_params, t));
  }
  layout.shared = TiedAliases(*core_.module);
  // The optimizer's param groups, each its trainable parameters in the
  // module's registration order (named_parameters, each tensor once under
  // its first name): the order DeepSpeed flattens a param group in, at
  // every stage, and so the order its stage-3 loader reads partitions back
  // by. The engine's flat groups follow its plan instead (stage 3: unit
  // order), so the checkpoint records this one (SavedLayout::optimizer_groups).
  const ResolvedParamGroups& pg = core_.param_groups;
  layout.optimizer_groups = pg.members;
  if (pg.size() > 1 || !core_.options.param_groups.empty()) {
    // The run's own groups, each with the settings it trains with (the lr
    // the next step applies, as DeepSpeed's param_groups hold it).
    const double next_lr = core_.scheduler->Lr(core_.global_steps - core_.skipped_steps);
    for (size_t k = 0; k < pg.size(); ++k) {
      const OptimizerConfig& c = pg.configs[k];
      ckpt::SavedLayout::GroupSettings gs;
      gs.lr = pg.lr[k].value_or(next_lr);
      gs.weight_decay = c.weight_decay;
      gs.eps = c.eps;
      const OptimizerType t = c.type;
      if (t == OptimizerType::kAdam || t == OptimizerType::kAdamW || t == OptimizerType::kLion) {
        gs.betas = {c.betas[0], c.betas[1]};
      }
      layout.optimizer_group_settings.push_back(std::move(gs));
    }
  }
  return layout;
}

ckpt::RankShards Checkpointer::CurrentShards(const ckpt::SavedLayout& layout, std::vector<at::Tensor>* keep) {
  const int rank = core_.shard_pg->rank();
  ckpt::RankShards shards;
  std::vector<std::string> kinds = core_.optimizer->state_names();
  kinds.insert(kinds.begin(), "master");
  zero::ShardedOptimizer* opt = core_.optimizer.get();
  for (size_t g = 0; g < core_.groups.size(); ++g) {
    const zero::FlatGroup& fg = core_.groups[g];
    const int64_t owned = fg.owned_end() - fg.owned_begin();
    for (const std::string& kind : kinds) {
      ckpt::TensorRef ref;
      if (const float* resident = opt->Resident(kind, static_cast<int>(g))) {
        at::Tensor t = at::from_blob(const_cast<float*>(resident), {owned}, at::kFloat);
        if (!core_.sharding.optimizer_state()) {
          // Stage 0 saves each rank's even share of the whole buffer.
          const auto [b, e] = layout.Range(fg.layout.padded_numel, rank);
          keep->push_back(t.narrow(0, b, e - b).clone());
          ref = Ref(keep->back());
        } else {
          ref = Ref(t);
        }
      } else {
        ref.dtype = ckpt::DType::kFloat32;
        ref.shape = {owned};
        ref.source = [opt, kind, g](uint64_t offset, void* dst, uint64_t n) {
          return opt->Read(kind, static_cast<int>(g), static_cast<int64_t>(offset / sizeof(float)),
                           static_cast<int64_t>((offset + n) / sizeof(float)), static_cast<float*>(dst));
        };
      }
      if (kind == "master") {
        shards.master.push_back(std::move(ref));
      } else {
        shards.state[kind].push_back(std::move(ref));
      }
    }
  }
  for (const zero::FlatGroup& g : core_.frozen_groups) {
    const int chunk = core_.coordinator ? core_.ChunkOfGroup(&g) : -1;
    if (chunk >= 0 && core_.coordinator->swapped(chunk)) {
      // The shard is on NVMe: stream it out through a swap buffer.
      ckpt::TensorRef ref;
      ref.dtype = ToCkpt(g.param_shard.scalar_type());
      ref.shape = {g.param_shard.numel()};
      zero::ParamCoordinator* pc = core_.coordinator.get();
      ref.source = [pc, chunk](uint64_t offset, void* dst, uint64_t n) -> absl::Status {
        try {
          at::Tensor shard = pc->AcquireShard(chunk, /*read=*/true);
          std::memcpy(dst, static_cast<const char*>(shard.data_ptr()) + offset, n);
          pc->ReleaseShard(chunk, /*dirty=*/false);
        } catch (const Error& e) {
          return e.status();
        }
        return absl::OkStatus();
      };
      shards.frozen.push_back(std::move(ref));
      continue;
    }
    keep->push_back(g.OwnedParams().contiguous());
    shards.frozen.push_back(Ref(keep->back()));
  }
  keep->push_back(CpuRngState());
  shards.rng_cpu = Ref(keep->back());
  if (core_.replica_pg) {
    // Every replica's generator state reaches the writing one (replica 0),
    // so a resume in this layout gives each rank its own stream back.
    const at::Tensor own = keep->back();  // a handle: `keep` grows below
    const int64_t n = own.numel();
    const int replicas = core_.replica_pg->size();
    at::Tensor all = at::empty({replicas * n}, at::kByte);
    at::Tensor mine = all.narrow(0, core_.replica_pg->rank() * n, n);
    mine.copy_(own);
    comm::CollectiveLabel label("the replicas' RNG states");
    CheckWork(core_.replica_pg->AllGather(mine, all), "gathering the replicas' RNG states for the checkpoint");
    keep->push_back(all);
    for (int j = 1; j < replicas; ++j) shards.rng_cpu_replicas.push_back(Ref(all.narrow(0, j * n, n)));
  }
  return shards;
}

ckpt::TrainingState Checkpointer::CurrentTrainingState() const {
  ckpt::TrainingState ts;
  ts.global_steps = core_.global_steps;
  ts.global_samples = core_.global_samples;
  ts.skipped_steps = core_.skipped_steps;
  ts.micro_steps = core_.micro_steps;
  ts.dynamic_loss_scale = core_.scaler.dynamic();
  const LossScaler::State ss = core_.scaler.state();
  ts.loss_scale = ss.scale;
  ts.scaler_cur_iter = ss.cur_iter;
  ts.scaler_last_overflow_iter = ss.last_overflow_iter;
  ts.scaler_hysteresis = ss.cur_hysteresis;
  ts.optimizer_type = std::string(ToString(core_.config.optimizer.type));
  ts.optimizer_step = core_.optimizer->step_count();
  // A config built in code has no text: its resolved JSON stands in, so the
  // checkpoint still carries what `zt ckpt convert --to deepspeed` and a
  // DeepSpeed reader need (the optimizer's hyperparameters, the schedule).
  // steps_per_print 0 ("never", from code) has no JSON spelling (DeepSpeed
  // divides by it); the stand-in says 10, which no reader acts on.
  if (core_.config.source_json.empty()) {
    Config written = core_.config;
    if (written.steps_per_print <= 0) written.steps_per_print = 10;
    ts.ds_config = ConfigToJson(written);
  } else {
    ts.ds_config = core_.config.source_json;
  }
  return ts;
}

absl::Status Checkpointer::AgreeOnSaveId(const std::string& folder, ckpt::TrainingState* ts, bool* replacing) {
  // Rank 0's id reaches every rank by a max-reduce; the folder counts as
  // existing when any rank sees it.
  at::Tensor id = at::zeros({2}, at::kLong);
  if (core_.pg->rank() == 0) id[0] = ckpt::NewSaveId();
  comm::CollectiveLabel label("the checkpoint save id");
  std::error_code ec;
  id[1] = std::filesystem::exists(folder, ec) ? 1 : 0;
  ZT_RETURN_IF_ERROR(core_.pg->AllReduce(id, comm::ReduceOp::kMax)->Wait());
  ts->save_id = id[0].item<int64_t>();
  *replacing = id[1].item<int64_t>() != 0;
  return absl::OkStatus();
}

absl::Status Checkpointer::CheckReplicasAgree() {
  if (!core_.replica_pg) return absl::OkStatus();
  // The CRC-32 the checkpoint files use, over every resident state tensor
  // (NVMe-resident state is left out: reading it back here would double the
  // save's I/O).
  uint32_t crc = 0;
  std::vector<std::string> kinds = core_.optimizer->state_names();
  kinds.insert(kinds.begin(), "master");
  for (size_t g = 0; g < core_.groups.size(); ++g) {
    const int64_t owned = core_.groups[g].owned_end() - core_.groups[g].owned_begin();
    for (const std::string& kind : kinds) {
      if (const float* data = core_.optimizer->Resident(kind, static_cast<int>(g))) {
        crc = ckpt::Crc32(crc, data, static_cast<size_t>(owned) * sizeof(float));
      }
    }
  }
  const int64_t mine = crc;
  at::Tensor t = at::tensor({mine, -mine}, at::kLong);
  comm::CollectiveLabel label("the replicas' state hashes");
  ZT_RETURN_IF_ERROR(core_.replica_pg->AllReduce(t, comm::ReduceOp::kMax)->Wait());
  if (t[0].item<int64_t>() == -t[1].item<int64_t>()) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "the replicas of this rank's shards (world ranks ", absl::StrJoin(core_.replica_pg->world_ranks(), ", "),
      ") hold different master weights or optimizer state, which hierarchical sharding keeps identical; the "
      "checkpoint would keep only the first one's. Was a parameter changed on one rank alone (outside "
      "GatheredParameters with a modifier rank)?"));
}

// What an interrupted save leaves: a `<tag>.saving.<id>` folder (killed
// before the swap) or `<tag>.replaced.<id>` (killed between the renames).
// A save dir is written by one job at a time (zt train holds a run lock on
// it), so once a save is complete every other such folder is a leftover:
// removed, each named with its size, rather than kept forever.
void Checkpointer::RemoveStaleSaves(const std::string& dir, const std::string& current) {
  namespace fs = std::filesystem;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    size_t mark = name.rfind(".saving."), skip = 8;
    if (mark == std::string::npos) mark = name.rfind(".replaced."), skip = 10;
    if (mark == std::string::npos || mark == 0 || it->path().string() == current) continue;
    const std::string id = name.substr(mark + skip);
    if (id.empty() || id.find_first_not_of("0123456789abcdef") != std::string::npos) continue;
    std::error_code size_ec;
    uint64_t bytes = 0;
    for (fs::recursive_directory_iterator f(it->path(), size_ec), fend; !size_ec && f != fend; f.increment(size_ec)) {
      std::error_code e;
      if (f->is_regular_file(e)) bytes += f->file_size(e);
    }
    std::error_code rm;
    fs::remove_all(it->path(), rm);
    if (rm) {
      ZT_LOG(WARNING) << "an interrupted save left '" << it->path().string() << "' (" << HumanBytes(bytes)
                      << "), which could not be removed: " << rm.message();
    } else {
      ZT_LOG(WARNING) << "removed '" << it->path().string() << "' (" << HumanBytes(bytes)
                      << "), left by an interrupted save";
    }
  }
}

absl::Status Checkpointer::Publish(const std::string& dir, const std::string& tag, const std::string& staging,
                                   const ckpt::SavedLayout& layout, int64_t save_id) {
  const std::string folder = dir + "/" + tag;
  // A new tag was written in place; an existing one was staged beside it
  // and is swapped in now (util/publish_folder.h: the old one steps aside
  // under `<tag>.replaced.<id>`, which RemoveStaleSaves finds if a crash
  // leaves it).
  ZT_RETURN_IF_ERROR(PublishFolder(staging, folder, absl::StrFormat("%s.replaced.%x", folder, save_id)));
  RemoveStaleSaves(dir, staging);
  if (core_.config.zero.gather_16bit_weights_on_model_save) {
    ZT_ASSIGN_OR_RETURN(std::unique_ptr<ckpt::ZeroCheckpoint> saved, ckpt::ZeroCheckpoint::Open(dir, tag));
    ckpt::ExportOptions eo;
    eo.dtype = layout.model_dtype;
    ZT_RETURN_IF_ERROR(ckpt::ExportSafetensors(*saved, folder, eo).status());
  }
  return WriteFileAtomically(dir + "/latest", tag + "\n");
}

// ---------------------------------------------------------------------------
// Load

absl::StatusOr<ckpt::Value> Checkpointer::Load(const std::string& dir, const std::string& tag) {
  if (core_.micro_steps % core_.config.batch.accumulation_steps != 0) {
    return absl::FailedPreconditionError("LoadCheckpoint in the middle of gradient accumulation: load between steps");
  }
  std::unique_ptr<ckpt::ZeroCheckpoint> ck;
  std::unique_ptr<zero::OptimizerState> optimizer_state;
  Staged staged;
  at::Tensor rng;
  std::optional<ResolvedParamGroups> adopt_groups;
  // Memory copies first (engine/neighbour_copies.h): a rank whose own copy
  // is gone gets it from its neighbour, then every file a copy on this node
  // holds is read from there, the rest from `dir`.
  ckpt::CheckpointReadOptions read_options;
  int fetched = 0;
  NeighbourCopies* copies = Copies();
  if (copies != nullptr) {
    absl::StatusOr<std::string> resolved = tag.empty() ? ckpt::ReadLatestTag(dir) : absl::StatusOr<std::string>(tag);
    const std::string wanted = resolved.ok() ? *resolved : std::string();  // "" still takes part
    const std::string canonical = ckpt::CanonicalSaveDir(dir);
    absl::StatusOr<int> got = copies->FetchMissing(canonical, wanted);
    if (got.ok()) {
      fetched = *got;
    } else {
      ZT_LOG(WARNING) << "memory copies: could not fetch this rank's copy from its neighbour ("
                      << got.status().message() << "); reading it from '" << dir << "'";
    }
    if (!wanted.empty()) read_options = ckpt::ReadFromCopies(copies->memory(), canonical, wanted);
  }
  auto read = [&]() -> absl::Status {
    ZT_ASSIGN_OR_RETURN(ck, ckpt::ZeroCheckpoint::Open(dir, tag, read_options));
    const std::string where = absl::StrCat("checkpoint '", dir, "/", ck->tag(), "'");
    // What saves killed mid-write left beside the complete files.
    if (core_.pg->rank() == 0) RemoveStaleTemporaries(dir + "/" + ck->tag());
    ZT_RETURN_IF_ERROR(CheckSameModel(*ck, where, &adopt_groups));
    ZT_RETURN_IF_ERROR(ReadCheckpointState(*ck, where, &optimizer_state, &staged));
    ZT_RETURN_IF_ERROR(ck->VerifyRead());  // records read in pieces, checked before the commit
    // The RNG stream: world rank r saved as file r % W, replica r / W
    // (W the saved files; replicas exist under hierarchical sharding,
    // whose replica groups are strided), so each rank gets its own back
    // when the world size matches, in either layout; else a saved rank's.
    std::vector<uint8_t> bytes;
    const int saved = ck->layout().world_size, rank = core_.pg->rank();
    if (ck->ReadRngState(rank % saved, &bytes, rank / saved).ok() || ck->ReadRngState(rank % saved, &bytes).ok()) {
      rng = at::empty({static_cast<int64_t>(bytes.size())}, at::kByte);
      std::memcpy(rng.data_ptr(), bytes.data(), bytes.size());
    }
    return absl::OkStatus();
  };
  ZT_RETURN_IF_ERROR(ReadAndAgree(
      [&]() -> absl::Status {
        absl::Status st;
        if (!read_options.locate) return read();
        try {
          st = read();
        } catch (const Error& e) {
          st = e.status();
        } catch (const std::exception& e) {
          st = absl::InternalError(e.what());
        }
        if (st.ok()) return st;
        // A copy that fails any check (CRC, save id, names) is not used:
        // the whole read starts again from the save directory.
        ZT_LOG(WARNING) << "loading from memory copies failed (" << st.message() << "); reading '" << dir
                        << "' instead";
        read_options.locate = nullptr;
        ck.reset();
        optimizer_state.reset();
        staged = Staged();
        rng = at::Tensor();
        adopt_groups.reset();
        return read();
      },
      absl::StrCat("loading checkpoint from '", dir, "'")));
  if (copies != nullptr) {
    const std::vector<std::string> files = ck->files();
    const std::string& root = copies->memory().root();
    const int64_t from_memory = std::count_if(
        files.begin(), files.end(), [&](const std::string& f) { return f.compare(0, root.size(), root) == 0; });
    ZT_LOG(INFO) << "checkpoint '" << dir << "/" << ck->tag() << "': " << from_memory << " of " << files.size()
                 << " files read from memory copies"
                 << (fetched > 0 ? absl::StrCat(" (", fetched, " fetched from the neighbouring node)") : std::string())
                 << ", " << (files.size() - static_cast<size_t>(from_memory)) << " from disk";
  }

  // Everyone read everything: commit.
  const ckpt::TrainingState& ts = ck->training_state();
  if (adopt_groups) {
    // Settings the optimizer accepts: they trained the checkpoint.
    ThrowIfError(core_.optimizer->SetParamGroups(ReindexParamGroups(*adopt_groups, core_.param_names)));
    if (core_.pg->rank() == 0) {
      std::string listed;
      for (size_t g = 0; g < adopt_groups->size(); ++g) {
        const OptimizerConfig& c = adopt_groups->configs[g];
        absl::StrAppend(&listed, g == 0 ? "" : "; ", "group ", g, " (", adopt_groups->members[g].size(),
                        " parameters): weight_decay ", c.weight_decay, ", eps ", c.eps, ", betas [", c.betas[0], ", ",
                        c.betas[1], "]");
      }
      ZT_LOG(WARNING) << "resuming with the checkpoint's " << adopt_groups->size()
                      << " optimizer param groups and their settings, as DeepSpeed's load does, in place of the "
                         "config's single set (weight_decay "
                      << core_.config.optimizer.weight_decay << ", eps " << core_.config.optimizer.eps
                      << "): " << listed
                      << ". The lr follows this run's schedule. To choose the groups yourself, give them "
                         "(EngineOptions::param_groups, zt train --weight-decay-groups)";
    }
    core_.param_groups = std::move(*adopt_groups);
  }
  core_.optimizer->Adopt(std::move(optimizer_state), staged.masters, ts.optimizer_step);
  CommitFrozenAndBuffers(staged);
  core_.global_steps = ts.global_steps;
  core_.global_samples = ts.global_samples;
  core_.skipped_steps = ts.skipped_steps;
  core_.micro_steps = ts.micro_steps;
  if (core_.scaler.enabled()) {
    LossScaler::State s;
    s.scale = ts.loss_scale;
    s.cur_iter = ts.scaler_cur_iter;
    s.last_overflow_iter = ts.scaler_last_overflow_iter;
    s.cur_hysteresis = static_cast<int>(ts.scaler_hysteresis);
    core_.scaler.set_state(s);
  }
  if (rng.defined()) SetCpuRngState(rng);
  core_.reducer->ZeroGrads();
  core_.reducer->ClearErrorFeedback();  // LoCo's errors belong to the gradients before the load (never saved)
  if (core_.pg->rank() == 0) {
    ZT_LOG(INFO) << "loaded checkpoint '" << dir << "/" << ck->tag() << "' (step " << ts.global_steps << ", saved by "
                 << ck->layout().world_size << " ranks at stage " << ck->layout().stage << ")";
  }
  const ckpt::Value* client = ck->client_state();
  return client != nullptr ? *client : ckpt::Value(ckpt::Dict());
}

absl::Status Checkpointer::CheckSameModel(const ckpt::ZeroCheckpoint& ck, const std::string& where,
                                          std::optional<ResolvedParamGroups>* adopt_groups) const {
  const ckpt::SavedLayout& l = ck.layout();
  // Every trainable parameter there, with its shape.
  for (size_t i = 0; i < core_.params.size(); ++i) {
    const std::string& name = core_.param_names[i];
    const auto at = l.FindTrainable(name);
    if (!at) {
      return absl::NotFoundError(absl::StrCat(where, " has no trainable parameter '", name,
                                              "' (was it saved from this model, with the same parameters frozen?)"));
    }
    const ckpt::SavedParam& sp = l.groups[at->first].params[at->second];
    if (sp.shape != core_.params[i].sizes().vec()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": parameter '", name, "' has shape [",
                                                     absl::StrJoin(sp.shape, ", "), "], the model [",
                                                     absl::StrJoin(core_.params[i].sizes().vec(), ", "), "]"));
    }
  }
  int64_t model_numel = 0;
  for (const at::Tensor& p : core_.params) model_numel += p.numel();
  if (l.trainable_numel() != model_numel) {
    return absl::InvalidArgumentError(absl::StrCat(where, " has trainable parameters this model does not"));
  }
  const std::string optimizer(ToString(core_.config.optimizer.type));
  if (ck.training_state().optimizer_type != optimizer) {
    return absl::InvalidArgumentError(absl::StrCat(where, " was trained with ", ck.training_state().optimizer_type,
                                                   "; the config's optimizer is ", optimizer));
  }
  ZT_RETURN_IF_ERROR(CheckGroupSettings(ck, where, adopt_groups));
  const std::vector<std::string> names = core_.optimizer->state_names();
  if (names != ck.state_names()) {
    return absl::InvalidArgumentError(absl::StrCat(where, " holds optimizer state [",
                                                   absl::StrJoin(ck.state_names(), ", "), "]; this optimizer keeps [",
                                                   absl::StrJoin(names, ", "), "]"));
  }
  return absl::OkStatus();
}

absl::Status Checkpointer::CheckGroupSettings(const ckpt::ZeroCheckpoint& ck, const std::string& where,
                                              std::optional<ResolvedParamGroups>* adopt) const {
  adopt->reset();
  const ckpt::SavedLayout& l = ck.layout();
  // No per-group record: the checkpoint's ds_config held one set of settings.
  if (l.optimizer_group_settings.empty() || l.optimizer_group_settings.size() != l.optimizer_groups.size()) {
    return absl::OkStatus();
  }
  const ResolvedParamGroups& run = core_.param_groups;
  // Same value as saved: both went through a decimal text (JSON, Python's
  // float repr) to the nearest double, so equal settings compare equal;
  // the slack covers a value printed with fewer digits.
  auto same = [](double a, double b) { return std::fabs(a - b) <= 1e-12 * std::max(std::fabs(a), std::fabs(b)); };
  const bool one_cycle_betas = core_.config.scheduler.type == SchedulerType::kOneCycle;
  // What differs between a saved group's settings and a run group's ("" if nothing).
  auto differs = [&](const ckpt::SavedLayout::GroupSettings& s, const OptimizerConfig& o) -> std::string {
    if (!same(s.weight_decay, o.weight_decay)) {
      return absl::StrCat("weight_decay ", s.weight_decay, " (this run: ", o.weight_decay, ")");
    }
    if (!same(s.eps, o.eps)) return absl::StrCat("eps ", s.eps, " (this run: ", o.eps, ")");
    if (s.betas.size() == 2 && !one_cycle_betas && (!same(s.betas[0], o.betas[0]) || !same(s.betas[1], o.betas[1]))) {
      return absl::StrCat("betas [", s.betas[0], ", ", s.betas[1], "] (this run: [", o.betas[0], ", ", o.betas[1],
                          "])");
    }
    return "";
  };
  auto shown = [](const std::vector<std::string>& names) {
    std::vector<std::string> head(names.begin(), names.begin() + std::min<size_t>(names.size(), 3));
    return absl::StrCat(names.size(), " parameters: ", absl::StrJoin(head, ", "), names.size() > 3 ? ", ..." : "");
  };
  std::map<std::string, size_t> saved_of;
  for (size_t g = 0; g < l.optimizer_groups.size(); ++g) {
    for (const std::string& n : l.optimizer_groups[g]) saved_of[n] = g;
  }
  const bool run_has_groups = !core_.options.param_groups.empty() || run.size() > 1;
  if (run_has_groups) {
    // The run's groups must be the checkpoint's: the same parameters in
    // each, trained with the same settings.
    for (size_t k = 0; k < run.size(); ++k) {
      const std::vector<std::string>& members = run.members[k];
      const std::string group =
          absl::StrCat("this run's optimizer param group '", run.names[k], "' (", shown(members), ")");
      std::optional<size_t> g0;
      for (const std::string& n : members) {
        auto it = saved_of.find(n);
        if (it == saved_of.end()) {
          return absl::FailedPreconditionError(
              absl::StrCat(where, " has no trainable parameter '", n, "' in its optimizer param groups"));
        }
        if (!g0) g0 = it->second;
        if (it->second != *g0) {
          return absl::FailedPreconditionError(absl::StrCat(
              where, ": ", group, " holds '", members.front(), "' and '", n,
              "', which the checkpoint keeps in different optimizer param groups (", *g0, " and ", it->second,
              "); give the run the checkpoint's groups (", l.optimizer_groups.size(),
              " of them), or leave "
              "EngineOptions::param_groups / --weight-decay-groups unset to resume with the checkpoint's groups"));
        }
      }
      if (l.optimizer_groups[*g0].size() != members.size()) {
        return absl::FailedPreconditionError(
            absl::StrCat(where, ": its optimizer param group ", *g0, " (", shown(l.optimizer_groups[*g0]),
                         ") holds parameters ", group,
                         " does not; give the run the checkpoint's groups, or leave EngineOptions::param_groups / "
                         "--weight-decay-groups unset to resume with the checkpoint's groups"));
      }
      const std::string d = differs(l.optimizer_group_settings[*g0], run.configs[k]);
      if (!d.empty()) {
        return absl::FailedPreconditionError(absl::StrCat(
            where, ": its optimizer param group ", *g0, " (", shown(l.optimizer_groups[*g0]), ") was trained with ", d,
            " and is this run's group '", run.names[k],
            "'; give that group the saved value to continue the same training, or leave the run's groups unset "
            "to resume with the checkpoint's"));
      }
    }
    return absl::OkStatus();
  }
  // One group with the config's settings: where every saved group agrees
  // with them, nothing changes. Otherwise the checkpoint's groups and
  // settings are taken, as DeepSpeed's load does (torch's load_state_dict
  // restores every group's settings), and the log says so at commit.
  bool agree = true;
  for (const auto& s : l.optimizer_group_settings) agree &= differs(s, core_.config.optimizer).empty();
  if (agree) return absl::OkStatus();
  ResolvedParamGroups r;
  for (size_t g = 0; g < l.optimizer_groups.size(); ++g) {
    const ckpt::SavedLayout::GroupSettings& s = l.optimizer_group_settings[g];
    OptimizerConfig c = core_.config.optimizer;
    c.weight_decay = s.weight_decay;
    c.eps = s.eps;
    if (s.betas.size() == 2 && !one_cycle_betas) c.betas = {s.betas[0], s.betas[1]};
    r.names.push_back(absl::StrCat("checkpoint group ", g));
    r.configs.push_back(c);
    r.lr.emplace_back();  // the run's lr (its schedule), as DeepSpeed's scheduler sets it
    r.members.emplace_back();
  }
  // Members in the module's order (run.members[0]: every trainable one).
  for (const std::string& n : run.members.front()) {
    auto it = saved_of.find(n);
    if (it == saved_of.end()) {
      return absl::FailedPreconditionError(
          absl::StrCat(where, " has no trainable parameter '", n, "' in its optimizer param groups"));
    }
    r.members[it->second].push_back(n);
  }
  for (size_t g = 0; g < r.members.size(); ++g) {
    if (r.members[g].empty()) {
      return absl::FailedPreconditionError(
          absl::StrCat(where, ": its optimizer param group ", g, " holds none of this run's trainable parameters"));
    }
  }
  *adopt = std::move(r);
  return absl::OkStatus();
}

absl::Status Checkpointer::ReadCheckpointState(const ckpt::ZeroCheckpoint& ck, const std::string& where,
                                               std::unique_ptr<zero::OptimizerState>* optimizer_state, Staged* staged) {
  const ckpt::SavedLayout& l = ck.layout();
  // Where the saved group is this group, split the same way, each rank
  // reads its own record whole (one pass, CRC included); elsewhere
  // parameter by parameter, from whichever saved ranks hold them.
  std::vector<char> same(core_.groups.size(), 0);
  for (size_t gi = 0; gi < core_.groups.size() && gi < l.groups.size(); ++gi) {
    const zero::FlatGroup& g = core_.groups[gi];
    const ckpt::SavedGroup& sg = l.groups[gi];
    bool match = sg.padded_numel == g.layout.padded_numel && sg.params.size() == g.layout.slots.size();
    for (size_t k = 0; match && k < sg.params.size(); ++k) {
      const plan::ParamSlot& slot = g.layout.slots[k];
      match = sg.params[k].name == core_.param_names[static_cast<size_t>(slot.param_index)] &&
              sg.params[k].offset == slot.offset && sg.params[k].numel == slot.numel;
    }
    same[gi] = match ? 1 : 0;
  }
  auto per_param = [&ck](const std::string& what) -> TrainableReader {
    return [&ck, what](const std::string& name, int64_t b, int64_t e, float* dst) {
      return ck.ReadTrainable(name, what, b, e, dst);
    };
  };
  auto per_group = [&ck, &same](const std::string& what) -> GroupReader {
    return [&ck, &same, what](size_t g, int64_t b, int64_t e, float* dst) -> std::optional<absl::Status> {
      if (!same[g]) return std::nullopt;
      return ck.ReadGroup(g, what, b, e, dst);
    };
  };
  // The optimizer state goes into a fresh store placed like the live one
  // (a second set of swap files with NVMe offload), a group at a time, so
  // loading never holds more than one group of it in memory. A store in
  // memory is read into directly (no second copy of each group).
  ZT_ASSIGN_OR_RETURN(*optimizer_state, core_.optimizer->MakeStaging());
  zero::OptimizerState* store = optimizer_state->get();
  for (const std::string& kind : core_.optimizer->kinds()) {
    const int k = store->KindIndex(kind);
    ZT_RETURN_IF_ERROR(ReadOwned(
        per_param(kind), per_group(kind),
        [&](size_t g, const at::Tensor& values) {
          return store->Write(k, static_cast<int>(g), 0, values.numel(), values.data_ptr<float>());
        },
        [&](size_t g) {
          return store->Resident(k, static_cast<int>(g)) != nullptr
                     ? zero::ResidentTensor(*store, k, static_cast<int>(g))
                     : at::Tensor();
        }));
  }
  if (core_.optimizer->master_is_params()) {
    ZT_RETURN_IF_ERROR(ReadOwned(per_param("master"), per_group("master"), [&](size_t, const at::Tensor& values) {
      staged->masters.push_back(values);
      return absl::OkStatus();
    }));
  }
  auto frozen_reader = [&](const std::string& name, int64_t b, int64_t e, at::Tensor dst) -> absl::Status {
    if (l.FindFrozen(name)) {
      at::Tensor tmp = at::empty({e - b}, at::TensorOptions().dtype(FromCkpt(l.model_dtype)));
      ZT_RETURN_IF_ERROR(ck.ReadFrozen(name, b, e, tmp.data_ptr()));
      dst.copy_(tmp);
      return absl::OkStatus();
    }
    const ckpt::TensorRef* m = ck.ModuleTensor(name);
    if (m == nullptr) return absl::NotFoundError(absl::StrCat(where, " has no frozen parameter '", name, "'"));
    if (e > m->numel()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": frozen parameter '", name, "' has ", m->numel(), " elements, fewer than the model's"));
    }
    at::Tensor whole = at::empty({m->numel()}, at::TensorOptions().dtype(FromCkpt(m->dtype)));
    ZT_RETURN_IF_ERROR(ck.ReadModuleTensor(*m, whole.data_ptr()));
    dst.copy_(whole.narrow(0, b, e - b));
    return absl::OkStatus();
  };
  ZT_RETURN_IF_ERROR(ReadFrozen(frozen_reader, &staged->frozen));
  for (const auto& item : core_.module->named_buffers(/*recurse=*/true)) {
    if (!item.value().defined()) continue;
    const ckpt::TensorRef* m = ck.ModuleTensor(item.key());
    if (m == nullptr) return absl::NotFoundError(absl::StrCat(where, " has no buffer '", item.key(), "'"));
    if (m->numel() != item.value().numel()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": buffer '", item.key(), "' has another size"));
    }
    at::Tensor tmp = at::empty(m->shape, at::TensorOptions().dtype(FromCkpt(m->dtype)));
    ZT_RETURN_IF_ERROR(ck.ReadModuleTensor(*m, tmp.data_ptr()));
    staged->buffers.emplace_back(item.value(), tmp);
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// LoadWeights

namespace {

// Size-1 dimensions aside: [N] and [1, N] hold the same values in order.
std::vector<int64_t> Squeezed(const std::vector<int64_t>& shape) {
  std::vector<int64_t> out;
  for (int64_t d : shape) {
    if (d != 1) out.push_back(d);
  }
  return out;
}

}  // namespace

Checkpointer::WeightShapes Checkpointer::ModelWeightShapes() const {
  WeightShapes w;
  for (size_t i = 0; i < core_.params.size(); ++i) w.numel_of[core_.param_names[i]] = core_.params[i].numel();
  for (size_t i = 0; i < core_.frozen_params.size(); ++i) {
    w.numel_of[core_.frozen_names[i]] = core_.frozen_params[i].numel();
  }
  for (const auto& item : core_.module->named_parameters(true)) w.numel_of.emplace(item.key(), item.value().numel());
  for (const auto& item : core_.module->named_parameters(true))
    w.shape_of.emplace(item.key(), item.value().sizes().vec());
  for (const auto& item : core_.module->named_buffers(true)) {
    if (item.value().defined()) w.shape_of.emplace(item.key(), item.value().sizes().vec());
  }
  return w;
}

absl::Status Checkpointer::ReadWeightRange(const ckpt::SafetensorsModel& model, const std::string& path,
                                           const WeightShapes& shapes, const std::string& name, int64_t numel,
                                           int64_t b, int64_t e, at::Tensor dst) {
  auto [reader, t] = model.Find(name);
  if (t == nullptr) return absl::NotFoundError(name);
  int64_t n = 1;
  for (int64_t d : t->shape) n *= d;
  if (n != numel) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", path, "': '", name, "' has ", n, " elements, the model ", numel));
  }
  if (auto it = shapes.shape_of.find(name); it != shapes.shape_of.end() && Squeezed(it->second) != Squeezed(t->shape)) {
    return absl::InvalidArgumentError(absl::StrCat("'", path, "': '", name, "' has shape [",
                                                   absl::StrJoin(t->shape, ", "), "], the model [",
                                                   absl::StrJoin(it->second, ", "),
                                                   "]: the same elements in another layout are other weights "
                                                   "(a transposed matrix?)"));
  }
  if (ckpt::IsFloating(t->dtype) != at::isFloatingType(dst.scalar_type())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "'", path, "': '", name, "' is ", std::string(ckpt::DTypeName(t->dtype)), " where the model holds ",
        c10::toString(dst.scalar_type()), ": integers and floating point do not convert into weights"));
  }
  const size_t es = ckpt::DTypeSize(t->dtype);
  at::Tensor raw = at::empty({e - b}, at::TensorOptions().dtype(FromCkpt(t->dtype)));
  ZT_RETURN_IF_ERROR(
      reader->ReadBytes(*t, static_cast<uint64_t>(b) * es, static_cast<uint64_t>(e) * es, raw.data_ptr()));
  dst.copy_(raw);
  return absl::OkStatus();
}

absl::StatusOr<std::set<std::string>> Checkpointer::WeightsKeptByModel(const ckpt::SafetensorsModel& model,
                                                                       const std::string& path,
                                                                       const WeightShapes& shapes,
                                                                       const std::vector<std::string>& new_parameters) {
  // Missing names first, all at once, so the error lists every one. A tied
  // alias may be absent (transformers drops lm_head.weight when tied); LoRA
  // adapters and the caller's new parameters may be absent too and keep
  // their values (a base model's weights into a model with fresh adapters).
  const std::map<std::string, std::string> aliases = TiedAliases(*core_.module);
  const std::set<std::string> trainable(core_.param_names.begin(), core_.param_names.end());
  const std::set<std::string> may_be_new(new_parameters.begin(), new_parameters.end());
  std::set<std::string> kept;
  std::vector<std::string> missing;
  for (const auto& [name, n] : shapes.numel_of) {
    if (model.Find(name).second != nullptr || aliases.count(name) > 0) continue;
    if (trainable.count(name) > 0 && (IsLoraParameterName(name) || may_be_new.count(name) > 0)) {
      kept.insert(name);
    } else {
      missing.push_back(name);
    }
  }
  if (!missing.empty()) {
    std::sort(missing.begin(), missing.end());
    return absl::NotFoundError(
        absl::StrCat("'", path, "' lacks ", missing.size(), " of the model's weights: ", absl::StrJoin(missing, ", ")));
  }
  return kept;
}

absl::Status Checkpointer::StageWeights(const ckpt::SafetensorsModel& model, const std::string& path,
                                        const WeightShapes& shapes, const std::set<std::string>& kept, Staged* staged) {
  auto read = [&](const std::string& name, int64_t numel, int64_t b, int64_t e, at::Tensor dst) {
    return ReadWeightRange(model, path, shapes, name, numel, b, e, std::move(dst));
  };
  ZT_RETURN_IF_ERROR(ReadOwned(
      [&](const std::string& name, int64_t b, int64_t e, float* dst) {
        if (kept.count(name) > 0) return CurrentMaster(name, b, e, dst);
        return read(name, shapes.numel_of.at(name), b, e, at::from_blob(dst, {e - b}, at::kFloat));
      },
      nullptr,
      [&](size_t, const at::Tensor& values) {
        staged->masters.push_back(values);
        return absl::OkStatus();
      }));
  ZT_RETURN_IF_ERROR(ReadFrozen([&](const std::string& name, int64_t b, int64_t e,
                                    at::Tensor dst) { return read(name, shapes.numel_of.at(name), b, e, dst); },
                                &staged->frozen));
  for (const auto& item : core_.module->named_buffers(true)) {
    if (!item.value().defined() || model.Find(item.key()).second == nullptr) continue;
    at::Tensor tmp = at::empty_like(item.value());
    ZT_RETURN_IF_ERROR(read(item.key(), item.value().numel(), 0, item.value().numel(), tmp.view({-1})));
    staged->buffers.emplace_back(item.value(), tmp);
  }
  return absl::OkStatus();
}

absl::Status Checkpointer::LoadWeights(const std::string& path, const std::vector<std::string>& new_parameters) {
  // The model's names with their sizes and shapes: trainable and frozen
  // parameters under every name they are registered by (tied aliases
  // included), and buffers. The same element count in another shape (a
  // transposed [64, 260] embedding for [260, 64]) is other weights.
  const WeightShapes shapes = ModelWeightShapes();
  std::unique_ptr<ckpt::SafetensorsModel> model;
  std::set<std::string> kept;  // trainable names the file lacks that keep their values
  Staged staged;
  ZT_RETURN_IF_ERROR(ReadAndAgree(
      [&]() -> absl::Status {
        ZT_ASSIGN_OR_RETURN(model, ckpt::SafetensorsModel::Open(path));
        ZT_ASSIGN_OR_RETURN(kept, WeightsKeptByModel(*model, path, shapes, new_parameters));
        return StageWeights(*model, path, shapes, kept, &staged);
      },
      absl::StrCat("loading weights from '", path, "'")));
  core_.optimizer->SetMasters(staged.masters);
  CommitFrozenAndBuffers(staged);
  if (core_.pg->rank() == 0) LogLoadedWeights(path, *model, shapes.numel_of, kept);
  return absl::OkStatus();
}

absl::Status Checkpointer::CurrentMaster(const std::string& name, int64_t b, int64_t e, float* dst) {
  for (size_t gi = 0; gi < core_.groups.size(); ++gi) {
    const zero::FlatGroup& g = core_.groups[gi];
    const int64_t owned =
        core_.sharding.optimizer_state() ? g.owned_begin() : 0;  // Read counts from the owned range's start
    for (const plan::ParamSlot& s : g.layout.slots) {
      if (core_.param_names[static_cast<size_t>(s.param_index)] != name) continue;
      return core_.optimizer->Read("master", static_cast<int>(gi), s.offset + b - owned, s.offset + e - owned, dst);
    }
  }
  return absl::NotFoundError(absl::StrCat("no trainable parameter '", name, "'"));
}

void Checkpointer::LogLoadedWeights(const std::string& path, const ckpt::SafetensorsModel& model,
                                    const std::unordered_map<std::string, int64_t>& numel_of,
                                    const std::set<std::string>& kept) {
  std::set<std::string> known;  // the model's names (aliases and buffers included)
  for (const auto& [name, n] : numel_of) known.insert(name);
  for (const auto& item : core_.module->named_buffers(true)) known.insert(item.key());
  std::vector<std::string> extra;
  for (const std::string& n : model.names()) {
    if (known.count(n) == 0) extra.push_back(n);
  }
  // The names come from the file: at most 20 of them, each cut to 200
  // characters (a hostile file's 10 MB name made a 10 MB log line).
  std::vector<std::string> shown;
  for (size_t i = 0; i < extra.size() && i < 20; ++i) {
    shown.push_back(extra[i].size() > 200 ? absl::StrCat(extra[i].substr(0, 200), "...") : extra[i]);
  }
  if (extra.size() > shown.size()) shown.push_back(absl::StrCat("and ", extra.size() - shown.size(), " more"));
  ZT_LOG(INFO) << "loaded weights from '" << path << "'"
               << (extra.empty() ? std::string()
                                 : absl::StrCat("; ignored ", extra.size(),
                                                " tensors the model does not have: ", absl::StrJoin(shown, ", ")));
  std::vector<std::string> fresh;
  int64_t adapters = 0;
  for (const std::string& name : kept) {
    if (IsLoraParameterName(name)) {
      ++adapters;
    } else {
      fresh.push_back(name);
    }
  }
  if (adapters > 0) {
    ZT_LOG(INFO) << adapters << " LoRA adapter tensors are not in '" << path << "' and keep their values";
  }
  if (!fresh.empty()) {
    ZT_LOG(INFO) << "'" << path << "' has no " << absl::StrJoin(fresh, ", ")
                 << ": a new head, which keeps its initial values (train it before use)";
  }
}

// ---------------------------------------------------------------------------
// ExportWeights

absl::Status Checkpointer::ExportWeights(const std::string& path) {
  if (path.empty()) return absl::InvalidArgumentError("ExportWeights: the output path is empty");
  // The temporary checkpoint sits beside the output (same disk, so the
  // export reads what was just written) under a name every rank derives
  // from rank 0's save id.
  std::string parent = std::filesystem::path(path).parent_path().string();
  if (parent.empty()) parent = ".";
  at::Tensor id = at::zeros({1}, at::kLong);
  if (core_.pg->rank() == 0) id[0] = ckpt::NewSaveId();
  {
    comm::CollectiveLabel label("the export's temporary name");
    ZT_RETURN_IF_ERROR(core_.pg->AllReduce(id, comm::ReduceOp::kMax)->Wait());
  }
  const std::string scratch = absl::StrFormat("%s/.zt_export.%x", parent, id[0].item<int64_t>());
  keep_memory_copies_ = false;  // a scratch save, not one a restart resumes from
  absl::Status saved = Save(scratch, "export", ckpt::Value());
  absl::Status exported = saved;
  if (saved.ok() && core_.pg->rank() == 0) {
    auto opened = ckpt::ZeroCheckpoint::Open(scratch, "export");
    exported = opened.ok() ? ckpt::ExportSafetensors(**opened, path).status() : opened.status();
  }
  if (core_.pg->rank() == 0) {
    std::error_code ec;
    std::filesystem::remove_all(scratch, ec);  // best effort: the export is what counts
  }
  ZT_RETURN_IF_ERROR(saved);
  ZT_RETURN_IF_ERROR(
      comm::AgreeAcrossRanks(*core_.pg, exported, absl::StrCat("exporting the weights to '", path, "'")));
  if (core_.pg->rank() == 0) {
    ZT_LOG(INFO) << "exported the weights to '" << path << "'";
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// Readers

absl::Status Checkpointer::CheckTagAgreement(const std::string& tag) {
  if (core_.pg->size() == 1 || core_.config.checkpoint.tag_validation == TagValidation::kIgnore)
    return absl::OkStatus();
  at::Tensor hi = at::full({1}, TagHash(tag), at::kLong), lo = hi.clone();
  comm::CollectiveLabel label("the checkpoint tag check");
  ZT_RETURN_IF_ERROR(core_.pg->AllReduce(hi, comm::ReduceOp::kMax)->Wait());
  ZT_RETURN_IF_ERROR(core_.pg->AllReduce(lo, comm::ReduceOp::kMin)->Wait());
  if (hi.item<int64_t>() == lo.item<int64_t>()) return absl::OkStatus();
  const std::string msg = absl::StrCat("ranks save under different checkpoint tags (this rank: '", tag,
                                       "'); pass every rank the same tag (checkpoint.tag_validation)");
  if (core_.config.checkpoint.tag_validation == TagValidation::kFail) return absl::FailedPreconditionError(msg);
  ZT_LOG(WARNING) << msg;
  return absl::OkStatus();
}

absl::Status Checkpointer::ReadOwned(const TrainableReader& read, const GroupReader& whole, const OwnedSink& sink,
                                     const OwnedPlace& place) {
  for (size_t gi = 0; gi < core_.groups.size(); ++gi) {
    const zero::FlatGroup& g = core_.groups[gi];
    const int64_t b = core_.sharding.optimizer_state() ? g.owned_begin() : 0,
                  e = core_.sharding.optimizer_state() ? g.owned_end() : g.layout.padded_numel;
    at::Tensor placed = place ? place(gi) : at::Tensor();
    ZT_CHECK(!placed.defined() || placed.numel() == e - b);
    at::Tensor m = placed.defined() ? placed : OwnedBuffer(g, b, e);
    float* data = m.data_ptr<float>();
    std::optional<absl::Status> at_once = whole ? whole(gi, b, e, data) : std::nullopt;
    if (at_once.has_value()) {
      ZT_RETURN_IF_ERROR(*at_once);
    } else {
      for (const plan::ParamSlot& s : g.layout.slots) {
        const plan::SlotRange r = plan::Intersect(s, b, e);
        if (r.empty()) continue;
        ZT_RETURN_IF_ERROR(read(core_.param_names[static_cast<size_t>(s.param_index)], r.begin_in_param, r.end_in_param,
                                data + (s.offset + r.begin_in_param - b)));
      }
    }
    if (!placed.defined()) ZT_RETURN_IF_ERROR(sink(gi, m));
  }
  return absl::OkStatus();
}

absl::Status Checkpointer::ReadFrozen(const FrozenReader& frozen, TensorCopies* frozen_out) {
  if (core_.sharding.parameters()) {
    const int64_t t = static_cast<int64_t>(core_.params.size());
    for (const zero::FlatGroup& g : core_.frozen_groups) {
      at::Tensor dst = g.OwnedParams();
      at::Tensor tmp = at::zeros_like(dst);
      for (const plan::ParamSlot& s : g.layout.slots) {
        const plan::SlotRange r = plan::Intersect(s, g.owned_begin(), g.owned_end());
        if (r.empty()) continue;
        ZT_RETURN_IF_ERROR(
            frozen(core_.frozen_names[static_cast<size_t>(s.param_index - t)], r.begin_in_param, r.end_in_param,
                   tmp.narrow(0, s.offset + r.begin_in_param - g.owned_begin(), r.end_in_param - r.begin_in_param)));
      }
      frozen_out->emplace_back(dst, tmp);
    }
  } else {
    std::unordered_map<const void*, bool> seen;
    for (const auto& item : core_.module->named_parameters(/*recurse=*/true)) {
      const at::Tensor& p = item.value();
      if (p.requires_grad() || !seen.emplace(p.unsafeGetTensorImpl(), true).second) continue;
      at::Tensor tmp = at::empty(p.sizes(), p.options().requires_grad(false));
      ZT_RETURN_IF_ERROR(frozen(item.key(), 0, p.numel(), tmp.view({-1})));
      frozen_out->emplace_back(p, tmp);
    }
  }
  return absl::OkStatus();
}

void Checkpointer::CommitFrozen(TensorCopies& frozen) {
  at::NoGradGuard no_grad;
  for (auto& [dst, tmp] : frozen) {
    // A stage-3 shard on NVMe has no memory of its own: write it through
    // a swap buffer.
    const int chunk = core_.coordinator ? core_.ChunkOfShard(dst) : -1;
    if (chunk >= 0 && core_.coordinator->swapped(chunk)) {
      at::Tensor shard = core_.coordinator->AcquireShard(chunk, /*read=*/false);
      shard.copy_(tmp.view(shard.sizes()));
      core_.coordinator->ReleaseShard(chunk, /*dirty=*/true);
      continue;
    }
    at::Tensor d = dst;
    d.copy_(tmp.view(d.sizes()));
  }
  // Full buffers that hold more than this rank's range: stages 1/2, and at
  // stage 3 the persistent chunks (trainable and frozen).
  if (core_.sharding.optimizer_state() && core_.shard_pg->size() > 1) {
    core_.GatherParams();
    std::vector<std::unique_ptr<comm::Work>> works;
    comm::CollectiveLabel label("loaded frozen parameters");
    for (zero::FlatGroup& g : core_.frozen_groups) {
      if (g.param_residency != zero::ParamResidency::kShardOnly) {
        works.push_back(core_.shard_pg->AllGather(g.OwnedParams(), g.params));
      }
    }
    for (auto& w : works) CheckWork(std::move(w), "all-gathering loaded parameters");
  }
}

}  // namespace zt
