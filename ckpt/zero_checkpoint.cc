// Implementation of ckpt/zero_checkpoint.h.
#include "ckpt/zero_checkpoint.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <random>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "ckpt/value_fields.h"
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
  if (tag.empty() || tag.find('/') != std::string::npos) {
    return absl::DataLossError(absl::StrCat("'", path, "' does not hold a tag (got '", tag, "')"));
  }
  return tag;
}

absl::StatusOr<std::unique_ptr<ZeroCheckpoint>> ZeroCheckpoint::Open(const std::string& dir, const std::string& tag) {
  std::unique_ptr<ZeroCheckpoint> c(new ZeroCheckpoint());
  c->dir_ = dir;
  if (tag.empty()) {
    ZT_ASSIGN_OR_RETURN(c->tag_, ReadLatestTag(dir));
  } else {
    c->tag_ = tag;
  }
  const std::string folder = JoinPath(dir, c->tag_);

  // Rank 0's model states name the stage and world size; the rest follows.
  std::unique_ptr<PtReader> first;
  std::string first_path;
  int file_stage = 0;
  for (int stage : {0, 3}) {
    first_path = JoinPath(folder, ModelStatesFile(stage, 0));
    auto r = PtReader::Open(first_path);
    if (r.ok()) {
      first = std::move(*r);
      file_stage = stage;
      break;
    }
    if (!absl::IsNotFound(r.status())) return r.status();
  }
  if (first == nullptr) {
    return absl::NotFoundError(absl::StrCat("checkpoint '", folder, "' has no model states file (",
                                            ModelStatesFile(0, 0), " or ", ModelStatesFile(3, 0),
                                            "); is the tag right, and did the save finish?"));
  }
  if (!first->root().is_dict()) return absl::DataLossError(absl::StrCat("'", first_path, "' does not hold a dict"));
  // DeepSpeed's own checkpoints carry its version and no layout of ours.
  if (first->root().AsDict().Find("zt_layout") == nullptr && first->root().AsDict().Find("ds_version") != nullptr) {
    ZT_RETURN_IF_ERROR(c->OpenDeepSpeed(folder, std::move(first), file_stage));
    return c;
  }
  Fields meta(first_path, first->root().AsDict(), "");
  ZT_ASSIGN_OR_RETURN(const Value* layout_v, meta.Get("zt_layout"));
  ZT_ASSIGN_OR_RETURN(c->layout_, SavedLayout::FromValue(*layout_v));
  const SavedLayout& l = c->layout_;
  TrainingState& ts = c->ts_;
  ZT_ASSIGN_OR_RETURN(ts.global_steps, meta.Int("global_steps"));
  ZT_ASSIGN_OR_RETURN(ts.global_samples, meta.Int("global_samples"));
  ZT_ASSIGN_OR_RETURN(ts.skipped_steps, meta.Int("skipped_steps"));
  ZT_ASSIGN_OR_RETURN(ts.micro_steps, meta.Int("micro_steps"));
  ZT_ASSIGN_OR_RETURN(ts.ds_config, meta.Str("ds_config"));
  if (const Value* id = first->root().AsDict().Find("zt_save_id"); id != nullptr && id->is_int()) {
    ts.save_id = id->AsInt();
  }
  c->model_.push_back(std::move(first));
  if (l.stage == 3) {
    for (int r = 1; r < l.world_size; ++r) {
      ZT_ASSIGN_OR_RETURN(auto m, PtReader::Open(JoinPath(folder, ModelStatesFile(3, r))));
      c->model_.push_back(std::move(m));
    }
  }
  for (int r = 0; r < l.world_size; ++r) {
    ZT_ASSIGN_OR_RETURN(auto o, PtReader::Open(JoinPath(folder, OptimStatesFile(r, l.model_dtype))));
    c->optim_.push_back(std::move(o));
  }

  // Every file must come from the save rank 0's model states belong to, and
  // sit under its own rank's name.
  auto same_save = [&](const std::string& path, const Dict& d, const char* rank_key, const char* id_key,
                       int rank) -> absl::Status {
    const Value* id = d.Find(id_key);
    const Value* file_rank = d.Find(rank_key);
    if (ts.save_id != 0 && (id == nullptr || !id->is_int() || id->AsInt() != ts.save_id)) {
      return absl::DataLossError(absl::StrFormat(
          "'%s' belongs to another save than '%s' (save id %s, not %x): the folder mixes files of different "
          "saves (swapped, from another step or another run); restore the files of one save",
          path, c->model_[0]->path(), id != nullptr && id->is_int() ? absl::StrFormat("%x", id->AsInt()) : "none",
          ts.save_id));
    }
    if (file_rank != nullptr && file_rank->is_int() && file_rank->AsInt() != rank) {
      return absl::DataLossError(
          absl::StrFormat("'%s' holds rank %d's state but is named for rank %d: the files were renamed or swapped",
                          path, file_rank->AsInt(), rank));
    }
    return absl::OkStatus();
  };
  for (int r = 0; r < l.world_size; ++r) {
    const PtReader& o = *c->optim_[static_cast<size_t>(r)];
    if (!o.root().is_dict()) return absl::DataLossError(absl::StrCat("'", o.path(), "' does not hold a dict"));
    const Value* zt = o.root().AsDict().Find("zt");
    if (zt != nullptr && zt->is_dict()) ZT_RETURN_IF_ERROR(same_save(o.path(), zt->AsDict(), "rank", "save_id", r));
    if (l.stage == 3) {
      const PtReader& m = *c->model_[static_cast<size_t>(r)];
      if (!m.root().is_dict()) return absl::DataLossError(absl::StrCat("'", m.path(), "' does not hold a dict"));
      ZT_RETURN_IF_ERROR(same_save(m.path(), m.root().AsDict(), "zt_rank", "zt_save_id", r));
    }
  }

  // Per rank: the fp32 master and state tensors of every group.
  const char* master_key = l.stage == 3 ? "fp32_flat_groups" : "single_partition_of_fp32_groups";
  for (int r = 0; r < l.world_size; ++r) {
    const std::string& path = c->optim_[r]->path();
    if (!c->optim_[r]->root().is_dict()) return absl::DataLossError(absl::StrCat("'", path, "' does not hold a dict"));
    Fields root(path, c->optim_[r]->root().AsDict(), "");
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
    ZT_ASSIGN_OR_RETURN(const List* masters, osd.Seq(master_key));
    ZT_ASSIGN_OR_RETURN(auto m, TensorsOf(*masters, l.groups.size(), DType::kFloat32, path, master_key));
    c->master_.push_back(std::move(m));
    ZT_ASSIGN_OR_RETURN(const Dict* base_d, osd.Sub("base_optimizer_state"));
    Fields base(path, *base_d, "optimizer_state_dict.base_optimizer_state");
    ZT_ASSIGN_OR_RETURN(const Dict* state_d, base.Sub("state"));
    std::vector<std::string> names;
    std::map<std::string, std::vector<const TensorRef*>> per_name;
    for (size_t g = 0; g < l.groups.size(); ++g) {
      const Value* gs = state_d->Find(static_cast<int64_t>(g));
      if (gs == nullptr || !gs->is_dict()) {
        return absl::DataLossError(absl::StrFormat("'%s': optimizer state of group %d is missing", path, g));
      }
      std::vector<std::string> here;
      for (const auto& [k, v] : gs->AsDict().items) {
        if (!k.is_string() || !v.is_tensor()) continue;  // "step" and scalars
        const TensorRef& t = v.AsTensor();
        const auto [b, e] = l.Range(l.groups[g].padded_numel, r);
        if (t.dtype != DType::kFloat32 || t.numel() != e - b || !t.contiguous()) {
          return absl::DataLossError(absl::StrFormat("'%s': optimizer state '%s' of group %d is not %d fp32 elements",
                                                     path, k.AsString(), g, e - b));
        }
        here.push_back(k.AsString());
        per_name[k.AsString()].push_back(&t);
      }
      if (g == 0) names = here;
      if (here != names)
        return absl::DataLossError(absl::StrFormat("'%s': groups hold different optimizer states", path));
    }
    if (r == 0) {
      c->state_names_ = names;
      ZT_ASSIGN_OR_RETURN(const Dict* zt_d, root.Sub("zt"));
      Fields zt(path, *zt_d, "zt");
      ZT_ASSIGN_OR_RETURN(ts.optimizer_type, zt.Str("optimizer_type"));
      ZT_ASSIGN_OR_RETURN(ts.optimizer_step, zt.Int("optimizer_step"));
      ZT_ASSIGN_OR_RETURN(const Dict* scaler_d, osd.Sub("loss_scaler"));
      Fields scaler(path, *scaler_d, "optimizer_state_dict.loss_scaler");
      ZT_ASSIGN_OR_RETURN(ts.loss_scale, scaler.Double("cur_scale"));
      ZT_ASSIGN_OR_RETURN(ts.scaler_cur_iter, scaler.Int("cur_iter"));
      ZT_ASSIGN_OR_RETURN(ts.scaler_last_overflow_iter, scaler.Int("last_overflow_iter"));
      ZT_ASSIGN_OR_RETURN(ts.scaler_hysteresis, scaler.Int("cur_hysteresis"));
      ZT_ASSIGN_OR_RETURN(ts.dynamic_loss_scale, osd.Bool("dynamic_loss_scale"));
    } else if (names != c->state_names_) {
      return absl::DataLossError(absl::StrFormat("'%s' holds different optimizer states than rank 0's file", path));
    }
    for (const std::string& n : names) c->state_[n].push_back(per_name[n]);
  }

  if (l.stage == 3) {
    for (int r = 0; r < l.world_size; ++r) {
      const std::string& path = c->model_[r]->path();
      if (!c->model_[r]->root().is_dict())
        return absl::DataLossError(absl::StrCat("'", path, "' does not hold a dict"));
      Fields f(path, c->model_[r]->root().AsDict(), "");
      ZT_ASSIGN_OR_RETURN(const List* frags, f.Seq("frozen_param_fragments"));
      ZT_ASSIGN_OR_RETURN(auto fr, TensorsOf(*frags, l.frozen.size(), l.model_dtype, path, "frozen_param_fragments"));
      c->frozen_.push_back(std::move(fr));
    }
  }
  // Every rank's share of every group must be there, exactly.
  for (int r = 0; r < l.world_size; ++r) {
    for (size_t g = 0; g < l.groups.size(); ++g) {
      const auto [b, e] = l.Range(l.groups[g].padded_numel, r);
      if (c->master_[r][g]->numel() != e - b) {
        return absl::DataLossError(absl::StrFormat("'%s': group %d holds %d elements, the layout gives rank %d %d",
                                                   c->optim_[r]->path(), g, c->master_[r][g]->numel(), r, e - b));
      }
    }
  }
  return c;
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

absl::Status ZeroCheckpoint::VerifyOnce(const PtReader& file, const TensorRef& t) const {
  {
    std::lock_guard<std::mutex> lock(verified_mu_);
    if (verified_.count({file.path(), t.record}) != 0) return absl::OkStatus();
  }
  ZT_RETURN_IF_ERROR(file.VerifyRecord(t.record));
  std::lock_guard<std::mutex> lock(verified_mu_);
  verified_.insert({file.path(), t.record});
  return absl::OkStatus();
}

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
    if (lo == rb && hi == re && t.storage_offset == 0 && t.nbytes() == t.storage_nbytes) {
      // The whole record (a load at the saving world size): copy and check
      // its CRC-32 in one pass.
      ZT_RETURN_IF_ERROR(file.Read(t, dst_here, /*verify=*/true));
      std::lock_guard<std::mutex> lock(verified_mu_);
      verified_.insert({file.path(), t.record});
      continue;
    }
    ZT_RETURN_IF_ERROR(VerifyOnce(file, t));
    ZT_RETURN_IF_ERROR(file.ReadElements(t, lo - rb, hi - rb, dst_here));
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

const TensorRef* ZeroCheckpoint::RngState(int rank) const {
  if (rank < 0 || rank >= layout_.world_size || !optim_[static_cast<size_t>(rank)]->root().is_dict()) return nullptr;
  const Value* zt = optim_[static_cast<size_t>(rank)]->root().AsDict().Find("zt");
  if (zt == nullptr || !zt->is_dict()) return nullptr;
  const Value* rng = zt->AsDict().Find("rng_cpu");
  return rng != nullptr && rng->is_tensor() ? &rng->AsTensor() : nullptr;
}

absl::Status ZeroCheckpoint::ReadRngState(int rank, std::vector<uint8_t>* out) const {
  const TensorRef* t = RngState(rank);
  if (t == nullptr) return absl::NotFoundError(absl::StrCat("checkpoint has no RNG state for rank ", rank));
  out->resize(t->nbytes());
  return optim_[static_cast<size_t>(rank)]->Read(*t, out->data(), /*verify=*/true);
}

absl::Status ZeroCheckpoint::VerifyAll() const {
  for (const auto& m : model_) ZT_RETURN_IF_ERROR(m->VerifyAll());
  for (const auto& o : optim_) ZT_RETURN_IF_ERROR(o->VerifyAll());
  return absl::OkStatus();
}

}  // namespace zt::ckpt
