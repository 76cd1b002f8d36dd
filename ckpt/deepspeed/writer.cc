// Implementation of ckpt/deepspeed/writer.h.
#include "ckpt/deepspeed/writer.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "ckpt/deepspeed/optimizer.h"
#include "ckpt/format/pt_file.h"
#include "plan/layout.h"
#include "util/file_io.h"
#include "util/status.h"

namespace zt::ckpt {
namespace {

constexpr char kZeroStageEnumModule[] = "deepspeed.runtime.zero.config";
constexpr char kLossScalerModule[] = "deepspeed.runtime.fp16.loss_scaler";
constexpr char kFragmentAddressModule[] = "deepspeed.utils.tensor_fragment";

// --- values of DeepSpeed's files

Value OrderedDict() {
  Dict d;
  d.ordered = true;
  return Value(std::move(d));
}

Value TorchSize(const std::vector<int64_t>& shape) {
  Value::Tuple dims;
  for (int64_t s : shape) dims.items.emplace_back(s);
  return Value(Call{{"torch", "Size"}, {Value(std::move(dims))}});
}

// ZeroStageEnum's member, as Python pickles an enum member: getattr(cls, name).
Value ZeroStage(int stage) {
  const char* member = stage == 1 ? "optimizer_states" : stage == 2 ? "gradients" : "weights";
  return Value(Call{{"builtins", "getattr"}, {Value(Global{kZeroStageEnumModule, "ZeroStageEnum"}), Value(member)}});
}

// The static LossScaler DeepSpeed keeps for fp32 and bf16 (and fp16 with a fixed scale).
Value LossScaler(double scale) {
  Object o{{kLossScalerModule, "LossScaler"}, {}};
  o.state.Set("cur_scale", scale);
  o.state.Set("dynamic", false);
  return Value(std::move(o));
}

Value FragmentAddress(int64_t numel, int64_t start) {
  Object o{{kFragmentAddressModule, "fragment_address"}, {}};
  o.state.Set("numel", numel);
  o.state.Set("start", start);
  return Value(std::move(o));
}

// JSON as the Value Python's json.load would give (objects as plain dicts).
Value FromJson(const nlohmann::ordered_json& j) {
  if (j.is_null()) return Value();
  if (j.is_boolean()) return Value(j.get<bool>());
  if (j.is_number_integer()) return Value(j.get<int64_t>());
  if (j.is_number_float()) return Value(j.get<double>());
  if (j.is_string()) return Value(j.get<std::string>());
  if (j.is_array()) {
    List l;
    for (const auto& x : j) l.push_back(FromJson(x));
    return Value(std::move(l));
  }
  Dict d;
  for (const auto& [k, x] : j.items()) d.Set(k, FromJson(x));
  return Value(std::move(d));
}

// nn.Module.state_dict()'s _metadata for a state dict with these keys: every
// module prefix in first-seen order ('' first), each at version 1 (every
// module's default _version). Modules that hold no tensor leave no key, so
// they cannot be listed; PyTorch's load reads only what is there.
Value StateDictMetadata(const Dict& module) {
  Dict meta;
  meta.ordered = true;
  std::set<std::string> seen;
  auto add = [&](const std::string& prefix) {
    if (!seen.insert(prefix).second) return;
    Dict version;
    version.Set("version", 1);
    meta.Set(prefix, std::move(version));
  };
  add("");
  for (const auto& [k, v] : module.items) {
    if (!k.is_string()) continue;
    const std::string& name = k.AsString();
    for (size_t dot = name.find('.'); dot != std::string::npos; dot = name.find('.', dot + 1)) {
      add(name.substr(0, dot));
    }
  }
  return Value(std::move(meta));
}

// --- tensors produced while the file is written

// A stretch of a flat output tensor: `count` elements of trainable
// parameter `name` from element `begin` on, or `count` zeros (name empty).
struct Segment {
  std::string name;
  int64_t begin = 0;
  int64_t count = 0;
};

// Elements [b, e) of the concatenation of `segments`, fp32, `what` being
// "master" or an optimizer state name.
absl::Status ReadSegments(const ZeroCheckpoint& ck, const std::vector<Segment>& segments, const std::string& what,
                          int64_t b, int64_t e, float* dst) {
  int64_t at = 0;
  for (const Segment& s : segments) {
    const int64_t lo = std::max(b, at), hi = std::min(e, at + s.count);
    if (lo < hi) {
      float* out = dst + (lo - b);
      if (s.name.empty()) {
        std::fill(out, out + (hi - lo), 0.0f);
      } else {
        ZT_RETURN_IF_ERROR(ck.ReadTrainable(s.name, what, s.begin + lo - at, s.begin + hi - at, out));
      }
    }
    at += s.count;
    if (at >= e) break;
  }
  return absl::OkStatus();
}

// A byte source over an element reader (the pt writer asks for byte ranges;
// a range that cuts an element is served through a small bounce buffer).
using ElementReader = std::function<absl::Status(int64_t b, int64_t e, void* dst)>;
std::function<absl::Status(uint64_t, void*, uint64_t)> ByteSource(size_t elem_size, ElementReader read) {
  return [elem_size, read = std::move(read)](uint64_t offset, void* dst, uint64_t n) -> absl::Status {
    const int64_t b = static_cast<int64_t>(offset / elem_size);
    const int64_t e = static_cast<int64_t>((offset + n + elem_size - 1) / elem_size);
    if (offset % elem_size == 0 && n % elem_size == 0) return read(b, e, dst);
    std::vector<char> bounce(static_cast<size_t>(e - b) * elem_size);
    ZT_RETURN_IF_ERROR(read(b, e, bounce.data()));
    std::memcpy(dst, bounce.data() + offset % elem_size, n);
    return absl::OkStatus();
  };
}

TensorRef FlatTensor(const ZeroCheckpoint& ck, std::vector<Segment> segments, const std::string& what) {
  TensorRef t;
  t.dtype = DType::kFloat32;
  int64_t numel = 0;
  for (const Segment& s : segments) numel += s.count;
  t.shape = {numel};
  auto shared = std::make_shared<const std::vector<Segment>>(std::move(segments));
  t.source = ByteSource(4, [&ck, shared, what](int64_t b, int64_t e, void* dst) {
    return ReadSegments(ck, *shared, what, b, e, static_cast<float*>(dst));
  });
  return t;
}

// A module tensor of the source, streamed chunk by chunk as it is written
// (hashed on the way; the conversion's VerifyRead completes the check).
TensorRef ModuleTensor(const ZeroCheckpoint& ck, const TensorRef& src) {
  TensorRef t;
  t.dtype = src.dtype;
  t.shape = src.shape;
  if (src.nbytes() == 0) return t;
  t.source = ByteSource(DTypeSize(src.dtype),
                        [&ck, src](int64_t b, int64_t e, void* dst) { return ck.ReadModuleElements(src, b, e, dst); });
  return t;
}

TensorRef EmptyTensor(DType dtype) {
  TensorRef t;
  t.dtype = dtype;
  t.shape = {0};
  return t;
}

// --- the plan: what every file holds

struct Plan {
  int stage = 0;
  int world = 1;
  DType dtype = DType::kFloat32;
  // Optimizer param groups, parameters in the model's order.
  std::vector<std::vector<const SavedParam*>> groups;
  // Stage 3: per param group, its sub-groups (index ranges into groups[g]).
  std::vector<std::vector<std::pair<size_t, size_t>>> sub_groups;
  DeepSpeedOptimizerFacts facts;
  Value ds_config;
  Value clip_grad;
  std::vector<std::string> state_names;
  // Frozen parameters in the module's order: stages 1/2 with their whole
  // module tensor (`whole`), stage 3 read from the frozen fragments.
  struct Frozen {
    std::string name;
    std::vector<int64_t> shape;
    int64_t numel = 0;
    TensorRef whole;
  };
  std::vector<Frozen> frozen;
  Dict module;                                // the module state dict as written (tensors with sources)
  Value buffer_names;                         // list of str
  Dict shared;                                // alias -> name, in module order
  int64_t applied_steps = 0;                  // global_steps - skipped_steps
  std::vector<std::unique_ptr<float>> steps;  // the 0-d `step` tensors' storage
};

// The optimizer's param groups in the model's parameter order, which is
// what DeepSpeed's loader copies the flat partitions back by (position, not
// name: at stage 3 a wrong order loads without an error and with every
// parameter's values in another's place). As recorded (DeepSpeed's
// param_shapes kept through conversions; zerotorch's engine records it in
// every checkpoint it writes); else, at stages 1/2, one group in the module
// state dict's order, which is the model's (named_parameters). A stage-3
// checkpoint that records neither (written by an older zerotorch, whose
// stage-3 groups are in unit order) is refused rather than guessed at.
absl::StatusOr<std::vector<std::vector<const SavedParam*>>> ParamGroups(const ZeroCheckpoint& ck) {
  const SavedLayout& l = ck.layout();
  std::vector<std::vector<const SavedParam*>> out;
  auto param = [&](const std::string& name) {
    const auto [g, p] = *l.FindTrainable(name);
    return &l.groups[g].params[p];
  };
  if (!l.optimizer_groups.empty()) {
    for (const auto& names : l.optimizer_groups) {
      out.emplace_back();
      for (const std::string& n : names) out.back().push_back(param(n));
    }
    return out;
  }
  size_t trainable = 0;
  for (const SavedGroup& g : l.groups) trainable += g.params.size();
  out.emplace_back();
  const Value* module = ck.model_states().AsDict().Find("module");
  if (l.stage != 3 && module != nullptr && module->is_dict()) {
    for (const auto& [k, v] : module->AsDict().items) {
      if (k.is_string() && l.FindTrainable(k.AsString()) && v.is_tensor() && v.AsTensor().numel() > 0) {
        out.back().push_back(param(k.AsString()));
      }
    }
    if (out.back().size() == trainable) return out;
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "checkpoint '", ck.dir(), "/", ck.tag(), "' (stage ", l.stage,
      ") does not record its parameters' order in the model, and DeepSpeed reads the partitions back by that "
      "order, not by name; resume it once with this zerotorch (zt train --resume) and save again, which records "
      "it, then convert that checkpoint"));
}

// DeepSpeed's stage-3 sub-groups of one param group (stage3.py
// _create_fp16_sub_groups): the whole group when it fits sub_group_size
// partition elements, else cut after the parameter that reaches it.
std::vector<std::pair<size_t, size_t>> SubGroups(const std::vector<const SavedParam*>& params, int world,
                                                 int64_t sub_group_size) {
  int64_t total = 0;
  for (const SavedParam* p : params) total += plan::PerParamShardNumel(p->numel, world);
  if (sub_group_size >= total) return {{0, params.size()}};
  std::vector<std::pair<size_t, size_t>> out;
  size_t begin = 0;
  int64_t local = 0;
  for (size_t i = 0; i < params.size(); ++i) {
    local += plan::PerParamShardNumel(params[i]->numel, world);
    if (local >= sub_group_size || i + 1 == params.size()) {
      out.emplace_back(begin, i + 1);
      begin = i + 1;
      local = 0;
    }
  }
  return out;
}

absl::Status CheckSupported(const ZeroCheckpoint& ck) {
  const SavedLayout& l = ck.layout();
  return CheckDeepSpeedWritable(absl::StrCat("checkpoint '", ck.dir(), "/", ck.tag(), "'"), l.stage, l.model_dtype,
                                ck.training_state().dynamic_loss_scale);
}

// The module state dict as DeepSpeed writes it: the source's entries in
// their order (stages 1/2 whole tensors; stage 3 an empty tensor for every
// parameter and tied alias, buffers whole), then whatever DeepSpeed's would
// also name that the source lacks (parameters, aliases), with its _metadata.
absl::Status BuildModule(const ZeroCheckpoint& ck, Plan* plan) {
  const SavedLayout& l = ck.layout();
  const Dict& root = ck.model_states().AsDict();
  const Value* src = root.Find("module");
  Dict& module = plan->module;
  module.ordered = true;
  auto is_param = [&](const std::string& n) { return l.FindTrainable(n).has_value() || l.shared.count(n) > 0; };
  List buffer_names;
  std::set<std::string> buffers;
  if (const Value* b = root.Find("buffer_names"); b != nullptr && (b->is_list() || b->is_tuple())) {
    for (const Value& n : b->AsList()) {
      if (!n.is_string()) continue;
      buffer_names.push_back(n);
      buffers.insert(n.AsString());
    }
  }
  if (src != nullptr && src->is_dict()) {
    for (const auto& [k, v] : src->AsDict().items) {
      if (!k.is_string() || !v.is_tensor()) continue;
      const std::string& name = k.AsString();
      if (!is_param(name) && buffers.count(name) == 0) {
        // Neither trained nor a buffer: a frozen parameter. Stages 1/2 keep
        // it whole in the module; stage 3 names it there (a placeholder)
        // and holds its values in the frozen fragments.
        if (plan->stage == 3) {
          const auto where = l.FindFrozen(name);
          if (!where) {
            return absl::DataLossError(absl::StrCat("'", ck.dir(), "/", ck.tag(), "': module entry '", name,
                                                    "' is neither a parameter nor a buffer of the checkpoint"));
          }
          const SavedParam& p = l.frozen[where->first].params[where->second];
          plan->frozen.push_back({name, p.shape, p.numel, {}});
          module.Set(name, EmptyTensor(plan->dtype));
        } else {
          const TensorRef& t = v.AsTensor();
          plan->frozen.push_back({name, t.shape, t.numel(), t});
          module.Set(name, ModuleTensor(ck, t));
        }
        continue;
      }
      if (plan->stage == 3 && is_param(name)) {
        module.Set(name, EmptyTensor(plan->dtype));
      } else {
        module.Set(name, ModuleTensor(ck, v.AsTensor()));
      }
    }
  }
  for (const auto& group : plan->groups) {
    for (const SavedParam* p : group) {
      if (module.Find(p->name) != nullptr) continue;
      if (plan->stage != 3) {
        return absl::DataLossError(absl::StrCat("'", ck.dir(), "/", ck.tag(), "': the module state dict lacks '",
                                                p->name, "'; a stage ", plan->stage,
                                                " checkpoint's model states hold every parameter"));
      }
      module.Set(p->name, EmptyTensor(plan->dtype));
    }
  }
  // Stage 3: frozen parameters the source's module did not name (zerotorch's
  // engine keeps only buffers there), in the layout's order.
  for (const SavedGroup& g : l.frozen) {
    for (const SavedParam& p : g.params) {
      if (module.Find(p.name) != nullptr) continue;
      plan->frozen.push_back({p.name, p.shape, p.numel, {}});
      module.Set(p.name, EmptyTensor(plan->dtype));
    }
  }
  for (const auto& [alias, name] : l.shared) {
    if (module.Find(alias) != nullptr) continue;
    const Value* target = module.Find(name);
    if (target == nullptr) {
      return absl::DataLossError(absl::StrCat("'", ck.dir(), "/", ck.tag(), "': tied alias '", alias, "' names '", name,
                                              "', which the module state dict lacks"));
    }
    module.Set(alias, *target);
  }
  // shared_params in the order DeepSpeed's module walk meets the aliases.
  for (const auto& [k, v] : module.items) {
    if (auto it = l.shared.find(k.AsString()); it != l.shared.end()) plan->shared.Set(it->first, it->second);
  }
  module.attributes.emplace_back("_metadata", StateDictMetadata(module));
  plan->buffer_names = Value(std::move(buffer_names));
  return absl::OkStatus();
}

absl::StatusOr<Plan> MakePlan(const ZeroCheckpoint& ck, int world) {
  ZT_RETURN_IF_ERROR(CheckSupported(ck));
  const SavedLayout& l = ck.layout();
  const TrainingState& ts = ck.training_state();
  Plan plan;
  plan.stage = l.stage;
  plan.world = world;
  plan.dtype = l.model_dtype;
  ZT_ASSIGN_OR_RETURN(plan.groups, ParamGroups(ck));
  plan.state_names = ck.state_names();
  plan.applied_steps = ts.global_steps - ts.skipped_steps;
  ZT_ASSIGN_OR_RETURN(plan.facts, DeepSpeedOptimizerFactsFromConfig(ts.ds_config, l.world_size, plan.applied_steps));
  const auto json = nlohmann::ordered_json::parse(ts.ds_config, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded() || !json.is_object()) {
    return absl::FailedPreconditionError(
        "the checkpoint's ds_config is not a JSON object; DeepSpeed's files hold the config as a dict");
  }
  plan.ds_config = FromJson(json);
  // DeepSpeed keeps gradient_clipping as the config gave it (default 0.0).
  plan.clip_grad = json.contains("gradient_clipping") ? FromJson(json["gradient_clipping"]) : Value(0.0);
  if (plan.stage == 3) {
    for (const auto& g : plan.groups) plan.sub_groups.push_back(SubGroups(g, world, plan.facts.sub_group_size));
  }
  ZT_RETURN_IF_ERROR(BuildModule(ck, &plan));
  return plan;
}

// --- the files

// Stage 3: rank `rank`'s piece of frozen parameter `f` as DeepSpeed's
// ds_tensor holds it: ceil(numel / world) elements of the flattened
// parameter from rank * piece on, the last rank's padded with zeros.
TensorRef FrozenPiece(const ZeroCheckpoint& ck, const Plan& plan, const Plan::Frozen& f, int rank) {
  const int64_t piece = plan::PerParamShardNumel(f.numel, plan.world);
  const int64_t first = piece * rank;
  const size_t elem = DTypeSize(plan.dtype);
  TensorRef t;
  t.dtype = plan.dtype;
  t.shape = {piece};
  t.source = ByteSource(elem, [&ck, name = f.name, numel = f.numel, first, elem](int64_t b, int64_t e, void* dst) {
    char* out = static_cast<char*>(dst);
    const int64_t lo = std::min(numel, first + b), hi = std::min(numel, first + e);
    if (lo < hi) ZT_RETURN_IF_ERROR(ck.ReadFrozen(name, lo, hi, out));
    std::memset(out + (hi - lo) * elem, 0, static_cast<size_t>((e - b) - (hi - lo)) * elem);
    return absl::OkStatus();
  });
  return t;
}

Value ModelStates(const ZeroCheckpoint& ck, const Plan& plan, int rank) {
  List param_shapes;
  for (const auto& group : plan.groups) {
    Value shapes = OrderedDict();
    for (const SavedParam* p : group) shapes.AsDict().Set(p->name, TorchSize(p->shape));
    param_shapes.push_back(std::move(shapes));
  }
  // Frozen parameters' records exist from stage 2 on (DeepSpeed's
  // save_frozen_param is zero_optimization_partition_gradients()).
  Value frozen_shapes = plan.stage >= 2 ? OrderedDict() : Value();
  Value frozen_fragments = plan.stage >= 2 ? OrderedDict() : Value();
  if (plan.stage >= 2) {
    for (const Plan::Frozen& f : plan.frozen) {
      frozen_shapes.AsDict().Set(f.name, TorchSize(f.shape));
      frozen_fragments.AsDict().Set(f.name,
                                    plan.stage == 3 ? FrozenPiece(ck, plan, f, rank) : ModuleTensor(ck, f.whole));
    }
  }
  Value scheduler;
  if (plan.facts.has_scheduler) {
    Dict s;
    s.Set("last_batch_iteration", plan.applied_steps - 1);
    scheduler = Value(std::move(s));
  }
  const TrainingState& ts = ck.training_state();
  Dict root;
  root.Set("module", Value(plan.module));
  root.Set("buffer_names", plan.buffer_names);
  root.Set("optimizer", Value());
  root.Set("param_shapes", std::move(param_shapes));
  root.Set("frozen_param_shapes", std::move(frozen_shapes));
  root.Set("shared_params", rank == 0 ? Value(plan.shared) : Value(Dict()));
  root.Set("frozen_param_fragments", std::move(frozen_fragments));
  root.Set("lr_scheduler", std::move(scheduler));
  root.Set("data_sampler", Value());
  root.Set("random_ltd", Value());
  root.Set("sparse_tensor_module_names", Value(Call{{"builtins", "set"}, {Value(List{})}}));
  root.Set("skipped_steps", ts.skipped_steps);
  root.Set("global_steps", ts.global_steps);
  root.Set("global_samples", ts.global_samples);
  root.Set("dp_world_size", plan.world);
  root.Set("mp_world_size", 1);
  root.Set("ds_config", plan.ds_config);
  root.Set("ds_version", kDeepSpeedFormatVersion);
  // DeepSpeed merges the user's client_state into the root (state.update).
  if (const Value* client = ck.client_state(); client != nullptr && client->is_dict()) {
    for (const auto& [k, v] : client->AsDict().items) {
      if (k.is_string() && root.Find(k.AsString()) == nullptr) root.Set(k, v);
    }
  }
  return Value(std::move(root));
}

// The base optimizer's state dict over `flats` (segments per flat tensor),
// param group g owning flats[first[g] .. first[g + 1]).
Value BaseOptimizerState(const ZeroCheckpoint& ck, Plan& plan, const std::vector<std::vector<Segment>>& flats,
                         const std::vector<size_t>& first) {
  Dict state;
  for (size_t f = 0; f < flats.size(); ++f) {
    Dict per;
    plan.steps.push_back(std::make_unique<float>(static_cast<float>(ck.training_state().optimizer_step)));
    TensorRef step;
    step.dtype = DType::kFloat32;
    step.data = plan.steps.back().get();
    per.Set("step", step);
    for (const std::string& name : plan.state_names) per.Set(name, FlatTensor(ck, flats[f], name));
    state.Set(static_cast<int64_t>(f), std::move(per));
  }
  List groups;
  const auto& recorded = ck.layout().optimizer_group_settings;
  // A group's own settings where the checkpoint records them (a DeepSpeed
  // checkpoint's per-group weight decay, kept through conversion): the
  // config's single values would overwrite them when DeepSpeed loads. The
  // lr stays the schedule's, which DeepSpeed applies to every group. A key
  // whose recorded value differs from the config's in some group was given
  // per group (torch keeps such keys first, before its defaults, and the
  // fixtures show that order).
  const Dict& defaults = plan.facts.param_group;
  auto number = [](const Value* v, double* x) {
    if (v == nullptr || !(v->is_double() || v->is_int())) return false;
    *x = v->AsDouble();  // an int widens
    return true;
  };
  auto same_numbers = [&](const Value* v, const std::vector<double>& want) {
    if (v == nullptr || !v->is_list() || v->AsList().size() != want.size()) return false;
    for (size_t i = 0; i < want.size(); ++i) {
      double x = 0;
      if (!number(&v->AsList()[i], &x) || x != want[i]) return false;
    }
    return true;
  };
  bool own_wd = false, own_eps = false, own_betas = false;
  for (const SavedLayout::GroupSettings& r : recorded) {
    double x = 0;
    own_wd |= !number(defaults.Find("weight_decay"), &x) || x != r.weight_decay;
    own_eps |= !number(defaults.Find("eps"), &x) || x != r.eps;
    own_betas |= r.betas.size() == 2 && !same_numbers(defaults.Find("betas"), r.betas);
  }
  auto betas_of = [](const SavedLayout::GroupSettings& r) {
    List b;
    for (double x : r.betas) b.emplace_back(x);
    return b;
  };
  for (size_t g = 0; g + 1 < first.size(); ++g) {
    Dict group;
    if (g < recorded.size()) {
      const SavedLayout::GroupSettings& r = recorded[g];
      if (own_wd) group.Set("weight_decay", r.weight_decay);
      if (own_betas && r.betas.size() == 2) group.Set("betas", betas_of(r));
      if (own_eps) group.Set("eps", r.eps);
    }
    for (const auto& [k, v] : defaults.items) {
      if (group.Find(k.AsString()) == nullptr) group.Set(k, v);
    }
    List ids;
    for (size_t f = first[g]; f < first[g + 1]; ++f) ids.emplace_back(static_cast<int64_t>(f));
    group.Set("params", std::move(ids));
    groups.emplace_back(std::move(group));
  }
  Dict base;
  base.Set("state", std::move(state));
  base.Set("param_groups", std::move(groups));
  return Value(std::move(base));
}

// Stages 1/2 (stage_1_and_2.py state_dict): rank `rank`'s even share of each
// param group's flat buffer, padded at the end to a multiple of 2 x world.
Value Stage12OptimStates(const ZeroCheckpoint& ck, Plan& plan, int rank) {
  std::vector<std::vector<Segment>> flats;
  std::vector<size_t> first;
  List paddings, partition_count, mappings, fp32;
  for (const auto& group : plan.groups) {
    int64_t numel = 0;
    for (const SavedParam* p : group) numel += p->numel;
    const int64_t padded = plan::PaddedNumel(numel, plan.world);
    const int64_t part = padded / plan.world;
    const int64_t lo = part * rank, hi = lo + part;
    std::vector<Segment> segments;
    Value mapping = OrderedDict();
    int64_t offset = 0;
    for (const SavedParam* p : group) {
      const int64_t b = std::max(lo, offset), e = std::min(hi, offset + p->numel);
      if (b < e) {
        segments.push_back({p->name, b - offset, e - b});
        mapping.AsDict().Set(p->name, FragmentAddress(e - b, b - lo));
      }
      offset += p->numel;
    }
    const int64_t filled = std::clamp<int64_t>(numel - lo, 0, part);
    // DeepSpeed saves the last rank's fp32 partition without the buffer's
    // tail padding (partition[:len - group_paddings]) and its moments whole.
    const int64_t padding = rank == plan.world - 1 ? padded - numel : int64_t{0};
    std::vector<Segment> master = segments;
    if (filled < part) segments.push_back({"", 0, part - filled});
    if (filled < part && part - filled > padding) master.push_back({"", 0, part - filled - padding});
    first.push_back(flats.size());
    flats.push_back(segments);
    fp32.emplace_back(FlatTensor(ck, std::move(master), "master"));
    paddings.emplace_back(padding);
    partition_count.emplace_back(plan.world);
    mappings.push_back(std::move(mapping));
  }
  first.push_back(flats.size());
  Dict osd;
  osd.Set("loss_scaler", LossScaler(ck.training_state().loss_scale));
  osd.Set("dynamic_loss_scale", false);
  osd.Set("overflow", false);
  osd.Set("clip_grad", plan.clip_grad);
  osd.Set("base_optimizer_state", BaseOptimizerState(ck, plan, flats, first));
  osd.Set("single_partition_of_fp32_groups", std::move(fp32));
  osd.Set("zero_stage", ZeroStage(plan.stage));
  osd.Set("group_paddings", std::move(paddings));
  osd.Set("partition_count", std::move(partition_count));
  osd.Set("ds_version", kDeepSpeedFormatVersion);
  osd.Set("param_slice_mappings", std::move(mappings));
  return Value(std::move(osd));
}

// Stage 3 (stage3.py _rigid_state_dict): per sub-group, rank `rank`'s piece
// of each of its parameters, ceil(numel / world) elements, the last rank's
// padded with zeros.
Value Stage3OptimStates(const ZeroCheckpoint& ck, Plan& plan, int rank) {
  std::vector<std::vector<Segment>> flats;
  std::vector<size_t> first;
  List fp32;
  for (size_t g = 0; g < plan.groups.size(); ++g) {
    first.push_back(flats.size());
    for (const auto& [b, e] : plan.sub_groups[g]) {
      std::vector<Segment> segments;
      for (size_t i = b; i < e; ++i) {
        const SavedParam* p = plan.groups[g][i];
        const int64_t piece = plan::PerParamShardNumel(p->numel, plan.world);
        const int64_t lo = std::min(p->numel, piece * rank);
        const int64_t hi = std::min(p->numel, piece * (rank + 1));
        if (lo < hi) segments.push_back({p->name, lo, hi - lo});
        if (hi - lo < piece) segments.push_back({"", 0, piece - (hi - lo)});
      }
      flats.push_back(segments);
      fp32.emplace_back(FlatTensor(ck, std::move(segments), "master"));
    }
  }
  first.push_back(flats.size());
  Dict osd;
  osd.Set("zero_stage", ZeroStage(3));
  osd.Set("loss_scaler", LossScaler(ck.training_state().loss_scale));
  osd.Set("dynamic_loss_scale", false);
  osd.Set("overflow", false);
  osd.Set("partition_count", plan.world);
  osd.Set("optimizer_state_dict", BaseOptimizerState(ck, plan, flats, first));
  osd.Set("fp32_flat_groups", std::move(fp32));
  return Value(std::move(osd));
}

Value OptimStates(const ZeroCheckpoint& ck, Plan& plan, int rank) {
  Dict root;
  root.Set("optimizer_state_dict",
           plan.stage == 3 ? Stage3OptimStates(ck, plan, rank) : Stage12OptimStates(ck, plan, rank));
  root.Set("ds_config", plan.ds_config);
  root.Set("ds_version", kDeepSpeedFormatVersion);
  return Value(std::move(root));
}

}  // namespace

