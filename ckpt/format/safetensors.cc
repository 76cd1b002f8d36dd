// safetensors: the streaming writer, shard planning and the index, the
// strict reader and the multi-file model view. Headers are checked the way
// the reference implementation checks them (known dtypes, sizes that match
// shapes, offsets that tile the data area exactly), with messages that say
// which tensor and which field is wrong.
#include "ckpt/format/safetensors.h"

#include <sys/stat.h>

#include <algorithm>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"
#include "util/file_io.h"
#include "util/json_reader.h"
#include "util/limits.h"
#include "util/status.h"
#include "util/strings.h"

namespace zt::ckpt {
namespace {

using Json = nlohmann::ordered_json;  // keeps the header's order

constexpr uint64_t kMaxHeaderBytes = 100u << 20;  // the reference implementation's limit

// numel * element size, or an error when a dimension is negative or the product overflows.
absl::StatusOr<uint64_t> CheckedBytes(DType dtype, const std::vector<int64_t>& shape) {
  uint64_t n = DTypeSize(dtype);
  for (int64_t d : shape) {
    if (d < 0) return absl::InvalidArgumentError(absl::StrCat("negative dimension in shape ", ShapeText(shape)));
    if (d != 0 && n > (uint64_t{1} << 62) / static_cast<uint64_t>(d)) {
      return absl::InvalidArgumentError(absl::StrCat("shape ", ShapeText(shape), " is too large"));
    }
    n *= static_cast<uint64_t>(d);
  }
  return n;
}

std::string Dir(const std::string& path) {
  size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

}  // namespace

uint64_t SafetensorsEntry::nbytes() const {
  uint64_t n = DTypeSize(dtype);
  for (int64_t d : shape) n *= static_cast<uint64_t>(d);
  return n;
}

// ------------------------------------------------------------------- writer

absl::StatusOr<std::unique_ptr<SafetensorsWriter>> SafetensorsWriter::Create(
    const std::string& path, std::vector<SafetensorsEntry> entries, const std::map<std::string, std::string>& metadata,
    const AtomicFileOptions& file_options) {
  auto where = [&](const std::string& name) {
    return absl::StrCat("safetensors file '", path, "', tensor '", name, "'");
  };
  Json header = Json::object();
  if (!metadata.empty()) {
    Json m = Json::object();
    for (const auto& [k, v] : metadata) m[k] = v;
    header["__metadata__"] = std::move(m);
  }
  uint64_t offset = 0;
  for (const SafetensorsEntry& e : entries) {
    if (e.name.empty() || e.name == "__metadata__") {
      return absl::InvalidArgumentError(absl::StrCat(where(e.name), ": not a valid tensor name"));
    }
    if (header.contains(e.name)) return absl::InvalidArgumentError(absl::StrCat(where(e.name), ": declared twice"));
    auto bytes = CheckedBytes(e.dtype, e.shape);
    if (!bytes.ok()) return absl::InvalidArgumentError(absl::StrCat(where(e.name), ": ", bytes.status().message()));
    header[e.name] = Json{{"dtype", std::string(SafetensorsName(e.dtype))},
                          {"shape", e.shape},
                          {"data_offsets", {offset, offset + *bytes}}};
    offset += *bytes;
  }
  std::string text = header.dump();
  // Pad with spaces so the data area starts 8-byte aligned (as the reference writer does).
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string prefix(8, '\0');
  for (int i = 0; i < 8; ++i) prefix[i] = static_cast<char>((static_cast<uint64_t>(text.size()) >> (8 * i)) & 0xFF);

  ZT_ASSIGN_OR_RETURN(AtomicFile file, AtomicFile::Create(path, file_options));
  ZT_RETURN_IF_ERROR(file.Append(prefix.data(), prefix.size()));
  ZT_RETURN_IF_ERROR(file.Append(text.data(), text.size()));
  std::unique_ptr<SafetensorsWriter> w(new SafetensorsWriter());
  w->file_ = std::make_unique<AtomicFile>(std::move(file));
  w->entries_ = std::move(entries);
  while (w->current_ < w->entries_.size() && w->entries_[w->current_].nbytes() == 0) ++w->current_;
  return w;
}

absl::Status SafetensorsWriter::Write(const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    if (current_ >= entries_.size()) {
      return absl::FailedPreconditionError(
          absl::StrCat("safetensors file '", file_->path(), "': ", n, " bytes written past the last declared tensor"));
    }
    const uint64_t room = entries_[current_].nbytes() - written_in_current_;
    const size_t take = static_cast<size_t>(std::min<uint64_t>(room, n));
    ZT_RETURN_IF_ERROR(file_->Append(p, take));
    p += take;
    n -= take;
    written_in_current_ += take;
    if (written_in_current_ == entries_[current_].nbytes()) {
      written_in_current_ = 0;
      ++current_;
      while (current_ < entries_.size() && entries_[current_].nbytes() == 0) ++current_;
    }
  }
  return absl::OkStatus();
}

absl::Status SafetensorsWriter::Finish() {
  if (current_ < entries_.size()) {
    const SafetensorsEntry& e = entries_[current_];
    return absl::FailedPreconditionError(absl::StrCat("safetensors file '", file_->path(), "': tensor '", e.name,
                                                      "' got ", written_in_current_, " of its ", e.nbytes(), " bytes (",
                                                      entries_.size() - current_,
                                                      " tensors incomplete); write every declared tensor "
                                                      "before Finish"));
  }
  return file_->Commit();
}

// ----------------------------------------------------------- shards, index

ShardPlan PlanShards(const std::vector<SafetensorsEntry>& entries, uint64_t max_shard_bytes, const std::string& stem) {
  ShardPlan plan;
  uint64_t bytes = 0;
  for (const SafetensorsEntry& e : entries) {
    if (plan.shards.empty() || (!plan.shards.back().entries.empty() && bytes + e.nbytes() > max_shard_bytes)) {
      plan.shards.emplace_back();
      bytes = 0;
    }
    plan.shards.back().entries.push_back(e);
    bytes += e.nbytes();
  }
  if (plan.shards.empty()) plan.shards.emplace_back();  // an empty model is still one (empty) file
  const size_t n = plan.shards.size();
  for (size_t i = 0; i < n; ++i) {
    plan.shards[i].file =
        n == 1 ? absl::StrCat(stem, ".safetensors") : absl::StrFormat("%s-%05d-of-%05d.safetensors", stem, i + 1, n);
  }
  return plan;
}

absl::Status WriteIndex(const std::string& dir, const ShardPlan& plan, const std::string& stem) {
  uint64_t total = 0;
  std::map<std::string, std::string> weight_map;  // sorted, as transformers writes it
  for (const ShardPlan::Shard& shard : plan.shards) {
    for (const SafetensorsEntry& e : shard.entries) {
      total += e.nbytes();
      weight_map[e.name] = shard.file;
    }
  }
  Json index = {{"metadata", {{"total_size", total}}}, {"weight_map", Json::object()}};
  for (const auto& [name, file] : weight_map) index["weight_map"][name] = file;
  return WriteFileAtomically(absl::StrCat(dir, "/", stem, ".safetensors.index.json"), index.dump(2) + "\n");
}

// ------------------------------------------------------------------- reader

namespace {

// "safetensors file '<path>': <what>": every header error names the file.
absl::Status BadFile(const std::string& where, const std::string& what) {
  return absl::DataLossError(absl::StrCat(where, ": ", what));
}

// The header: its length (the first 8 bytes, little-endian; within the file
// and the 100 MiB limit) and the JSON object that follows.
struct Header {
  uint64_t length = 0;
  Json json;
};

absl::StatusOr<Header> ReadHeader(const ReadFile& file, const std::string& where) {
  const uint64_t size = file.size();
  if (size < 8) return BadFile(where, absl::StrCat("only ", size, " bytes; not a safetensors file or truncated"));
  unsigned char len_bytes[8];
  ZT_RETURN_IF_ERROR(file.PRead(len_bytes, 8, 0));
  Header header;
  for (int i = 0; i < 8; ++i) header.length |= static_cast<uint64_t>(len_bytes[i]) << (8 * i);
  if (header.length > kMaxHeaderBytes || header.length > size - 8) {
    return BadFile(where, absl::StrCat("header length ", header.length, " exceeds ",
                                       header.length > kMaxHeaderBytes ? "the 100 MiB limit" : "the file",
                                       " (file has ", size, " bytes); not a safetensors file or truncated"));
  }
  std::string text(header.length, '\0');
  ZT_RETURN_IF_ERROR(file.PRead(text.data(), text.size(), 8));
  // The header is an object of tensor entries (objects of a string and two
  // arrays of integers) and "__metadata__" (an object of strings): three
  // levels. Parsed in linear time, duplicate names refused.
  JsonReadLimits limits;
  limits.max_depth = 3;
  limits.max_object_keys = LimitValue(Limit::kSafetensorsTensors) + 1;  // and __metadata__
  limits.object_keys_note = absl::StrCat("a header holds at most one key per tensor and \"__metadata__\"; ",
                                         LimitNote(Limit::kSafetensorsTensors));
  ZT_ASSIGN_OR_RETURN(header.json, ReadJsonText(text, absl::StrCat(where, " header"), limits));
  if (!header.json.is_object()) return BadFile(where, "header is not a JSON object");
  return header;
}

// The "__metadata__" entry: an object of strings, added to `metadata`.
absl::Status ReadMetadata(const Json& value, const std::string& where, std::map<std::string, std::string>* metadata) {
  if (!value.is_object()) return BadFile(where, "'__metadata__' is not an object");
  for (const auto& [mk, mv] : value.items()) {
    if (!mv.is_string()) return BadFile(where, absl::StrCat("'__metadata__' value '", mk, "' is not a string"));
    (*metadata)[mk] = mv.get<std::string>();
  }
  return absl::OkStatus();
}

// One tensor's entry `key` -> `value`: exactly dtype (a known one), shape
// (non-negative integers) and data_offsets ([begin, end) inside the
// `data_size`-byte data area that starts at `data_start`, holding exactly
// the shape's bytes).
absl::StatusOr<SafetensorsReader::Tensor> ParseTensorEntry(const std::string& key, const Json& value,
                                                           uint64_t data_start, uint64_t data_size,
                                                           const std::string& where) {
  auto field = [&](const std::string& what) { return BadFile(where, absl::StrCat("tensor '", key, "': ", what)); };
  if (!value.is_object()) return field("entry is not an object");
  for (const auto& [k, unused] : value.items()) {
    if (k != "dtype" && k != "shape" && k != "data_offsets") return field(absl::StrCat("unknown field '", k, "'"));
  }
  if (!value.contains("dtype") || !value["dtype"].is_string()) return field("'dtype' missing or not a string");
  const std::string dtype_name = value["dtype"].get<std::string>();
  std::optional<DType> dtype = DTypeFromSafetensorsName(dtype_name);
  if (!dtype)
    return field(absl::StrCat("dtype '", dtype_name,
                              "' is not supported (F32, F64, F16, BF16, I64, "
                              "I32, I16, I8, U8, BOOL)"));
  SafetensorsReader::Tensor t;
  t.name = key;
  t.dtype = *dtype;
  if (!value.contains("shape") || !value["shape"].is_array()) return field("'shape' missing or not an array");
  for (const Json& d : value["shape"]) {
    if (!d.is_number_unsigned()) return field("'shape' holds something other than a non-negative integer");
    t.shape.push_back(d.get<int64_t>());
  }
  const Json& offsets = value.contains("data_offsets") ? value["data_offsets"] : Json();
  if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() ||
      !offsets[1].is_number_unsigned()) {
    return field("'data_offsets' missing or not [begin, end]");
  }
  const uint64_t begin = offsets[0].get<uint64_t>(), end = offsets[1].get<uint64_t>();
  auto bytes = CheckedBytes(t.dtype, t.shape);
  if (!bytes.ok()) return field(std::string(bytes.status().message()));
  if (begin > end || end > data_size) {
    return field(absl::StrCat("data_offsets [", begin, ", ", end, ") lie outside the ", data_size,
                              "-byte data area (truncated file?)"));
  }
  if (end - begin != *bytes) {
    return field(absl::StrCat("data_offsets [", begin, ", ", end, ") hold ", end - begin, " bytes, but ",
                              std::string(DTypeName(t.dtype)), " ", ShapeText(t.shape), " needs ", *bytes));
  }
  t.file_offset = data_start + begin;
  t.nbytes = *bytes;
  return t;
}

// The tensors must tile the data area [data_start, file_size): no gaps, no
// overlaps, nothing after. The first tensor out of place (in offset order) is named.
absl::Status CheckTiling(const std::vector<SafetensorsReader::Tensor>& tensors, uint64_t data_start, uint64_t file_size,
                         const std::string& where) {
  std::vector<size_t> order(tensors.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const SafetensorsReader::Tensor &x = tensors[a], &y = tensors[b];
    return std::make_pair(x.file_offset, x.nbytes) < std::make_pair(y.file_offset, y.nbytes);
  });
  uint64_t expected = data_start;
  for (size_t i : order) {
    const SafetensorsReader::Tensor& t = tensors[i];
    if (t.file_offset != expected) {
      return BadFile(where,
                     absl::StrCat("tensor '", t.name, "' starts at data offset ", t.file_offset - data_start,
                                  t.file_offset < expected ? ", overlapping the tensor before it" : ", leaving a gap",
                                  " (expected ", expected - data_start, ")"));
    }
    expected += t.nbytes;
  }
  if (expected != file_size) {
    return BadFile(where, absl::StrCat("the tensors end at data offset ", expected - data_start,
                                       " but the data area has ", file_size - data_start, " bytes"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<SafetensorsReader>> SafetensorsReader::Open(const std::string& path) {
  std::unique_ptr<SafetensorsReader> r(new SafetensorsReader());
  ZT_ASSIGN_OR_RETURN(r->file_, ReadFile::Open(path));
  const std::string where = absl::StrCat("safetensors file '", path, "'");
  ZT_ASSIGN_OR_RETURN(const Header header, ReadHeader(r->file_, where));
  const uint64_t data_start = 8 + header.length;
  const uint64_t data_size = r->file_.size() - data_start;
  for (const auto& [key, value] : header.json.items()) {
    if (key == "__metadata__") {
      ZT_RETURN_IF_ERROR(ReadMetadata(value, where, &r->metadata_));
      continue;
    }
    ZT_ASSIGN_OR_RETURN(Tensor t, ParseTensorEntry(key, value, data_start, data_size, where));
    r->by_name_[key] = r->tensors_.size();
    r->tensors_.push_back(std::move(t));
  }
  if (const int64_t limit = LimitValue(Limit::kSafetensorsTensors); static_cast<int64_t>(r->tensors_.size()) > limit) {
    return BadFile(where,
                   absl::StrCat("holds ", r->tensors_.size(), " tensors; ", LimitNote(Limit::kSafetensorsTensors)));
  }
  ZT_RETURN_IF_ERROR(CheckTiling(r->tensors_, data_start, r->file_.size(), where));
  return r;
}

const SafetensorsReader::Tensor* SafetensorsReader::Find(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : &tensors_[it->second];
}

absl::Status SafetensorsReader::Read(const Tensor& t, void* dst) const { return ReadBytes(t, 0, t.nbytes, dst); }

absl::Status SafetensorsReader::ReadBytes(const Tensor& t, uint64_t begin, uint64_t end, void* dst) const {
  if (begin > end || end > t.nbytes) {
    return absl::OutOfRangeError(absl::StrCat("safetensors file '", path(), "', tensor '", t.name, "': bytes [", begin,
                                              ", ", end, ") of a ", t.nbytes, "-byte tensor"));
  }
  return file_.PRead(dst, static_cast<size_t>(end - begin), t.file_offset + begin);
}

// -------------------------------------------------------------------- model

absl::StatusOr<std::unique_ptr<SafetensorsModel>> SafetensorsModel::Open(const std::string& path) {
  auto model = std::make_unique<SafetensorsModel>();
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    return absl::NotFoundError(absl::StrCat("safetensors model '", path, "': ", std::strerror(errno),
                                            "; give a .safetensors file, an index .json or a directory"));
  }
  std::string file = path;
  if (S_ISDIR(st.st_mode)) {
    const std::string single = absl::StrCat(path, "/model.safetensors");
    const std::string index = absl::StrCat(path, "/model.safetensors.index.json");
    if (::stat(single.c_str(), &st) == 0) {
      file = single;
    } else if (::stat(index.c_str(), &st) == 0) {
      file = index;
    } else {
      return absl::NotFoundError(absl::StrCat("directory '", path,
                                              "' holds neither model.safetensors nor "
                                              "model.safetensors.index.json"));
    }
  }
  if (file.size() >= 5 && file.compare(file.size() - 5, 5, ".json") == 0) {
    const std::string where = absl::StrCat("safetensors index '", file, "'");
    ZT_ASSIGN_OR_RETURN(std::string text, ReadSmallFile(file, 256u << 20));
    JsonReadLimits limits;
    limits.max_depth = 8;  // {"metadata": {...}, "weight_map": {name: shard}}
    limits.max_object_keys = LimitValue(Limit::kSafetensorsTensors);
    limits.object_keys_note = LimitNote(Limit::kSafetensorsTensors);
    ZT_ASSIGN_OR_RETURN(Json index, ReadJsonText(text, where, limits));
    if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object()) {
      return absl::DataLossError(absl::StrCat(where, ": no \"weight_map\" object"));
    }
    std::map<std::string, size_t> file_index;
    for (const auto& [name, shard] : index["weight_map"].items()) {
      if (!shard.is_string()) {
        return absl::DataLossError(absl::StrCat(where, ": weight_map['", name, "'] is not a file name"));
      }
      const std::string shard_name = shard.get<std::string>();
      auto [it, inserted] = file_index.try_emplace(shard_name, model->files_.size());
      if (inserted) {
        // The index is untrusted: a shard is a file of this folder.
        ZT_ASSIGN_OR_RETURN(const std::string shard_path,
                            ConfinedPath(Dir(file), shard_name, absl::StrCat(where, ": weight_map['", name, "']")));
        auto reader = SafetensorsReader::Open(shard_path);
        if (!reader.ok()) {
          return absl::Status(reader.status().code(),
                              absl::StrCat(where, " lists shard '", shard_name, "': ", reader.status().message()));
        }
        model->files_.push_back(std::move(reader).value());
      }
      const SafetensorsReader& reader = *model->files_[it->second];
      const SafetensorsReader::Tensor* t = reader.Find(name);
      if (t == nullptr) {
        return absl::DataLossError(
            absl::StrCat(where, " maps '", name, "' to '", shard_name, "', which does not hold it"));
      }
      model->where_[name] = {it->second, static_cast<size_t>(t - reader.tensors().data())};
    }
    return model;
  }
  ZT_ASSIGN_OR_RETURN(auto reader, SafetensorsReader::Open(file));
  for (size_t i = 0; i < reader->tensors().size(); ++i) model->where_[reader->tensors()[i].name] = {0, i};
  model->files_.push_back(std::move(reader));
  return model;
}

std::vector<std::string> SafetensorsModel::names() const {
  std::vector<std::string> out;
  out.reserve(where_.size());
  for (const auto& [name, unused] : where_) out.push_back(name);
  return out;
}

std::pair<const SafetensorsReader*, const SafetensorsReader::Tensor*> SafetensorsModel::Find(
    const std::string& name) const {
  auto it = where_.find(name);
  if (it == where_.end()) return {nullptr, nullptr};
  const SafetensorsReader* reader = files_[it->second.first].get();
  return {reader, &reader->tensors()[it->second.second]};
}

}  // namespace zt::ckpt
