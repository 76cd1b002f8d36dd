// Implementation of ckpt/deepspeed/optimizer.h.
#include "ckpt/deepspeed/optimizer.h"

#include <array>
#include <memory>
#include <optional>

#include "absl/strings/str_cat.h"
#include "config/config.h"
#include "schedule/lr_scheduler.h"
#include "util/status.h"

namespace zt::ckpt {

absl::StatusOr<DeepSpeedOptimizerFacts> DeepSpeedOptimizerFactsFromConfig(const std::string& ds_config, int world_size,
                                                                          int64_t steps_taken) {
  ParseOptions options;
  options.world_size = world_size;
  options.source_name = "the checkpoint's ds_config";
  ParseResult parsed = ParseConfig(ds_config, options);
  if (!parsed.config.has_value()) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot derive DeepSpeed's optimizer param groups: ", parsed.status().message()));
  }
  const Config& config = *parsed.config;
  if (!config.optimizer.present) {
    return absl::FailedPreconditionError(
        "the checkpoint's ds_config has no \"optimizer\" block: DeepSpeed's files need the optimizer's "
        "hyperparameters (lr, betas, eps, weight_decay) and the checkpoint records them nowhere else");
  }
  const OptimizerType type = config.optimizer.type;
  if (type != OptimizerType::kAdam && type != OptimizerType::kAdamW) {
    return absl::UnimplementedError(absl::StrCat("converting a checkpoint trained with ", std::string(ToString(type)),
                                                 " to DeepSpeed's format is not supported yet (Adam and AdamW are)"));
  }
  // The config's faults are the checkpoint's, not the command line's (exit 1, not 2).
  if (absl::Status st = ValidateSchedulerConfig(config.scheduler, config.optimizer.lr); !st.ok()) {
    return absl::FailedPreconditionError(absl::StrCat("the checkpoint's ds_config: ", st.message()));
  }
  const std::unique_ptr<LrScheduler> schedule = MakeLrScheduler(config.scheduler, config.optimizer.lr);

  DeepSpeedOptimizerFacts facts;
  facts.has_scheduler = config.scheduler.type != SchedulerType::kNone;
  facts.sub_group_size = config.zero.sub_group_size;
  Dict& g = facts.param_group;
  g.Set("lr", schedule->Lr(steps_taken));
  // DeepSpeed hands the config's list to torch, which keeps it as a list.
  std::array<double, 2> betas = config.optimizer.betas;
  if (std::optional<double> m = schedule->Momentum(steps_taken)) betas[0] = *m;
  if (std::optional<double> b2 = schedule->Beta2(steps_taken)) betas[1] = *b2;
  g.Set("betas", List{Value(betas[0]), Value(betas[1])});
  g.Set("eps", config.optimizer.eps);
  g.Set("weight_decay", config.optimizer.weight_decay);
  g.Set("amsgrad", false);
  if (type == OptimizerType::kAdamW || config.optimizer.adam_w_mode) {
    // torch.optim.AdamW (torch 1.13), which DeepSpeed's torch_adam builds in adam_w_mode.
    g.Set("foreach", Value());
    g.Set("maximize", false);
    g.Set("capturable", false);
  } else {
    g.Set("maximize", false);
    g.Set("foreach", Value());
    g.Set("capturable", false);
    g.Set("differentiable", false);
    g.Set("fused", false);
  }
  return facts;
}

}  // namespace zt::ckpt
