// Key table, part 1: batch sizes, top-level training keys, fp16 and bf16.
// Defaults are DeepSpeed's (deepspeed/runtime/constants.py, precision_config.py).
#include "config/schema.h"

namespace zt::config_internal {

void AddBatchKeys(std::vector<KeySpec>& keys) {
  const std::string s = "Batch size";
  auto batch = [&](KeySpec spec) {
    spec.section = s;
    spec.batch = true;
    keys.push_back(std::move(spec).AtLeast(1).DefaultText("derived"));
  };
  batch(IntKey("train_batch_size", ZT_FIELD(batch.train_batch), nullptr,
               "Samples per optimizer step, summed over all data-parallel ranks.")
            .FilledByTrainer(TrainerArgument("train_batch_size", nullptr,
                                             "world size * `per_device_train_batch_size` * "
                                             "`gradient_accumulation_steps` (derived by the rules above)")));
  batch(IntKey("train_micro_batch_size_per_gpu", ZT_FIELD(batch.micro_batch), nullptr,
               "Samples per rank per forward/backward pass.")
            .FilledByTrainer(TrainerArgument("per_device_train_batch_size", 8)));
  batch(IntKey("gradient_accumulation_steps", ZT_FIELD(batch.accumulation_steps), nullptr,
               "Micro-batches whose gradients are summed before each optimizer step.")
            .FilledByTrainer(TrainerArgument("gradient_accumulation_steps", 1)));
}

void AddTrainingKeys(std::vector<KeySpec>& keys) {
  const std::string s = "Training";
  auto add = [&](KeySpec spec) {
    spec.section = s;
    keys.push_back(std::move(spec));
  };
  add(IntKey("steps_per_print", ZT_FIELD(steps_per_print), 10,
             "Log progress (loss, learning rate, throughput) every N optimizer steps.")
          .AtLeast(1));
  add(BoolKey("wall_clock_breakdown", ZT_FIELD(wall_clock_breakdown), false,
              "Time forward, backward and optimizer step separately and log the breakdown every "
              "`steps_per_print` steps."));
  add(FloatKey("gradient_clipping", ZT_FIELD(gradient_clipping), 0.0,
               "Clip gradients to this global L2 norm, computed across all ranks and shards; 0 turns "
               "clipping off.")
          .AtLeast(0)
          .FilledByTrainer(TrainerArgument("max_grad_norm", 1.0)));
  add(BoolKey("prescale_gradients", ZT_FIELD(prescale_gradients), false,
              "Divide gradients by the world size before the reduction instead of after it."));
  add(FloatKey("gradient_predivide_factor", ZT_FIELD(gradient_predivide_factor), 1.0,
               "Divide gradients by this factor before the reduction and by world size / factor after "
               "it (keeps fp16 sums in range at large world sizes).")
          .Above(0));
  add(EnumKey("communication_data_type", ZT_OPT_ENUM_FIELD(communication_data_type, DType),
              Choices({DType::kFloat32, DType::kFloat16, DType::kBFloat16}), nullptr,
              "Data type in which gradients are reduced across ranks.")
          .Nullable()
          .DefaultText("null (the model's dtype)"));
  add(BoolKey("zero_allow_untested_optimizer", ZT_FIELD(zero_allow_untested_optimizer), false,
              "Allow ZeRO with a client optimizer (one not built from the `optimizer` block).")
          .IgnoredHere("the engine builds its optimizer from the `optimizer` block; client optimizers are not taken"));
  add(BoolKey("zero_force_ds_cpu_optimizer", ZT_FIELD(zero_force_ds_cpu_optimizer), true,
              "With optimizer offload, require zerotorch's CPU optimizer rather than a client optimizer.")
          .IgnoredHere("offloaded optimizer state is always updated by zerotorch's own CPU optimizer"));
  add(BoolKey("dump_state", ZT_FIELD(dump_state), false, "Log the resolved engine state after start-up.")
          .IgnoredHere("no state dump is logged"));
  add(BoolKey("memory_breakdown", ZT_FIELD(memory_breakdown), false, "Log memory use every `steps_per_print` steps.")
          .IgnoredHere("no per-step memory log (`zt estimate` and the benchmarks report memory)"));
  add(BoolKey("dataloader_drop_last", {}, false,
              "DeepSpeed's data loader drops the last incomplete batch. zerotorch builds no data loader; "
              "accepted, no effect.")
          .NoEffect());
  add(IntKey("vocabulary_size", {}, nullptr,
             "DeepSpeed only warns when it is not a multiple of 8; accepted, no effect.")
          .Nullable()
          .NoEffect());
}

void AddPrecisionKeys(std::vector<KeySpec>& keys, std::vector<LegacySpelling>& legacy) {
  auto add = [&](const char* section, KeySpec spec) {
    spec.section = section;
    keys.push_back(std::move(spec));
  };
  add("fp16", ObjectKey("fp16", "fp16 mixed precision."));
  add("fp16", BoolKey("fp16.enabled", ZT_FIELD(fp16.enabled), false,
                      "Train with fp16 weights, fp32 master weights and loss scaling.")
                  .FilledByTrainer(TrainerArgument("fp16", false, "`fp16` or `fp16_full_eval` (amp backend)")));
  add("fp16", BoolKey("fp16.auto_cast", ZT_FIELD(fp16.auto_cast), false,
                      "Cast floating-point inputs of the model's forward to fp16.")
                  .IgnoredHere("inputs are not cast; the model sees the dtype its caller gives"));
  add("fp16",
      FloatKey("fp16.loss_scale", ZT_FIELD(fp16.loss_scale), 0.0, "0: dynamic loss scaling; > 0: this static scale.")
          .AtLeast(0));
  add("fp16", IntKey("fp16.initial_scale_power", ZT_FIELD(fp16.initial_scale_power), 16,
                     "Dynamic scaling starts at 2^initial_scale_power.")
                  .Range(0, 64));
  add("fp16", IntKey("fp16.loss_scale_window", ZT_FIELD(fp16.loss_scale_window), 1000,
                     "Overflow-free steps after which the dynamic scale doubles.")
                  .AtLeast(1));
  add("fp16",
      IntKey("fp16.hysteresis", ZT_FIELD(fp16.hysteresis), 2, "Overflows tolerated before the dynamic scale is halved.")
          .AtLeast(1));
  add("fp16", BoolKey("fp16.consecutive_hysteresis", ZT_FIELD(fp16.consecutive_hysteresis), false,
                      "Refill the hysteresis after every overflow-free step (only consecutive overflows "
                      "count)."));
  add("fp16", FloatKey("fp16.min_loss_scale", ZT_FIELD(fp16.min_loss_scale), 1.0,
                       "Floor of the dynamic scale; an overflow at the floor stops training with an error.")
                  .Above(0));
  add("fp16", BoolKey("fp16.fp16_master_weights_and_grads", {}, false, "fp16 master weights")
                  .Unsupported("zerotorch always keeps fp32 master weights"));

  add("bf16", ObjectKey("bf16", "bfloat16 mixed precision."));
  add("bf16", BoolKey("bf16.enabled", ZT_FIELD(bf16.enabled), false,
                      "Train with bf16 weights and fp32 master weights (no loss scaling).")
                  .FilledByTrainer(TrainerArgument("bf16", false, "`bf16` or `bf16_full_eval`")));
  add("bf16", BoolKey("bf16.immediate_grad_update", {}, false,
                      "DeepSpeed's bf16 optimizer option for when gradients are applied; accepted, no "
                      "effect.")
                  .NoEffect());
  add("bf16", BoolKey("bf16.check_grad_overflow", {}, false,
                      "DeepSpeed's optional overflow check for bf16; accepted, no effect.")
                  .NoEffect());
  add("bf16", BoolKey("bf16.bf16_master_weights_and_grads", {}, false, "bf16 master weights")
                  .Unsupported("zerotorch always keeps fp32 master weights"));
  add("bf16", BoolKey("bf16.bf16_optimizer_states", {}, false, "bf16 optimizer states")
                  .Unsupported("zerotorch keeps optimizer states in fp32"));
  legacy.push_back({"bfloat16", "bf16", "the old name of the `bf16` block", true});
}

}  // namespace zt::config_internal
