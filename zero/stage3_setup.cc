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
    diff = absl::StrFormat("world size %d vs %d", ps.world_size, world);
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

FlatGroup ShardChunk(const plan::ChunkLayout& chunk, const std::vector<at::Tensor>& params, comm::ProcessGroup& pg,
                     at::ScalarType dtype) {
  FlatGroup g = FlattenParams(chunk.layout, params, pg.rank(), ParamResidency::kOwnsSliceOfFull, dtype);
  if (pg.size() > 1) {
    absl::Status st = pg.Broadcast(g.params, 0)->Wait();
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

absl::StatusOr<Stage3Build> BuildStage3(torch::nn::Module& model, comm::ProcessGroup& pg,
                                        const Stage3Options& options) {
  Walk w;
  Visit(model, "", 0, w);
  const int num_units = static_cast<int>(w.bases.size());

  // Engine order: trainable parameters first, then frozen ones.
  Stage3Build b;
  std::vector<int> engine_index(w.params.size(), -1);
  for (int pass = 0; pass < 2; ++pass) {
    for (size_t i = 0; i < w.params.size(); ++i) {
      const at::Tensor& p = w.params[i];
      if (p.requires_grad() != (pass == 0)) continue;
      if (!p.device().is_cpu()) {
        return absl::UnimplementedError(
            absl::StrCat("parameter '", w.param_names[i], "' is on ", p.device().str(),
                         "; this build trains CPU parameters over Gloo (CUDA/NCCL support comes with a CUDA build)"));
      }
      if (!at::isFloatingType(p.scalar_type())) {
        return absl::InvalidArgumentError(absl::StrCat("parameter '", w.param_names[i], "' is not floating point"));
      }
      engine_index[i] = static_cast<int>(b.params.size());
      b.params.push_back(p);
      b.names.push_back(w.param_names[i]);
    }
    if (pass == 0) b.num_trainable = static_cast<int>(b.params.size());
  }

  // Each parameter belongs to the innermost unit common to all its owners.
  std::vector<std::vector<int>> members(static_cast<size_t>(num_units));
  std::vector<int> owner_of(b.params.size(), 0);
  for (size_t i = 0; i < w.params.size(); ++i) {
    int owner = w.owners[i].front();
    for (int o : w.owners[i]) owner = CommonAncestor(w, owner, o);
    owner_of[static_cast<size_t>(engine_index[i])] = owner;
  }
  for (size_t e = 0; e < b.params.size(); ++e) members[static_cast<size_t>(owner_of[e])].push_back(static_cast<int>(e));

  b.units.resize(static_cast<size_t>(num_units));
  for (size_t u = 0; u < b.units.size(); ++u) {
    b.units[u].name = w.names[u];
    b.units[u].base = w.bases[u];
  }
  for (int e : members[0]) b.root_numel += b.params[static_cast<size_t>(e)].numel();

  int64_t persistent_used = 0;
  auto add_chunk = [&b](int unit, const plan::ChunkLayout& layout, FlatGroup group) {
    Stage3Build::ChunkRef ref;
    ref.trainable = layout.trainable;
    ref.unit = unit;
    ref.persistent = layout.persistent;
    std::vector<FlatGroup>& list = layout.trainable ? b.trainable_chunks : b.frozen_chunks;
    ref.index = static_cast<int>(list.size());
    list.push_back(std::move(group));
    b.units[static_cast<size_t>(unit)].chunks.push_back(static_cast<int>(b.chunks.size()));
    b.chunks.push_back(ref);
  };

  for (int u = 0; u < num_units; ++u) {
    std::vector<int> fresh = members[static_cast<size_t>(u)];
    UnitBase* base = w.bases[static_cast<size_t>(u)];
    if (base != nullptr && base->preshard() != nullptr) {
      PresharedUnit& ps = *base->preshard();
      ZT_RETURN_IF_ERROR(CheckSameOptions(ps, w.names[static_cast<size_t>(u)], pg.size(), options));
      std::vector<int> local_to_engine(ps.params.size(), -1);
      for (size_t k = 0; k < ps.params.size(); ++k) {
        auto it = w.index.find(ps.params[k].unsafeGetTensorImpl());
        const int e = it == w.index.end() ? -1 : engine_index[static_cast<size_t>(it->second)];
        if (e < 0 || owner_of[static_cast<size_t>(e)] != u) {
          return absl::FailedPreconditionError(
              absl::StrCat("a parameter of unit '", Label(w.names[static_cast<size_t>(u)]),
                           "' was sharded at construction (zt::ShardedInit) but is now ",
                           e < 0 ? "not part of the model"
                                 : absl::StrCat("also registered outside it ('", b.names[static_cast<size_t>(e)], "')"),
                           "; tie weights inside the unit, or build the model without ShardedInit"));
        }
        local_to_engine[k] = e;
      }
      for (size_t c = 0; c < ps.layouts.size(); ++c) {
        plan::ChunkLayout layout = ps.layouts[c];
        for (plan::ParamSlot& slot : layout.layout.slots) {
          slot.param_index = local_to_engine[static_cast<size_t>(slot.param_index)];
          const at::Tensor& p = b.params[static_cast<size_t>(slot.param_index)];
          if (p.requires_grad() != layout.trainable) {
            return absl::FailedPreconditionError(absl::StrCat(
                "parameter '", b.names[static_cast<size_t>(slot.param_index)], "' was ",
                layout.trainable ? "trainable" : "frozen", " when zt::ShardedInit sharded its unit and is ",
                p.requires_grad() ? "trainable" : "frozen",
                " now; set requires_grad inside the unit's constructor, or build the model without ShardedInit"));
          }
          fresh.erase(std::remove(fresh.begin(), fresh.end(), slot.param_index), fresh.end());
        }
        if (layout.persistent) persistent_used += layout.layout.numel;
        FlatGroup group = std::move(ps.groups[c]);
        group.layout = layout.layout;
        add_chunk(u, layout, std::move(group));
      }
      base->preshard().reset();
    }

    std::vector<plan::UnitParam> infos;
    for (int e : fresh) {
      plan::UnitParam up;
      up.param_index = e;
      up.numel = b.params[static_cast<size_t>(e)].numel();
      up.trainable = b.params[static_cast<size_t>(e)].requires_grad();
      infos.push_back(up);
    }
    if (infos.empty()) continue;
    std::vector<plan::ChunkLayout> layouts =
        plan::PlanUnitChunks(infos, options.bucket_numel, pg.size(), options.persistence,
                             /*all_persistent=*/u == 0, &persistent_used);
    for (const plan::ChunkLayout& layout : layouts) {
      add_chunk(u, layout, ShardChunk(layout, b.params, pg, options.dtype));
    }
  }
  return b;
}

}  // namespace zt::zero
