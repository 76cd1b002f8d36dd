// Shared pieces of the engine parity tests: a small model whose layer sizes
// do not divide by any world size, deterministic data, and a reference loop
// that trains the same model on the whole global batch in one process with
// plain LibTorch (or the reference optimizer for Lion, which LibTorch lacks).
#pragma once

#include <torch/torch.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "config/config.h"

namespace zt::testing {

struct ParityNetImpl : torch::nn::Module {
  ParityNetImpl() {
    fc1 = register_module("fc1", torch::nn::Linear(13, 17));
    fc2 = register_module("fc2", torch::nn::Linear(17, 5));
  }
  torch::Tensor forward(const torch::Tensor& x) { return fc2(torch::tanh(fc1(x))); }
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
};
TORCH_MODULE(ParityNet);

// Elementwise-only model for fp16 on CPU (LibTorch 1.13 has no CPU fp16 matmul).
struct ScaleShiftImpl : torch::nn::Module {
  ScaleShiftImpl() {
    w = register_parameter("w", torch::randn({13}) * 0.5 + 1.0);
    b = register_parameter("b", torch::randn({13}) * 0.1);
  }
  torch::Tensor forward(const torch::Tensor& x) { return x * w + b; }
  torch::Tensor w, b;
};
TORCH_MODULE(ScaleShift);

struct ParityData {
  torch::Tensor x, y;  // [steps * global_batch, features]
};

// The parity tests' common config: micro-batch 2, no accumulation, AdamW
// (lr 1e-2, weight decay 0.01), overlap_comm on, no step log.
Config ParityBaseConfig(int stage);

// Same tensors in every process: generated from a fixed seed.
ParityData MakeData(int64_t rows, int64_t in_features, int64_t out_features, uint64_t seed);

// Rows of micro-batch `micro` of optimizer step `step` for `rank`, such that
// the union over ranks and micro-steps is the step's global batch in order.
int64_t MicroBatchStart(const BatchConfig& b, int64_t step, int64_t micro, int rank);

// Trains `model` for `steps` optimizer steps on the global batch with a
// plain single-process loop mirroring `config` (optimizer, scheduler incl.
// OneCycle momentum, clipping). For bf16 configs the model runs in bf16 and
// the optimizer updates fp32 master copies, as the engine does.
void TrainReference(torch::nn::Module& model, const std::function<torch::Tensor(const torch::Tensor&)>& forward,
                    const ParityData& data, const Config& config, int64_t steps);

// The same loop with any loss: loss(x, y) gets the step's global batch rows
// as they are in `data` (no dtype conversion). `after_step(s)` runs after
// optimizer step s. Tied parameters are stepped once.
void TrainReferenceWithLoss(torch::nn::Module& model,
                            const std::function<torch::Tensor(const torch::Tensor&, const torch::Tensor&)>& loss,
                            const ParityData& data, const Config& config, int64_t steps,
                            const std::function<void(int64_t)>& after_step = nullptr);

// Largest violation of |a - b| <= atol + rtol * |b| over all parameters,
// as a message ("" when within tolerance).
std::string CompareParams(torch::nn::Module& a, torch::nn::Module& b, double rtol, double atol);

}  // namespace zt::testing
