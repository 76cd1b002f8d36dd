// Between LibTorch tensors and the LibTorch-free checkpoint code (ckpt/):
// dtype mapping and tensor references.
#pragma once

#include <ATen/core/Tensor.h>

#include "ckpt/format/dtype.h"
#include "ckpt/format/value.h"

namespace zt {

// Throws zt::Error for dtypes checkpoints cannot store (complex, quantized).
ckpt::DType ToCkpt(at::ScalarType t);
at::ScalarType FromCkpt(ckpt::DType d);
// A reference to a contiguous CPU tensor's bytes; the tensor must outlive
// every use of the reference (the write it is given to).
ckpt::TensorRef Ref(const at::Tensor& t);

}  // namespace zt
