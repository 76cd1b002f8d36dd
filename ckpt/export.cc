// Implementation of ckpt/export.h.
#include "ckpt/export.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ckpt/format/dtype_convert.h"
#include "ckpt/format/safetensors.h"
#include "config/lora_options.h"
#include "util/file_io.h"
#include "util/read_ahead.h"
#include "util/status.h"

namespace zt::ckpt {
namespace {

// The dtype a tensor saved as `source` is written in: floating point ones in
// the export dtype, integer ones (buffers) as they are.
DType OutputDType(DType source, const ExportOptions& options) { return IsFloating(source) ? options.dtype : source; }

using Item = ExportTensor;

// Trainable parameter `p`'s fp32 master, written as `entry_name` (its own
// name, or a tied alias of it).
Item MasterItem(const ZeroCheckpoint& ck, const std::string& entry_name, const SavedParam& p,
                const ExportOptions& options) {
  Item it;
  it.entry = {entry_name, OutputDType(DType::kFloat32, options), p.shape};
  it.numel = p.numel;
  it.read = [&ck, name = p.name](int64_t b, int64_t e, void* dst) {
    return ck.ReadTrainable(name, "master", b, e, static_cast<float*>(dst));
  };
  return it;
}

// Frozen (stage 3) parameter `p`, in the model dtype, written as `entry_name`.
Item FrozenItem(const ZeroCheckpoint& ck, const std::string& entry_name, const SavedParam& p,
                const ExportOptions& options) {
  const DType model_dtype = ck.layout().model_dtype;
  Item it;
  it.entry = {entry_name, OutputDType(model_dtype, options), p.shape};
  it.source = model_dtype;
  it.numel = p.numel;
  it.read = [&ck, name = p.name](int64_t b, int64_t e, void* dst) { return ck.ReadFrozen(name, b, e, dst); };
  return it;
}

// Every trainable parameter, then every frozen one, in layout order.
std::vector<Item> ParameterItems(const ZeroCheckpoint& ck, const ExportOptions& options) {
  const SavedLayout& l = ck.layout();
  std::vector<Item> items;
  for (const SavedGroup& g : l.groups) {
    for (const SavedParam& p : g.params) items.push_back(MasterItem(ck, p.name, p, options));
  }
  for (const SavedGroup& g : l.frozen) {
    for (const SavedParam& p : g.params) items.push_back(FrozenItem(ck, p.name, p, options));
  }
  return items;
}

// Whether the model states list `name` among the buffers.
bool IsBuffer(const ZeroCheckpoint& ck, const std::string& name) {
  const Value* bn = ck.model_states().AsDict().Find("buffer_names");
  bool is_buffer = false;
  if (bn != nullptr && (bn->is_list() || bn->is_tuple())) {
    for (const Value& b : bn->AsList()) is_buffer = is_buffer || (b.is_string() && b.AsString() == name);
  }
  return is_buffer;
}

// Module entries that are neither trainable masters nor frozen fragments nor
// tied aliases: buffers (unless left out), and at stages 0-2 frozen
// parameters (saved whole in `module`). Each must be contiguous.
absl::Status AddModuleItems(const ZeroCheckpoint& ck, const ExportOptions& options, std::vector<Item>* items) {
  const SavedLayout& l = ck.layout();
  const Value* module = ck.model_states().is_dict() ? ck.model_states().AsDict().Find("module") : nullptr;
  if (module == nullptr || !module->is_dict()) return absl::OkStatus();
  for (const auto& [k, v] : module->AsDict().items) {
    if (!k.is_string() || !v.is_tensor()) continue;
    const std::string& name = k.AsString();
    if (l.FindTrainable(name) || l.FindFrozen(name) || l.shared.count(name)) continue;
    if (!options.include_buffers && IsBuffer(ck, name)) continue;
    const TensorRef& t = v.AsTensor();
    if (!t.contiguous()) return absl::DataLossError(absl::StrCat("module entry '", name, "' is not contiguous"));
    Item it;
    it.entry = {name, OutputDType(t.dtype, options), t.shape};
    it.source = t.dtype;
    it.numel = t.numel();
    // Streamed chunk by chunk like the parameters (hashed on the way;
    // VerifyRead before each file is published completes the check).
    it.read = [&ck, &t](int64_t b, int64_t e, void* dst) { return ck.ReadModuleElements(t, b, e, dst); };
    items->push_back(std::move(it));
  }
  return absl::OkStatus();
}

// Tied aliases as tensors of their own (DeepSpeed's zero_to_fp32 writes them
// so), each a copy of the parameter it names. An alias of a module entry (a
// buffer) gets none: that entry is written under its own name.
void AddTiedCopies(const ZeroCheckpoint& ck, const ExportOptions& options, std::vector<Item>* items) {
  const SavedLayout& l = ck.layout();
  for (const auto& [alias, name] : l.shared) {
    if (const auto where = l.FindTrainable(name)) {
      items->push_back(MasterItem(ck, alias, l.groups[where->first].params[where->second], options));
    } else if (const auto fwhere = l.FindFrozen(name)) {
      items->push_back(FrozenItem(ck, alias, l.frozen[fwhere->first].params[fwhere->second], options));
    }
  }
}

// An adapted weight's merged elements: base + scaling * (B A)[element],
// where A is [r, in] and B [out, r], both read whole (they are small) on
// first use. The weight is [out, in], or [in, out] with fan_in_fan_out.
class MergedWeight {
 public:
  MergedWeight(Item base, Item a, Item b, const ExportOptions& options)
      : base_(std::move(base)), a_(std::move(a)), b_(std::move(b)), options_(options) {}

