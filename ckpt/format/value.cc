// ckpt::Value accessors and TensorRef geometry. Accessors abort on a type
// mismatch: callers check the type first (a mismatch is a bug, not input).
#include "ckpt/format/value.h"

#include "util/status.h"

namespace zt::ckpt {

int64_t TensorRef::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

bool TensorRef::contiguous() const {
  if (storage_offset != 0) return false;
  if (stride.empty()) return true;  // written tensors: dense by definition
  if (stride.size() != shape.size()) return false;
  // Reading: the view must also cover the whole storage record.
  if (storage_nbytes != 0 && nbytes() != storage_nbytes) return false;
  if (numel() == 0) return true;
  int64_t expected = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    // A dimension of size 1 may carry any stride (PyTorch does the same).
    if (shape[i] != 1 && stride[i] != expected) return false;
    expected *= shape[i];
  }
  return true;
}

const Value* Dict::Find(const std::string& key) const {
  for (const auto& [k, v] : items) {
    if (k.is_string() && k.AsString() == key) return &v;
  }
  return nullptr;
}

const Value* Dict::Find(int64_t key) const {
  for (const auto& [k, v] : items) {
    if (k.is_int() && k.AsInt() == key) return &v;
  }
  return nullptr;
}

void Dict::Set(Value key, Value value) {
  ZT_CHECK_MSG(key.is_string() || key.is_int(), "dict keys must be str or int, got %s", key.TypeName());
  for (auto& [k, v] : items) {
    bool same =
        key.is_string() ? (k.is_string() && k.AsString() == key.AsString()) : (k.is_int() && k.AsInt() == key.AsInt());
    if (same) {
      v = std::move(value);
      return;
    }
  }
  items.emplace_back(std::move(key), std::move(value));
}

Value::Value(const Value&) = default;
Value::Value(Value&&) noexcept = default;
Value& Value::operator=(const Value&) = default;
Value& Value::operator=(Value&&) noexcept = default;
Value::~Value() = default;

#define ZT_VALUE_EXPECT_(cond, want) \
  ZT_CHECK_MSG(cond, "ckpt::Value holds %s, not %s (check the type before calling)", TypeName(), want)

bool Value::AsBool() const {
  ZT_VALUE_EXPECT_(is_bool(), "bool");
  return std::get<bool>(data_);
}

int64_t Value::AsInt() const {
  ZT_VALUE_EXPECT_(is_int(), "int");
  return std::get<int64_t>(data_);
}

double Value::AsDouble() const {
  if (is_int()) return static_cast<double>(std::get<int64_t>(data_));
  ZT_VALUE_EXPECT_(is_double(), "float");
  return std::get<double>(data_);
}

const std::string& Value::AsString() const {
  ZT_VALUE_EXPECT_(is_string(), "str");
  return std::get<std::string>(data_);
}

const List& Value::AsList() const {
  if (is_tuple()) return std::get<Tuple>(data_).items;
  ZT_VALUE_EXPECT_(is_list(), "list or tuple");
  return std::get<List>(data_);
}

const Dict& Value::AsDict() const {
  ZT_VALUE_EXPECT_(is_dict(), "dict");
  return *std::get<std::shared_ptr<Dict>>(data_);
}

Dict& Value::AsDict() {
  ZT_VALUE_EXPECT_(is_dict(), "dict");
  return *std::get<std::shared_ptr<Dict>>(data_);
}

const TensorRef& Value::AsTensor() const {
  ZT_VALUE_EXPECT_(is_tensor(), "tensor");
  return *std::get<std::shared_ptr<TensorRef>>(data_);
}

const Global& Value::AsGlobal() const {
  ZT_VALUE_EXPECT_(is_global(), "global");
  return std::get<Global>(data_);
}

const Call& Value::AsCall() const {
  ZT_VALUE_EXPECT_(is_call(), "call");
  return *std::get<std::shared_ptr<Call>>(data_);
}

const Object& Value::AsObject() const {
  ZT_VALUE_EXPECT_(is_object(), "object");
  return *std::get<std::shared_ptr<Object>>(data_);
}

const char* Value::TypeName() const {
  switch (data_.index()) {
    case 0: return "None";
    case 1: return "bool";
    case 2: return "int";
    case 3: return "float";
    case 4: return "str";
    case 5: return "list";
    case 6: return "tuple";
    case 7: return "dict";
    case 8: return "tensor";
    case 9: return "global";
    case 10: return "call";
    case 11: return "object";
  }
  return "?";
}

#undef ZT_VALUE_EXPECT_

}  // namespace zt::ckpt
