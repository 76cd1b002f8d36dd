// Implementation of lora/lora_layer.h.
#include "lora/lora_layer.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/nn/functional/dropout.h>
#include <torch/nn/init.h>

#include <cmath>

#include "util/status.h"

namespace zt {

void LoraLayer::AddLora(torch::nn::Module& self, const LoraOptions& options, const at::Tensor& like, uint64_t seed) {
  ZT_CHECK_MSG(!has_lora(), "AddLora: the layer already has an adapter");
  ZT_CHECK_MSG(options.enabled(), "AddLora: r must be >= 1");
  // A from the adapter's own generator (torch's global one is left alone),
  // B zero; both in fp32, then in the base weight's dtype.
  at::Tensor a = at::empty({options.r, lora_in_features()}, at::kFloat);
  at::Tensor b = at::zeros({lora_out_features(), options.r}, at::kFloat);
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  const double bound = 1.0 / std::sqrt(static_cast<double>(lora_in_features()));
  a.uniform_(-bound, bound, gen);
  lora_A = self.register_module("lora_A", LoraMatrix(a.to(like.scalar_type())));
  lora_B = self.register_module("lora_B", LoraMatrix(b.to(like.scalar_type())));
  scaling_ = options.scaling();
  dropout_ = options.dropout;
}

at::Tensor LoraLayer::AddLoraTerm(const at::Tensor& x, const at::Tensor& base_out, bool training) const {
  if (!has_lora()) return base_out;
  at::Tensor in = dropout_ > 0 && training ? torch::dropout(x, dropout_, /*train=*/true) : x;
  return base_out + torch::linear(torch::linear(in, lora_A->weight), lora_B->weight) * scaling_;
}

}  // namespace zt
