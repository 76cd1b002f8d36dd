// Implementation of zero/stage3_setup.h.
#include "zero/stage3_setup.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "util/error.h"
#include "util/status.h"
#include "zero/sharded_init.h"
#include "zero/storage.h"

namespace zt::zero {
namespace {

std::string Join(const std::string& a, const std::string& b) { return a.empty() ? b : absl::StrCat(a, ".", b); }
std::string Label(const std::string& unit) { return unit.empty() ? "<root>" : unit; }

// The module tree as units and parameters, in named_parameters() order.
struct Walk {
  std::vector<UnitBase*> bases{nullptr};
  std::vector<std::string> names{""};
  std::vector<int> parent{-1};
  std::unordered_map<UnitBase*, int> ids;
  std::vector<at::Tensor> params;
  std::vector<std::string> param_names;
  std::unordered_map<const c10::TensorImpl*, int> index;
  std::vector<std::vector<int>> owners;  // per parameter: the units registering it
};

void Visit(torch::nn::Module& m, const std::string& path, int owner, Walk& w) {
  if (UnitBase* u = AsUnit(m)) {
    auto [it, inserted] = w.ids.emplace(u, static_cast<int>(w.bases.size()));
    if (inserted) {
      w.bases.push_back(u);
      w.names.push_back(path);
      w.parent.push_back(owner);
    }
    owner = it->second;
  }
  for (const auto& item : m.named_parameters(/*recurse=*/false)) {
    const at::Tensor& p = item.value();
    auto [it, inserted] = w.index.emplace(p.unsafeGetTensorImpl(), static_cast<int>(w.params.size()));
    if (inserted) {
      w.params.push_back(p);
      w.param_names.push_back(Join(path, item.key()));
      w.owners.emplace_back();
    }
    w.owners[static_cast<size_t>(it->second)].push_back(owner);
  }
  for (const auto& child : m.named_children()) Visit(*child.value(), Join(path, child.key()), owner, w);
}

int Depth(const Walk& w, int u) {
  int d = 0;
  for (; w.parent[static_cast<size_t>(u)] >= 0; u = w.parent[static_cast<size_t>(u)]) ++d;
  return d;
}

int CommonAncestor(const Walk& w, int a, int b) {
  int da = Depth(w, a), db = Depth(w, b);
  for (; da > db; --da) a = w.parent[static_cast<size_t>(a)];
  for (; db > da; --db) b = w.parent[static_cast<size_t>(b)];
  while (a != b) {
    a = w.parent[static_cast<size_t>(a)];
    b = w.parent[static_cast<size_t>(b)];
  }
  return a;
}

absl::Status CheckSameOptions(const PresharedUnit& ps, const std::string& unit, int world, const Stage3Options& o) {
  const Stage3Options& p = ps.options;
  std::string diff;
  if (ps.world_size != world)
    diff = absl::StrFormat("sharded over %d vs %d ranks (the world size, or mics_shard_size)", ps.world_size, world);
  else if (p.dtype != o.dtype)
    diff = absl::StrCat("dtype ", c10::toString(p.dtype), " vs ", c10::toString(o.dtype));
  else if (p.bucket_numel != o.bucket_numel)
    diff = absl::StrFormat("reduce_bucket_size %d vs %d", p.bucket_numel, o.bucket_numel);
  else if (p.persistence.param_threshold != o.persistence.param_threshold) {
    diff = absl::StrFormat("stage3_param_persistence_threshold %d vs %d", p.persistence.param_threshold,
                           o.persistence.param_threshold);
  } else if (p.persistence.model_threshold != o.persistence.model_threshold) {
    diff = absl::StrFormat("stage3_model_persistence_threshold %d vs %d", p.persistence.model_threshold,
                           o.persistence.model_threshold);
  }
  if (diff.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("unit '", Label(unit),
                   "' was sharded at construction (zt::ShardedInit) with different settings than the "
                   "engine's (",
                   diff, "); give ShardedInit and Engine::Create the same process group and config"));
}

}  // namespace

FlatGroup ShardChunk(const plan::ChunkLayout& chunk, const std::vector<at::Tensor>& params, comm::ProcessGroup& shard,
                     comm::ProcessGroup& world, at::ScalarType dtype) {
  FlatGroup g = FlattenParams(chunk.layout, params, shard.rank(), ParamResidency::kOwnsSliceOfFull, dtype);
  if (world.size() > 1) {
    absl::Status st = world.Broadcast(g.params, 0)->Wait();
    if (!st.ok()) {
      throw Error(
          absl::Status(st.code(), absl::StrCat("broadcasting rank 0's initial parameters failed: ", st.message())));
    }
  }
  if (!chunk.persistent) {
    g.param_shard = g.params.narrow(0, g.owned_begin(), g.layout.shard_numel).clone();
    FreeStorage(g.params);
    g.param_residency = ParamResidency::kShardOnly;
  }
  return g;
}

namespace {

// BuildStage3's steps over one walk of the model, sharing what they learn:
// the engine's parameter order, each parameter's owning unit, the chunks.
class Stage3Builder {
 public:
  Stage3Builder(const Walk& w, comm::ProcessGroup& pg, comm::ProcessGroup& world, const Stage3Options& options)
      : w_(w), pg_(pg), world_(world), options_(options) {}

