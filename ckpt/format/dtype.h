// Element types the checkpoint files store, and their names in PyTorch's
// pickled storages and in safetensors headers. No LibTorch: the engine maps
// at::ScalarType to these (engine side), so the format code builds and
// tests in seconds.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

namespace zt::ckpt {

enum class DType { kFloat32, kFloat64, kFloat16, kBFloat16, kInt64, kInt32, kInt16, kInt8, kUInt8, kBool };

// Bytes per element.
size_t DTypeSize(DType d);
// float32, float64, float16 or bfloat16.
bool IsFloating(DType d);
// "FloatStorage", "DoubleStorage", "HalfStorage", "BFloat16Storage", "LongStorage", "IntStorage",
// "ShortStorage", "CharStorage", "ByteStorage", "BoolStorage" (the torch.<Name> GLOBAL in a pickle).
std::string_view TorchStorageName(DType d);
std::optional<DType> DTypeFromTorchStorageName(std::string_view name);
// "F32", "F64", "F16", "BF16", "I64", "I32", "I16", "I8", "U8", "BOOL" (safetensors).
std::string_view SafetensorsName(DType d);
std::optional<DType> DTypeFromSafetensorsName(std::string_view name);
// "float32", "bfloat16", ... for messages.
std::string_view DTypeName(DType d);

}  // namespace zt::ckpt
