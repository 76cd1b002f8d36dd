// Internal: typed lookups in a parsed checkpoint file (a ckpt::Value tree),
// with errors that name the file and the key path, shared by the readers of
// zerotorch's and DeepSpeed's checkpoint files.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ckpt/format/dtype.h"
#include "ckpt/format/value.h"

namespace zt::ckpt {

class Fields {
 public:
  // `file` names the file in errors; `where` is the key path of `d` ("" for the root).
  Fields(const std::string& file, const Dict& d, std::string where) : file_(file), d_(d), where_(std::move(where)) {}
  absl::StatusOr<const Value*> Get(const std::string& key) const;
  absl::StatusOr<int64_t> Int(const std::string& key) const;
  absl::StatusOr<double> Double(const std::string& key) const;  // an int or a float
  absl::StatusOr<bool> Bool(const std::string& key) const;
  absl::StatusOr<std::string> Str(const std::string& key) const;
  absl::StatusOr<const Dict*> Sub(const std::string& key) const;
  absl::StatusOr<const List*> Seq(const std::string& key) const;  // a list or a tuple
  std::string where(const std::string& key) const { return where_.empty() ? key : where_ + "." + key; }

 private:
  absl::Status Missing(const std::string& key) const;
  absl::Status Wrong(const std::string& key, const char* want, const Value& got) const;
  const std::string& file_;
  const Dict& d_;
  std::string where_;
};

// Tensors of a list, checked: `count` of them, each 1-D, dense, of `dtype`.
absl::StatusOr<std::vector<const TensorRef*>> TensorsOf(const List& l, size_t count, DType dtype,
                                                        const std::string& file, const std::string& what);

// A 1-D tensor of `dtype` whose elements lie densely, in order, inside its
// storage (stride 1, storage_offset + numel within the storage), though it
// may not cover all of it: what torch.save writes for a slice such as
// DeepSpeed's `partition[:len - padding]` (the storage whole, the tensor a
// prefix). Readers then use the tensor's size, never the storage's.
bool IsDenseView1D(const TensorRef& t, DType dtype);

}  // namespace zt::ckpt