  absl::Status Validate() const {
    const auto& ws = base_.entry.shape;
    const auto& as = a_.entry.shape;
    const auto& bs = b_.entry.shape;
    const bool ok =
        ws.size() == 2 && as.size() == 2 && bs.size() == 2 && as[0] == bs[1] &&
        (options_.lora_fan_in_fan_out ? (ws[0] == as[1] && ws[1] == bs[0]) : (ws[0] == bs[0] && ws[1] == as[1]));
    if (!ok) {
      return absl::InvalidArgumentError(
          absl::StrCat("cannot merge LoRA into '", base_.entry.name, "': its shape [", absl::StrJoin(ws, ", "),
                       "] does not fit A [", absl::StrJoin(as, ", "), "] and B [", absl::StrJoin(bs, ", "),
                       "] (fan_in_fan_out ", options_.lora_fan_in_fan_out ? "true" : "false", ")"));
    }
    return absl::OkStatus();
  }

  // Elements [b, e) of the merged weight, as float32.
  absl::Status Read(int64_t begin, int64_t end, float* dst) {
    std::call_once(loaded_, [this] { load_status_ = Load(); });
    ZT_RETURN_IF_ERROR(load_status_);
    std::vector<char> raw(static_cast<size_t>(end - begin) * DTypeSize(base_.source));
    ZT_RETURN_IF_ERROR(base_.read(begin, end, raw.data()));
    ZT_RETURN_IF_ERROR(
        ConvertElements(base_.source, raw.data(), DType::kFloat32, dst, static_cast<size_t>(end - begin)));
    const int64_t r = a_.entry.shape[0], in = a_.entry.shape[1];
    const int64_t cols = base_.entry.shape[1];
    const float s = static_cast<float>(options_.lora_scaling);
    for (int64_t i = begin; i < end; ++i) {
      const int64_t row = i / cols, col = i % cols;
      const int64_t o = options_.lora_fan_in_fan_out ? col : row, c = options_.lora_fan_in_fan_out ? row : col;
      float acc = 0.f;
      for (int64_t k = 0; k < r; ++k)
        acc += b_values_[static_cast<size_t>(o * r + k)] * a_values_[static_cast<size_t>(k * in + c)];
      dst[i - begin] += s * acc;
    }
    return absl::OkStatus();
  }

 private:
  absl::Status LoadWhole(const Item& it, std::vector<float>* out) {
    std::vector<char> raw(static_cast<size_t>(it.numel) * DTypeSize(it.source));
    ZT_RETURN_IF_ERROR(it.read(0, it.numel, raw.data()));
    out->resize(static_cast<size_t>(it.numel));
    return ConvertElements(it.source, raw.data(), DType::kFloat32, out->data(), out->size());
  }
  absl::Status Load() {
    ZT_RETURN_IF_ERROR(LoadWhole(a_, &a_values_));
    return LoadWhole(b_, &b_values_);
  }