absl::Status CheckDeepSpeedWritable(const std::string& where, int stage, DType model_dtype, bool dynamic_loss_scale) {
  if (stage < 1 || stage > 3) {
    return absl::UnimplementedError(absl::StrCat(
        where, " is ZeRO stage ", stage,
        "; DeepSpeed writes stage 0 as a plain optimizer state dict, which zerotorch does not write: use ZeRO "
        "stage 1-3"));
  }
  if (stage == 1 && model_dtype == DType::kBFloat16) {
    return absl::UnimplementedError(
        absl::StrCat(where,
                     " is bf16 at ZeRO stage 1, which DeepSpeed 0.14.5 trains with its BF16_Optimizer and saves in "
                     "that optimizer's format; zerotorch writes ZeRO's format only (stages 1-3 fp32, 2-3 bf16/fp16)"));
  }
  if (dynamic_loss_scale) {
    return absl::UnimplementedError(absl::StrCat(
        where, " uses a dynamic fp16 loss scale; writing DeepSpeed's DynamicLossScaler is not supported yet"));
  }
  return absl::OkStatus();
}

absl::Status WriteDeepSpeedFiles(const ZeroCheckpoint& ck, const std::string& folder, int world) {
  if (world < 1) return absl::InvalidArgumentError(absl::StrCat("the world size must be at least 1, got ", world));
  ZT_ASSIGN_OR_RETURN(Plan plan, MakePlan(ck, world));
  // The tensors' sources only read the source checkpoint's files (and the
  // module cache of the one tensor being written): reading the next chunk
  // while one is written is safe, and overlaps the two disks' work.
  PtWriteOptions read_ahead;
  read_ahead.read_ahead = true;
  read_ahead.direct_io = true;  // gigabytes written once: past the page cache (util/direct_io.h)
  for (int r = 0; r < world; ++r) {
    if (plan.stage == 3 || r == 0) {
      ZT_RETURN_IF_ERROR(
          WritePtFile(JoinPath(folder, ModelStatesFile(plan.stage, r)), ModelStates(ck, plan, r), read_ahead));
    }
    ZT_RETURN_IF_ERROR(
        WritePtFile(JoinPath(folder, OptimStatesFile(r, plan.dtype)), OptimStates(ck, plan, r), read_ahead));
    plan.steps.clear();  // the step tensors of the file just written
  }
  return absl::OkStatus();
}

