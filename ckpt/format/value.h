// ckpt::Value: the tree a PyTorch .pt file holds (what torch.save pickles),
// restricted to what checkpoints need: None, bool, int, float, str, list,
// tuple, dict (str or int keys, insertion-ordered; `ordered` makes Python
// see a collections.OrderedDict) and tensors; for writing DeepSpeed's files
// also a few Python objects by reference: a global (a class), a call of a
// global (torch.Size((2, 3)), builtins.set([]), builtins.getattr(cls, name))
// and a plain object (a class instance with its __dict__). The reader maps
// DeepSpeed's objects to plain values instead (pickle.h), so these three
// appear only in trees built for writing.
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
#include "ckpt/format/dtype.h"

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
  // Writing only: attributes set on the dict object after its items (a
  // pickle BUILD), e.g. the `_metadata` every nn.Module.state_dict() carries.
  // The reader drops them (pickle.h).
  std::vector<std::pair<std::string, Value>> attributes;
};

// A Python global by module and name, e.g. {"torch", "Size"}.
struct Global {
  std::string module;
  std::string name;
};

// `callable(*args)`, pickled as GLOBAL, the argument tuple, REDUCE.
struct Call {
  Global callable;
  List args;
};

// An instance of class `cls` whose __dict__ is `state` (str keys), pickled
// as Python pickles plain classes and dataclasses: cls.__new__(cls) (NEWOBJ)
// then BUILD with the state.
struct Object {
  Global cls;
  Dict state;
};

class Value {
 public:
  struct None {};
  struct Tuple {
    List items;
  };
  using Data = std::variant<None, bool, int64_t, double, std::string, List, Tuple, std::shared_ptr<Dict>,
                            std::shared_ptr<TensorRef>, Global, std::shared_ptr<Call>, std::shared_ptr<Object>>;

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
  Value(Global g) : data_(std::move(g)) {}
  Value(Call c) : data_(std::make_shared<Call>(std::move(c))) {}
  Value(Object o) : data_(std::make_shared<Object>(std::move(o))) {}

  bool is_none() const { return std::holds_alternative<None>(data_); }
  bool is_bool() const { return std::holds_alternative<bool>(data_); }
  bool is_int() const { return std::holds_alternative<int64_t>(data_); }
  bool is_double() const { return std::holds_alternative<double>(data_); }
  bool is_string() const { return std::holds_alternative<std::string>(data_); }
  bool is_list() const { return std::holds_alternative<List>(data_); }
  bool is_tuple() const { return std::holds_alternative<Tuple>(data_); }
  bool is_dict() const { return std::holds_alternative<std::shared_ptr<Dict>>(data_); }
  bool is_tensor() const { return std::holds_alternative<std::shared_ptr<TensorRef>>(data_); }
  bool is_global() const { return std::holds_alternative<Global>(data_); }
  bool is_call() const { return std::holds_alternative<std::shared_ptr<Call>>(data_); }
  bool is_object() const { return std::holds_alternative<std::shared_ptr<Object>>(data_); }

  // Accessors abort on a type mismatch (check first); AsDouble accepts ints.
  bool AsBool() const;
  int64_t AsInt() const;
  double AsDouble() const;
  const std::string& AsString() const;
  const List& AsList() const;  // a list or a tuple's items
  const Dict& AsDict() const;
  Dict& AsDict();
  const TensorRef& AsTensor() const;
  const Global& AsGlobal() const;
  const Call& AsCall() const;
  const Object& AsObject() const;

  // "None", "bool", "int", "float", "str", "list", "tuple", "dict", "tensor",
  // "global", "call", "object".
  const char* TypeName() const;
  const Data& data() const { return data_; }

 private:
  Data data_;
};

}  // namespace zt::ckpt