  Item base_, a_, b_;
  const ExportOptions& options_;
  std::once_flag loaded_;
  absl::Status load_status_;
  std::vector<float> a_values_, b_values_;
};

// Applies options.lora to the items: adapters merged into their weights,
// kept alone under PEFT's names, or left as saved.
absl::Status ApplyLoraExport(const ExportOptions& options, std::vector<Item>* items) {
  if (options.lora == LoraExport::kAsSaved) return absl::OkStatus();
  std::vector<Item> adapters, rest;
  LoraOptions saved;
  saved.modules_to_save = options.lora_modules_to_save;
  for (Item& it : *items) {
    const bool with_adapter = IsLoraParameterName(it.entry.name) || (options.lora == LoraExport::kAdapterOnly &&
                                                                     IsLoraSavedModuleParameter(saved, it.entry.name));
    (with_adapter ? adapters : rest).push_back(std::move(it));
  }
  if (adapters.empty()) {
    return absl::InvalidArgumentError(
        "the checkpoint has no LoRA adapters (no parameter under a lora_A or lora_B layer); export it without a "
        "LoRA mode");
  }
  if (options.lora == LoraExport::kAdapterOnly) {
    // Modules to save keep their own names under the prefix, as PEFT's
    // get_peft_model_state_dict writes them.
    for (Item& it : adapters) it.entry.name = "base_model.model." + it.entry.name;
    *items = std::move(adapters);
    return absl::OkStatus();
  }
  if (!(options.lora_scaling > 0)) {
    return absl::InvalidArgumentError("merging LoRA adapters needs their scaling alpha / r (> 0)");
  }
  // <layer> -> its A and B.
  std::map<std::string, std::pair<const Item*, const Item*>> pairs;
  for (const Item& it : adapters) {
    const std::string& n = it.entry.name;
    const bool is_a = absl::EndsWith(n, ".lora_A.weight"), is_b = absl::EndsWith(n, ".lora_B.weight");
    if (!is_a && !is_b) {
      return absl::InvalidArgumentError(absl::StrCat("LoRA parameter '", n,
                                                     "' is neither <layer>.lora_A.weight nor "
                                                     "<layer>.lora_B.weight; it cannot be merged"));
    }
    auto& pair = pairs[n.substr(0, n.size() - std::string(".lora_A.weight").size())];
    (is_a ? pair.first : pair.second) = &it;
  }
  for (auto& [layer, ab] : pairs) {
    if (ab.first == nullptr || ab.second == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("layer '", layer, "' has lora_", ab.first ? "A" : "B",
                                                     " but not lora_", ab.first ? "B" : "A", "; it cannot be merged"));
    }
    const std::string weight = layer + ".weight";  // (a structured binding cannot be captured in C++17)
    auto base = std::find_if(rest.begin(), rest.end(), [&](const Item& it) { return it.entry.name == weight; });
    if (base == rest.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("LoRA layer '", layer, "' has no ", layer, ".weight to merge into"));
    }
    auto merged = std::make_shared<MergedWeight>(*base, *ab.first, *ab.second, options);
    ZT_RETURN_IF_ERROR(merged->Validate());
    base->source = DType::kFloat32;
    base->read = [merged](int64_t b, int64_t e, void* dst) { return merged->Read(b, e, static_cast<float*>(dst)); };
  }
  *items = std::move(rest);
  return absl::OkStatus();
}

// Where the files go: `out` itself when it names a .safetensors file (one
// shard), else the directory `out` (created) with the entries split into
// shards of at most max_shard_bytes.
struct OutputPlan {
  std::string dir;
  ShardPlan shards;
};

