// Implementation of lora/dense_linear.h.
#include "lora/dense_linear.h"

#include <torch/torch.h>

#include <vector>

namespace zt {

at::Tensor DenseLinear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias, bool in_out) {
  const int64_t in = in_out ? weight.size(0) : weight.size(1);
  if (x.dim() >= 1 && x.numel() == in && x.size(-1) == in) {
    const at::Tensor w = in_out ? weight.t() : weight;  // [out, in]
    const at::Tensor row = x.reshape({in});
    at::Tensor y = bias.defined() ? torch::addmv(bias, w, row) : torch::mv(w, row);
    std::vector<int64_t> shape = x.sizes().vec();
    shape.back() = w.size(0);
    return y.view(shape);
  }
  if (!in_out) return torch::linear(x, weight, bias);
  std::vector<int64_t> shape = x.sizes().vec();
  shape.back() = weight.size(1);
  const at::Tensor x2 = x.reshape({-1, in});
  return (bias.defined() ? torch::addmm(bias, x2, weight) : torch::mm(x2, weight)).view(shape);
}

}  // namespace zt
