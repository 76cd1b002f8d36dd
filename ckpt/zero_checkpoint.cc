// Implementation of ckpt/zero_checkpoint.h.
#include "ckpt/zero_checkpoint.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <random>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "ckpt/format/value_fields.h"
#include "util/file_io.h"
#include "util/status.h"

namespace zt::ckpt {
namespace {

constexpr char kVersion[] = "zerotorch 0.1.0";

Value TensorList(const std::vector<TensorRef>& ts) {
  List l;
  for (const TensorRef& t : ts) l.emplace_back(t);
  return Value(std::move(l));
}

Value ShapeTuple(const std::vector<int64_t>& shape) {
  Value::Tuple t;
  for (int64_t s : shape) t.items.emplace_back(s);
  return Value(std::move(t));
}

Value LossScalerValue(const TrainingState& ts) {
  Dict d;
  d.Set("cur_scale", ts.loss_scale);
  d.Set("cur_iter", ts.scaler_cur_iter);
  d.Set("last_overflow_iter", ts.scaler_last_overflow_iter);
  d.Set("cur_hysteresis", ts.scaler_hysteresis);
  d.Set("dynamic", ts.dynamic_loss_scale);
  return Value(std::move(d));
}

}  // namespace

std::string ModelStatesFile(int stage, int rank) {
  return stage == 3 ? absl::StrFormat("zero_pp_rank_%d_mp_rank_00_model_states.pt", rank)
                    : std::string("mp_rank_00_model_states.pt");
}

std::string OptimStatesFile(int rank, DType model_dtype) {
  return absl::StrFormat("%szero_pp_rank_%d_mp_rank_00_optim_states.pt", model_dtype == DType::kBFloat16 ? "bf16_" : "",
                         rank);
}

int64_t NewSaveId() {
  std::random_device rd;
  const uint64_t bits = (static_cast<uint64_t>(rd()) << 32) ^ rd() ^
                        static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  const int64_t id = static_cast<int64_t>(bits >> 1);  // positive: pickles as a plain int
  return id == 0 ? 1 : id;
}

Value MakeOptimStates(const SavedLayout& layout, int rank, const RankShards& shards, const TrainingState& ts) {
  // base_optimizer_state: torch.optim's state_dict shape, one "param" per group.
  Dict state;
  for (size_t g = 0; g < shards.master.size(); ++g) {
    Dict per;
    per.Set("step", ts.optimizer_step);
    for (const auto& [name, tensors] : shards.state) per.Set(name, tensors[g]);
    state.Set(static_cast<int64_t>(g), std::move(per));
  }
  Dict param_group;
  List ids;
  for (size_t g = 0; g < shards.master.size(); ++g) ids.emplace_back(static_cast<int64_t>(g));
  param_group.Set("params", std::move(ids));
  Dict base;
  base.Set("state", std::move(state));
  base.Set("param_groups", List{Value(std::move(param_group))});

  Dict osd;
  osd.Set("zero_stage", layout.stage);
  osd.Set("partition_count", layout.world_size);
  osd.Set("loss_scaler", LossScalerValue(ts));
  osd.Set("dynamic_loss_scale", ts.dynamic_loss_scale);
  osd.Set("overflow", false);
  osd.Set("base_optimizer_state", std::move(base));
  osd.Set(layout.stage == 3 ? "fp32_flat_groups" : "single_partition_of_fp32_groups", TensorList(shards.master));

  Dict zt;
  zt.Set("rank", rank);
  zt.Set("save_id", ts.save_id);
  zt.Set("global_steps", ts.global_steps);
  zt.Set("optimizer_type", ts.optimizer_type);
  zt.Set("optimizer_step", ts.optimizer_step);
  if (shards.rng_cpu.has_value()) zt.Set("rng_cpu", *shards.rng_cpu);
  if (!shards.rng_cpu_replicas.empty()) zt.Set("rng_cpu_replicas", TensorList(shards.rng_cpu_replicas));

  Dict root;
  root.Set("optimizer_state_dict", std::move(osd));
  root.Set("ds_config", ts.ds_config);
  root.Set("ds_version", kVersion);
  root.Set("zt", std::move(zt));
  return Value(std::move(root));
}

Value MakeModelStates(const SavedLayout& layout, int rank, const TrainingState& ts, const Dict& module,
                      const std::vector<std::string>& buffer_names, const RankShards& shards,
                      const Value& client_state) {
  List param_shapes;
  for (const SavedGroup& g : layout.groups) {
    Dict shapes;
    shapes.ordered = true;
    for (const SavedParam& p : g.params) shapes.Set(p.name, ShapeTuple(p.shape));
    param_shapes.emplace_back(std::move(shapes));
  }
  Dict frozen_shapes;
  frozen_shapes.ordered = true;
  for (const SavedGroup& g : layout.frozen) {
    for (const SavedParam& p : g.params) frozen_shapes.Set(p.name, ShapeTuple(p.shape));
  }
  Dict shared;
  for (const auto& [alias, name] : layout.shared) shared.Set(alias, name);
  List buffers;
  for (const std::string& b : buffer_names) buffers.emplace_back(b);
  Dict sched;
  sched.Set("last_batch_iteration", ts.global_steps - ts.skipped_steps - 1);

  Dict root;
  root.Set("module", Value(module));
  root.Set("buffer_names", std::move(buffers));
  root.Set("param_shapes", std::move(param_shapes));
  root.Set("frozen_param_shapes", std::move(frozen_shapes));
  root.Set("shared_params", std::move(shared));
  root.Set("lr_scheduler", std::move(sched));
  root.Set("global_steps", ts.global_steps);
  root.Set("global_samples", ts.global_samples);
  root.Set("skipped_steps", ts.skipped_steps);
  root.Set("micro_steps", ts.micro_steps);
  root.Set("dp_world_size", layout.world_size);
  root.Set("mp_world_size", 1);
  root.Set("ds_config", ts.ds_config);
  root.Set("ds_version", kVersion);
  root.Set("client_state", client_state.is_none() ? Value(Dict()) : client_state);
  root.Set("zt_layout", layout.ToValue());
  root.Set("zt_rank", rank);
  root.Set("zt_save_id", ts.save_id);
  if (layout.stage == 3) root.Set("frozen_param_fragments", TensorList(shards.frozen));
  return Value(std::move(root));
}

absl::StatusOr<std::string> ReadLatestTag(const std::string& dir) {
  const std::string path = JoinPath(dir, "latest");
  auto text = ReadSmallFile(path, 4096);
  if (!text.ok()) {
    return absl::NotFoundError(absl::StrCat("no checkpoint in '", dir, "': cannot read '", path, "' (",
                                            text.status().message(), "); pass a tag, or save a checkpoint first"));
  }
  std::string tag(absl::StripAsciiWhitespace(*text));
  if (tag.empty()) return absl::DataLossError(absl::StrCat("'", path, "' does not hold a tag (got '", tag, "')"));
  // `latest` is untrusted: the tag it names is a folder of this checkpoint.
  auto confined = ConfinedPath(dir, tag, absl::StrCat("'", path, "'"));
  if (!confined.ok()) return absl::DataLossError(confined.status().message());
  return tag;
}

namespace {

// Every checkpoint file's root is a dict; this is the error when it is not.
absl::Status NotADict(const std::string& path) {
  return absl::DataLossError(absl::StrCat("'", path, "' does not hold a dict"));
}

// The tag to open: `tag` itself, or when it is empty the one `<dir>/latest` names.
absl::StatusOr<std::string> ResolveTag(const std::string& dir, const std::string& tag) {
  if (!tag.empty()) return tag;
  return ReadLatestTag(dir);
}

// Rank 0's model states and the naming it was found under: 0 (stages 0-2)
// or 3 (stage 3); the file's own fields say which stage exactly.
struct FirstModelStates {
  std::unique_ptr<PtReader> file;
  int file_stage = 0;
};

// Opens rank 0's model states in `folder`, trying stage 0-2's name before
// stage 3's. Only NotFound moves on to the next name: any other error (a
// damaged file) is returned as it is. The root must be a dict.
absl::StatusOr<FirstModelStates> OpenFirstModelStates(const std::string& folder, const ReadFileOptions& options,
                                                      const std::function<std::string(const std::string&)>& path_of) {
  for (int stage : {0, 3}) {
    const std::string path = path_of(ModelStatesFile(stage, 0));
    auto r = PtReader::Open(path, options);
    if (r.ok()) {
      if (!(*r)->root().is_dict()) return NotADict(path);
      return FirstModelStates{std::move(*r), stage};
    }
    if (!absl::IsNotFound(r.status())) return r.status();
  }
  return absl::NotFoundError(absl::StrCat("checkpoint '", folder, "' has no model states file (", ModelStatesFile(0, 0),
                                          " or ", ModelStatesFile(3, 0),
                                          "); is the tag right, and did the save finish?"));
}

// DeepSpeed's own checkpoints carry its version and no layout of ours.
bool WrittenByDeepSpeed(const Dict& model_states) {
  return model_states.Find("zt_layout") == nullptr && model_states.Find("ds_version") != nullptr;
}

// The save-wide facts in zerotorch's rank-0 model states (`first`, a dict):
// the layout, the counters, the config and the save id (0 when not recorded).
absl::Status ReadModelStates(const PtReader& first, SavedLayout* layout, TrainingState* ts) {
  Fields meta(first.path(), first.root().AsDict(), "");
  ZT_ASSIGN_OR_RETURN(const Value* layout_v, meta.Get("zt_layout"));
  ZT_ASSIGN_OR_RETURN(*layout, SavedLayout::FromValue(*layout_v));
  ZT_ASSIGN_OR_RETURN(ts->global_steps, meta.Int("global_steps"));
  ZT_ASSIGN_OR_RETURN(ts->global_samples, meta.Int("global_samples"));
  ZT_ASSIGN_OR_RETURN(ts->skipped_steps, meta.Int("skipped_steps"));
  ZT_ASSIGN_OR_RETURN(ts->micro_steps, meta.Int("micro_steps"));
  ZT_ASSIGN_OR_RETURN(ts->ds_config, meta.Str("ds_config"));
  if (const Value* id = first.root().AsDict().Find("zt_save_id"); id != nullptr && id->is_int()) {
    ts->save_id = id->AsInt();
  }
  return absl::OkStatus();
}

// One file's identity against rank 0's model states (`first_path`): `d`
// holds its save id under `id_key` and its rank under `rank_key`. With a
// save id recorded (not 0) the file must carry the same one; a recorded rank
// must be the one the file is named for (`rank`).
absl::Status CheckFileIdentity(const std::string& path, const Dict& d, const char* rank_key, const char* id_key,
                               int rank, int64_t save_id, const std::string& first_path) {
  const Value* id = d.Find(id_key);
  const Value* file_rank = d.Find(rank_key);
  if (save_id != 0 && (id == nullptr || !id->is_int() || id->AsInt() != save_id)) {
    return absl::DataLossError(absl::StrFormat(
        "'%s' belongs to another save than '%s' (save id %s, not %x): the folder mixes files of different "
        "saves (swapped, from another step or another run); restore the files of one save",
        path, first_path, id != nullptr && id->is_int() ? absl::StrFormat("%x", id->AsInt()) : "none", save_id));
  }
  if (file_rank != nullptr && file_rank->is_int() && file_rank->AsInt() != rank) {
    return absl::DataLossError(
        absl::StrFormat("'%s' holds rank %d's state but is named for rank %d: the files were renamed or swapped", path,
                        file_rank->AsInt(), rank));
  }
  return absl::OkStatus();
}

// Every file must come from the save rank 0's model states (model[0])
// belong to, and sit under its own rank's name: each optim file's `zt`
// dict (where present) and, at stage 3, each rank's model states. Checked
// rank by rank, the optim file first, before any file's contents are read,
// so a mixed folder is named as such rather than as a shape mismatch.
absl::Status CheckFilesOfOneSave(const std::vector<std::unique_ptr<PtReader>>& model,
                                 const std::vector<std::unique_ptr<PtReader>>& optim, const SavedLayout& l,
                                 int64_t save_id) {
  const std::string& first_path = model[0]->path();
  for (int r = 0; r < l.world_size; ++r) {
    const PtReader& o = *optim[static_cast<size_t>(r)];
    if (!o.root().is_dict()) return NotADict(o.path());
    const Value* zt = o.root().AsDict().Find("zt");
    if (zt != nullptr && zt->is_dict()) {
      ZT_RETURN_IF_ERROR(CheckFileIdentity(o.path(), zt->AsDict(), "rank", "save_id", r, save_id, first_path));
    }
    if (l.stage == 3) {
      const PtReader& m = *model[static_cast<size_t>(r)];
      if (!m.root().is_dict()) return NotADict(m.path());
      ZT_RETURN_IF_ERROR(
          CheckFileIdentity(m.path(), m.root().AsDict(), "zt_rank", "zt_save_id", r, save_id, first_path));
    }
  }
  return absl::OkStatus();
}

// One rank's optim states file, as pointers into its parsed tree (valid
// while the PtReader lives).
struct RankOptimStates {
  std::vector<const TensorRef*> master;                        // fp32, per group
  std::vector<std::string> names;                              // the state tensors' names, group 0's order
  std::map<std::string, std::vector<const TensorRef*>> state;  // per name, per group
};

// Reads rank `rank`'s optim states: stage and partition count must match
// the layout (else the folder mixes saves), the master is one fp32 tensor
// per group, and every group holds the same state tensors, each the rank's
// range of its group in fp32.
absl::StatusOr<RankOptimStates> ReadOptimStates(const PtReader& file, int rank, const SavedLayout& l,
                                                const std::string& folder) {
  const std::string& path = file.path();
  if (!file.root().is_dict()) return NotADict(path);
  Fields root(path, file.root().AsDict(), "");
  ZT_ASSIGN_OR_RETURN(const Dict* osd_d, root.Sub("optimizer_state_dict"));
  Fields osd(path, *osd_d, "optimizer_state_dict");
  ZT_ASSIGN_OR_RETURN(int64_t partitions, osd.Int("partition_count"));
  ZT_ASSIGN_OR_RETURN(int64_t zero_stage, osd.Int("zero_stage"));
  if (partitions != l.world_size || zero_stage != l.stage) {
    return absl::DataLossError(absl::StrFormat(
        "'%s' was saved by stage %d with %d ranks, but the model states say stage %d with %d: files from "
        "different saves are mixed in '%s'",
        path, zero_stage, partitions, l.stage, l.world_size, folder));
  }
  RankOptimStates out;
  const char* master_key = l.stage == 3 ? "fp32_flat_groups" : "single_partition_of_fp32_groups";
  ZT_ASSIGN_OR_RETURN(const List* masters, osd.Seq(master_key));
  ZT_ASSIGN_OR_RETURN(out.master, TensorsOf(*masters, l.groups.size(), DType::kFloat32, path, master_key));
  ZT_ASSIGN_OR_RETURN(const Dict* base_d, osd.Sub("base_optimizer_state"));
  Fields base(path, *base_d, "optimizer_state_dict.base_optimizer_state");
  ZT_ASSIGN_OR_RETURN(const Dict* state_d, base.Sub("state"));
  for (size_t g = 0; g < l.groups.size(); ++g) {
    const Value* gs = state_d->Find(static_cast<int64_t>(g));
    if (gs == nullptr || !gs->is_dict()) {
      return absl::DataLossError(absl::StrFormat("'%s': optimizer state of group %d is missing", path, g));
    }
    std::vector<std::string> here;
    for (const auto& [k, v] : gs->AsDict().items) {
      if (!k.is_string() || !v.is_tensor()) continue;  // "step" and scalars
      const TensorRef& t = v.AsTensor();
      const auto [b, e] = l.Range(l.groups[g].padded_numel, rank);
      if (t.dtype != DType::kFloat32 || t.numel() != e - b || !t.contiguous()) {
        return absl::DataLossError(absl::StrFormat("'%s': optimizer state '%s' of group %d is not %d fp32 elements",
                                                   path, k.AsString(), g, e - b));
      }
      here.push_back(k.AsString());
      out.state[k.AsString()].push_back(&t);
    }
    if (g == 0) out.names = here;
    if (here != out.names) {
      return absl::DataLossError(absl::StrFormat("'%s': groups hold different optimizer states", path));
    }
  }
  return out;
}

// The optimizer's type and step count and the loss scaler, which every rank
// agrees on: read from rank 0's optim states (already read by ReadOptimStates).
absl::Status ReadOptimizerCounters(const PtReader& rank0, TrainingState* ts) {
  const std::string& path = rank0.path();
  Fields root(path, rank0.root().AsDict(), "");
  ZT_ASSIGN_OR_RETURN(const Dict* osd_d, root.Sub("optimizer_state_dict"));
  Fields osd(path, *osd_d, "optimizer_state_dict");
  ZT_ASSIGN_OR_RETURN(const Dict* zt_d, root.Sub("zt"));
  Fields zt(path, *zt_d, "zt");
  ZT_ASSIGN_OR_RETURN(ts->optimizer_type, zt.Str("optimizer_type"));
  ZT_ASSIGN_OR_RETURN(ts->optimizer_step, zt.Int("optimizer_step"));
  ZT_ASSIGN_OR_RETURN(const Dict* scaler_d, osd.Sub("loss_scaler"));
  Fields scaler(path, *scaler_d, "optimizer_state_dict.loss_scaler");
  ZT_ASSIGN_OR_RETURN(ts->loss_scale, scaler.Double("cur_scale"));
  ZT_ASSIGN_OR_RETURN(ts->scaler_cur_iter, scaler.Int("cur_iter"));
  ZT_ASSIGN_OR_RETURN(ts->scaler_last_overflow_iter, scaler.Int("last_overflow_iter"));
  ZT_ASSIGN_OR_RETURN(ts->scaler_hysteresis, scaler.Int("cur_hysteresis"));
  ZT_ASSIGN_OR_RETURN(ts->dynamic_loss_scale, osd.Bool("dynamic_loss_scale"));
  return absl::OkStatus();
}

// Stage 3: one rank's fragments of every frozen group, from its model states.
absl::StatusOr<std::vector<const TensorRef*>> ReadFrozenFragments(const PtReader& model, const SavedLayout& l) {
  const std::string& path = model.path();
  if (!model.root().is_dict()) return NotADict(path);
  Fields f(path, model.root().AsDict(), "");
  ZT_ASSIGN_OR_RETURN(const List* frags, f.Seq("frozen_param_fragments"));
  return TensorsOf(*frags, l.frozen.size(), l.model_dtype, path, "frozen_param_fragments");
}

// Every rank's share of every group must be there, exactly: master[rank][group]
// holds the elements the layout gives that rank (optim names the files in errors).
absl::Status CheckRankShares(const SavedLayout& l, const std::vector<std::vector<const TensorRef*>>& master,
                             const std::vector<std::unique_ptr<PtReader>>& optim) {
  for (int r = 0; r < l.world_size; ++r) {
    for (size_t g = 0; g < l.groups.size(); ++g) {
      const auto [b, e] = l.Range(l.groups[g].padded_numel, r);
      if (master[r][g]->numel() != e - b) {
        return absl::DataLossError(absl::StrFormat("'%s': group %d holds %d elements, the layout gives rank %d %d",
                                                   optim[r]->path(), g, master[r][g]->numel(), r, e - b));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

std::string ZeroCheckpoint::PathOf(const std::string& folder, const std::string& name) const {
  if (locate_) {
    std::string located = locate_(name);
    if (!located.empty()) return located;
  }
  return JoinPath(folder, name);
}

absl::StatusOr<std::unique_ptr<PtReader>> ZeroCheckpoint::OpenFile(const std::string& folder,
                                                                   const std::string& name) const {
  return PtReader::Open(PathOf(folder, name), read_options_);
}

absl::StatusOr<std::unique_ptr<ZeroCheckpoint>> ZeroCheckpoint::Open(const std::string& dir, const std::string& tag,
                                                                     const CheckpointReadOptions& options) {
  std::unique_ptr<ZeroCheckpoint> c(new ZeroCheckpoint());
  c->dir_ = dir;
  c->read_options_.direct_min = options.direct_io ? kStreamingDirectMin : 0;
  c->locate_ = options.locate;
  ZT_ASSIGN_OR_RETURN(c->tag_, ResolveTag(dir, tag));
  const std::string folder = JoinPath(dir, c->tag_);
  // Rank 0's model states name the writer, the stage and the world size; the rest follows.
  ZT_ASSIGN_OR_RETURN(
      FirstModelStates first,
      OpenFirstModelStates(folder, c->read_options_, [&](const std::string& name) { return c->PathOf(folder, name); }));
  if (WrittenByDeepSpeed(first.file->root().AsDict())) {
    ZT_RETURN_IF_ERROR(c->OpenDeepSpeed(folder, std::move(first.file), first.file_stage));
  } else {
    ZT_RETURN_IF_ERROR(c->OpenZerotorch(folder, std::move(first.file)));
  }
  return c;
}

absl::Status ZeroCheckpoint::OpenZerotorch(const std::string& folder, std::unique_ptr<PtReader> first) {
  ZT_RETURN_IF_ERROR(ReadModelStates(*first, &layout_, &ts_));
  const SavedLayout& l = layout_;
  model_.push_back(std::move(first));
  if (l.stage == 3) {
    for (int r = 1; r < l.world_size; ++r) {
      ZT_ASSIGN_OR_RETURN(auto m, OpenFile(folder, ModelStatesFile(3, r)));
      model_.push_back(std::move(m));
    }
  }
  for (int r = 0; r < l.world_size; ++r) {
    ZT_ASSIGN_OR_RETURN(auto o, OpenFile(folder, OptimStatesFile(r, l.model_dtype)));
    optim_.push_back(std::move(o));
  }
  ZT_RETURN_IF_ERROR(CheckFilesOfOneSave(model_, optim_, l, ts_.save_id));

  // Per rank: the fp32 master and state tensors of every group; rank 0's
  // state names are the ones every rank must hold.
  for (int r = 0; r < l.world_size; ++r) {
    const PtReader& file = *optim_[static_cast<size_t>(r)];
    ZT_ASSIGN_OR_RETURN(RankOptimStates o, ReadOptimStates(file, r, l, folder));
    master_.push_back(std::move(o.master));
    if (r == 0) {
      state_names_ = o.names;
      ZT_RETURN_IF_ERROR(ReadOptimizerCounters(file, &ts_));
    } else if (o.names != state_names_) {
      return absl::DataLossError(
          absl::StrFormat("'%s' holds different optimizer states than rank 0's file", file.path()));
    }
    for (const std::string& n : o.names) state_[n].push_back(o.state[n]);
  }
  if (l.stage == 3) {
    for (int r = 0; r < l.world_size; ++r) {
      ZT_ASSIGN_OR_RETURN(auto fragments, ReadFrozenFragments(*model_[static_cast<size_t>(r)], l));
      frozen_.push_back(std::move(fragments));
    }
  }
  return CheckRankShares(l, master_, optim_);
}

const Value* ZeroCheckpoint::client_state() const {
  return model_[0]->root().is_dict() ? model_[0]->root().AsDict().Find("client_state") : nullptr;
}

std::vector<std::string> ZeroCheckpoint::files() const {
  std::vector<std::string> out;
  for (const auto& m : model_) out.push_back(m->path());
  for (const auto& o : optim_) out.push_back(o->path());
  return out;
}

absl::Status ZeroCheckpoint::VerifyRead() const { return verifier_.Finish(); }

absl::Status ZeroCheckpoint::ReadGroupRange(const std::vector<std::unique_ptr<PtReader>>& files,
                                            const std::vector<std::vector<const TensorRef*>>& per_rank, size_t group,
                                            int64_t padded_numel, int64_t begin, int64_t end, size_t elem_size,
                                            void* dst) const {
  char* out = static_cast<char*>(dst);
  for (int r = 0; r < layout_.world_size && begin < end; ++r) {
    const auto [rb, re] = layout_.Range(padded_numel, r);
    const int64_t lo = std::max(begin, rb), hi = std::min(end, re);
    if (lo >= hi) continue;
    const TensorRef& t = *per_rank[static_cast<size_t>(r)][group];
    const PtReader& file = *files[static_cast<size_t>(r)];
    char* dst_here = out + (lo - begin) * elem_size;
    // A rank's tensor may stop short of its range: DeepSpeed's stage-1/2
    // files leave the buffer's tail padding out of the last rank's partition
    // (OpenDeepSpeed checked that exactly the padding is missing). Those
    // elements read as the zeros they were trained as.
    const int64_t have = std::min(hi, rb + t.numel());
    if (have < hi) {
      std::memset(out + (std::max(lo, have) - begin) * elem_size, 0,
                  static_cast<size_t>(hi - std::max(lo, have)) * elem_size);
      if (lo >= have) continue;
    }
    const int64_t hi_here = have;
    if (lo == rb && hi_here == re && t.storage_offset == 0 && t.nbytes() == t.storage_nbytes) {
      // The whole record (a load at the saving world size): copy and check
      // its CRC-32 in one pass.
      ZT_RETURN_IF_ERROR(file.Read(t, dst_here, /*verify=*/true));
      verifier_.Checked(file, t);
      continue;
    }
    // A piece: hashed on the way when it continues what was read of the
    // record before (VerifyRead checks the rest).
    ZT_RETURN_IF_ERROR(file.ReadElements(t, lo - rb, hi_here - rb, dst_here));
    const uint64_t at = static_cast<uint64_t>(t.storage_offset + (lo - rb)) * elem_size;
    ZT_RETURN_IF_ERROR(verifier_.Consumed(file, t, at, dst_here, static_cast<uint64_t>(hi_here - lo) * elem_size));
  }
  return absl::OkStatus();
}

absl::StatusOr<const std::vector<std::vector<const TensorRef*>>*> ZeroCheckpoint::Source(
    const std::string& what) const {
  if (what == "master") return &master_;
  auto it = state_.find(what);
  if (it == state_.end()) {
    return absl::NotFoundError(absl::StrCat("checkpoint has no optimizer state '", what, "' (it holds: ",
                                            state_names_.empty() ? "none" : absl::StrJoin(state_names_, ", "), ")"));
  }
  return &it->second;
}

absl::Status ZeroCheckpoint::ReadGroup(size_t group, const std::string& what, int64_t begin, int64_t end,
                                       float* dst) const {
  if (group >= layout_.groups.size()) return absl::OutOfRangeError(absl::StrCat("no trainable group ", group));
  const int64_t padded = layout_.groups[group].padded_numel;
  if (begin < 0 || end > padded || begin > end) {
    return absl::OutOfRangeError(
        absl::StrFormat("group %d has %d elements; asked for [%d, %d)", group, padded, begin, end));
  }
  ZT_ASSIGN_OR_RETURN(const auto* src, Source(what));
  return ReadGroupRange(optim_, *src, group, padded, begin, end, sizeof(float), dst);
}

absl::Status ZeroCheckpoint::ReadFrozenGroup(size_t group, int64_t begin, int64_t end, void* dst) const {
  if (group >= layout_.frozen.size()) return absl::OutOfRangeError(absl::StrCat("no frozen group ", group));
  const int64_t padded = layout_.frozen[group].padded_numel;
  if (begin < 0 || end > padded || begin > end) {
    return absl::OutOfRangeError(
        absl::StrFormat("frozen group %d has %d elements; asked for [%d, %d)", group, padded, begin, end));
  }
  return ReadGroupRange(model_, frozen_, group, padded, begin, end, DTypeSize(layout_.model_dtype), dst);
}

absl::Status ZeroCheckpoint::ReadTrainable(const std::string& name, const std::string& what, int64_t begin, int64_t end,
                                           float* dst) const {
  const auto where = layout_.FindTrainable(name);
  if (!where) return absl::NotFoundError(absl::StrCat("checkpoint has no trainable parameter '", name, "'"));
  const SavedGroup& g = layout_.groups[where->first];
  const SavedParam& p = g.params[where->second];
  if (begin < 0 || end > p.numel || begin > end) {
    return absl::OutOfRangeError(
        absl::StrFormat("'%s' has %d elements; asked for [%d, %d)", name, p.numel, begin, end));
  }
  ZT_ASSIGN_OR_RETURN(const auto* src, Source(what));
  return ReadGroupRange(optim_, *src, where->first, g.padded_numel, p.offset + begin, p.offset + end, sizeof(float),
                        dst);
}

absl::Status ZeroCheckpoint::ReadFrozen(const std::string& name, int64_t begin, int64_t end, void* dst) const {
  const auto where = layout_.FindFrozen(name);
  if (!where) return absl::NotFoundError(absl::StrCat("checkpoint has no frozen parameter '", name, "'"));
  const SavedGroup& g = layout_.frozen[where->first];
  const SavedParam& p = g.params[where->second];
  if (begin < 0 || end > p.numel || begin > end) {
    return absl::OutOfRangeError(
        absl::StrFormat("'%s' has %d elements; asked for [%d, %d)", name, p.numel, begin, end));
  }
  return ReadGroupRange(model_, frozen_, where->first, g.padded_numel, p.offset + begin, p.offset + end,
                        DTypeSize(layout_.model_dtype), dst);
}

const TensorRef* ZeroCheckpoint::ModuleTensor(const std::string& name) const {
  if (!model_[0]->root().is_dict()) return nullptr;
  const Value* m = model_[0]->root().AsDict().Find("module");
  if (m == nullptr || !m->is_dict()) return nullptr;
  const Value* t = m->AsDict().Find(name);
  return t != nullptr && t->is_tensor() ? &t->AsTensor() : nullptr;
}

absl::Status ZeroCheckpoint::ReadModuleTensor(const TensorRef& t, void* dst) const {
  return model_[0]->Read(t, dst, /*verify=*/true);
}

absl::Status ZeroCheckpoint::ReadModuleElements(const TensorRef& t, int64_t begin, int64_t end, void* dst) const {
  const PtReader& file = *model_[0];
  ZT_RETURN_IF_ERROR(file.ReadElements(t, begin, end, dst));
  const uint64_t es = DTypeSize(t.dtype);
  return verifier_.Consumed(file, t, static_cast<uint64_t>(t.storage_offset + begin) * es, dst,
                            static_cast<uint64_t>(end - begin) * es);
}

const TensorRef* ZeroCheckpoint::RngState(int rank, int replica) const {
  if (rank < 0 || rank >= layout_.world_size || replica < 0 || !optim_[static_cast<size_t>(rank)]->root().is_dict()) {
    return nullptr;
  }
  const Value* zt = optim_[static_cast<size_t>(rank)]->root().AsDict().Find("zt");
  if (zt == nullptr || !zt->is_dict()) return nullptr;
  if (replica > 0) {
    const Value* list = zt->AsDict().Find("rng_cpu_replicas");
    if (list == nullptr || !list->is_list() || static_cast<size_t>(replica) > list->AsList().size()) return nullptr;
    const Value& rng = list->AsList()[static_cast<size_t>(replica - 1)];
    return rng.is_tensor() ? &rng.AsTensor() : nullptr;
  }
  const Value* rng = zt->AsDict().Find("rng_cpu");
  return rng != nullptr && rng->is_tensor() ? &rng->AsTensor() : nullptr;
}

absl::Status ZeroCheckpoint::ReadRngState(int rank, std::vector<uint8_t>* out, int replica) const {
  const TensorRef* t = RngState(rank, replica);
  if (t == nullptr) {
    return absl::NotFoundError(absl::StrCat("checkpoint has no RNG state for rank ", rank,
                                            replica > 0 ? absl::StrCat(" replica ", replica) : std::string()));
  }
  out->resize(t->nbytes());
  return optim_[static_cast<size_t>(rank)]->Read(*t, out->data(), /*verify=*/true);
}

absl::Status ZeroCheckpoint::VerifyAll() const {
  for (const auto& m : model_) ZT_RETURN_IF_ERROR(m->VerifyAll());
  for (const auto& o : optim_) ZT_RETURN_IF_ERROR(o->VerifyAll());
  return absl::OkStatus();
}

}  // namespace zt::ckpt