  // Engine order: trainable parameters first, then frozen ones.
  absl::Status OrderParams() {
    engine_index_.assign(w_.params.size(), -1);
    for (int pass = 0; pass < 2; ++pass) {
      for (size_t i = 0; i < w_.params.size(); ++i) {
        const at::Tensor& p = w_.params[i];
        if (p.requires_grad() != (pass == 0)) continue;
        if (!p.device().is_cpu()) {
          return absl::UnimplementedError(
              absl::StrCat("parameter '", w_.param_names[i], "' is on ", p.device().str(),
                           "; this build trains CPU parameters over Gloo (CUDA/NCCL support comes with a CUDA build)"));
        }
        if (!at::isFloatingType(p.scalar_type())) {
          return absl::InvalidArgumentError(absl::StrCat("parameter '", w_.param_names[i], "' is not floating point"));
        }
        engine_index_[i] = static_cast<int>(b_.params.size());
        b_.params.push_back(p);
        b_.names.push_back(w_.param_names[i]);
      }
      if (pass == 0) b_.num_trainable = static_cast<int>(b_.params.size());
    }
    return absl::OkStatus();
  }

  // Each parameter belongs to the innermost unit common to all its owners;
  // returns every unit's members (engine indices, engine order).
  std::vector<std::vector<int>> AssignOwners() {
    const size_t num_units = w_.bases.size();
    std::vector<std::vector<int>> members(num_units);
    owner_of_.assign(b_.params.size(), 0);
    for (size_t i = 0; i < w_.params.size(); ++i) {
      int owner = w_.owners[i].front();
      for (int o : w_.owners[i]) owner = CommonAncestor(w_, owner, o);
      owner_of_[static_cast<size_t>(engine_index_[i])] = owner;
    }
    for (size_t e = 0; e < b_.params.size(); ++e) {
      members[static_cast<size_t>(owner_of_[e])].push_back(static_cast<int>(e));
    }
    b_.units.resize(num_units);
    for (size_t u = 0; u < num_units; ++u) {
      b_.units[u].name = w_.names[u];
      b_.units[u].base = w_.bases[u];
    }
    for (int e : members[0]) b_.root_numel += b_.params[static_cast<size_t>(e)].numel();
    return members;
  }

