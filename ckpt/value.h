// ckpt::Value: the tree a PyTorch .pt file holds (what torch.save pickles),
// restricted to what checkpoints need: None, bool, int, float, str, list,
// tuple, dict (str or int keys, insertion-ordered; `ordered` makes Python
// see a collections.OrderedDict) and tensors.
//
// Tensors are references, never owned data:
//  * when writing, a TensorRef points at contiguous host memory that must
//    stay valid until the write returns, or carries a `source` that
//    produces the bytes on demand (state that is not in memory);
//  * when reading, a TensorRef says where the bytes are in the file
//    (record, absolute offset, size, CRC32) and PtReader reads them on
//    demand, whole or in ranges, so huge files are never loaded at once.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "ckpt/dtype.h"

namespace zt::ckpt {

struct TensorRef {
  DType dtype = DType::kFloat32;
  std::vector<int64_t> shape;
  // Writing: contiguous bytes, numel(shape) * DTypeSize(dtype) of them...
  const void* data = nullptr;
  // ...or, when `data` is null, a producer of bytes [offset, offset + n)
  // into dst, called in order, a bounded chunk at a time, during the write.
  std::function<absl::Status(uint64_t offset, void* dst, uint64_t n)> source;
  // Reading (filled by PtReader): the storage this tensor views.
  std::vector<int64_t> stride;  // in elements
  int64_t storage_offset = 0;   // in elements
  std::string record;           // zip record holding the storage
  uint64_t file_offset = 0;     // absolute offset of the storage's first byte
  uint64_t storage_nbytes = 0;
  uint32_t crc32 = 0;  // of the whole storage record

  int64_t numel() const;
  uint64_t nbytes() const { return static_cast<uint64_t>(numel()) * DTypeSize(dtype); }
  // True when the tensor covers its storage densely from offset 0 in
  // row-major order (what we write; readers may require it).
  bool contiguous() const;
};

class Value;
using List = std::vector<Value>;
// Keys are str or int Values; order is insertion order.
struct Dict {
  std::vector<std::pair<Value, Value>> items;
  bool ordered = false;  // pickled as collections.OrderedDict
  // Lookup by string key (nullptr when absent).
  const Value* Find(const std::string& key) const;
  const Value* Find(int64_t key) const;
  void Set(Value key, Value value);  // replaces an existing key
};

class Value {
 public:
  struct None {};
  struct Tuple {
    List items;
  };
  using Data = std::variant<None, bool, int64_t, double, std::string, List, Tuple, std::shared_ptr<Dict>,
                            std::shared_ptr<TensorRef>>;

  Value() = default;
  // Out of line (value.cc): inlined, GCC 12 flags the variant's vector move
  // with a false -Wmaybe-uninitialized in every caller that grows a List.
  Value(const Value&);
  Value(Value&&) noexcept;
  Value& operator=(const Value&);
  Value& operator=(Value&&) noexcept;
  ~Value();
  Value(None) {}
  Value(bool b) : data_(b) {}
  Value(int v) : data_(static_cast<int64_t>(v)) {}
  Value(int64_t v) : data_(v) {}
  Value(double v) : data_(v) {}
  Value(const char* s) : data_(std::string(s)) {}
  Value(std::string s) : data_(std::move(s)) {}
  Value(List l) : data_(std::move(l)) {}
  Value(Tuple t) : data_(std::move(t)) {}
  Value(Dict d) : data_(std::make_shared<Dict>(std::move(d))) {}
  Value(TensorRef t) : data_(std::make_shared<TensorRef>(std::move(t))) {}

  bool is_none() const { return std::holds_alternative<None>(data_); }
  bool is_bool() const { return std::holds_alternative<bool>(data_); }
  bool is_int() const { return std::holds_alternative<int64_t>(data_); }
  bool is_double() const { return std::holds_alternative<double>(data_); }
  bool is_string() const { return std::holds_alternative<std::string>(data_); }
  bool is_list() const { return std::holds_alternative<List>(data_); }
  bool is_tuple() const { return std::holds_alternative<Tuple>(data_); }
  bool is_dict() const { return std::holds_alternative<std::shared_ptr<Dict>>(data_); }
  bool is_tensor() const { return std::holds_alternative<std::shared_ptr<TensorRef>>(data_); }

  // Accessors abort on a type mismatch (check first); AsDouble accepts ints.
  bool AsBool() const;
  int64_t AsInt() const;
  double AsDouble() const;
  const std::string& AsString() const;
  const List& AsList() const;  // a list or a tuple's items
  const Dict& AsDict() const;
  Dict& AsDict();
  const TensorRef& AsTensor() const;

  // "None", "bool", "int", "float", "str", "list", "tuple", "dict", "tensor".
  const char* TypeName() const;
  const Data& data() const { return data_; }

 private:
  Data data_;
};

}  // namespace zt::ckpt
