// Implementation of engine/tensor_ref.h.
#include "engine/tensor_ref.h"

#include "absl/strings/str_cat.h"
#include "util/error.h"
#include "util/status.h"

namespace zt {

ckpt::DType ToCkpt(at::ScalarType t) {
  switch (t) {
    case at::kFloat: return ckpt::DType::kFloat32;
    case at::kDouble: return ckpt::DType::kFloat64;
    case at::kHalf: return ckpt::DType::kFloat16;
    case at::kBFloat16: return ckpt::DType::kBFloat16;
    case at::kLong: return ckpt::DType::kInt64;
    case at::kInt: return ckpt::DType::kInt32;
    case at::kShort: return ckpt::DType::kInt16;
    case at::kChar: return ckpt::DType::kInt8;
    case at::kByte: return ckpt::DType::kUInt8;
    case at::kBool: return ckpt::DType::kBool;
    default: break;
  }
  throw Error(absl::InvalidArgumentError(absl::StrCat("checkpoints cannot store ", c10::toString(t), " tensors")));
}

at::ScalarType FromCkpt(ckpt::DType d) {
  switch (d) {
    case ckpt::DType::kFloat32: return at::kFloat;
    case ckpt::DType::kFloat64: return at::kDouble;
    case ckpt::DType::kFloat16: return at::kHalf;
    case ckpt::DType::kBFloat16: return at::kBFloat16;
    case ckpt::DType::kInt64: return at::kLong;
    case ckpt::DType::kInt32: return at::kInt;
    case ckpt::DType::kInt16: return at::kShort;
    case ckpt::DType::kInt8: return at::kChar;
    case ckpt::DType::kUInt8: return at::kByte;
    case ckpt::DType::kBool: return at::kBool;
  }
  return at::kFloat;
}

ckpt::TensorRef Ref(const at::Tensor& t) {
  ZT_CHECK(t.is_contiguous() && t.device().is_cpu());
  ckpt::TensorRef r;
  r.dtype = ToCkpt(t.scalar_type());
  r.shape = t.sizes().vec();
  r.data = t.data_ptr();
  return r;
}

}  // namespace zt
