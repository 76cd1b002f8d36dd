// The engine config every engine test starts from: a batch shape, an
// optimizer block, a ZeRO stage, and no step printing. Each test then sets
// what it is about (buckets, persistence, precision, scheduler) on top.
#pragma once

#include <cstdint>

#include "config/config.h"

namespace zt::testing {

inline Config TestConfig(int stage, int64_t micro_batch, int64_t accumulation,
                         OptimizerType optimizer = OptimizerType::kAdamW, double lr = 1e-3) {
  Config c;
  c.batch.train_micro_batch_size_per_gpu = micro_batch;
  c.batch.gradient_accumulation_steps = accumulation;
  c.steps_per_print = 1000;
  c.optimizer.present = true;
  c.optimizer.type = optimizer;
  c.optimizer.lr = lr;
  c.zero.stage = stage;
  return c;
}

}  // namespace zt::testing
