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
#include "ckpt/value_fields.h"
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

}  // namespace

absl::Status ZeroCheckpoint::OpenDeepSpeed(const std::string& folder, std::unique_ptr<PtReader> first, int file_stage) {
  const std::string first_path = first->path();
  Fields meta(first_path, first->root().AsDict(), "");
  ZT_ASSIGN_OR_RETURN(const std::string version, meta.Str("ds_version"));
  format_ = absl::StrCat("DeepSpeed ", version);
  SavedLayout& l = layout_;
  TrainingState& ts = ts_;
  ZT_ASSIGN_OR_RETURN(const int64_t world, meta.Int("dp_world_size"));
  if (world < 1) return absl::DataLossError(absl::StrCat("'", first_path, "': dp_world_size is ", world));
  if (const Value* mp = first->root().AsDict().Find("mp_world_size");
      mp != nullptr && mp->is_int() && mp->AsInt() != 1) {
    return absl::UnimplementedError(absl::StrCat("'", first_path, "' was saved with model parallelism (mp_world_size ",
                                                 mp->AsInt(), "); zerotorch reads data-parallel checkpoints only"));
  }
  l.world_size = static_cast<int>(world);
  l.rule = PartitionRule::kEven;
  ZT_ASSIGN_OR_RETURN(ts.global_steps, meta.Int("global_steps"));
  ZT_ASSIGN_OR_RETURN(ts.global_samples, meta.Int("global_samples"));
  ZT_ASSIGN_OR_RETURN(ts.skipped_steps, meta.Int("skipped_steps"));
  ZT_ASSIGN_OR_RETURN(const Dict* config, meta.Sub("ds_config"));
  ts.ds_config = ToJson(Value(*config)).dump(2);
  int64_t gas = 1;
  if (const Value* g = config->Find("gradient_accumulation_steps"); g != nullptr && g->is_int()) gas = g->AsInt();
  ts.micro_steps = ts.global_steps * gas;
  if (const Value* opt = config->Find("optimizer"); opt != nullptr && opt->is_dict()) {
    if (const Value* type = opt->AsDict().Find("type"); type != nullptr && type->is_string()) {
      ts.optimizer_type = OptimizerName(type->AsString());
    }
  }

  // Parameters, per optimizer param group, in flattening order.
  ZT_ASSIGN_OR_RETURN(const List* shapes, meta.Seq("param_shapes"));
  std::vector<std::vector<SavedParam>> param_groups;
  for (size_t g = 0; g < shapes->size(); ++g) {
    const Value& group = (*shapes)[g];
    if (!group.is_dict()) {
      return absl::DataLossError(absl::StrFormat("'%s': param_shapes[%d] is a %s, expected a dict of shapes",
                                                 first_path, g, group.TypeName()));
    }
    std::vector<SavedParam> params;
    for (const auto& [k, v] : group.AsDict().items) {
      SavedParam p;
      if (!k.is_string() || !(v.is_tuple() || v.is_list())) {
        return absl::DataLossError(
            absl::StrFormat("'%s': param_shapes[%d] holds an entry that is not name -> shape", first_path, g));
      }
      p.name = k.AsString();
      p.numel = 1;
      for (const Value& d : v.AsList()) {
        if (!d.is_int() || d.AsInt() < 0) {
          return absl::DataLossError(
              absl::StrFormat("'%s': the shape of '%s' is not a list of sizes", first_path, p.name));
        }
        p.shape.push_back(d.AsInt());
        p.numel *= d.AsInt();
      }
      params.push_back(std::move(p));
    }
    param_groups.push_back(std::move(params));
  }
  if (const Value* frozen = first->root().AsDict().Find("frozen_param_shapes");
      frozen != nullptr && frozen->is_dict() && !frozen->AsDict().items.empty()) {
    return absl::UnimplementedError(absl::StrCat(
        "'", first_path, "' holds ", frozen->AsDict().items.size(),
        " frozen parameters (frozen_param_shapes); zerotorch does not read DeepSpeed's frozen parameters yet"));
  }
  if (const Value* shared = first->root().AsDict().Find("shared_params"); shared != nullptr && shared->is_dict()) {
    for (const auto& [alias, name] : shared->AsDict().items) {
      if (alias.is_string() && name.is_string()) l.shared[alias.AsString()] = name.AsString();
    }
  }
  // The module's dtype: the model states' module tensors carry it (empty
  // placeholders at stage 3, full tensors at stages 1/2).
  l.model_dtype = DType::kFloat32;
  if (const Value* module = first->root().AsDict().Find("module"); module != nullptr && module->is_dict()) {
    const std::string& first_param = param_groups.empty() || param_groups[0].empty() ? "" : param_groups[0][0].name;
    // A parameter's entry, not a buffer's, whose dtype may differ.
    const Value* t = module->AsDict().Find(first_param);
    if (t != nullptr && t->is_tensor()) l.model_dtype = t->AsTensor().dtype;
  }

  // The optim files name the stage.
  model_.push_back(std::move(first));
  for (int r = 0; r < l.world_size; ++r) {
    auto o = PtReader::Open(JoinPath(folder, OptimStatesFile(r, l.model_dtype)));
    if (!o.ok() && absl::IsNotFound(o.status()) && l.model_dtype == DType::kBFloat16) {
      o = PtReader::Open(JoinPath(folder, OptimStatesFile(r, DType::kFloat32)));
    }
    if (!o.ok()) return o.status();
    if (!(*o)->root().is_dict()) return absl::DataLossError(absl::StrCat("'", (*o)->path(), "' does not hold a dict"));
    optim_.push_back(std::move(*o));
  }
  {
    Fields root(optim_[0]->path(), optim_[0]->root().AsDict(), "");
    ZT_ASSIGN_OR_RETURN(const Dict* osd_d, root.Sub("optimizer_state_dict"));
    Fields osd(optim_[0]->path(), *osd_d, "optimizer_state_dict");
    ZT_ASSIGN_OR_RETURN(const int64_t stage, osd.Int("zero_stage"));
    if (stage < 1 || stage > 3 || (stage == 3) != (file_stage == 3)) {
      return absl::DataLossError(absl::StrFormat("'%s' says ZeRO stage %d, but the model states file is '%s'",
                                                 optim_[0]->path(), stage, model_[0]->path()));
    }
    l.stage = static_cast<int>(stage);
  }
  if (l.stage == 3) {
    for (int r = 1; r < l.world_size; ++r) {
      ZT_ASSIGN_OR_RETURN(auto m, PtReader::Open(JoinPath(folder, ModelStatesFile(3, r))));
      model_.push_back(std::move(m));
    }
  }

  // The layout: one group per param group (stages 1/2) or per parameter (stage 3).
  std::vector<int64_t> group_piece;  // stage 3: each group's per-rank piece
  for (const auto& params : param_groups) {
    if (l.stage == 3) {
      for (const SavedParam& p : params) {
        SavedGroup g;
        g.params.push_back(p);
        g.params.back().offset = 0;
        g.numel = p.numel;
        group_piece.push_back(plan::PerParamShardNumel(p.numel, world));
        g.padded_numel = group_piece.back() * world;
        l.groups.push_back(std::move(g));
      }
    } else {
      SavedGroup g;
      for (const SavedParam& p : params) {
        g.params.push_back(p);
        g.params.back().offset = g.numel;
        g.numel += p.numel;
      }
      l.groups.push_back(std::move(g));  // padded_numel from the partitions below
    }
  }

  // Per rank: the fp32 partitions and the optimizer state, as views per group.
  const char* master_key = l.stage == 3 ? "fp32_flat_groups" : "single_partition_of_fp32_groups";
  const char* base_key = l.stage == 3 ? "optimizer_state_dict" : "base_optimizer_state";
  for (int r = 0; r < l.world_size; ++r) {
    const std::string& path = optim_[static_cast<size_t>(r)]->path();
    Fields root(path, optim_[static_cast<size_t>(r)]->root().AsDict(), "");
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
    const size_t flat_count = flats_l->size();
    ZT_ASSIGN_OR_RETURN(auto flats, TensorsOf(*flats_l, flat_count, DType::kFloat32, path, master_key));
    if (l.stage != 3 && flat_count != l.groups.size()) {
      return absl::DataLossError(
          absl::StrFormat("'%s': %s has %d groups, param_shapes %d", path, master_key, flat_count, l.groups.size()));
    }
    // The state per sub-group: tensors laid out like the partitions, and `step`.
    std::map<std::string, std::vector<const TensorRef*>> state_flats;
    std::vector<std::string> names;
    for (size_t g = 0; g < flat_count; ++g) {
      const Value* gs = state_d->Find(static_cast<int64_t>(g));
      if (gs == nullptr || !gs->is_dict()) {
        return absl::DataLossError(absl::StrFormat("'%s': optimizer state of group %d is missing", path, g));
      }
      std::vector<std::string> here;
      for (const auto& [k, v] : gs->AsDict().items) {
        if (!k.is_string() || !v.is_tensor()) continue;
        const TensorRef& t = v.AsTensor();
        if (k.AsString() == "step" && t.numel() == 1) {
          if (r == 0 && g == 0 && (t.dtype == DType::kFloat32 || t.dtype == DType::kInt64)) {
            char bytes[8] = {0};
            ZT_RETURN_IF_ERROR(optim_[0]->Read(t, bytes, /*verify=*/true));
            if (t.dtype == DType::kFloat32) {
              float f;
              std::memcpy(&f, bytes, 4);
              ts.optimizer_step = static_cast<int64_t>(f);
            } else {
              std::memcpy(&ts.optimizer_step, bytes, 8);
            }
          }
          continue;
        }
        if (t.dtype != DType::kFloat32 || t.numel() != flats[g]->numel() || !t.contiguous()) {
          return absl::DataLossError(absl::StrFormat("'%s': optimizer state '%s' of group %d is not %d fp32 elements",
                                                     path, k.AsString(), g, flats[g]->numel()));
        }
        here.push_back(k.AsString());
        state_flats[k.AsString()].push_back(&t);
      }
      if (g == 0) names = here;
      if (here != names)
        return absl::DataLossError(absl::StrFormat("'%s': groups hold different optimizer states", path));
    }
    if (r == 0) {
      state_names_ = names;
      ZT_ASSIGN_OR_RETURN(const Dict* scaler_d, osd.Sub("loss_scaler"));
      Fields scaler(path, *scaler_d, "optimizer_state_dict.loss_scaler");
      ZT_ASSIGN_OR_RETURN(ts.loss_scale, scaler.Double("cur_scale"));
      // DynamicLossScaler's counters; a static LossScaler has none.
      if (scaler_d->Find("cur_iter") != nullptr) {
        ZT_ASSIGN_OR_RETURN(ts.scaler_cur_iter, scaler.Int("cur_iter"));
      }
      if (scaler_d->Find("last_overflow_iter") != nullptr) {
        ZT_ASSIGN_OR_RETURN(ts.scaler_last_overflow_iter, scaler.Int("last_overflow_iter"));
      }
      if (scaler_d->Find("cur_hysteresis") != nullptr) {
        ZT_ASSIGN_OR_RETURN(ts.scaler_hysteresis, scaler.Int("cur_hysteresis"));
      }
      ZT_ASSIGN_OR_RETURN(ts.dynamic_loss_scale, osd.Bool("dynamic_loss_scale"));
      if (ts.optimizer_step == 0) ts.optimizer_step = ts.global_steps - ts.skipped_steps;
    } else if (names != state_names_) {
      return absl::DataLossError(absl::StrFormat("'%s' holds different optimizer states than rank 0's file", path));
    }

    if (l.stage == 3) {
      // Cut each parameter's piece out of the sub-group streams.
      auto pieces = [&](const std::vector<const TensorRef*>& src,
                        const std::string& what) -> absl::StatusOr<std::vector<const TensorRef*>> {
        FlatCursor cursor(src, absl::StrCat("'", path, "': ", what));
        std::vector<const TensorRef*> out;
        for (size_t g = 0; g < l.groups.size(); ++g) {
          ZT_ASSIGN_OR_RETURN(TensorRef view, cursor.Take(group_piece[g], l.groups[g].params[0].name));
          views_.push_back(std::make_unique<TensorRef>(std::move(view)));
          out.push_back(views_.back().get());
        }
        if (cursor.Remaining() != 0) {
          return absl::DataLossError(absl::StrFormat("'%s': %s holds %d elements more than param_shapes account for",
                                                     path, what, cursor.Remaining()));
        }
        return out;
      };
      ZT_ASSIGN_OR_RETURN(auto m, pieces(flats, master_key));
      master_.push_back(std::move(m));
      for (const std::string& n : names) {
        ZT_ASSIGN_OR_RETURN(auto s, pieces(state_flats[n], n));
        state_[n].push_back(std::move(s));
      }
    } else {
      for (size_t g = 0; g < l.groups.size(); ++g) {
        const int64_t padded = flats[g]->numel() * world;
        if (r == 0) {
          if (padded < l.groups[g].numel) {
            return absl::DataLossError(absl::StrFormat(
                "'%s': group %d's partition holds %d elements, too few for its %d parameters' %d over %d ranks", path,
                g, flats[g]->numel(), l.groups[g].params.size(), l.groups[g].numel, world));
          }
          l.groups[g].padded_numel = padded;
        } else if (padded != l.groups[g].padded_numel) {
          return absl::DataLossError(absl::StrFormat("'%s': group %d's partition holds %d elements, rank 0's %d", path,
                                                     g, flats[g]->numel(), l.groups[g].padded_numel / world));
        }
      }
      master_.push_back(flats);
      for (const std::string& n : names) state_[n].push_back(state_flats[n]);
    }
  }
  return absl::OkStatus();
}

}  // namespace zt::ckpt
