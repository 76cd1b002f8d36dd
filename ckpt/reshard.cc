// Implementation of ckpt/reshard.h.
#include "ckpt/reshard.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "plan/layout.h"
#include "util/file_io.h"
#include "util/status.h"

namespace zt::ckpt {
namespace {

// Owned bytes behind TensorRefs for one file write.
struct Arena {
  std::vector<std::unique_ptr<std::vector<char>>> blocks;
  TensorRef Make(DType dtype, int64_t numel) {
    blocks.push_back(std::make_unique<std::vector<char>>(static_cast<size_t>(numel) * DTypeSize(dtype)));
    TensorRef t;
    t.dtype = dtype;
    t.shape = {numel};
    t.data = blocks.back()->data();
    return t;
  }
  void* data(const TensorRef& t) { return const_cast<void*>(t.data); }
};

// A copy of `v` whose tensors are read from `file` into `arena`.
absl::StatusOr<Value> Materialize(const Value& v, const ZeroCheckpoint& ck, Arena& arena) {
  if (v.is_tensor()) {
    const TensorRef& t = v.AsTensor();
    TensorRef copy = arena.Make(t.dtype, t.numel());
    copy.shape = t.shape;
    if (t.nbytes() > 0) ZT_RETURN_IF_ERROR(ck.ReadModuleTensor(t, arena.data(copy)));
    return Value(copy);
  }
  if (v.is_dict()) {
    Dict d;
    d.ordered = v.AsDict().ordered;
    for (const auto& [k, x] : v.AsDict().items) {
      ZT_ASSIGN_OR_RETURN(Value m, Materialize(x, ck, arena));
      d.Set(k, std::move(m));
    }
    return Value(std::move(d));
  }
  if (v.is_list() || v.is_tuple()) {
    List l;
    for (const Value& x : v.AsList()) {
      ZT_ASSIGN_OR_RETURN(Value m, Materialize(x, ck, arena));
      l.push_back(std::move(m));
    }
    if (v.is_tuple()) return Value(Value::Tuple{std::move(l)});
    return Value(std::move(l));
  }
  return v;
}

// The checkpoint's layout for `world` ranks.
SavedLayout ResizedLayout(const SavedLayout& old, int world) {
  SavedLayout layout = old;
  layout.world_size = world;
  if (old.rule == PartitionRule::kEven) {
    // Re-padded the way the engine pads for `world` ranks (plan/layout.h).
    for (SavedGroup& g : layout.groups) g.padded_numel = plan::PaddedNumel(g.numel, world);
    for (SavedGroup& g : layout.frozen) g.padded_numel = plan::PaddedNumel(g.numel, world);
  }
  return layout;
}

// The model states' "buffer_names" (empty when absent), copied to every
// new model states file.
std::vector<std::string> BufferNames(const ZeroCheckpoint& ck) {
  const Value* buffers_v = ck.model_states().AsDict().Find("buffer_names");
  std::vector<std::string> buffer_names;
  if (buffers_v != nullptr && (buffers_v->is_list() || buffers_v->is_tuple())) {
    for (const Value& b : buffers_v->AsList()) {
      if (b.is_string()) buffer_names.push_back(b.AsString());
    }
  }
  return buffer_names;
}

// Rank r's shards under the new `layout`, read from the old ranks of `ck`
// into `arena` (which must outlive the returned refs).
class RankShardReader {
 public:
  RankShardReader(const ZeroCheckpoint& ck, const SavedLayout& layout, int r, Arena& arena)
      : ck_(ck), old_(ck.layout()), layout_(layout), r_(r), arena_(arena) {}