// --- DeepSpeed's universal checkpoint (checkpoint/ds_to_universal.py)

namespace {

// A copy of `d` without the keys in `drop`.
Dict Without(const Dict& d, const std::set<std::string>& drop) {
  Dict out;
  out.ordered = d.ordered;
  for (const auto& [k, v] : d.items) {
    if (!k.is_string() || drop.count(k.AsString()) == 0) out.items.emplace_back(k, v);
  }
  return out;
}

// zero/optimizer_state.pt: rank 0's optimizer dict with its param groups
// lifted to the top. Stages 1/2 drop the partitions and their mappings
// (ds_to_universal keeps only the global state); stage 3 keeps everything.
Value UniversalOptimizerState(const Value& rank0_osd, int stage) {
  const Dict& osd = rank0_osd.AsDict();
  const Value* base = osd.Find(stage == 3 ? "optimizer_state_dict" : "base_optimizer_state");
  Dict out = stage == 3
                 ? osd
                 : Without(osd, {"base_optimizer_state", "param_slice_mappings", "single_partition_of_fp32_groups"});
  out.Set("param_groups", *base->AsDict().Find("param_groups"));
  return Value(std::move(out));
}

// One parameter's `what` ("master" or a state name), whole, read while its
// file is written: stages 1/2 as {'param': tensor of the parameter's shape,
// 'cat_dim': 0} (no tensor parallelism: nothing to concatenate), stage 3 as
// the bare flat tensor (ds_to_universal's merge_zero3_slices).
Value UniversalParamFile(const ZeroCheckpoint& ck, const SavedParam& p, const std::string& what, int stage) {
  TensorRef t;
  t.dtype = DType::kFloat32;
  t.shape = stage == 3 ? std::vector<int64_t>{p.numel} : p.shape;
  t.source = ByteSource(4, [&ck, name = p.name, what](int64_t b, int64_t e, void* dst) {
    return ck.ReadTrainable(name, what, b, e, static_cast<float*>(dst));
  });
  if (stage == 3) return Value(t);
  Dict d;
  d.Set("param", Value(t));
  d.Set("cat_dim", int64_t{0});
  return Value(std::move(d));
}

}  // namespace

