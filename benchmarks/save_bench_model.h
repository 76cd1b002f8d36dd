// The model and engine settings the save benchmarks share
// (async_save_bench.cc, memory_copies_bench.cc): `depth` x Linear(width,
// width) with GELU, trained by AdamW at stage 1 on one rank, micro-batch 32,
// so their checkpoints (16 bytes per parameter) are the same size.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "absl/strings/str_cat.h"
#include "config/config.h"

namespace zt::bench {

struct SaveBenchMlpImpl : torch::nn::Module {
  SaveBenchMlpImpl(int64_t width, int64_t depth) {
    for (int64_t i = 0; i < depth; ++i)
      layers.push_back(register_module(absl::StrCat("fc", i), torch::nn::Linear(width, width)));
  }
  torch::Tensor forward(torch::Tensor x) {
    for (auto& l : layers) x = torch::gelu(l->forward(x));
    return x;
  }
  std::vector<torch::nn::Linear> layers;
};
TORCH_MODULE(SaveBenchMlp);

inline Config SaveBenchConfig() {
  Config c;
  c.batch.train_micro_batch_size_per_gpu = 32;
  c.batch.gradient_accumulation_steps = 1;
  c.steps_per_print = 0;
  c.optimizer.present = true;
  c.optimizer.type = OptimizerType::kAdamW;
  c.zero.stage = 1;
  return c;
}

}  // namespace zt::bench