  // A unit zt::ShardedInit sharded at construction brings its chunks along:
  // they are mapped to engine indices and checked against today's model;
  // its parameters leave `fresh` (those still to plan).
  absl::Status AdoptPresharded(int u, std::vector<int>* fresh) {
    UnitBase* base = w_.bases[static_cast<size_t>(u)];
    PresharedUnit& ps = *base->preshard();
    const std::string& name = w_.names[static_cast<size_t>(u)];
    ZT_RETURN_IF_ERROR(CheckSameOptions(ps, name, pg_.size(), options_));
    std::vector<int> local_to_engine(ps.params.size(), -1);
    for (size_t k = 0; k < ps.params.size(); ++k) {
      auto it = w_.index.find(ps.params[k].unsafeGetTensorImpl());
      const int e = it == w_.index.end() ? -1 : engine_index_[static_cast<size_t>(it->second)];
      if (e < 0 || owner_of_[static_cast<size_t>(e)] != u) {
        return absl::FailedPreconditionError(absl::StrCat(
            "a parameter of unit '", Label(name), "' was sharded at construction (zt::ShardedInit) but is now ",
            e < 0 ? "not part of the model"
                  : absl::StrCat("also registered outside it ('", b_.names[static_cast<size_t>(e)], "')"),
            "; tie weights inside the unit, or build the model without ShardedInit"));
      }
      local_to_engine[k] = e;
    }
    for (size_t c = 0; c < ps.layouts.size(); ++c) {
      plan::ChunkLayout layout = ps.layouts[c];
      for (plan::ParamSlot& slot : layout.layout.slots) {
        slot.param_index = local_to_engine[static_cast<size_t>(slot.param_index)];
        const at::Tensor& p = b_.params[static_cast<size_t>(slot.param_index)];
        if (p.requires_grad() != layout.trainable) {
          return absl::FailedPreconditionError(absl::StrCat(
              "parameter '", b_.names[static_cast<size_t>(slot.param_index)], "' was ",
              layout.trainable ? "trainable" : "frozen", " when zt::ShardedInit sharded its unit and is ",
              p.requires_grad() ? "trainable" : "frozen",
              " now; set requires_grad inside the unit's constructor, or build the model without ShardedInit"));
        }
        fresh->erase(std::remove(fresh->begin(), fresh->end(), slot.param_index), fresh->end());
      }
      if (layout.persistent) persistent_used_ += layout.layout.numel;
      FlatGroup group = std::move(ps.groups[c]);
      group.layout = layout.layout;
      AddChunk(u, layout, std::move(group));
    }
    base->preshard().reset();
    return absl::OkStatus();
  }

  // Plans and shards the chunks of `fresh`, unit u's parameters not sharded
  // at construction (the root's are persistent as a whole).
  void ShardFresh(int u, const std::vector<int>& fresh) {
    std::vector<plan::UnitParam> infos;
    for (int e : fresh) {
      plan::UnitParam up;
      up.param_index = e;
      up.numel = b_.params[static_cast<size_t>(e)].numel();
      up.trainable = b_.params[static_cast<size_t>(e)].requires_grad();
      infos.push_back(up);
    }
    if (infos.empty()) return;
    std::vector<plan::ChunkLayout> layouts =
        plan::PlanUnitChunks(infos, options_.bucket_numel, pg_.size(), options_.persistence,
                             /*all_persistent=*/u == 0, &persistent_used_);
    for (const plan::ChunkLayout& layout : layouts) {
      AddChunk(u, layout, ShardChunk(layout, b_.params, pg_, world_, options_.dtype));
    }
  }

  Stage3Build Take() { return std::move(b_); }

 private:
  void AddChunk(int unit, const plan::ChunkLayout& layout, FlatGroup group) {
    Stage3Build::ChunkRef ref;
    ref.trainable = layout.trainable;
    ref.unit = unit;
    ref.persistent = layout.persistent;
    std::vector<FlatGroup>& list = layout.trainable ? b_.trainable_chunks : b_.frozen_chunks;
    ref.index = static_cast<int>(list.size());
    list.push_back(std::move(group));
    b_.units[static_cast<size_t>(unit)].chunks.push_back(static_cast<int>(b_.chunks.size()));
    b_.chunks.push_back(ref);
  }

  const Walk& w_;
  comm::ProcessGroup& pg_;     // the shards' group
  comm::ProcessGroup& world_;  // every rank: rank 0's initial values reach all of them
  const Stage3Options& options_;
  Stage3Build b_;
  std::vector<int> engine_index_;  // per walked parameter: its engine index
  std::vector<int> owner_of_;      // per engine parameter: its unit
  int64_t persistent_used_ = 0;    // elements made persistent so far (model-wide budget)
};

}  // namespace

absl::StatusOr<Stage3Build> BuildStage3(torch::nn::Module& model, comm::ProcessGroup& shard, comm::ProcessGroup& world,
                                        const Stage3Options& options) {
  Walk w;
  Visit(model, "", 0, w);
  Stage3Builder builder(w, shard, world, options);
  ZT_RETURN_IF_ERROR(builder.OrderParams());
  std::vector<std::vector<int>> members = builder.AssignOwners();
  for (int u = 0; u < static_cast<int>(w.bases.size()); ++u) {
    std::vector<int> fresh = members[static_cast<size_t>(u)];
    UnitBase* base = w.bases[static_cast<size_t>(u)];
    if (base != nullptr && base->preshard() != nullptr) ZT_RETURN_IF_ERROR(builder.AdoptPresharded(u, &fresh));
    builder.ShardFresh(u, fresh);
  }
  return builder.Take();
}

}  // namespace zt::zero
