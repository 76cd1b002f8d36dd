// Key table, part 2: the optimizer and scheduler blocks, with per-type
// parameters and defaults. Optimizer defaults follow DeepSpeed's FusedAdam /
// DeepSpeedCPUAdam (Adam, AdamW), DeepSpeedCPUAdagrad and torch.optim.Adagrad,
// FusedLion / DeepSpeedCPULion, and torch.optim.SGD; scheduler names and
// defaults follow deepspeed/runtime/lr_schedules.py.
#include "absl/strings/match.h"
#include "config/schema.h"

namespace zt::config_internal {
namespace {

using O = OptimizerType;
using S = SchedulerType;

}  // namespace

void AddOptimizerKeys(std::vector<KeySpec>& keys) {
  auto add = [&](KeySpec spec) {
    spec.section = "optimizer";
    keys.push_back(std::move(spec));
  };
  add(ObjectKey("optimizer", "The optimizer zerotorch builds for the sharded parameters."));
  add(EnumKey("optimizer.type", ZT_ENUM_FIELD(optimizer.type),
              Choices({O::kAdam, O::kAdamW, O::kAdagrad, O::kLion, O::kSGD}), nullptr,
              "Optimizer algorithm; \"Adam\" decouples weight decay unless `adam_w_mode` is false.")
          .Required());
  add(ObjectKey("optimizer.params", "Parameters of the chosen type."));
  add(BoolKey("optimizer.legacy_fusion", {}, false, "DeepSpeed's old fused-kernel switch")
          .Unsupported("zerotorch has one implementation per optimizer"));

  const std::string p = "optimizer.params.";
  // The Trainer fills these four whatever the optimizer type.
  const TrainerAuto learning_rate = TrainerArgument("learning_rate", 5e-5);
  const TrainerAuto adam_epsilon = TrainerArgument("adam_epsilon", 1e-8);
  add(FloatKey(p + "lr", ZT_FIELD(optimizer.lr), 1e-3, "Learning rate.")
          .AtLeast(0)
          .AppliesTo({O::kAdam, O::kAdamW, O::kLion, O::kSGD})
          .FilledByTrainer(learning_rate));
  add(FloatKey(p + "lr", ZT_FIELD(optimizer.lr), 1e-2, "Learning rate.")
          .AtLeast(0)
          .AppliesTo({O::kAdagrad})
          .FilledByTrainer(learning_rate));
  add(PairKey(p + "betas", ZT_FIELD(optimizer.betas), Json::array({0.9, 0.999}),
              "Decay rates of the first and second moment (Lion: interpolation and update rates).")
          .AtLeast(0)
          .Below(1)
          .AppliesTo({O::kAdam, O::kAdamW, O::kLion})
          .FilledByTrainer(
              TrainerArgument("adam_beta1, adam_beta2", Json::array({0.9, 0.999}), "[`adam_beta1`, `adam_beta2`]")));
  add(FloatKey(p + "eps", ZT_FIELD(optimizer.eps), 1e-8, "Added to the denominator for stability.")
          .Above(0)
          .AppliesTo({O::kAdam, O::kAdamW})
          .FilledByTrainer(adam_epsilon));
  add(FloatKey(p + "eps", ZT_FIELD(optimizer.eps), 1e-10, "Added to the denominator for stability.")
          .Above(0)
          .AppliesTo({O::kAdagrad})
          .FilledByTrainer(adam_epsilon));
  add(FloatKey(p + "weight_decay", ZT_FIELD(optimizer.weight_decay), 0.0,
               "Weight decay: decoupled for AdamW, Lion and Adam with `adam_w_mode`; an L2 term in the "
               "gradient otherwise.")
          .AtLeast(0)
          .FilledByTrainer(TrainerArgument("weight_decay", 0.0)));
  add(BoolKey(p + "bias_correction", ZT_FIELD(optimizer.bias_correction), true,
              "Correct the moment estimates for their zero initialization.")
          .AppliesTo({O::kAdam, O::kAdamW}));
  add(BoolKey(p + "adam_w_mode", ZT_FIELD(optimizer.adam_w_mode), true,
              "Decoupled weight decay (AdamW). Type \"AdamW\" always uses it; false is only valid with "
              "type \"Adam\" (L2 regularization).")
          .AppliesTo({O::kAdam, O::kAdamW}));
  add(BoolKey(p + "torch_adam", ZT_FIELD(optimizer.torch_adam), false,
              "Use LibTorch's Adam/AdamW kernels instead of zerotorch's fused ones (for comparisons).")
          .IgnoredHere("zerotorch always runs its own fused Adam kernels")
          .AppliesTo({O::kAdam, O::kAdamW}));
  add(BoolKey(p + "amsgrad", {}, false, "the AMSGrad variant")
          .AppliesTo({O::kAdam, O::kAdamW})
          .Unsupported("DeepSpeed's fused and CPU Adam do not implement it either"));
  add(FloatKey(p + "momentum", ZT_FIELD(optimizer.momentum), 0.0, "Momentum factor.").AtLeast(0).AppliesTo({O::kSGD}));
  add(FloatKey(p + "dampening", ZT_FIELD(optimizer.dampening), 0.0, "Dampening of the momentum.")
          .AtLeast(0)
          .AppliesTo({O::kSGD}));
  add(BoolKey(p + "nesterov", ZT_FIELD(optimizer.nesterov), false,
              "Nesterov momentum (needs momentum > 0 and dampening 0).")
          .AppliesTo({O::kSGD}));
  add(FloatKey(p + "initial_accumulator_value", ZT_FIELD(optimizer.initial_accumulator_value), 0.0,
               "Starting value of the sum of squared gradients.")
          .AtLeast(0)
          .AppliesTo({O::kAdagrad}));
  add(FloatKey(p + "lr_decay", {}, 0.0, "torch.optim.Adagrad's learning-rate decay")
          .AppliesTo({O::kAdagrad})
          .Unsupported("use a scheduler"));
}

void AddSchedulerKeys(std::vector<KeySpec>& keys) {
  auto add = [&](KeySpec spec) {
    spec.section = "scheduler";
    keys.push_back(std::move(spec));
  };
  add(ObjectKey("scheduler", "Learning-rate schedule."));
  add(EnumKey("scheduler.type", ZT_ENUM_FIELD(scheduler.type),
              Choices({S::kWarmupLR, S::kWarmupDecayLR, S::kWarmupCosineLR, S::kOneCycle, S::kLRRangeTest}), nullptr,
              "Schedule.")
          .Required());
  add(ObjectKey("scheduler.params", "Parameters of the chosen type."));

  const std::string p = "scheduler.params.";
  const auto warmup = {S::kWarmupLR, S::kWarmupDecayLR};
  add(FloatKey(p + "warmup_min_lr", ZT_FIELD(scheduler.warmup_min_lr), 0.0, "Learning rate at step 0.")
          .AtLeast(0)
          .AppliesTo(warmup)
          .FilledByTrainer(TrainerArgument("", 0.0, "0 (always; not a Trainer argument)")));
  // The Trainer writes learning_rate here and into optimizer.params.lr (and
  // refuses a config where the two differ): the optimizer's lr is that value.
  add(FloatKey(p + "warmup_max_lr", ZT_FIELD(scheduler.warmup_max_lr), 1e-3,
               "Learning rate at the end of warm-up. \"auto\" takes `optimizer.params.lr`.")
          .AtLeast(0)
          .AppliesTo(warmup)
          .AutoDerived(
              +[](const Config& c) -> Json { return c.optimizer.lr; }, "= optimizer.params.lr")
          .FilledByTrainer(TrainerArgument("learning_rate", nullptr, "`learning_rate`, i.e. `optimizer.params.lr`")));
  add(IntKey(p + "warmup_num_steps", ZT_FIELD(scheduler.warmup_num_steps), 1000, "Warm-up length in steps.")
          .AtLeast(0)
          .AppliesTo({S::kWarmupLR, S::kWarmupDecayLR, S::kWarmupCosineLR})
          .FilledByTrainer(
              TrainerArgument("warmup_steps / warmup_ratio", 0,
                              "`warmup_steps` if above 0, else ceil(`warmup_ratio` * the number of training steps)")));
  add(EnumKey(p + "warmup_type", ZT_ENUM_FIELD(scheduler.warmup_type), Choices({WarmupType::kLog, WarmupType::kLinear}),
              "log", "Shape of the warm-up curve.")
          .AppliesTo({S::kWarmupLR, S::kWarmupDecayLR, S::kWarmupCosineLR}));
  add(IntKey(p + "total_num_steps", ZT_FIELD(scheduler.total_num_steps), nullptr,
             "Length of the whole schedule; the rate reaches its floor here.")
          .AtLeast(1)
          .Required()
          .AppliesTo({S::kWarmupDecayLR, S::kWarmupCosineLR})
          .FilledByTrainer(TrainerRunValue(RunInput::kTrainingSteps, "num_training_steps",
                                           "the number of training steps (`max_steps`, or epochs * steps per "
                                           "epoch)")));
  add(FloatKey(p + "warmup_min_ratio", ZT_FIELD(scheduler.warmup_min_ratio), 0.0,
               "Warm-up starts at this fraction of the optimizer's lr.")
          .Range(0, 1)
          .AppliesTo({S::kWarmupCosineLR}));
  add(FloatKey(p + "cos_min_ratio", ZT_FIELD(scheduler.cos_min_ratio), 1e-4,
               "The cosine decay ends at this fraction of the optimizer's lr.")
          .Range(0, 1)
          .AppliesTo({S::kWarmupCosineLR}));

  const auto one_cycle = {S::kOneCycle};
  add(FloatKey(p + "cycle_min_lr", ZT_FIELD(scheduler.cycle_min_lr), nullptr,
               "Learning rate at the start and end of the cycle.")
          .AtLeast(0)
          .Required()
          .AppliesTo(one_cycle));
  add(FloatKey(p + "cycle_max_lr", ZT_FIELD(scheduler.cycle_max_lr), nullptr, "Learning rate at the peak of the cycle.")
          .AtLeast(0)
          .Required()
          .AppliesTo(one_cycle));
  add(FloatKey(p + "decay_lr_rate", ZT_FIELD(scheduler.decay_lr_rate), 0.0,
               "After the cycle: lr = cycle_min_lr / (1 + decay_lr_rate * steps / decay_step_size).")
          .AtLeast(0)
          .AppliesTo(one_cycle));
  add(IntKey(p + "cycle_first_step_size", ZT_FIELD(scheduler.cycle_first_step_size), 2000,
             "Steps of the rising half of the cycle.")
          .AtLeast(1)
          .AppliesTo(one_cycle));
  add(IntKey(p + "cycle_second_step_size", ZT_FIELD(scheduler.cycle_second_step_size), nullptr,
             "Steps of the falling half of the cycle.")
          .AtLeast(1)
          .AppliesTo(one_cycle)
          .Derived(
              +[](const Config& c) -> Json { return c.scheduler.cycle_first_step_size; }, "= cycle_first_step_size"));
  add(IntKey(p + "cycle_first_stair_count", ZT_FIELD(scheduler.cycle_first_stair_count), 0,
             "Stairs in the rising half (0: a smooth ramp).")
          .AtLeast(0)
          .AppliesTo(one_cycle));
  add(IntKey(p + "cycle_second_stair_count", ZT_FIELD(scheduler.cycle_second_stair_count), nullptr,
             "Stairs in the falling half (0: a smooth ramp).")
          .AtLeast(0)
          .AppliesTo(one_cycle)
          .Derived(
              +[](const Config& c) -> Json { return c.scheduler.cycle_first_stair_count; },
              "= cycle_first_stair_count"));
  add(IntKey(p + "decay_step_size", ZT_FIELD(scheduler.decay_step_size), 0,
             "Interval of the post-cycle decay in steps (0: no decay).")
          .AtLeast(0)
          .AppliesTo(one_cycle));
  add(BoolKey(p + "cycle_momentum", ZT_FIELD(scheduler.cycle_momentum), true,
              "Cycle the momentum (Adam beta1, SGD momentum) inversely to the learning rate.")
          .AppliesTo(one_cycle));
  add(FloatKey(p + "cycle_min_mom", ZT_FIELD(scheduler.cycle_min_mom), 0.8, "Momentum at the peak of the cycle.")
          .AtLeast(0)
          .Below(1)
          .AppliesTo(one_cycle));
  add(FloatKey(p + "cycle_max_mom", ZT_FIELD(scheduler.cycle_max_mom), 0.9,
               "Momentum at the start and end of the cycle.")
          .AtLeast(0)
          .Below(1)
          .AppliesTo(one_cycle));
  add(FloatKey(p + "decay_mom_rate", ZT_FIELD(scheduler.decay_mom_rate), 0.0,
               "After the cycle: momentum grows by this rate per decay_step_size steps.")
          .AtLeast(0)
          .AppliesTo(one_cycle));

  const auto range_test = {S::kLRRangeTest};
  add(FloatKey(p + "lr_range_test_min_lr", ZT_FIELD(scheduler.lr_range_test_min_lr), 1e-3, "Starting learning rate.")
          .AtLeast(0)
          .AppliesTo(range_test));
  add(IntKey(p + "lr_range_test_step_size", ZT_FIELD(scheduler.lr_range_test_step_size), 2000, "Steps per increase.")
          .AtLeast(1)
          .AppliesTo(range_test));
  add(FloatKey(p + "lr_range_test_step_rate", ZT_FIELD(scheduler.lr_range_test_step_rate), 1.0,
               "lr = min_lr * (1 + step_rate * step / step_size).")
          .Above(0)
          .AppliesTo(range_test));
  add(BoolKey(p + "lr_range_test_staircase", ZT_FIELD(scheduler.lr_range_test_staircase), false,
              "Increase in steps instead of continuously.")
          .AppliesTo(range_test));
}

std::string KnownUnsupportedOptimizer(std::string_view type) {
  // DeepSpeed's own optimizers, then the torch.optim classes DeepSpeed would
  // look up by name.
  static const char* kNames[] = {"Lamb",  "OneBitAdam", "OneBitLamb", "ZeroOneAdam", "MuAdam", "MuAdamW", "MuSGD",
                                 "Muon",  "RMSprop",    "Adadelta",   "Adamax",      "NAdam",  "RAdam",   "ASGD",
                                 "LBFGS", "Rprop",      "SparseAdam", "FusedAdam",   "CPUAdam"};
  for (const char* name : kNames) {
    if (absl::EqualsIgnoreCase(name, std::string(type))) return name;
  }
  return "";
}

std::string KnownUnsupportedScheduler(std::string_view type) {
  // torch.optim.lr_scheduler classes, which DeepSpeed falls back to by name.
  static const char* kNames[] = {"LambdaLR",          "StepLR",
                                 "MultiStepLR",       "ConstantLR",
                                 "LinearLR",          "ExponentialLR",
                                 "CosineAnnealingLR", "CyclicLR",
                                 "OneCycleLR",        "CosineAnnealingWarmRestarts",
                                 "ReduceLROnPlateau", "PolynomialLR",
                                 "SequentialLR",      "ChainedScheduler"};
  for (const char* name : kNames) {
    if (absl::EqualsIgnoreCase(name, std::string(type))) return name;
  }
  return "";
}

}  // namespace zt::config_internal
