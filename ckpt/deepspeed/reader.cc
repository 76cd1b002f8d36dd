// ZeroCheckpoint::OpenDeepSpeed: reads the files DeepSpeed writes (the 0.14 format; tried with 0.14.5)
// into the same SavedLayout the rest of zt_ckpt uses, so consolidation,
// resharding, inspection and resuming treat both alike. Facts of the format
// (from DeepSpeed's engine, stage_1_and_2, stage3 and zero_to_fp32, checked
// against checkpoints DeepSpeed 0.14.5 wrote):
//
//  * model states (rank 0's at stages 1/2, every rank's at stage 3) hold
//    param_shapes: one OrderedDict name -> torch.Size per optimizer param
//    group, in the order the parameters were flattened; shared_params (tied
//    alias -> the name it is stored under); global_steps, global_samples,
//    skipped_steps, dp_world_size, ds_config (a dict), lr_scheduler.
//  * stages 1/2: each rank's optim states hold, per param group, one flat
//    fp32 tensor (single_partition_of_fp32_groups): the group's parameters
//    back to back, padded at the end, split evenly over the ranks. That is
//    our kEven rule with one SavedGroup per param group.
//  * stage 3: every parameter is partitioned on its own: each rank holds
//    ceil(numel / world) elements of it (the last rank padded), and its
//    fp32_flat_groups (one per sub-group) are those pieces back to back in
//    param_shapes order. One SavedGroup per parameter, padded to
//    ceil(numel / world) * world, is the same kEven rule; each rank's piece is
//    a view into its flat tensor.
//  * the base optimizer's state (exp_avg, ...) is laid out like the fp32
//    partitions, plus a 0-d `step`.
#include <cstring>
#include <nlohmann/json.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "ckpt/format/value_fields.h"
#include "ckpt/zero_checkpoint.h"
#include "plan/layout.h"
#include "util/file_io.h"
#include "util/status.h"

namespace zt::ckpt {
namespace {

nlohmann::ordered_json ToJson(const Value& v) {
  if (v.is_none()) return nullptr;
  if (v.is_bool()) return v.AsBool();
  if (v.is_int()) return v.AsInt();
  if (v.is_double()) return v.AsDouble();
  if (v.is_string()) return v.AsString();
  if (v.is_list() || v.is_tuple()) {
    nlohmann::ordered_json a = nlohmann::ordered_json::array();
    for (const Value& x : v.AsList()) a.push_back(ToJson(x));
    return a;
  }
  if (v.is_dict()) {
    nlohmann::ordered_json o = nlohmann::ordered_json::object();
    for (const auto& [k, x] : v.AsDict().items) {
      o[k.is_string() ? k.AsString() : std::to_string(k.AsInt())] = ToJson(x);
    }
    return o;
  }
  return "<tensor>";
}

// DeepSpeed's optimizer type names are case-insensitive; ours are spelled out.
std::string OptimizerName(const std::string& ds_type) {
  const std::string t = absl::AsciiStrToLower(ds_type);
  if (t == "adamw") return "AdamW";
  if (t == "adam") return "Adam";
  if (t == "sgd") return "SGD";
  if (t == "adagrad") return "Adagrad";
  if (t == "lion") return "Lion";
  return ds_type;
}

// One rank's flat tensors (sub-groups) read as one stream: `Take(n)` is a
// view of the next n elements; a piece never straddles two tensors.
class FlatCursor {
 public:
  FlatCursor(std::vector<const TensorRef*> flats, std::string what)
      : flats_(std::move(flats)), what_(std::move(what)) {}
  absl::StatusOr<TensorRef> Take(int64_t n, const std::string& param) {
    while (index_ < flats_.size() && offset_ == flats_[index_]->numel()) {
      ++index_;
      offset_ = 0;
    }
    if (index_ >= flats_.size() || offset_ + n > flats_[index_]->numel()) {
      return absl::DataLossError(absl::StrCat(what_, " ends before parameter '", param, "' (", n,
                                              " elements of it expected): the partitions do not match param_shapes"));
    }
    TensorRef view = *flats_[index_];
    view.storage_offset += offset_;
    view.shape = {n};
    view.stride = {1};
    offset_ += n;
    return view;
  }
  // Elements left over after the last piece (must be none).
  int64_t Remaining() const {
    int64_t left = 0;
    for (size_t i = index_; i < flats_.size(); ++i) left += flats_[i]->numel() - (i == index_ ? offset_ : 0);
    return left;
  }