  absl::StatusOr<RankShards> Read() {
    RankShards shards;
    for (size_t gi = 0; gi < layout_.groups.size(); ++gi) {
      const auto [b, e] = layout_.Range(layout_.groups[gi].padded_numel, r_);
      TensorRef m = arena_.Make(DType::kFloat32, e - b);
      ZT_RETURN_IF_ERROR(Fill(gi, "master", m));
      shards.master.push_back(m);
      for (const std::string& name : ck_.state_names()) {
        TensorRef s = arena_.Make(DType::kFloat32, e - b);
        ZT_RETURN_IF_ERROR(Fill(gi, name, s));
        shards.state[name].push_back(s);
      }
    }
    for (size_t gi = 0; gi < layout_.frozen.size(); ++gi) {
      const auto [b, e] = layout_.Range(layout_.frozen[gi].padded_numel, r_);
      TensorRef f = arena_.Make(layout_.model_dtype, e - b);
      std::memset(arena_.data(f), 0, static_cast<size_t>(e - b) * DTypeSize(layout_.model_dtype));
      const int64_t hi = std::min(e, old_.frozen[gi].padded_numel);
      if (b < hi) ZT_RETURN_IF_ERROR(ck_.ReadFrozenGroup(gi, b, hi, arena_.data(f)));
      shards.frozen.push_back(f);
    }
    // RNG: rank r continues old rank r's stream (r mod the old world size).
    std::vector<uint8_t> rng;
    if (ck_.ReadRngState(r_ % old_.world_size, &rng).ok()) {
      TensorRef t = arena_.Make(DType::kUInt8, static_cast<int64_t>(rng.size()));
      std::memcpy(arena_.data(t), rng.data(), rng.size());
      shards.rng_cpu = t;
    }
    return shards;
  }

 private:
  // Group gi's range for rank r, read from whichever old ranks hold it;
  // re-padding adds zeros past the old buffer's end.
  absl::Status Fill(size_t gi, const std::string& what, TensorRef& t) {
    const auto [b, e] = layout_.Range(layout_.groups[gi].padded_numel, r_);
    float* dst = static_cast<float*>(arena_.data(t));
    std::fill(dst, dst + (e - b), 0.0f);
    const int64_t hi = std::min(e, old_.groups[gi].padded_numel);
    if (b < hi) ZT_RETURN_IF_ERROR(ck_.ReadGroup(gi, what, b, hi, dst));
    return absl::OkStatus();
  }

  const ZeroCheckpoint& ck_;
  const SavedLayout& old_;
  const SavedLayout& layout_;
  const int r_;
  Arena& arena_;
};

}  // namespace

absl::Status Reshard(const ZeroCheckpoint& ck, const std::string& out_dir, int world) {
  if (world < 1) return absl::InvalidArgumentError(absl::StrCat("--world-size must be at least 1, got ", world));
  const SavedLayout layout = ResizedLayout(ck.layout(), world);
  ZT_RETURN_IF_ERROR(MakeDirs(out_dir));
  const std::string folder = out_dir + "/" + ck.tag();
  ZT_RETURN_IF_ERROR(MakeDirs(folder));

  TrainingState ts = ck.training_state();
  ts.save_id = NewSaveId();  // a new save, whose files agree with each other only
  const Value* module_v = ck.model_states().AsDict().Find("module");
  const std::vector<std::string> buffer_names = BufferNames(ck);
  Arena module_arena;
  Value module = Value(Dict());
  if (module_v != nullptr) {
    ZT_ASSIGN_OR_RETURN(module, Materialize(*module_v, ck, module_arena));
  }
  const Value* client = ck.client_state();

  // Written once, gigabytes at a time: past the page cache (util/direct_io.h).
  PtWriteOptions direct;
  direct.direct_io = true;
  for (int r = 0; r < world; ++r) {
    Arena arena;
    ZT_ASSIGN_OR_RETURN(const RankShards shards, RankShardReader(ck, layout, r, arena).Read());
    ZT_RETURN_IF_ERROR(ck.VerifyRead());  // what this rank's files hold is checked before they are written
    ZT_RETURN_IF_ERROR(WritePtFile(folder + "/" + OptimStatesFile(r, layout.model_dtype),
                                   MakeOptimStates(layout, r, shards, ts), direct));
    if (layout.stage == 3 || r == 0) {
      const Dict empty;
      ZT_RETURN_IF_ERROR(WritePtFile(folder + "/" + ModelStatesFile(layout.stage, r),
                                     MakeModelStates(layout, r, ts, module.is_dict() ? module.AsDict() : empty,
                                                     buffer_names, shards, client ? *client : Value()),
                                     direct));
    }
  }
  return WriteFileAtomically(out_dir + "/latest", ck.tag() + "\n");
}

}  // namespace zt::ckpt
