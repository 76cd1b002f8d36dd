// Implementation of lora/lora_layer.h.
#include "lora/lora_layer.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/nn/functional/dropout.h>
#include <torch/nn/init.h>

#include <cmath>
#include <mutex>

#include "util/status.h"

namespace zt {

void LoraLayer::AddLora(torch::nn::Module& self, const LoraOptions& options, const at::Tensor& like, uint64_t seed) {
  ZT_CHECK_MSG(!has_lora(), "AddLora: the layer already has an adapter");
  ZT_CHECK_MSG(options.enabled(), "AddLora: r must be >= 1");
  // torch::nn::Linear's constructor draws from the global generator: its
  // state is put back afterwards, and A is drawn from the adapter's own.
  at::Generator global = at::detail::getDefaultCPUGenerator();
  at::Tensor global_state;
  {
    std::lock_guard<std::mutex> lock(global.mutex());
    global_state = global.get_state();
  }
  torch::nn::Linear a(torch::nn::LinearOptions(lora_in_features(), options.r).bias(false));
  torch::nn::Linear b(torch::nn::LinearOptions(options.r, lora_out_features()).bias(false));
  {
    std::lock_guard<std::mutex> lock(global.mutex());
    global.set_state(global_state);
  }
  {
    torch::NoGradGuard no_grad;
    at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
    const double bound = 1.0 / std::sqrt(static_cast<double>(lora_in_features()));
    a->weight.uniform_(-bound, bound, gen);
    b->weight.zero_();
  }
  a->to(like.scalar_type());
  b->to(like.scalar_type());
  lora_A = self.register_module("lora_A", a);
  lora_B = self.register_module("lora_B", b);
  scaling_ = options.scaling();
  dropout_ = options.dropout;
}

at::Tensor LoraLayer::AddLoraTerm(const at::Tensor& x, const at::Tensor& base_out, bool training) const {
  if (!has_lora()) return base_out;
  at::Tensor in = dropout_ > 0 && training ? torch::dropout(x, dropout_, /*train=*/true) : x;
  return base_out + torch::linear(torch::linear(in, lora_A->weight), lora_B->weight) * scaling_;
}

}  // namespace zt