 private:
  std::vector<const TensorRef*> flats_;
  std::string what_;
  size_t index_ = 0;
  int64_t offset_ = 0;
};

// What DeepSpeed's rank-0 model states say about the whole save.
struct DsModelStates {
  std::string version;  // ds_version
  // dp_world_size as saved (64-bit: the checks below compare against it as
  // DeepSpeed wrote it; SavedLayout::world_size holds it as an int).
  int64_t world = 0;
  std::vector<std::vector<SavedParam>> param_groups;  // per optimizer param group, in flattening order
  // frozen_param_shapes (stages 2/3; DeepSpeed writes None at stage 1), in
  // its order: parameters the optimizer never saw (requires_grad False).
  std::vector<SavedParam> frozen;
};

// The save-wide facts of DeepSpeed's rank-0 model states `first` (a dict):
// version, world size (model parallelism refused), counters, the config as
// JSON text, the micro steps and optimizer type it implies. Fills l's world
// size and rule and ts's counters and config; returns the version and the
// world size (param_groups is left to ReadDsParamShapes).
absl::StatusOr<DsModelStates> ReadDsSaveFacts(const PtReader& first, SavedLayout* l, TrainingState* ts) {
  const std::string& path = first.path();
  Fields meta(path, first.root().AsDict(), "");
  DsModelStates out;
  ZT_ASSIGN_OR_RETURN(out.version, meta.Str("ds_version"));
  ZT_ASSIGN_OR_RETURN(out.world, meta.Int("dp_world_size"));
  if (out.world < 1) return absl::DataLossError(absl::StrCat("'", path, "': dp_world_size is ", out.world));
  if (const Value* mp = first.root().AsDict().Find("mp_world_size");
      mp != nullptr && mp->is_int() && mp->AsInt() != 1) {
    return absl::UnimplementedError(absl::StrCat("'", path, "' was saved with model parallelism (mp_world_size ",
                                                 mp->AsInt(), "); zerotorch reads data-parallel checkpoints only"));
  }
  l->world_size = static_cast<int>(out.world);
  l->rule = PartitionRule::kEven;
  ZT_ASSIGN_OR_RETURN(ts->global_steps, meta.Int("global_steps"));
  ZT_ASSIGN_OR_RETURN(ts->global_samples, meta.Int("global_samples"));
  ZT_ASSIGN_OR_RETURN(ts->skipped_steps, meta.Int("skipped_steps"));
  ZT_ASSIGN_OR_RETURN(const Dict* config, meta.Sub("ds_config"));
  ts->ds_config = ToJson(Value(*config)).dump(2);
  int64_t gas = 1;
  if (const Value* g = config->Find("gradient_accumulation_steps"); g != nullptr && g->is_int()) gas = g->AsInt();
  ts->micro_steps = ts->global_steps * gas;
  if (const Value* opt = config->Find("optimizer"); opt != nullptr && opt->is_dict()) {
    if (const Value* type = opt->AsDict().Find("type"); type != nullptr && type->is_string()) {
      ts->optimizer_type = OptimizerName(type->AsString());
    }
  }
  return out;
}

// One name -> torch.Size dict of the model states (`what` names it in errors).
absl::StatusOr<std::vector<SavedParam>> ReadDsShapeDict(const std::string& path, const Value& group,
                                                        const std::string& what) {
  if (!group.is_dict()) {
    return absl::DataLossError(
        absl::StrFormat("'%s': %s is a %s, expected a dict of shapes", path, what, group.TypeName()));
  }
  std::vector<SavedParam> params;
  for (const auto& [k, v] : group.AsDict().items) {
    SavedParam p;
    if (!k.is_string() || !(v.is_tuple() || v.is_list())) {
      return absl::DataLossError(absl::StrFormat("'%s': %s holds an entry that is not name -> shape", path, what));
    }
    p.name = k.AsString();
    p.numel = 1;
    for (const Value& d : v.AsList()) {
      if (!d.is_int() || d.AsInt() < 0) {
        return absl::DataLossError(absl::StrFormat("'%s': the shape of '%s' is not a list of sizes", path, p.name));
      }
      p.shape.push_back(d.AsInt());
      p.numel *= d.AsInt();
    }
    params.push_back(std::move(p));
  }
  return params;
}

// param_shapes of rank 0's model states: per optimizer param group, each
// parameter's name, shape and element count in flattening order (offsets
// are left to the layout).
absl::StatusOr<std::vector<std::vector<SavedParam>>> ReadDsParamShapes(const PtReader& first) {
  const std::string& path = first.path();
  Fields meta(path, first.root().AsDict(), "");
  ZT_ASSIGN_OR_RETURN(const List* shapes, meta.Seq("param_shapes"));
  std::vector<std::vector<SavedParam>> param_groups;
  for (size_t g = 0; g < shapes->size(); ++g) {
    ZT_ASSIGN_OR_RETURN(std::vector<SavedParam> params,
                        ReadDsShapeDict(path, (*shapes)[g], absl::StrFormat("param_shapes[%d]", g)));
    param_groups.push_back(std::move(params));
  }
  return param_groups;
}

// Everything zerotorch reads from DeepSpeed's rank-0 model states `first`
// (a dict): the save-wide facts, the parameters (trainable and frozen), the
// tied aliases and the model dtype.
absl::StatusOr<DsModelStates> ReadDsModelStates(const PtReader& first, SavedLayout* l, TrainingState* ts) {
  const std::string& path = first.path();
  const Dict& root = first.root().AsDict();
  ZT_ASSIGN_OR_RETURN(DsModelStates out, ReadDsSaveFacts(first, l, ts));
  ZT_ASSIGN_OR_RETURN(out.param_groups, ReadDsParamShapes(first));
  if (const Value* frozen = root.Find("frozen_param_shapes"); frozen != nullptr && !frozen->is_none()) {
    ZT_ASSIGN_OR_RETURN(out.frozen, ReadDsShapeDict(path, *frozen, "frozen_param_shapes"));
  }
  if (const Value* shared = root.Find("shared_params"); shared != nullptr && shared->is_dict()) {
    for (const auto& [alias, name] : shared->AsDict().items) {
      if (alias.is_string() && name.is_string()) l->shared[alias.AsString()] = name.AsString();
    }
  }
  // The module's dtype: the model states' module tensors carry it (empty
  // placeholders at stage 3, full tensors at stages 1/2).
  l->model_dtype = DType::kFloat32;
  if (const Value* module = root.Find("module"); module != nullptr && module->is_dict()) {
    const auto& groups = out.param_groups;
    const std::string& first_param = groups.empty() || groups[0].empty() ? "" : groups[0][0].name;
    // A parameter's entry, not a buffer's, whose dtype may differ.
    const Value* t = module->AsDict().Find(first_param);
    if (t != nullptr && t->is_tensor()) l->model_dtype = t->AsTensor().dtype;
  }
  return out;
}

// Every rank's optim states, in rank order; each root must be a dict. A bf16
// save's files carry the bf16_ prefix, unless DeepSpeed ran bf16 without its
// bf16 optimizer: then the plain name is tried.
absl::StatusOr<std::vector<std::unique_ptr<PtReader>>> OpenDsOptimStates(const std::string& folder,
                                                                         const SavedLayout& l,
                                                                         const ReadFileOptions& options) {
  std::vector<std::unique_ptr<PtReader>> optim;
  for (int r = 0; r < l.world_size; ++r) {
    auto o = PtReader::Open(JoinPath(folder, OptimStatesFile(r, l.model_dtype)), options);
    if (!o.ok() && absl::IsNotFound(o.status()) && l.model_dtype == DType::kBFloat16) {
      o = PtReader::Open(JoinPath(folder, OptimStatesFile(r, DType::kFloat32)), options);
    }
    if (!o.ok()) return o.status();
    if (!(*o)->root().is_dict()) return absl::DataLossError(absl::StrCat("'", (*o)->path(), "' does not hold a dict"));
    optim.push_back(std::move(*o));
  }
  return optim;
}

// The ZeRO stage, which the optim files name (rank 0's): 1 to 3, and 3 exactly
// when rank 0's model states (`model_path`) were found under stage 3's name
// (`file_stage`).
absl::StatusOr<int> ReadDsStage(const PtReader& optim0, const std::string& model_path, int file_stage) {
  Fields root(optim0.path(), optim0.root().AsDict(), "");
  ZT_ASSIGN_OR_RETURN(const Dict* osd_d, root.Sub("optimizer_state_dict"));
  Fields osd(optim0.path(), *osd_d, "optimizer_state_dict");
  ZT_ASSIGN_OR_RETURN(const int64_t stage, osd.Int("zero_stage"));
  if (stage < 1 || stage > 3 || (stage == 3) != (file_stage == 3)) {
    return absl::DataLossError(absl::StrFormat("'%s' says ZeRO stage %d, but the model states file is '%s'",
                                               optim0.path(), stage, model_path));
  }
  return static_cast<int>(stage);
}

// The layout's groups: one per param group at stages 1/2 (its parameters
// back to back; padded_numel is left 0, for the partitions to give), one per
// parameter at stage 3 (padded to a whole piece per rank). Returns each
// group's per-rank piece at stage 3 (empty at stages 1/2).
std::vector<int64_t> AddDsGroups(const std::vector<std::vector<SavedParam>>& param_groups, int64_t world,
                                 SavedLayout* l) {
  std::vector<int64_t> group_piece;
  for (const auto& params : param_groups) {
    if (l->stage == 3) {
      for (const SavedParam& p : params) {
        SavedGroup g;
        g.params.push_back(p);
        g.params.back().offset = 0;
        g.numel = p.numel;
        group_piece.push_back(plan::PerParamShardNumel(p.numel, world));
        g.padded_numel = group_piece.back() * world;
        l->groups.push_back(std::move(g));
      }
    } else {
      SavedGroup g;
      for (const SavedParam& p : params) {
        g.params.push_back(p);
        g.params.back().offset = g.numel;
        g.numel += p.numel;
      }
      l->groups.push_back(std::move(g));  // padded_numel from the partitions
    }
  }
  return group_piece;
}

// One rank's optim states, as pointers into its parsed tree (valid while
// the PtReader lives): the flat fp32 tensors, per param group (stages 1/2)
// or sub-group (stage 3), and the state tensors laid out like them.
struct DsRankOptimStates {
  std::vector<const TensorRef*> flats;
  // Stages 1/2: group_paddings, the elements of each group's even partition
  // this rank's flat tensor leaves out (the padding at the buffer's end,
  // all on the last rank); 0 at stage 3, whose flats are whole.
  std::vector<int64_t> paddings;
  std::vector<std::string> names;                              // state tensors, group 0's order
  std::map<std::string, std::vector<const TensorRef*>> state;  // per name, per flat
};

// A 0-d `step` tensor's value (fp32 or int64) into *step; other dtypes leave
// it as it is (the caller falls back on the counters).
absl::Status ReadDsStep(const PtReader& file, const TensorRef& t, int64_t* step) {
  if (t.dtype != DType::kFloat32 && t.dtype != DType::kInt64) return absl::OkStatus();
  char bytes[8] = {0};
  ZT_RETURN_IF_ERROR(file.Read(t, bytes, /*verify=*/true));
  if (t.dtype == DType::kFloat32) {
    float f;
    std::memcpy(&f, bytes, 4);
    *step = static_cast<int64_t>(f);
  } else {
    std::memcpy(step, bytes, 8);
  }
  return absl::OkStatus();
}

// The base optimizer's state of each of `flats` (state_d[g]): tensors shaped
// like flats[g], the same names in every group, and a `step` that is not a
// state tensor. With `step` non-null, group 0's step count is read into it
// (where it is found, so a damaged record fails in the same place it did).
absl::Status ReadDsGroupStates(const PtReader& file, const Dict& state_d, int64_t* step, DsRankOptimStates* out) {
  const std::string& path = file.path();
  for (size_t g = 0; g < out->flats.size(); ++g) {
    const Value* gs = state_d.Find(static_cast<int64_t>(g));
    if (gs == nullptr || !gs->is_dict()) {
      return absl::DataLossError(absl::StrFormat("'%s': optimizer state of group %d is missing", path, g));
    }
    std::vector<std::string> here;
    for (const auto& [k, v] : gs->AsDict().items) {
      if (!k.is_string() || !v.is_tensor()) continue;
      const TensorRef& t = v.AsTensor();
      if (k.AsString() == "step" && t.numel() == 1) {
        if (step != nullptr && g == 0) ZT_RETURN_IF_ERROR(ReadDsStep(file, t, step));
        continue;
      }
      // The moments are saved whole: the partition plus its padding.
      const int64_t want = out->flats[g]->numel() + out->paddings[g];
      if (t.dtype != DType::kFloat32 || t.numel() != want || !t.contiguous()) {
        return absl::DataLossError(absl::StrFormat("'%s': optimizer state '%s' of group %d is not %d fp32 elements",
                                                   path, k.AsString(), g, want));
      }
      here.push_back(k.AsString());
      out->state[k.AsString()].push_back(&t);
    }
    if (g == 0) out->names = here;
    if (here != out->names) {
      return absl::DataLossError(absl::StrFormat("'%s': groups hold different optimizer states", path));
    }
  }
  return absl::OkStatus();
}

// Reads one rank's optim states `file`: its stage and partition count must
// be the model states' (`l`, `world`), else the folder mixes saves. `step`:
// see ReadDsGroupStates (rank 0 only).
absl::StatusOr<DsRankOptimStates> ReadDsOptimStates(const PtReader& file, const SavedLayout& l, int64_t world,
                                                    const std::string& folder, int64_t* step) {
  const std::string& path = file.path();
  const char* master_key = l.stage == 3 ? "fp32_flat_groups" : "single_partition_of_fp32_groups";
  const char* base_key = l.stage == 3 ? "optimizer_state_dict" : "base_optimizer_state";
  Fields root(path, file.root().AsDict(), "");
  ZT_ASSIGN_OR_RETURN(const Dict* osd_d, root.Sub("optimizer_state_dict"));
  Fields osd(path, *osd_d, "optimizer_state_dict");
  ZT_ASSIGN_OR_RETURN(const int64_t stage, osd.Int("zero_stage"));
  ZT_ASSIGN_OR_RETURN(const Value* partitions, osd.Get("partition_count"));
  // An int at stage 3, one per param group at stages 1/2.
  bool partitions_ok = partitions->is_int() ? partitions->AsInt() == world : partitions->is_list();
  if (partitions->is_list()) {
    for (const Value& p : partitions->AsList()) partitions_ok &= p.is_int() && p.AsInt() == world;
  }
  if (stage != l.stage || !partitions_ok) {
    return absl::DataLossError(absl::StrFormat(
        "'%s' was saved by another stage or world size than the model states (stage %d with %d ranks): files of "
        "different saves are mixed in '%s'",
        path, l.stage, world, folder));
  }
  ZT_ASSIGN_OR_RETURN(const List* flats_l, osd.Seq(master_key));
  ZT_ASSIGN_OR_RETURN(const Dict* base_d, osd.Sub(base_key));
  Fields base(path, *base_d, osd.where(base_key));
  ZT_ASSIGN_OR_RETURN(const Dict* state_d, base.Sub("state"));
  DsRankOptimStates out;
  if (l.stage == 3) {
    ZT_ASSIGN_OR_RETURN(out.flats, TensorsOf(*flats_l, flats_l->size(), DType::kFloat32, path, master_key));
    out.paddings.assign(out.flats.size(), 0);
  } else {
    // Each partition minus its padding, which DeepSpeed pickles as a slice
    // of the whole partition's storage (stage_1_and_2.state_dict).
    for (size_t g = 0; g < flats_l->size(); ++g) {
      const Value& v = (*flats_l)[g];
      if (!v.is_tensor() || !IsDenseView1D(v.AsTensor(), DType::kFloat32)) {
        return absl::DataLossError(absl::StrFormat("'%s': %s[%d] is not a 1-D float32 tensor", path, master_key, g));
      }
      out.flats.push_back(&v.AsTensor());
    }
    if (out.flats.size() != l.groups.size()) {
      return absl::DataLossError(absl::StrFormat("'%s': %s has %d groups, param_shapes %d", path, master_key,
                                                 out.flats.size(), l.groups.size()));
    }
    out.paddings.assign(out.flats.size(), 0);
    if (const Value* pads = osd_d->Find("group_paddings"); pads != nullptr && !pads->is_none()) {
      const bool ok_list = (pads->is_list() || pads->is_tuple()) && pads->AsList().size() == out.flats.size();
      for (size_t g = 0; ok_list && g < out.flats.size(); ++g) {
        const Value& pv = pads->AsList()[g];
        if (!pv.is_int() || pv.AsInt() < 0) {
          return absl::DataLossError(absl::StrFormat("'%s': group_paddings[%d] is not a count", path, g));
        }
        out.paddings[g] = pv.AsInt();
      }
      if (!ok_list) {
        return absl::DataLossError(
            absl::StrFormat("'%s': group_paddings is not one count per group (%d groups)", path, out.flats.size()));
      }
    }
  }
  ZT_RETURN_IF_ERROR(ReadDsGroupStates(file, *state_d, step, &out));
  return out;
}

// The loss scaler (a static LossScaler has no counters) and, where no
// `step` tensor gave it, the optimizer's step count: from rank 0's optim
// states, which ReadDsOptimStates has checked.
absl::Status ReadDsLossScaler(const PtReader& rank0, TrainingState* ts) {
  const std::string& path = rank0.path();
  Fields root(path, rank0.root().AsDict(), "");
  ZT_ASSIGN_OR_RETURN(const Dict* osd_d, root.Sub("optimizer_state_dict"));
  Fields osd(path, *osd_d, "optimizer_state_dict");
  ZT_ASSIGN_OR_RETURN(const Dict* scaler_d, osd.Sub("loss_scaler"));
  Fields scaler(path, *scaler_d, "optimizer_state_dict.loss_scaler");
  ZT_ASSIGN_OR_RETURN(ts->loss_scale, scaler.Double("cur_scale"));
  // DynamicLossScaler's counters; a static LossScaler has none.
  if (scaler_d->Find("cur_iter") != nullptr) {
    ZT_ASSIGN_OR_RETURN(ts->scaler_cur_iter, scaler.Int("cur_iter"));
  }
  if (scaler_d->Find("last_overflow_iter") != nullptr) {
    ZT_ASSIGN_OR_RETURN(ts->scaler_last_overflow_iter, scaler.Int("last_overflow_iter"));
  }
  if (scaler_d->Find("cur_hysteresis") != nullptr) {
    ZT_ASSIGN_OR_RETURN(ts->scaler_hysteresis, scaler.Int("cur_hysteresis"));
  }
  ZT_ASSIGN_OR_RETURN(ts->dynamic_loss_scale, osd.Bool("dynamic_loss_scale"));
  if (ts->optimizer_step == 0) ts->optimizer_step = ts->global_steps - ts->skipped_steps;
  return absl::OkStatus();
}

// The hyper-parameters of every optimizer param group, as the base
// optimizer saved them (torch's param_groups: stages 1/2 under
// base_optimizer_state, stage 3 under optimizer_state_dict; one per
// param_shapes group, in its order). DeepSpeed's ds_config keeps only the
// config's values; per-group settings (HF Trainer's no-decay group for
// biases and norms) live only here. Rank 0's file; every rank saves the same.
absl::StatusOr<std::vector<SavedLayout::GroupSettings>> ReadDsGroupSettings(const PtReader& rank0, int stage,
                                                                            size_t groups) {
  const std::string& path = rank0.path();
  Fields root(path, rank0.root().AsDict(), "");
  ZT_ASSIGN_OR_RETURN(const Dict* osd_d, root.Sub("optimizer_state_dict"));
  Fields osd(path, *osd_d, "optimizer_state_dict");
  const char* base_key = stage == 3 ? "optimizer_state_dict" : "base_optimizer_state";
  ZT_ASSIGN_OR_RETURN(const Dict* base_d, osd.Sub(base_key));
  Fields base(path, *base_d, osd.where(base_key));
  ZT_ASSIGN_OR_RETURN(const List* pg, base.Seq("param_groups"));
  if (pg->size() != groups) {
    return absl::DataLossError(absl::StrFormat("'%s': %s has %d param_groups, param_shapes %d groups", path,
                                               base.where("param_groups"), pg->size(), groups));
  }
  std::vector<SavedLayout::GroupSettings> out;
  for (size_t g = 0; g < pg->size(); ++g) {
    const Value& v = (*pg)[g];
    const std::string where = absl::StrFormat("%s[%d]", base.where("param_groups"), g);
    if (!v.is_dict()) return absl::DataLossError(absl::StrCat("'", path, "': ", where, " is not a dict"));
    Fields f(path, v.AsDict(), where);
    SavedLayout::GroupSettings s;
    ZT_ASSIGN_OR_RETURN(s.lr, f.Double("lr"));
    ZT_ASSIGN_OR_RETURN(s.weight_decay, f.Double("weight_decay"));
    ZT_ASSIGN_OR_RETURN(s.eps, f.Double("eps"));
    if (const Value* betas = v.AsDict().Find("betas"); betas != nullptr && (betas->is_list() || betas->is_tuple())) {
      for (const Value& b : betas->AsList()) {
        if (!b.is_double() && !b.is_int()) {
          return absl::DataLossError(absl::StrCat("'", path, "': ", where, ".betas holds a non-number"));
        }
        s.betas.push_back(b.AsDouble());  // an int widens
      }
    }
    out.push_back(std::move(s));
  }
  return out;
}

// Stage 3: each parameter's piece (group_piece[g] elements of group g) cut
// out of one rank's flat tensors `src`, in layout order, which must use them
// up exactly. The views are owned by `views`; the result points at them.
// `path` and `what` (the tensors' key or state name) name them in errors.
absl::StatusOr<std::vector<const TensorRef*>> CutDsStage3Pieces(const std::vector<const TensorRef*>& src,
                                                                const SavedLayout& l,
                                                                const std::vector<int64_t>& group_piece,
                                                                const std::string& path, const std::string& what,
                                                                std::vector<std::unique_ptr<TensorRef>>* views) {
  FlatCursor cursor(src, absl::StrCat("'", path, "': ", what));
  std::vector<const TensorRef*> out;
  for (size_t g = 0; g < l.groups.size(); ++g) {
    ZT_ASSIGN_OR_RETURN(TensorRef view, cursor.Take(group_piece[g], l.groups[g].params[0].name));
    views->push_back(std::make_unique<TensorRef>(std::move(view)));
    out.push_back(views->back().get());
  }
  if (cursor.Remaining() != 0) {
    return absl::DataLossError(absl::StrFormat("'%s': %s holds %d elements more than param_shapes account for", path,
                                               what, cursor.Remaining()));
  }
  return out;
}

// Stages 1/2: a group's padded length is its even partition's length (the
// rank's flat tensor plus its group_paddings) times the world size. Rank
// 0's partitions set it (they must hold the group's parameters); every
// other rank's must agree. `saved` adds up the elements the ranks' flat
// tensors hold, per group, for CheckDsStage12Totals.
absl::Status CheckDsStage12Partitions(const DsRankOptimStates& o, int rank, int64_t world, const std::string& path,
                                      SavedLayout* l, std::vector<int64_t>* saved) {
  saved->resize(l->groups.size(), 0);
  for (size_t g = 0; g < l->groups.size(); ++g) {
    SavedGroup& group = l->groups[g];
    const int64_t partition = o.flats[g]->numel() + o.paddings[g];
    const int64_t padded = partition * world;
    if (rank == 0) {
      if (padded < group.numel) {
        return absl::DataLossError(absl::StrFormat(
            "'%s': group %d's partition holds %d elements, too few for its %d parameters' %d over %d ranks", path, g,
            partition, group.params.size(), group.numel, world));
      }
      group.padded_numel = padded;
    } else if (padded != group.padded_numel) {
      return absl::DataLossError(
          absl::StrFormat("'%s': group %d's partition holds %d elements and %d of padding, rank 0's %d in all", path, g,
                          o.flats[g]->numel(), o.paddings[g], group.padded_numel / world));
    }
    (*saved)[g] += o.flats[g]->numel();
  }
  return absl::OkStatus();
}

// Stages 1/2, after every rank: the flat tensors without their padding hold
// exactly the group's parameters (DeepSpeed trims the padding off the end
// of the buffer), so a padding recorded in the wrong place, or a format
// that keeps it, is a named error rather than values read from the wrong
// offsets.
absl::Status CheckDsStage12Totals(const SavedLayout& l, const std::vector<int64_t>& saved, const std::string& folder) {
  for (size_t g = 0; g < l.groups.size(); ++g) {
    if (saved[g] != l.groups[g].numel) {
      return absl::DataLossError(absl::StrFormat(
          "'%s': group %d's partitions hold %d elements without their group_paddings, its %d parameters %d", folder, g,
          saved[g], l.groups[g].params.size(), l.groups[g].numel));
    }
  }
  return absl::OkStatus();
}

// Frozen parameters (frozen_param_shapes). Stages 1/2: the model states'
// `module` holds each whole (DeepSpeed writes the fragments only from stage
// 2 on, and then whole too), as zerotorch's own stage 0-2 files do: checked
// there, nothing to map. Stage 3: one frozen group per parameter, split as
// the trainable ones are (ceil(numel / world) per rank, the last padded);
// each rank's model states hold its piece in frozen_param_fragments.
absl::Status AddDsFrozen(const std::vector<SavedParam>& frozen, const std::vector<std::unique_ptr<PtReader>>& model,
                         SavedLayout* l, std::vector<std::vector<const TensorRef*>>* fragments) {
  if (frozen.empty()) return absl::OkStatus();
  const std::string& path0 = model[0]->path();
  if (l->stage != 3) {
    const Value* module = model[0]->root().AsDict().Find("module");
    for (const SavedParam& p : frozen) {
      const Value* t = module != nullptr && module->is_dict() ? module->AsDict().Find(p.name) : nullptr;
      if (t == nullptr || !t->is_tensor() || t->AsTensor().shape != p.shape) {
        return absl::DataLossError(absl::StrCat("'", path0, "': frozen parameter '", p.name,
                                                "' (frozen_param_shapes) is not in the module state dict whole"));
      }
    }
    return absl::OkStatus();
  }
  const int64_t world = l->world_size;
  for (const SavedParam& p : frozen) {
    SavedGroup g;
    g.params.push_back(p);
    g.params.back().offset = 0;
    g.numel = p.numel;
    g.padded_numel = plan::PerParamShardNumel(p.numel, world) * world;
    l->frozen.push_back(std::move(g));
  }
  fragments->assign(model.size(), {});
  for (size_t r = 0; r < model.size(); ++r) {
    const std::string& path = model[r]->path();
    const Value* f = model[r]->root().AsDict().Find("frozen_param_fragments");
    if (f == nullptr || !f->is_dict()) {
      return absl::DataLossError(absl::StrCat("'", path, "' lists ", frozen.size(),
                                              " frozen parameters but holds no frozen_param_fragments dict"));
    }
    for (const SavedGroup& g : l->frozen) {
      const SavedParam& p = g.params[0];
      const Value* t = f->AsDict().Find(p.name);
      const int64_t piece = g.padded_numel / world;
      if (t == nullptr || !t->is_tensor() || !IsDenseView1D(t->AsTensor(), l->model_dtype) ||
          t->AsTensor().numel() != piece) {
        return absl::DataLossError(absl::StrFormat(
            "'%s': frozen_param_fragments['%s'] is not a 1-D %s tensor of %d elements (ceil(%d / %d ranks))", path,
            p.name, std::string(DTypeName(l->model_dtype)), piece, p.numel, world));
      }
      (*fragments)[r].push_back(&t->AsTensor());
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ZeroCheckpoint::OpenDeepSpeed(const std::string& folder, std::unique_ptr<PtReader> first, int file_stage) {
  ZT_ASSIGN_OR_RETURN(const DsModelStates ms, ReadDsModelStates(*first, &layout_, &ts_));
  format_ = absl::StrCat("DeepSpeed ", ms.version);
  SavedLayout& l = layout_;
  model_.push_back(std::move(first));
  ZT_ASSIGN_OR_RETURN(optim_, OpenDsOptimStates(folder, l, read_options_));
  ZT_ASSIGN_OR_RETURN(l.stage, ReadDsStage(*optim_[0], model_[0]->path(), file_stage));
  if (l.stage == 3) {
    for (int r = 1; r < l.world_size; ++r) {
      ZT_ASSIGN_OR_RETURN(auto m, OpenFile(folder, ModelStatesFile(3, r)));
      model_.push_back(std::move(m));
    }
  }
  const std::vector<int64_t> group_piece = AddDsGroups(ms.param_groups, ms.world, &l);
  for (const auto& params : ms.param_groups) {
    l.optimizer_groups.emplace_back();
    for (const SavedParam& p : params) l.optimizer_groups.back().push_back(p.name);
  }

  ZT_RETURN_IF_ERROR(AddDsFrozen(ms.frozen, model_, &l, &frozen_));

  // Per rank: the fp32 partitions and the optimizer state, as views per group.
  std::vector<int64_t> saved;
  for (int r = 0; r < l.world_size; ++r) {
    const PtReader& file = *optim_[static_cast<size_t>(r)];
    const std::string& path = file.path();
    ZT_ASSIGN_OR_RETURN(DsRankOptimStates o,
                        ReadDsOptimStates(file, l, ms.world, folder, r == 0 ? &ts_.optimizer_step : nullptr));
    if (r == 0) {
      state_names_ = o.names;
      ZT_RETURN_IF_ERROR(ReadDsLossScaler(file, &ts_));
      ZT_ASSIGN_OR_RETURN(l.optimizer_group_settings, ReadDsGroupSettings(file, l.stage, l.optimizer_groups.size()));
    } else if (o.names != state_names_) {
      return absl::DataLossError(absl::StrFormat("'%s' holds different optimizer states than rank 0's file", path));
    }
    if (l.stage == 3) {
      // Each parameter's piece, cut out of the sub-group streams.
      ZT_ASSIGN_OR_RETURN(auto m, CutDsStage3Pieces(o.flats, l, group_piece, path, "fp32_flat_groups", &views_));
      master_.push_back(std::move(m));
      for (const std::string& n : o.names) {
        ZT_ASSIGN_OR_RETURN(auto s, CutDsStage3Pieces(o.state[n], l, group_piece, path, n, &views_));
        state_[n].push_back(std::move(s));
      }
    } else {
      ZT_RETURN_IF_ERROR(CheckDsStage12Partitions(o, r, ms.world, path, &l, &saved));
      master_.push_back(o.flats);
      for (const std::string& n : o.names) state_[n].push_back(o.state[n]);
    }
  }
  if (l.stage != 3) ZT_RETURN_IF_ERROR(CheckDsStage12Totals(l, saved, folder));
  return absl::OkStatus();
}

}  // namespace zt::ckpt
