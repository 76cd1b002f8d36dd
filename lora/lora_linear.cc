// Implementation of lora/lora_linear.h.
#include "lora/lora_linear.h"

#include <torch/nn/functional/linear.h>
#include <torch/nn/init.h>

#include <cmath>

#include "lora/dense_linear.h"

namespace zt {

LoraLinearImpl::LoraLinearImpl(const torch::nn::LinearOptions& o) : options(o) {
  weight = register_parameter("weight", torch::empty({o.out_features(), o.in_features()}));
  // torch::nn::LinearImpl::reset_parameters, draw for draw.
  torch::nn::init::kaiming_uniform_(weight, std::sqrt(5));
  if (o.bias()) {
    bias = register_parameter("bias", torch::empty(o.out_features()));
    auto [fan_in, fan_out] = torch::nn::init::_calculate_fan_in_and_fan_out(weight);
    const double bound = 1 / std::sqrt(static_cast<double>(fan_in));
    torch::nn::init::uniform_(bias, -bound, bound);
  } else {
    bias = register_parameter("bias", {}, /*requires_grad=*/false);
  }
}

at::Tensor LoraLinearImpl::forward(const at::Tensor& input) {
  return AddLoraTerm(input, DenseLinear(input, weight, bias), is_training());
}

}  // namespace zt