absl::StatusOr<OutputPlan> PlanOutput(const std::string& out, const std::vector<SafetensorsEntry>& entries,
                                      const ExportOptions& options) {
  OutputPlan plan;
  plan.dir = out;
  if (absl::EndsWith(out, ".safetensors")) {
    plan.shards.shards.push_back({out.substr(out.find_last_of('/') + 1), entries});
    plan.dir = out.find('/') == std::string::npos ? "." : out.substr(0, out.find_last_of('/'));
  } else {
    ZT_RETURN_IF_ERROR(MakeDirs(out));
    plan.shards = PlanShards(entries, options.max_shard_bytes);
  }
  return plan;
}

// After a folder export: weights a previous export left there that the new
// one does not replace (model.safetensors after a sharded export, shards
// and an index after a single file, shards beyond the new count), so that
// transformers' from_pretrained(dir) cannot pick up an old file.
absl::Status RemoveStaleWeights(const std::string& dir, const ShardPlan& plan) {
  std::set<std::string> now;
  for (const ShardPlan::Shard& sh : plan.shards) now.insert(sh.file);
  if (plan.needs_index()) now.insert("model.safetensors.index.json");
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    const bool weights =
        name == "model.safetensors" || name == "model.safetensors.index.json" ||
        (absl::StartsWith(name, "model-") && absl::EndsWith(name, ".safetensors") && absl::StrContains(name, "-of-"));
    if (!weights || now.count(name) > 0) continue;
    if (!std::filesystem::remove(entry.path(), ec) || ec) {
      return absl::InternalError(
          absl::StrCat("removing the earlier export's '", entry.path().string(), "' failed: ", ec.message()));
    }
  }
  return absl::OkStatus();
}

// Every file's metadata: the format, where the weights came from, and the
// tied aliases ("alias=name,...") when there are any.
std::map<std::string, std::string> ExportMetadata(const ZeroCheckpoint& ck, const ExportOptions& options) {
  std::map<std::string, std::string> metadata = {{"format", "pt"},
                                                 {"zt_checkpoint_tag", ck.tag()},
                                                 {"zt_global_steps", std::to_string(ck.training_state().global_steps)}};
  if (!ck.layout().shared.empty() && options.lora != LoraExport::kAdapterOnly) {
    std::vector<std::string> tied;
    for (const auto& [alias, name] : ck.layout().shared) tied.push_back(alias + "=" + name);
    metadata["zt_tied"] = absl::StrJoin(tied, ",");
  }
  return metadata;
}

// Every item's chunks of options.chunk_elements in file order, read in
// their source dtype and converted on a reader thread (util/read_ahead.h)
// while the chunks before them are hashed and written: reading and writing
// keep the disk and both cores busy instead of taking turns. The lead is
// two fp32 chunks' bytes (four chunks of a 16-bit export), so memory stays
// at a few chunks.
class ChunkStream {
 public:
  ChunkStream(const std::vector<Item>& items, const ExportOptions& options)
      : stream_(Pieces(items, options), kLeadChunks * static_cast<size_t>(options.chunk_elements) * sizeof(float)) {}

  // Item `item`'s next chunk, converted (valid until the next call). Items
  // must be asked for in order, each for all of its chunks.
  absl::StatusOr<absl::Span<const char>> Next(size_t item) {
    if (next_ >= owners_.size() || owners_[next_] != item) {
      return absl::InternalError("export asked for chunks out of order");
    }
    ++next_;
    return stream_.Next();
  }

 private:
  static constexpr size_t kLeadChunks = 2;

  std::vector<ReadAhead::Piece> Pieces(const std::vector<Item>& items, const ExportOptions& options) {
    std::vector<ReadAhead::Piece> pieces;
    for (size_t i = 0; i < items.size(); ++i) {
      const Item& it = items[i];
      for (int64_t b = 0; b < it.numel; b += options.chunk_elements) {
        const int64_t e = std::min(it.numel, b + options.chunk_elements);
        const size_t n = static_cast<size_t>(e - b);
        owners_.push_back(i);
        // The reader thread runs one piece at a time, so one conversion
        // scratch serves them all.
        pieces.push_back({n * DTypeSize(it.entry.dtype), [&it, b, e, n, scratch = &scratch_](char* dst) {
                            // Same dtype: straight into the output buffer, no conversion copy.
                            if (it.source == it.entry.dtype) return it.read(b, e, dst);
                            scratch->resize(n * DTypeSize(it.source));
                            ZT_RETURN_IF_ERROR(it.read(b, e, scratch->data()));
                            return ConvertElements(it.source, scratch->data(), it.entry.dtype, dst, n);
                          }});
      }
    }
    return pieces;
  }

