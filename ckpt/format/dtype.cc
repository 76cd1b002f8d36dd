// Names of the element types: PyTorch's storage class names (the GLOBALs a
// pickled storage refers to) and safetensors' dtype strings. One table, so
// the two spellings of a type can never disagree.
#include "ckpt/format/dtype.h"

#include <array>

namespace zt::ckpt {
namespace {

struct DTypeInfo {
  DType dtype;
  size_t size;
  std::string_view torch_storage;
  std::string_view safetensors;
  std::string_view name;
};

constexpr std::array<DTypeInfo, 10> kDTypes = {{
    {DType::kFloat32, 4, "FloatStorage", "F32", "float32"},
    {DType::kFloat64, 8, "DoubleStorage", "F64", "float64"},
    {DType::kFloat16, 2, "HalfStorage", "F16", "float16"},
    {DType::kBFloat16, 2, "BFloat16Storage", "BF16", "bfloat16"},
    {DType::kInt64, 8, "LongStorage", "I64", "int64"},
    {DType::kInt32, 4, "IntStorage", "I32", "int32"},
    {DType::kInt16, 2, "ShortStorage", "I16", "int16"},
    {DType::kInt8, 1, "CharStorage", "I8", "int8"},
    {DType::kUInt8, 1, "ByteStorage", "U8", "uint8"},
    {DType::kBool, 1, "BoolStorage", "BOOL", "bool"},
}};

// The enum's values index the table (checked at compile time below).
constexpr bool TableMatchesEnum() {
  for (size_t i = 0; i < kDTypes.size(); ++i) {
    if (static_cast<size_t>(kDTypes[i].dtype) != i) return false;
  }
  return true;
}
static_assert(TableMatchesEnum(), "kDTypes must list DType values in enum order");

const DTypeInfo& Info(DType d) { return kDTypes[static_cast<size_t>(d)]; }

}  // namespace

bool IsFloating(DType d) {
  return d == DType::kFloat32 || d == DType::kFloat64 || d == DType::kFloat16 || d == DType::kBFloat16;
}

size_t DTypeSize(DType d) { return Info(d).size; }
std::string_view TorchStorageName(DType d) { return Info(d).torch_storage; }
std::string_view SafetensorsName(DType d) { return Info(d).safetensors; }
std::string_view DTypeName(DType d) { return Info(d).name; }

std::optional<DType> DTypeFromTorchStorageName(std::string_view name) {
  for (const DTypeInfo& info : kDTypes) {
    if (info.torch_storage == name) return info.dtype;
  }
  return std::nullopt;
}

std::optional<DType> DTypeFromSafetensorsName(std::string_view name) {
  for (const DTypeInfo& info : kDTypes) {
    if (info.safetensors == name) return info.dtype;
  }
  return std::nullopt;
}

}  // namespace zt::ckpt
