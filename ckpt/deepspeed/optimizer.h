// What DeepSpeed's files record about the optimizer that a checkpoint keeps
// only as its config text (ds_config) and step count: the hyperparameters of
// each optimizer param group (torch's optimizer saves them with its state,
// and DeepSpeed's load replaces the optimizer's groups with them, so they
// must be complete), whether an lr scheduler ran, and stage 3's sub-group
// size. Derived with zerotorch's config parser and its DeepSpeed-exact lr
// schedules (schedule/lr_scheduler.h), so the lr is the one DeepSpeed's
// optimizer held after `steps_taken` applied steps.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "ckpt/format/value.h"

namespace zt::ckpt {

struct DeepSpeedOptimizerFacts {
  // One param group as torch.optim saves it, without "params": for AdamW (and
  // Adam in DeepSpeed's adam_w_mode) torch 1.13's AdamW keys lr, betas, eps,
  // weight_decay, amsgrad, foreach, maximize, capturable; for Adam without
  // adam_w_mode torch.optim.Adam's (adding differentiable, fused). These are
  // the groups of DeepSpeed's `torch_adam` optimizers, as the fixtures show.
  Dict param_group;
  bool has_scheduler = false;  // DeepSpeed saves lr_scheduler as None without one
  int64_t sub_group_size = 0;  // zero_optimization.sub_group_size (stage 3)
};

// From `ds_config` (the JSON text a checkpoint carries), parsed for
// `world_size` ranks, after `steps_taken` applied optimizer steps.
// Unimplemented for optimizers other than Adam/AdamW; FailedPrecondition when
// the config does not parse or has no optimizer block (DeepSpeed needs the
// hyperparameters and the checkpoint has nothing else to take them from).
absl::StatusOr<DeepSpeedOptimizerFacts> DeepSpeedOptimizerFactsFromConfig(const std::string& ds_config, int world_size,
                                                                          int64_t steps_taken);

}  // namespace zt::ckpt