  std::vector<size_t> owners_;  // each chunk's item
  size_t next_ = 0;
  std::vector<char> scratch_;
  ReadAhead stream_;  // declared last: its reader stops before the rest goes
};

// Streams one item into `writer`, chunk by chunk.
absl::Status WriteItem(const Item& it, size_t index, ChunkStream& stream, SafetensorsWriter* writer,
                       const ExportOptions& options) {
  for (int64_t b = 0; b < it.numel; b += options.chunk_elements) {
    ZT_ASSIGN_OR_RETURN(absl::Span<const char> bytes, stream.Next(index));
    ZT_RETURN_IF_ERROR(writer->Write(bytes.data(), bytes.size()));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<ExportTensor>> ExportTensors(const ZeroCheckpoint& ck, const ExportOptions& options) {
  std::vector<Item> items = ParameterItems(ck, options);
  ZT_RETURN_IF_ERROR(AddModuleItems(ck, options, &items));
  // By default tied aliases are named in the metadata only.
  if (options.tied_copies) AddTiedCopies(ck, options, &items);
  ZT_RETURN_IF_ERROR(ApplyLoraExport(options, &items));
  return items;
}

absl::Status ExportTensor::ReadAs(int64_t begin, int64_t end, void* dst) const {
  if (source == entry.dtype) return read(begin, end, dst);
  const size_t n = static_cast<size_t>(end - begin);
  std::vector<char> raw(n * DTypeSize(source));
  ZT_RETURN_IF_ERROR(read(begin, end, raw.data()));
  return ConvertElements(source, raw.data(), entry.dtype, dst, n);
}

absl::StatusOr<ExportResult> ExportSafetensors(const ZeroCheckpoint& ck, const std::string& out,
                                               const ExportOptions& options) {
  if (!IsFloating(options.dtype)) {
    return absl::InvalidArgumentError(
        absl::StrCat("export dtype must be floating point, not ", std::string(DTypeName(options.dtype))));
  }
  if (options.chunk_elements < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("export chunk_elements must be positive, got ", options.chunk_elements));
  }
  ZT_ASSIGN_OR_RETURN(std::vector<Item> items, ExportTensors(ck, options));

  std::vector<SafetensorsEntry> entries;
  for (const Item& it : items) entries.push_back(it.entry);
  ZT_ASSIGN_OR_RETURN(const OutputPlan plan, PlanOutput(out, entries, options));
  const std::map<std::string, std::string> metadata = ExportMetadata(ck, options);

  // The plan keeps the items' order: shard after shard, entry after entry.
  ExportResult result;
  ChunkStream stream(items, options);
  size_t next = 0;
  for (const ShardPlan::Shard& shard : plan.shards.shards) {
    const std::string path = plan.dir + "/" + shard.file;
    ZT_ASSIGN_OR_RETURN(auto writer,
                        SafetensorsWriter::Create(path, shard.entries, metadata,
                                                  AtomicFileOptions{options.direct_io ? kStreamingDirectAfter : 0}));
    for (size_t k = 0; k < shard.entries.size(); ++k, ++next) {
      ZT_RETURN_IF_ERROR(WriteItem(items[next], next, stream, writer.get(), options));
      result.bytes += items[next].entry.nbytes();
      ++result.tensors;
    }
    // The pieces read so far are checked before the file is renamed into place.
    ZT_RETURN_IF_ERROR(ck.VerifyRead());
    ZT_RETURN_IF_ERROR(writer->Finish());
    result.files.push_back(path);
  }
  if (plan.shards.needs_index()) {
    ZT_RETURN_IF_ERROR(WriteIndex(plan.dir, plan.shards));
    result.files.push_back(plan.dir + "/model.safetensors.index.json");
  }
  if (!absl::EndsWith(out, ".safetensors")) ZT_RETURN_IF_ERROR(RemoveStaleWeights(plan.dir, plan.shards));
  return result;
}

}  // namespace zt::ckpt
