// Engine::SaveCheckpoint / LoadCheckpoint / LoadWeights: the LibTorch side of
// checkpoints. The files' contents and layout are ckpt/zero_checkpoint.h's;
// here we point its tensor references at the engine's buffers, run the
// collectives that keep ranks in agreement, and read back any saved world
// size into this rank's shards.
#include <ATen/CPUGeneratorImpl.h>
#include <sys/stat.h>
#include <torch/torch.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "ckpt/convert.h"
#include "ckpt/export.h"
#include "ckpt/pt_file.h"
#include "ckpt/safetensors.h"
#include "ckpt/zero_checkpoint.h"
#include "comm/agreement.h"
#include "comm/collective_label.h"
#include "engine/engine.h"
#include "engine/tensor_ref.h"
#include "plan/layout.h"
#include "util/error.h"
#include "util/file_io.h"
#include "util/log.h"
#include "util/status.h"
#include "zero/flat_group.h"
#include "zero/grad_reducer.h"
#include "zero/optimizer_state.h"
#include "zero/sharded_optimizer.h"

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
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (unsigned char c : tag) h = (h ^ c) * 1099511628211ull;
  return static_cast<int64_t>(h >> 1);
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

absl::Status Engine::CheckTagAgreement(const std::string& tag) {
  if (pg_->size() == 1 || config_.checkpoint.tag_validation == TagValidation::kIgnore) return absl::OkStatus();
  at::Tensor hi = at::full({1}, TagHash(tag), at::kLong), lo = hi.clone();
  comm::CollectiveLabel label("the checkpoint tag check");
  ZT_RETURN_IF_ERROR(pg_->AllReduce(hi, comm::ReduceOp::kMax)->Wait());
  ZT_RETURN_IF_ERROR(pg_->AllReduce(lo, comm::ReduceOp::kMin)->Wait());
  if (hi.item<int64_t>() == lo.item<int64_t>()) return absl::OkStatus();
  const std::string msg = absl::StrCat("ranks save under different checkpoint tags (this rank: '", tag,
                                       "'); pass every rank the same tag (checkpoint.tag_validation)");
  if (config_.checkpoint.tag_validation == TagValidation::kFail) return absl::FailedPreconditionError(msg);
  ZT_LOG(WARNING) << msg;
  return absl::OkStatus();
}

