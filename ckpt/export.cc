// Implementation of ckpt/export.h.
#include "ckpt/export.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <functional>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ckpt/convert.h"
#include "ckpt/safetensors.h"
#include "util/file_io.h"
#include "util/status.h"

namespace zt::ckpt {
namespace {

bool IsFloating(DType d) {
  return d == DType::kFloat32 || d == DType::kFloat64 || d == DType::kFloat16 || d == DType::kBFloat16;
}

// One tensor to export: its entry and how to produce elements [b, e) in its
// source dtype.
struct Item {
  SafetensorsEntry entry;
  DType source = DType::kFloat32;
  int64_t numel = 0;
  std::function<absl::Status(int64_t b, int64_t e, void* dst)> read;
};

}  // namespace

absl::StatusOr<ExportResult> ExportSafetensors(const ZeroCheckpoint& ck, const std::string& out,
                                               const ExportOptions& options) {
  if (!IsFloating(options.dtype)) {
    return absl::InvalidArgumentError(
        absl::StrCat("export dtype must be floating point, not ", std::string(DTypeName(options.dtype))));
  }
  const SavedLayout& l = ck.layout();
  std::vector<Item> items;
  auto out_dtype = [&](DType source) { return IsFloating(source) ? options.dtype : source; };
  for (const SavedGroup& g : l.groups) {
    for (const SavedParam& p : g.params) {
      Item it;
      it.entry = {p.name, out_dtype(DType::kFloat32), p.shape};
      it.numel = p.numel;
      it.read = [&ck, name = p.name](int64_t b, int64_t e, void* dst) {
        return ck.ReadTrainable(name, "master", b, e, static_cast<float*>(dst));
      };
      items.push_back(std::move(it));
    }
  }
  std::vector<std::string> frozen_names;
  for (const SavedGroup& g : l.frozen) {
    for (const SavedParam& p : g.params) {
      Item it;
      it.entry = {p.name, out_dtype(l.model_dtype), p.shape};
      it.source = l.model_dtype;
      it.numel = p.numel;
      it.read = [&ck, name = p.name](int64_t b, int64_t e, void* dst) { return ck.ReadFrozen(name, b, e, dst); };
      items.push_back(std::move(it));
      frozen_names.push_back(p.name);
    }
  }
  // Module entries that are neither trainable masters nor frozen fragments:
  // buffers, and at stages 0-2 frozen parameters (saved whole in `module`).
  const Value* module = ck.model_states().is_dict() ? ck.model_states().AsDict().Find("module") : nullptr;
  if (module != nullptr && module->is_dict()) {
    const Value* bn = ck.model_states().AsDict().Find("buffer_names");
    for (const auto& [k, v] : module->AsDict().items) {
      if (!k.is_string() || !v.is_tensor()) continue;
      const std::string& name = k.AsString();
      if (l.FindTrainable(name) || l.FindFrozen(name) || l.shared.count(name)) continue;
      bool is_buffer = false;
      if (bn != nullptr && (bn->is_list() || bn->is_tuple())) {
        for (const Value& b : bn->AsList()) is_buffer = is_buffer || (b.is_string() && b.AsString() == name);
      }
      if (is_buffer && !options.include_buffers) continue;
      const TensorRef& t = v.AsTensor();
      if (!t.contiguous()) return absl::DataLossError(absl::StrCat("module entry '", name, "' is not contiguous"));
      Item it;
      it.entry = {name, out_dtype(t.dtype), t.shape};
      it.source = t.dtype;
      it.numel = t.numel();
      // Module tensors are small next to the parameters: read whole, once.
      auto cache = std::make_shared<std::vector<char>>();
      it.read = [&ck, &t, cache](int64_t b, int64_t e, void* dst) -> absl::Status {
        if (cache->empty() && t.nbytes() > 0) {
          cache->resize(t.nbytes());
          ZT_RETURN_IF_ERROR(ck.ReadModuleTensor(t, cache->data()));
        }
        const size_t es = DTypeSize(t.dtype);
        std::memcpy(dst, cache->data() + b * es, static_cast<size_t>(e - b) * es);
        return absl::OkStatus();
      };
      items.push_back(std::move(it));
    }
  }

  // Tied aliases as tensors of their own (DeepSpeed's zero_to_fp32 writes
  // them so); by default they are named in the metadata only.
  if (options.tied_copies) {
    for (const auto& [alias, name] : l.shared) {
      Item it;
      if (const auto where = l.FindTrainable(name)) {
        const SavedParam& p = l.groups[where->first].params[where->second];
        it.entry = {alias, out_dtype(DType::kFloat32), p.shape};
        it.numel = p.numel;
        it.read = [&ck, name = name](int64_t b, int64_t e, void* dst) {
          return ck.ReadTrainable(name, "master", b, e, static_cast<float*>(dst));
        };
      } else if (const auto fwhere = l.FindFrozen(name)) {
        const SavedParam& p = l.frozen[fwhere->first].params[fwhere->second];
        it.entry = {alias, out_dtype(l.model_dtype), p.shape};
        it.source = l.model_dtype;
        it.numel = p.numel;
        it.read = [&ck, name = name](int64_t b, int64_t e, void* dst) { return ck.ReadFrozen(name, b, e, dst); };
      } else {
        continue;  // tied to a module entry (a buffer): written under its own name above
      }
      items.push_back(std::move(it));
    }
  }

  std::vector<SafetensorsEntry> entries;
  for (const Item& it : items) entries.push_back(it.entry);
  const bool single_file = absl::EndsWith(out, ".safetensors");
  std::string dir = out;
  ShardPlan plan;
  if (single_file) {
    plan.shards.push_back({out.substr(out.find_last_of('/') + 1), entries});
    dir = out.find('/') == std::string::npos ? "." : out.substr(0, out.find_last_of('/'));
  } else {
    ZT_RETURN_IF_ERROR(MakeDirs(out));
    plan = PlanShards(entries, options.max_shard_bytes);
  }
  std::map<std::string, std::string> metadata = {{"format", "pt"},
                                                 {"zt_checkpoint_tag", ck.tag()},
                                                 {"zt_global_steps", std::to_string(ck.training_state().global_steps)}};
  if (!l.shared.empty()) {
    std::vector<std::string> tied;
    for (const auto& [alias, name] : l.shared) tied.push_back(alias + "=" + name);
    metadata["zt_tied"] = absl::StrJoin(tied, ",");
  }

  ExportResult result;
  std::vector<char> src, dst;
  size_t next = 0;
  for (const ShardPlan::Shard& shard : plan.shards) {
    const std::string path = dir + "/" + shard.file;
    ZT_ASSIGN_OR_RETURN(auto writer, SafetensorsWriter::Create(path, shard.entries, metadata));
    for (size_t k = 0; k < shard.entries.size(); ++k, ++next) {
      const Item& it = items[next];
      const size_t in_size = DTypeSize(it.source), out_size = DTypeSize(it.entry.dtype);
      for (int64_t b = 0; b < it.numel; b += options.chunk_elements) {
        const int64_t e = std::min(it.numel, b + options.chunk_elements);
        const size_t n = static_cast<size_t>(e - b);
        src.resize(n * in_size);
        dst.resize(n * out_size);
        ZT_RETURN_IF_ERROR(it.read(b, e, src.data()));
        ZT_RETURN_IF_ERROR(ConvertElements(it.source, src.data(), it.entry.dtype, dst.data(), n));
        ZT_RETURN_IF_ERROR(writer->Write(dst.data(), n * out_size));
      }
      result.bytes += it.entry.nbytes();
      ++result.tensors;
    }
    ZT_RETURN_IF_ERROR(writer->Finish());
    result.files.push_back(path);
  }
  if (plan.needs_index()) {
    ZT_RETURN_IF_ERROR(WriteIndex(dir, plan));
    result.files.push_back(dir + "/model.safetensors.index.json");
  }
  return result;
}

}  // namespace zt::ckpt
