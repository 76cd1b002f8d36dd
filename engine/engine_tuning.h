// EngineTuning: the switches that turn one of the engine's fast paths off,
// so that tests and benchmarks compare it with its reference path in one
// run. Not part of the public EngineOptions (engine/engine.h) -- a user has
// no reason to slow the engine down, and the installed headers leave this
// one out -- in the way FSDP2 keeps its policies in their own types and
// leveldb its TEST_ hooks off its public options. Every value gives the
// same results; only speed and the counters in Engine::offload_stats()
// change.
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "engine/engine.h"
#include "ops/impl.h"

namespace zt {

struct EngineTuning {
  // The optimizer kernels: the fast ones, or the scalar reference.
  ops::Impl optimizer_impl = ops::Impl::kFast;
  // Stage 3 with the optimizer state on NVMe: the update of each sub-group
  // during the boundary Backward (plan/update_schedule.h). Off: in Step.
  bool update_during_backward = true;
  // The update during backward waits for each final sub-group's optimizer
  // state to arrive and updates it inside Backward, rather than updating
  // only what has arrived, so which sub-groups are updated inside Backward
  // follows the schedule alone and not the disk's speed (tests count them).
  bool update_during_backward_waits = false;
  // Stage 3 with the parameter shards on NVMe and an fp32 model: the update
  // of the swapped groups where the next forward gathers them (and, with
  // update_during_backward, the split update). Off: in Step.
  bool update_at_gather = true;
  // NVMe offload: the I/O engine starts the reads a gather waits for, and a
  // transfer someone waits for, before everything queued
  // (offload::IoPriority). Off: submission order.
  bool io_priority = true;
  // NVMe offload through io_uring: swap buffers registered as fixed buffers
  // (offload::IoEngine::Register). Off: each transfer pins its own pages.
  bool io_fixed_buffers = true;
};

// Engine::Create with `tuning` in place of the defaults.
absl::StatusOr<std::unique_ptr<Engine>> CreateTunedEngine(std::shared_ptr<torch::nn::Module> model, Config config,
                                                          std::shared_ptr<comm::ProcessGroup> group,
                                                          EngineOptions options, EngineTuning tuning);

}  // namespace zt