absl::Status Engine::SaveCheckpoint(const std::string& dir, const std::string& tag_in,
                                    const ckpt::Value& client_state) {
  if (micro_steps_ % config_.batch.accumulation_steps != 0) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "SaveCheckpoint in the middle of gradient accumulation (micro-step %d of %d): save after the Step() that "
        "ends an accumulation boundary",
        micro_steps_ % config_.batch.accumulation_steps, config_.batch.accumulation_steps));
  }
  if (!client_state.is_none() && (!client_state.is_dict() || HasTensor(client_state))) {
    return absl::InvalidArgumentError(
        "SaveCheckpoint: client_state must be a dict of numbers, strings, lists and dicts (no tensors)");
  }
  const std::string tag = tag_in.empty() ? absl::StrCat("global_step", global_steps_) : tag_in;
  ZT_RETURN_IF_ERROR(CheckTagAgreement(tag));
  const int rank = pg_->rank(), world = pg_->size();
  const std::string folder = dir + "/" + tag;

  // The layout: every group with its parameters' names and places.
  ckpt::SavedLayout layout;
  layout.stage = stage_;
  layout.world_size = world;
  layout.model_dtype = ToCkpt(params_.front().scalar_type());
  layout.rule = stage_ == 0 ? ckpt::PartitionRule::kCeil : ckpt::PartitionRule::kEven;
  auto saved_group = [](const zero::FlatGroup& g, const std::function<std::string(int)>& name,
                        const std::function<at::Tensor(int)>& param) {
    ckpt::SavedGroup sg;
    sg.padded_numel = g.layout.padded_numel;
    sg.numel = g.layout.numel;
    for (const plan::ParamSlot& s : g.layout.slots) {
      sg.params.push_back({name(s.param_index), param(s.param_index).sizes().vec(), s.offset, s.numel});
    }
    return sg;
  };
  const int64_t t = static_cast<int64_t>(params_.size());
  auto trainable_name = [this](int i) { return param_names_[static_cast<size_t>(i)]; };
  auto trainable = [this](int i) { return params_[static_cast<size_t>(i)]; };
  auto frozen_name = [this, t](int i) { return frozen_names_[static_cast<size_t>(i - t)]; };
  auto frozen = [this, t](int i) { return frozen_params_[static_cast<size_t>(i - t)]; };
  for (const zero::FlatGroup& g : groups_) layout.groups.push_back(saved_group(g, trainable_name, trainable));
  for (const zero::FlatGroup& g : frozen_groups_) layout.frozen.push_back(saved_group(g, frozen_name, frozen));
  layout.shared = TiedAliases(*module_);

  // This rank's range of every group: views of resident state, copies
  // (`keep`) of stage-0 slices, and sources that stream state the
  // optimizer keeps on NVMe into the file chunk by chunk.
  std::vector<at::Tensor> keep;
  ckpt::RankShards shards;
  std::vector<std::string> kinds = optimizer_->state_names();
  kinds.insert(kinds.begin(), "master");
  zero::ShardedOptimizer* opt = optimizer_.get();
  for (size_t g = 0; g < groups_.size(); ++g) {
    const zero::FlatGroup& fg = groups_[g];
    const int64_t owned = fg.owned_end() - fg.owned_begin();
    for (const std::string& kind : kinds) {
      ckpt::TensorRef ref;
      if (const float* resident = opt->Resident(kind, static_cast<int>(g))) {
        at::Tensor t = at::from_blob(const_cast<float*>(resident), {owned}, at::kFloat);
        if (stage_ == 0) {
          // Stage 0 saves each rank's even share of the whole buffer.
          const auto [b, e] = layout.Range(fg.layout.padded_numel, rank);
          keep.push_back(t.narrow(0, b, e - b).clone());
          ref = Ref(keep.back());
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
  for (const zero::FlatGroup& g : frozen_groups_) {
    const int chunk = coordinator_ ? ChunkOfGroup(&g) : -1;
    if (chunk >= 0 && coordinator_->swapped(chunk)) {
      // The shard is on NVMe: stream it out through a swap buffer.
      ckpt::TensorRef ref;
      ref.dtype = ToCkpt(g.param_shard.scalar_type());
      ref.shape = {g.param_shard.numel()};
      zero::ParamCoordinator* pc = coordinator_.get();
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
    keep.push_back(g.OwnedParams().contiguous());
    shards.frozen.push_back(Ref(keep.back()));
  }
  keep.push_back(CpuRngState());
  shards.rng_cpu = Ref(keep.back());

  ckpt::TrainingState ts;
  ts.global_steps = global_steps_;
  ts.global_samples = global_samples_;
  ts.skipped_steps = skipped_steps_;
  ts.micro_steps = micro_steps_;
  ts.dynamic_loss_scale = scaler_.dynamic();
  const LossScaler::State ss = scaler_.state();
  ts.loss_scale = ss.scale;
  ts.scaler_cur_iter = ss.cur_iter;
  ts.scaler_last_overflow_iter = ss.last_overflow_iter;
  ts.scaler_hysteresis = ss.cur_hysteresis;
  ts.optimizer_type = std::string(ToString(config_.optimizer.type));
  ts.optimizer_step = optimizer_->step_count();
  ts.ds_config = config_.source_json;
  // One id for every file of this save (rank 0's, shared by a max-reduce),
  // and whether the tag's folder exists already (any rank seeing it counts).
  // Nothing is created before this point, so every rank judges the same tree.
  bool replacing = false;
  {
    at::Tensor id = at::zeros({2}, at::kLong);
    if (rank == 0) id[0] = ckpt::NewSaveId();
    comm::CollectiveLabel label("the checkpoint save id");
    std::error_code ec;
    id[1] = std::filesystem::exists(folder, ec) ? 1 : 0;
    ZT_RETURN_IF_ERROR(pg_->AllReduce(id, comm::ReduceOp::kMax)->Wait());
    ts.save_id = id[0].item<int64_t>();
    replacing = id[1].item<int64_t>() != 0;
  }
  // A tag that exists (a second run into the same save dir, or a tag saved
  // twice) is written beside it and swapped in only once every rank's files
  // are complete: a save that fails on one rank leaves the old tag whole.
  const std::string staging = replacing ? absl::StrFormat("%s.saving.%x", folder, ts.save_id) : folder;

  // The module state dict: buffers, and at stages 0-2 the full parameters.
  ckpt::Dict module;
  module.ordered = true;
  std::vector<std::string> buffer_names;
  const bool write_model_states = stage_ == 3 || rank == 0;
  if (write_model_states) {
    if (stage_ != 3) {
      for (const auto& item : module_->named_parameters(/*recurse=*/true)) {
        keep.push_back(item.value().detach().contiguous());
        module.Set(item.key(), Ref(keep.back()));
      }
    }
    for (const auto& item : module_->named_buffers(/*recurse=*/true)) {
      if (!item.value().defined()) continue;
      keep.push_back(item.value().detach().contiguous());
      module.Set(item.key(), Ref(keep.back()));
      buffer_names.push_back(item.key());
    }
  }

  absl::Status local = MakeDirs(staging);
  if (local.ok()) {
    try {
      local = ckpt::WritePtFile(staging + "/" + ckpt::OptimStatesFile(rank, layout.model_dtype),
                                ckpt::MakeOptimStates(layout, rank, shards, ts));
      if (local.ok() && write_model_states) {
        local = ckpt::WritePtFile(staging + "/" + ckpt::ModelStatesFile(stage_, rank),
                                  ckpt::MakeModelStates(layout, rank, ts, module, buffer_names, shards, client_state));
      }
    } catch (const Error& e) {
      local = e.status();
    }
  }
  if (!local.ok()) {
    ZT_LOG(ERROR) << "saving checkpoint '" << folder << "': " << local.message();
  }
  absl::Status agreed = comm::AgreeAcrossRanks(*pg_, local, absl::StrCat("saving checkpoint '", folder, "'"));
  if (!agreed.ok()) {
    if (replacing && rank == 0) {
      std::error_code ec;
      std::filesystem::remove_all(staging, ec);  // the old tag stays as it was
    }
    return agreed;
  }

  // Every rank's files are in place: only now does `latest` move.
  absl::Status done = absl::OkStatus();
  if (rank == 0 && replacing) {
    // The old folder steps aside, the new one takes its name, the old one goes.
    const std::string old = absl::StrFormat("%s.replaced.%x", folder, ts.save_id);
    std::error_code ec;
    std::filesystem::rename(folder, old, ec);
    if (!ec) std::filesystem::rename(staging, folder, ec);
    if (ec) {
      done =
          absl::InternalError(absl::StrCat("replacing checkpoint '", folder, "' with '", staging, "': ", ec.message()));
    } else {
      std::filesystem::remove_all(old, ec);
    }
  }
  if (rank == 0 && done.ok()) {
    if (config_.zero.gather_16bit_weights_on_model_save) {
      auto opened = ckpt::ZeroCheckpoint::Open(dir, tag);
      ckpt::ExportOptions eo;
      eo.dtype = layout.model_dtype;
      done = opened.ok() ? ckpt::ExportSafetensors(**opened, folder, eo).status() : opened.status();
    }
    if (done.ok()) done = WriteFileAtomically(dir + "/latest", tag + "\n");
  }
  ZT_RETURN_IF_ERROR(comm::AgreeAcrossRanks(*pg_, done, absl::StrCat("finishing checkpoint '", folder, "'")));
  if (rank == 0) {
    ZT_LOG(INFO) << "saved checkpoint '" << folder << "' (step " << global_steps_ << ")";
  }
  return absl::OkStatus();
}

absl::Status Engine::ReadOwned(const TrainableReader& read, const GroupReader& whole, const OwnedSink& sink) {
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    const zero::FlatGroup& g = groups_[gi];
    const int64_t b = stage_ == 0 ? 0 : g.owned_begin(), e = stage_ == 0 ? g.layout.padded_numel : g.owned_end();
    at::Tensor m = OwnedBuffer(g, b, e);
    float* data = m.data_ptr<float>();
    std::optional<absl::Status> at_once = whole ? whole(gi, b, e, data) : std::nullopt;
    if (at_once.has_value()) {
      ZT_RETURN_IF_ERROR(*at_once);
    } else {
      for (const plan::ParamSlot& s : g.layout.slots) {
        const plan::SlotRange r = plan::Intersect(s, b, e);
        if (r.empty()) continue;
        ZT_RETURN_IF_ERROR(read(param_names_[static_cast<size_t>(s.param_index)], r.begin_in_param, r.end_in_param,
                                data + (s.offset + r.begin_in_param - b)));
      }
    }
    ZT_RETURN_IF_ERROR(sink(gi, m));
  }
  return absl::OkStatus();
}

absl::Status Engine::ReadFrozen(const FrozenReader& frozen,
                                std::vector<std::pair<at::Tensor, at::Tensor>>* frozen_out) {
  if (stage_ == 3) {
    const int64_t t = static_cast<int64_t>(params_.size());
    for (const zero::FlatGroup& g : frozen_groups_) {
      at::Tensor dst = g.OwnedParams();
      at::Tensor tmp = at::zeros_like(dst);
      for (const plan::ParamSlot& s : g.layout.slots) {
        const plan::SlotRange r = plan::Intersect(s, g.owned_begin(), g.owned_end());
        if (r.empty()) continue;
        ZT_RETURN_IF_ERROR(
            frozen(frozen_names_[static_cast<size_t>(s.param_index - t)], r.begin_in_param, r.end_in_param,
                   tmp.narrow(0, s.offset + r.begin_in_param - g.owned_begin(), r.end_in_param - r.begin_in_param)));
      }
      frozen_out->emplace_back(dst, tmp);
    }
  } else {
    std::unordered_map<const void*, bool> seen;
    for (const auto& item : module_->named_parameters(/*recurse=*/true)) {
      const at::Tensor& p = item.value();
      if (p.requires_grad() || !seen.emplace(p.unsafeGetTensorImpl(), true).second) continue;
      at::Tensor tmp = at::empty(p.sizes(), p.options().requires_grad(false));
      ZT_RETURN_IF_ERROR(frozen(item.key(), 0, p.numel(), tmp.view({-1})));
      frozen_out->emplace_back(p, tmp);
    }
  }
  return absl::OkStatus();
}

void Engine::CommitFrozen(std::vector<std::pair<at::Tensor, at::Tensor>>& frozen) {
  at::NoGradGuard no_grad;
  for (auto& [dst, tmp] : frozen) {
    // A stage-3 shard on NVMe has no memory of its own: write it through
    // a swap buffer.
    const int chunk = coordinator_ ? ChunkOfShard(dst) : -1;
    if (chunk >= 0 && coordinator_->swapped(chunk)) {
      at::Tensor shard = coordinator_->AcquireShard(chunk, /*read=*/false);
      shard.copy_(tmp.view(shard.sizes()));
      coordinator_->ReleaseShard(chunk, /*dirty=*/true);
      continue;
    }
    at::Tensor d = dst;
    d.copy_(tmp.view(d.sizes()));
  }
  // Full buffers that hold more than this rank's range: stages 1/2, and at
  // stage 3 the persistent chunks (trainable and frozen).
  if (stage_ >= 1 && pg_->size() > 1) {
    GatherParams();
    std::vector<std::unique_ptr<comm::Work>> works;
    comm::CollectiveLabel label("loaded frozen parameters");
    for (zero::FlatGroup& g : frozen_groups_) {
      if (!g.param_shard.defined()) works.push_back(pg_->AllGather(g.OwnedParams(), g.params));
    }
    for (auto& w : works) CheckWork(std::move(w), "all-gathering loaded parameters");
  }
}

int Engine::ChunkOfGroup(const zero::FlatGroup* group) const {
  if (!coordinator_) return -1;
  const auto& chunks = coordinator_->chunks();
  for (size_t c = 0; c < chunks.size(); ++c) {
    if (chunks[c].group == group) return static_cast<int>(c);
  }
  return -1;
}

int Engine::ChunkOfShard(const at::Tensor& shard) const {
  if (!coordinator_) return -1;
  const auto& chunks = coordinator_->chunks();
  for (size_t c = 0; c < chunks.size(); ++c) {
    if (chunks[c].group->param_shard.defined() && chunks[c].group->param_shard.is_same(shard))
      return static_cast<int>(c);
  }
  return -1;
}

absl::StatusOr<ckpt::Value> Engine::LoadCheckpoint(const std::string& dir, const std::string& tag) {
  if (micro_steps_ % config_.batch.accumulation_steps != 0) {
    return absl::FailedPreconditionError("LoadCheckpoint in the middle of gradient accumulation: load between steps");
  }
  std::unique_ptr<ckpt::ZeroCheckpoint> ck;
  std::vector<at::Tensor> masters;  // where the parameters are the master
  std::unique_ptr<zero::OptimizerState> staged;
  std::vector<std::pair<at::Tensor, at::Tensor>> frozen_tmp, buffer_tmp;
  at::Tensor rng;
  auto read_all = [&]() -> absl::Status {
    ZT_ASSIGN_OR_RETURN(ck, ckpt::ZeroCheckpoint::Open(dir, tag));
    const ckpt::SavedLayout& l = ck->layout();
    const std::string where = absl::StrCat("checkpoint '", dir, "/", ck->tag(), "'");
    // What saves killed mid-write left beside the complete files.
    if (pg_->rank() == 0) RemoveStaleTemporaries(dir + "/" + ck->tag());
    // Same model: every trainable parameter there, with its shape.
    for (size_t i = 0; i < params_.size(); ++i) {
      const auto at = l.FindTrainable(param_names_[i]);
      if (!at) {
        return absl::NotFoundError(absl::StrCat(where, " has no trainable parameter '", param_names_[i],
                                                "' (was it saved from this model, with the same parameters frozen?)"));
      }
      const ckpt::SavedParam& sp = l.groups[at->first].params[at->second];
      if (sp.shape != params_[i].sizes().vec()) {
        return absl::InvalidArgumentError(absl::StrCat(where, ": parameter '", param_names_[i], "' has shape [",
                                                       absl::StrJoin(sp.shape, ", "), "], the model [",
                                                       absl::StrJoin(params_[i].sizes().vec(), ", "), "]"));
      }
    }
    int64_t model_numel = 0;
    for (const at::Tensor& p : params_) model_numel += p.numel();
    if (l.trainable_numel() != model_numel) {
      return absl::InvalidArgumentError(absl::StrCat(where, " has trainable parameters this model does not"));
    }
    const ckpt::TrainingState& saved = ck->training_state();
    if (saved.optimizer_type != std::string(ToString(config_.optimizer.type))) {
      return absl::InvalidArgumentError(absl::StrCat(where, " was trained with ", saved.optimizer_type,
                                                     "; the config's optimizer is ",
                                                     std::string(ToString(config_.optimizer.type))));
    }
    const std::vector<std::string> names = optimizer_->state_names();
    if (names != ck->state_names()) {
      return absl::InvalidArgumentError(absl::StrCat(where, " holds optimizer state [",
                                                     absl::StrJoin(ck->state_names(), ", "),
                                                     "]; this optimizer keeps [", absl::StrJoin(names, ", "), "]"));
    }

    auto frozen_reader = [&](const std::string& name, int64_t b, int64_t e, at::Tensor dst) -> absl::Status {
      const at::ScalarType model = FromCkpt(l.model_dtype);
      if (l.FindFrozen(name)) {
        at::Tensor tmp = at::empty({e - b}, at::TensorOptions().dtype(model));
        ZT_RETURN_IF_ERROR(ck->ReadFrozen(name, b, e, tmp.data_ptr()));
        dst.copy_(tmp);
        return absl::OkStatus();
      }
      const ckpt::TensorRef* m = ck->ModuleTensor(name);
      if (m == nullptr) return absl::NotFoundError(absl::StrCat(where, " has no frozen parameter '", name, "'"));
      if (e > m->numel()) {
        return absl::InvalidArgumentError(absl::StrCat(where, ": frozen parameter '", name, "' has ", m->numel(),
                                                       " elements, fewer than the model's"));
      }
      at::Tensor whole = at::empty({m->numel()}, at::TensorOptions().dtype(FromCkpt(m->dtype)));
      ZT_RETURN_IF_ERROR(ck->ReadModuleTensor(*m, whole.data_ptr()));
      dst.copy_(whole.narrow(0, b, e - b));
      return absl::OkStatus();
    };
    // Where the saved group is this group, split the same way, each rank
    // reads its own record whole (one pass, CRC included); elsewhere
    // parameter by parameter, from whichever saved ranks hold them.
    std::vector<char> same(groups_.size(), 0);
    for (size_t gi = 0; gi < groups_.size() && gi < l.groups.size(); ++gi) {
      const zero::FlatGroup& g = groups_[gi];
      const ckpt::SavedGroup& sg = l.groups[gi];
      bool match = sg.padded_numel == g.layout.padded_numel && sg.params.size() == g.layout.slots.size();
      for (size_t k = 0; match && k < sg.params.size(); ++k) {
        const plan::ParamSlot& slot = g.layout.slots[k];
        match = sg.params[k].name == param_names_[static_cast<size_t>(slot.param_index)] &&
                sg.params[k].offset == slot.offset && sg.params[k].numel == slot.numel;
      }
      same[gi] = match ? 1 : 0;
    }
    auto owned_reader = [&](const std::string& what) -> std::pair<TrainableReader, GroupReader> {
      return {[&ck, what](const std::string& name, int64_t b, int64_t e, float* dst) {
                return ck->ReadTrainable(name, what, b, e, dst);
              },
              [&ck, &same, what](size_t g, int64_t b, int64_t e, float* dst) -> std::optional<absl::Status> {
                if (!same[g]) return std::nullopt;
                return ck->ReadGroup(g, what, b, e, dst);
              }};
    };
    // The optimizer state goes into a fresh store placed like the live one
    // (a second set of swap files with NVMe offload), a group at a time, so
    // loading never holds more than one group of it in memory.
    ZT_ASSIGN_OR_RETURN(staged, optimizer_->MakeStaging());
    for (const std::string& kind : optimizer_->kinds()) {
      const int k = staged->KindIndex(kind);
      auto [per_param, per_group] = owned_reader(kind);
      ZT_RETURN_IF_ERROR(ReadOwned(per_param, per_group, [&](size_t g, const at::Tensor& values) {
        return staged->Write(k, static_cast<int>(g), 0, values.numel(), values.data_ptr<float>());
      }));
    }
    if (optimizer_->master_is_params()) {
      auto [per_param, per_group] = owned_reader("master");
      ZT_RETURN_IF_ERROR(ReadOwned(per_param, per_group, [&](size_t, const at::Tensor& values) {
        masters.push_back(values);
        return absl::OkStatus();
      }));
    }
    ZT_RETURN_IF_ERROR(ReadFrozen(frozen_reader, &frozen_tmp));
    for (const auto& item : module_->named_buffers(/*recurse=*/true)) {
      if (!item.value().defined()) continue;
      const ckpt::TensorRef* m = ck->ModuleTensor(item.key());
      if (m == nullptr) return absl::NotFoundError(absl::StrCat(where, " has no buffer '", item.key(), "'"));
      if (m->numel() != item.value().numel()) {
        return absl::InvalidArgumentError(absl::StrCat(where, ": buffer '", item.key(), "' has another size"));
      }
      at::Tensor tmp = at::empty(m->shape, at::TensorOptions().dtype(FromCkpt(m->dtype)));
      ZT_RETURN_IF_ERROR(ck->ReadModuleTensor(*m, tmp.data_ptr()));
      buffer_tmp.emplace_back(item.value(), tmp);
    }
    // The RNG stream: this rank's own when the world size matches.
    std::vector<uint8_t> bytes;
    if (ck->ReadRngState(pg_->rank() % l.world_size, &bytes).ok()) {
      rng = at::empty({static_cast<int64_t>(bytes.size())}, at::kByte);
      std::memcpy(rng.data_ptr(), bytes.data(), bytes.size());
    }
    return absl::OkStatus();
  };
  absl::Status local;
  try {
    local = read_all();
  } catch (const std::exception& e) {
    local = absl::InternalError(absl::StrCat("loading checkpoint: ", e.what()));
  }
  if (!local.ok()) {
    ZT_LOG(ERROR) << local.message();
  }
  ZT_RETURN_IF_ERROR(comm::AgreeAcrossRanks(*pg_, local, absl::StrCat("loading checkpoint from '", dir, "'")));

  // Everyone read everything: commit.
  optimizer_->Adopt(std::move(staged), masters, ck->training_state().optimizer_step);
  CommitFrozen(frozen_tmp);
  {
    at::NoGradGuard no_grad;
    for (auto& [dst, tmp] : buffer_tmp) {
      at::Tensor d = dst;
      d.copy_(tmp.view(d.sizes()));
    }
  }
  const ckpt::TrainingState& ts = ck->training_state();
  global_steps_ = ts.global_steps;
  global_samples_ = ts.global_samples;
  skipped_steps_ = ts.skipped_steps;
  micro_steps_ = ts.micro_steps;
  if (scaler_.enabled()) {
    LossScaler::State s;
    s.scale = ts.loss_scale;
    s.cur_iter = ts.scaler_cur_iter;
    s.last_overflow_iter = ts.scaler_last_overflow_iter;
    s.cur_hysteresis = static_cast<int>(ts.scaler_hysteresis);
    scaler_.set_state(s);
  }
  if (rng.defined()) SetCpuRngState(rng);
  reducer_->ZeroGrads();
  log_window_start_ = last_event_ = std::chrono::steady_clock::now();
  if (pg_->rank() == 0) {
    ZT_LOG(INFO) << "loaded checkpoint '" << dir << "/" << ck->tag() << "' (step " << ts.global_steps << ", saved by "
                 << ck->layout().world_size << " ranks at stage " << ck->layout().stage << ")";
  }
  const ckpt::Value* client = ck->client_state();
  return client != nullptr ? *client : ckpt::Value(ckpt::Dict());
}

absl::Status Engine::LoadWeights(const std::string& path) {
  std::unique_ptr<ckpt::SafetensorsModel> model;
  std::vector<at::Tensor> masters;
  std::vector<std::pair<at::Tensor, at::Tensor>> frozen_tmp, buffer_tmp;
  std::set<std::string> known;  // the model's names (aliases and buffers included)
  auto read_all = [&]() -> absl::Status {
    ZT_ASSIGN_OR_RETURN(model, ckpt::SafetensorsModel::Open(path));
    std::vector<std::string> missing;
    auto find = [&](const std::string& name, int64_t numel)
        -> absl::StatusOr<std::pair<const ckpt::SafetensorsReader*, const ckpt::SafetensorsReader::Tensor*>> {
      auto [reader, t] = model->Find(name);
      if (t == nullptr) return absl::NotFoundError(name);
      int64_t n = 1;
      for (int64_t d : t->shape) n *= d;
      if (n != numel) {
        return absl::InvalidArgumentError(
            absl::StrCat("'", path, "': '", name, "' has ", n, " elements, the model ", numel));
      }
      return std::make_pair(reader, t);
    };
    auto read_range = [&](const std::string& name, int64_t numel, int64_t b, int64_t e,
                          at::Tensor dst) -> absl::Status {
      ZT_ASSIGN_OR_RETURN(auto found, find(name, numel));
      const size_t es = ckpt::DTypeSize(found.second->dtype);
      at::Tensor raw = at::empty({e - b}, at::TensorOptions().dtype(FromCkpt(found.second->dtype)));
      ZT_RETURN_IF_ERROR(found.first->ReadBytes(*found.second, static_cast<uint64_t>(b) * es,
                                                static_cast<uint64_t>(e) * es, raw.data_ptr()));
      dst.copy_(raw);
      return absl::OkStatus();
    };
    std::unordered_map<std::string, int64_t> numel_of;
    for (size_t i = 0; i < params_.size(); ++i) numel_of[param_names_[i]] = params_[i].numel();
    for (size_t i = 0; i < frozen_params_.size(); ++i) numel_of[frozen_names_[i]] = frozen_params_[i].numel();
    for (const auto& item : module_->named_parameters(true)) numel_of.emplace(item.key(), item.value().numel());
    for (const auto& [name, n] : numel_of) known.insert(name);
    for (const auto& item : module_->named_buffers(true)) known.insert(item.key());
    // Missing names first, all at once, so the error lists every one. A tied
    // alias may be absent (transformers drops lm_head.weight when tied).
    const std::map<std::string, std::string> aliases = TiedAliases(*module_);
    for (const auto& [name, n] : numel_of) {
      if (model->Find(name).second == nullptr && aliases.count(name) == 0) missing.push_back(name);
    }
    if (!missing.empty()) {
      std::sort(missing.begin(), missing.end());
      return absl::NotFoundError(absl::StrCat("'", path, "' lacks ", missing.size(),
                                              " of the model's weights: ", absl::StrJoin(missing, ", ")));
    }
    ZT_RETURN_IF_ERROR(ReadOwned(
        [&](const std::string& name, int64_t b, int64_t e, float* dst) {
          return read_range(name, numel_of[name], b, e, at::from_blob(dst, {e - b}, at::kFloat));
        },
        nullptr,
        [&](size_t, const at::Tensor& values) {
          masters.push_back(values);
          return absl::OkStatus();
        }));
    ZT_RETURN_IF_ERROR(ReadFrozen([&](const std::string& name, int64_t b, int64_t e,
                                      at::Tensor dst) { return read_range(name, numel_of[name], b, e, dst); },
                                  &frozen_tmp));
    for (const auto& item : module_->named_buffers(true)) {
      if (!item.value().defined() || model->Find(item.key()).second == nullptr) continue;
      at::Tensor tmp = at::empty_like(item.value());
      ZT_RETURN_IF_ERROR(read_range(item.key(), item.value().numel(), 0, item.value().numel(), tmp.view({-1})));
      buffer_tmp.emplace_back(item.value(), tmp);
    }
    return absl::OkStatus();
  };
  absl::Status local;
  try {
    local = read_all();
  } catch (const std::exception& e) {
    local = absl::InternalError(absl::StrCat("loading weights: ", e.what()));
  }
  if (!local.ok()) {
    ZT_LOG(ERROR) << local.message();
  }
  ZT_RETURN_IF_ERROR(comm::AgreeAcrossRanks(*pg_, local, absl::StrCat("loading weights from '", path, "'")));
  optimizer_->SetMasters(masters);
  CommitFrozen(frozen_tmp);
  {
    at::NoGradGuard no_grad;
    for (auto& [dst, tmp] : buffer_tmp) {
      at::Tensor d = dst;
      d.copy_(tmp);
    }
  }
  if (pg_->rank() == 0) {
    std::vector<std::string> extra;
    for (const std::string& n : model->names()) {
      if (known.count(n) == 0) extra.push_back(n);
    }
    ZT_LOG(INFO) << "loaded weights from '" << path << "'"
                 << (extra.empty() ? std::string()
                                   : absl::StrCat("; ignored ", extra.size(),
                                                  " tensors the model does not have: ", absl::StrJoin(extra, ", ")));
  }
  return absl::OkStatus();
}

}  // namespace zt