absl::Status WriteUniversalFiles(const ZeroCheckpoint& ck, const std::string& folder) {
  ZT_ASSIGN_OR_RETURN(Plan plan, MakePlan(ck, ck.layout().world_size));
  if (!plan.frozen.empty()) {
    return absl::UnimplementedError(absl::StrCat(
        "checkpoint '", ck.dir(), "/", ck.tag(), "' has ", plan.frozen.size(), " frozen parameters (",
        plan.frozen[0].name, plan.frozen.size() > 1 ? ", ..." : "",
        "); writing them in DeepSpeed's universal format is not supported yet: convert with --to deepspeed instead"));
  }
  PtWriteOptions read_ahead;
  read_ahead.read_ahead = true;
  read_ahead.direct_io = true;  // gigabytes written once: past the page cache (util/direct_io.h)
  // The model states ds_to_universal copies: rank 0's at stages 1/2, every
  // rank's at stage 3.
  for (int r = 0; r < (plan.stage == 3 ? plan.world : 1); ++r) {
    ZT_RETURN_IF_ERROR(
        WritePtFile(JoinPath(folder, ModelStatesFile(plan.stage, r)), ModelStates(ck, plan, r), read_ahead));
  }
  const std::string zero = JoinPath(folder, "zero");
  ZT_RETURN_IF_ERROR(MakeDirs(zero));
  {
    const Value rank0 = OptimStates(ck, plan, 0);
    const Value* osd = rank0.AsDict().Find("optimizer_state_dict");
    ZT_RETURN_IF_ERROR(WritePtFile(JoinPath(zero, "optimizer_state.pt"), UniversalOptimizerState(*osd, plan.stage)));
  }
  // The optimizer's step, as stages 1/2 keep it per parameter (a 0-dim
  // float tensor, as in base_optimizer_state); stage 3 reads it from
  // optimizer_state.pt instead.
  const float step = static_cast<float>(ck.training_state().optimizer_step);
  TensorRef step_tensor;
  step_tensor.dtype = DType::kFloat32;
  step_tensor.data = &step;
  std::vector<std::string> kinds = {"master"};
  kinds.insert(kinds.end(), plan.state_names.begin(), plan.state_names.end());
  for (const auto& group : plan.groups) {
    for (const SavedParam* p : group) {
      const std::string dir = JoinPath(zero, p->name);
      ZT_RETURN_IF_ERROR(MakeDirs(dir));
      for (const std::string& what : kinds) {
        const std::string file = (what == "master" ? "fp32" : what) + ".pt";
        ZT_RETURN_IF_ERROR(WritePtFile(JoinPath(dir, file), UniversalParamFile(ck, *p, what, plan.stage), read_ahead));
      }
      if (plan.stage != 3) ZT_RETURN_IF_ERROR(WritePtFile(JoinPath(dir, "step.pt"), Value(step_tensor)));
    }
  }
  return absl::OkStatus();
}

}  // namespace zt::ckpt
