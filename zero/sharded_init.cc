// Implementation of zero/sharded_init.h.
#include "zero/sharded_init.h"

#include <ATen/ATen.h>

#include <unordered_set>

#include "absl/strings/str_cat.h"
#include "comm/shard_groups.h"
#include "util/error.h"
#include "zero/unit_hook.h"

namespace zt {
namespace {

thread_local ShardedInit* g_active = nullptr;

at::ScalarType ModelDtype(const Config& c) {
  return c.fp16.enabled ? at::kHalf : c.bf16.enabled ? at::kBFloat16 : at::kFloat;
}

// The unit's own parameters: those reachable without entering a nested unit,
// each once, in named_parameters() order.
void CollectOwn(torch::nn::Module& m, bool is_top, std::unordered_set<const void*>& seen,
                std::vector<at::Tensor>& out) {
  if (!is_top && AsUnit(m) != nullptr) return;
  for (const auto& item : m.named_parameters(/*recurse=*/false)) {
    if (seen.insert(item.value().unsafeGetTensorImpl()).second) out.push_back(item.value());
  }
  for (const auto& child : m.named_children()) CollectOwn(*child.value(), false, seen, out);
}

}  // namespace

ShardedInit::ShardedInit(std::shared_ptr<comm::ProcessGroup> pg, const Config& config)
    : pg_(std::move(pg)), options_(zero::Stage3OptionsFromConfig(config)) {
  if (pg_ == nullptr) throw Error(absl::InvalidArgumentError("zt::ShardedInit: the process group is null"));
  if (config.zero.stage != 3) {
    throw Error(absl::InvalidArgumentError(
        absl::StrCat("zt::ShardedInit shards parameters for ZeRO stage 3, but the config has zero_optimization.stage ",
                     config.zero.stage, "; set it to 3 or build the model without ShardedInit")));
  }
  if (g_active != nullptr) {
    throw Error(absl::FailedPreconditionError("zt::ShardedInit: another ShardedInit is already active on this thread"));
  }
  // Collective, on every rank in the same order; construction needs no
  // replica groups.
  absl::StatusOr<comm::ShardGroups> groups =
      comm::MakeShardGroups(pg_, config.zero.mics_shard_size, "zero_optimization.mics_shard_size", /*replicas=*/false);
  if (!groups.ok()) throw Error(groups.status());
  shard_pg_ = std::move(groups->shard);
  g_active = this;
}

ShardedInit::~ShardedInit() { g_active = nullptr; }

namespace zero {

Stage3Options Stage3OptionsFromConfig(const Config& config) {
  Stage3Options o;
  o.bucket_numel = config.zero.reduce_bucket_size;
  o.persistence.param_threshold = config.zero.param_persistence_threshold;
  o.persistence.model_threshold = config.zero.model_persistence_threshold;
  o.dtype = ModelDtype(config);
  return o;
}

void ShardAtConstruction(torch::nn::Module& self, UnitBase& unit) {
  ShardedInit* init = g_active;
  if (init == nullptr) return;
  auto ps = std::make_shared<PresharedUnit>();
  std::unordered_set<const void*> seen;
  CollectOwn(self, /*is_top=*/true, seen, ps->params);
  ps->world_size = init->shard_pg().size();
  ps->options = init->options();
  std::vector<plan::UnitParam> infos;
  for (size_t i = 0; i < ps->params.size(); ++i) {
    const at::Tensor& p = ps->params[i];
    if (!at::isFloatingType(p.scalar_type()) || !p.device().is_cpu()) {
      throw Error(absl::InvalidArgumentError(
          "zt::ShardedInit shards floating-point CPU parameters; a unit has a parameter that is not"));
    }
    plan::UnitParam up;
    up.param_index = static_cast<int>(i);
    up.numel = p.numel();
    up.trainable = p.requires_grad();
    infos.push_back(up);
  }
  ps->layouts = plan::PlanUnitChunks(infos, ps->options.bucket_numel, ps->world_size, ps->options.persistence,
                                     /*all_persistent=*/false, init->persistent_used());
  for (const plan::ChunkLayout& layout : ps->layouts) {
    ps->groups.push_back(ShardChunk(layout, ps->params, init->shard_pg(), init->pg(), ps->options.dtype));
  }
  unit.preshard() = std::move(ps);
  // Until an engine adopts the shards, running the unit is an error that says so.
  unit.set_unit_hook(std::make_shared<UnitHook>(std::make_shared<CoordinatorLink>(), 0, "(sharded at construction)"));
}

}  // namespace zero
}  // namespace zt
