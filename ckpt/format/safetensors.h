// safetensors files (Hugging Face's format): 8-byte little-endian header
// length, a JSON header {"name": {"dtype": "F32", "shape": [...],
// "data_offsets": [begin, end]}, ..., "__metadata__": {str: str}}, then the
// tensors' bytes, back to back (offsets relative to the end of the header).
//
// SafetensorsWriter streams: the header is computed from the declared
// tensors first, then each tensor's bytes are written as they come, so a
// consolidated export never holds the model in memory. Sharded output
// follows transformers' convention: model-00001-of-00003.safetensors ...
// plus model.safetensors.index.json {"metadata": {"total_size": N},
// "weight_map": {name: file}}.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ckpt/format/dtype.h"
#include "util/file_io.h"

namespace zt::ckpt {

struct SafetensorsEntry {
  std::string name;
  DType dtype = DType::kFloat32;
  std::vector<int64_t> shape;
  uint64_t nbytes() const;
};

// One file. Declare every tensor up front (order kept), then Write each one's
// bytes in the same order (in one or several calls), then Finish.
class SafetensorsWriter {
 public:
  static absl::StatusOr<std::unique_ptr<SafetensorsWriter>> Create(
      const std::string& path, std::vector<SafetensorsEntry> entries,
      const std::map<std::string, std::string>& metadata = {}, const AtomicFileOptions& file_options = {});
  // Appends bytes of the current tensor; moves to the next when it is full.
  absl::Status Write(const void* data, size_t n);
  // Checks that every tensor got all its bytes; commits atomically.
  absl::Status Finish();

 private:
  SafetensorsWriter() = default;
  std::unique_ptr<AtomicFile> file_;
  std::vector<SafetensorsEntry> entries_;
  size_t current_ = 0;
  uint64_t written_in_current_ = 0;
};

// Splits `entries` (in order) into shards of at most `max_shard_bytes` (a
// tensor larger than that gets a shard of its own) and names them; one
// shard means a single "<stem>.safetensors" and no index.
struct ShardPlan {
  struct Shard {
    std::string file;  // file name, no directory
    std::vector<SafetensorsEntry> entries;
  };
  std::vector<Shard> shards;
  bool needs_index() const { return shards.size() > 1; }
};
ShardPlan PlanShards(const std::vector<SafetensorsEntry>& entries, uint64_t max_shard_bytes,
                     const std::string& stem = "model");
// Writes "<stem>.safetensors.index.json" for a plan (atomically).
absl::Status WriteIndex(const std::string& dir, const ShardPlan& plan, const std::string& stem = "model");

// A file opened for reading: the header is parsed, bytes are read on demand.
class SafetensorsReader {
 public:
  struct Tensor {
    std::string name;
    DType dtype;
    std::vector<int64_t> shape;
    uint64_t file_offset = 0;  // absolute
    uint64_t nbytes = 0;
  };
  static absl::StatusOr<std::unique_ptr<SafetensorsReader>> Open(const std::string& path);
  const std::vector<Tensor>& tensors() const { return tensors_; }  // header order
  const Tensor* Find(const std::string& name) const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  absl::Status Read(const Tensor& t, void* dst) const;
  absl::Status ReadBytes(const Tensor& t, uint64_t begin, uint64_t end, void* dst) const;
  const std::string& path() const { return file_.path(); }

 private:
  SafetensorsReader() = default;
  ReadFile file_;
  std::vector<Tensor> tensors_;
  std::map<std::string, size_t> by_name_;  // index into tensors_
  std::map<std::string, std::string> metadata_;
};

// Every tensor of a model stored as one file or as shards with an index:
// `path` is a .safetensors file, an index .json, or a directory holding
// either. Maps names to the file that holds them.
class SafetensorsModel {
 public:
  static absl::StatusOr<std::unique_ptr<SafetensorsModel>> Open(const std::string& path);
  std::vector<std::string> names() const;  // sorted
  // The tensor and its reader, or nullptr when absent.
  std::pair<const SafetensorsReader*, const SafetensorsReader::Tensor*> Find(const std::string& name) const;

 private:
  std::vector<std::unique_ptr<SafetensorsReader>> files_;
  std::map<std::string, std::pair<size_t, size_t>> where_;  // name -> (file, tensor index)
};

}  // namespace zt::ckpt
