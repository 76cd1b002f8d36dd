// The dense product of every linear layer of the built-in models (their
// LoRA-capable layers, GPT-2's Conv1D, the tied LM head): y = x W^T + b for
// W [out, in], or y = x W + b for W [in, out] (`in_out`), x [..., in].
// A single row -- one token, as generation's decode step computes -- goes
// through BLAS gemv: OpenBLAS runs its gemm with M = 1 3-4x slower than
// gemv on the same weights (4.7 ms against 18 ms for GPT-2's 50257 x 768
// head on one core), and a decode step is nothing but such products. More
// rows take gemm, exactly as torch::linear / addmm do (training is
// unchanged). Differentiable either way.
#pragma once

#include <ATen/core/Tensor.h>

namespace zt {

at::Tensor DenseLinear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias, bool in_out = false);

}  // namespace zt
