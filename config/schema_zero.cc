// Key table, part 3: zero_optimization with offload_optimizer and
// offload_param. Names, aliases and defaults follow DeepSpeed's
// deepspeed/runtime/zero/config.py and offload_config.py.
#include "config/schema.h"

namespace zt::config_internal {
namespace {

const char* kZ = "zero_optimization";

std::vector<EnumChoice> Devices() { return Choices({OffloadDevice::kNone, OffloadDevice::kCpu, OffloadDevice::kNvme}); }

void AddOffloadKeys(std::vector<KeySpec>& keys) {
  auto add = [&](const char* section, KeySpec spec) {
    spec.section = section;
    keys.push_back(std::move(spec));
  };
  const char* so = "zero_optimization.offload_optimizer";
  const std::string o = "zero_optimization.offload_optimizer.";
  add(so, ObjectKey(so, "Optimizer-state offload."));
  add(so, EnumKey(o + "device", ZT_ENUM_FIELD(zero.offload_optimizer.device), Devices(), "none",
                  "Where optimizer states live and the optimizer step runs."));
  add(so, StringKey(o + "nvme_path", ZT_FIELD(zero.offload_optimizer.nvme_path), nullptr,
                    "Directory for the swap files; required with device \"nvme\".")
              .Nullable());
  add(so, BoolKey(o + "pin_memory", ZT_FIELD(zero.offload_optimizer.pin_memory), false,
                  "Use page-locked host buffers (faster copies, less memory for everything else).")
              .IgnoredHere("a CPU-only build makes no device copies, so there is nothing to pin"));
  add(so,
      IntKey(o + "buffer_count", ZT_FIELD(zero.offload_optimizer.buffer_count), OffloadOptimizerConfig().buffer_count,
             "NVMe swap buffers, each one sub-group of one fp32 state (master copy, exp_avg, ...); at least the "
             "states per sub-group (Adam: 3 with a bf16/fp16 model, 2 with fp32). All are allocated: the "
             "sub-groups they hold stay in memory between steps, and only the rest is read and written.")
          .AtLeast(1));
  add(so,
      BoolKey(o + "pipeline_read", ZT_FIELD(zero.offload_optimizer.pipeline_read), false,
              "Read the sub-groups the swap buffers do not hold as soon as a buffer is free, while the step goes on."));
  add(so,
      BoolKey(o + "pipeline_write", ZT_FIELD(zero.offload_optimizer.pipeline_write), false,
              "Leave write-backs in flight while the step goes on; the last ones complete behind the next forward."));
  add(so, BoolKey(o + "fast_init", ZT_FIELD(zero.offload_optimizer.fast_init), false,
                  "DeepSpeed's shortcut for initializing NVMe-offloaded state; zerotorch's swap files start as "
                  "preallocated zeros either way, so only the master copy is written. Accepted, no effect.")
              .NoEffect());
  add(so, FloatKey(o + "ratio", ZT_FIELD(zero.offload_optimizer.ratio), 1.0,
                   "Fraction of the optimizer state that is offloaded; below 1 needs stage 3 (zerotorch offloads all "
                   "of it: Engine::Create rejects a ratio below 1).")
              .Above(0)
              .AtMost(1));
  add(so, BoolKey(o + "super_offload", {}, false, "DeepSpeed's Superchip offload").Unsupported("use device \"cpu\""));
  add(so, BoolKey(o + "convert_grad_on_cpu", {}, true,
                  "Where DeepSpeed's Superchip offload converts gradients; accepted, no effect.")
              .NoEffect());
  add(so, FloatKey(o + "cpuadam_cores_perc", {}, 0.8,
                   "Share of cores DeepSpeed's Superchip offload gives CPU Adam; accepted, no effect.")
              .Range(0, 1)
              .NoEffect());

  const char* sp = "zero_optimization.offload_param";
  const std::string p = "zero_optimization.offload_param.";
  add(sp, ObjectKey(sp, "Parameter offload (stage 3)."));
  add(sp, EnumKey(p + "device", ZT_ENUM_FIELD(zero.offload_param.device), Devices(), "none",
                  "Where partitioned parameters live between uses."));
  add(sp, StringKey(p + "nvme_path", ZT_FIELD(zero.offload_param.nvme_path), nullptr,
                    "Directory for the swap files; required with device \"nvme\".")
              .Nullable());
  add(sp, BoolKey(p + "pin_memory", ZT_FIELD(zero.offload_param.pin_memory), false, "Use page-locked host buffers.")
              .IgnoredHere("a CPU-only build makes no device copies, so there is nothing to pin"));
  add(sp, IntKey(p + "buffer_count", ZT_FIELD(zero.offload_param.buffer_count), OffloadParamConfig().buffer_count,
                 "NVMe swap buffers for parameters.")
              .AtLeast(1));
  add(sp, IntKey(p + "buffer_size", ZT_FIELD(zero.offload_param.buffer_size), OffloadParamConfig().buffer_size,
                 "Elements per NVMe swap buffer; must hold the largest chunk's shard (chunks have at most "
                 "reduce_bucket_size elements).")
              .AtLeast(1));
  add(sp, IntKey(p + "max_in_cpu", ZT_FIELD(zero.offload_param.max_in_cpu), OffloadParamConfig().max_in_cpu,
                 "Parameter elements to keep in host memory with NVMe offload (DeepSpeed's description).")
              .AtLeast(0)
              .IgnoredHere("as in DeepSpeed 0.14, which only logs it: every shard of at least aio.block_size bytes "
                           "goes to NVMe, smaller ones stay in memory"));
}

}  // namespace

void AddZeroKeys(std::vector<KeySpec>& keys, std::vector<LegacySpelling>& legacy) {
  auto add = [&](KeySpec spec) {
    spec.section = kZ;
    keys.push_back(std::move(spec));
  };
  const std::string z = "zero_optimization.";
  add(ObjectKey(kZ, "ZeRO partitioning."));
  add(IntKey(z + "stage", ZT_FIELD(zero.stage), 0,
             "0: data parallel; 1: partition optimizer states; 2: and gradients; 3: and parameters.")
          .Range(0, 3));
  add(BoolKey(z + "contiguous_gradients", ZT_FIELD(zero.contiguous_gradients), true,
              "Copy gradients into one contiguous buffer as they are produced (less fragmentation).")
          .IgnoredHere("gradients always live in contiguous flat buffers"));
  add(BoolKey(z + "reduce_scatter", ZT_FIELD(zero.reduce_scatter), true,
              "Average gradients with reduce-scatter (false: all-reduce, then keep the local part).")
          .IgnoredHere("gradients are always averaged with reduce-scatter at stages 1-3 (all-reduce at stage 0)"));
  add(IntKey(z + "reduce_bucket_size", ZT_FIELD(zero.reduce_bucket_size), 500000000,
             "Gradient elements reduced per bucket.")
          .AtLeast(1)
          .FilledByTrainer(TrainerHiddenSize(
              +[](int64_t h) -> int64_t { return h * h; }, false, "hidden_size * hidden_size")));
  add(BoolKey(z + "allgather_partitions", ZT_FIELD(zero.allgather_partitions), true,
              "Gather updated partitions with all-gather (false: one broadcast per rank).")
          .IgnoredHere("updated partitions are always all-gathered"));
  add(IntKey(z + "allgather_bucket_size", ZT_FIELD(zero.allgather_bucket_size), 500000000,
             "Parameter elements all-gathered per bucket.")
          .IgnoredHere("stages 1-2 all-gather the updated parameters one flat group at a time, groups sized by "
                       "reduce_bucket_size")
          .AtLeast(1));
  add(BoolKey(z + "overlap_comm", ZT_FIELD(zero.overlap_comm), false,
              "Overlap gradient reduction with the backward pass (uses more memory for buckets).")
          .Derived(
              +[](const Config& c) -> Json { return c.zero.stage == 3; }, "true at stage 3, else false"));
  add(BoolKey(z + "load_from_fp32_weights", ZT_FIELD(zero.load_from_fp32_weights), true,
              "On load, restore master weights from the checkpoint's fp32 copy (not from the 16-bit "
              "model weights).")
          .IgnoredHere("the fp32 master weights are always restored from the checkpoint's fp32 copy"));
  add(BoolKey(z + "elastic_checkpoint", ZT_FIELD(zero.elastic_checkpoint), false,
              "Stage 1/2: save optimizer state so it can be loaded at another world size.")
          .IgnoredHere("every checkpoint loads at any world size"));
  add(BoolKey(z + "round_robin_gradients", ZT_FIELD(zero.round_robin_gradients), false,
              "Stage 1/2 with CPU offload: spread gradient copies across ranks round-robin.")
          .IgnoredHere("gradient copies to the CPU are not spread round-robin"));
  add(IntKey(z + "sub_group_size", ZT_FIELD(zero.sub_group_size), 1000000000,
             "Stage 3: parameter elements per optimizer sub-group (the unit swapped to NVMe).")
          .AtLeast(1));
  add(IntKey(z + "stage3_prefetch_bucket_size", ZT_FIELD(zero.prefetch_bucket_size), 50000000,
             "Stage 3: parameter elements fetched ahead of use (0: no prefetch).")
          .AtLeast(0)
          .Alias("prefetch_bucket_size")
          // transformers truncates: int(0.9 * hidden_size * hidden_size), left to right in doubles.
          .FilledByTrainer(TrainerHiddenSize(
              +[](int64_t h) -> int64_t { return static_cast<int64_t>(0.9 * static_cast<double>(h) * h); }, true,
              "int(0.9 * hidden_size * hidden_size)")));
  add(IntKey(z + "stage3_param_persistence_threshold", ZT_FIELD(zero.param_persistence_threshold), 100000,
             "Stage 3: parameters with fewer elements stay gathered on every rank.")
          .AtLeast(0)
          .Alias("param_persistence_threshold")
          .FilledByTrainer(TrainerHiddenSize(
              +[](int64_t h) -> int64_t { return 10 * h; }, true, "10 * hidden_size")));
  add(IntKey(z + "stage3_model_persistence_threshold", ZT_FIELD(zero.model_persistence_threshold), INT64_MAX,
             "Stage 3: cap on the total elements kept gathered by the persistence threshold.")
          .AtLeast(0)
          .Alias("model_persistence_threshold")
          .DefaultText("unlimited (9223372036854775807)"));
  add(IntKey(z + "stage3_max_live_parameters", ZT_FIELD(zero.max_live_parameters), 1000000000,
             "Stage 3: gathered parameter elements allowed before the oldest are released.")
          .AtLeast(0)
          .Alias("max_live_parameters"));
  add(IntKey(z + "stage3_max_reuse_distance", ZT_FIELD(zero.max_reuse_distance), 1000000000,
             "Stage 3: keep a parameter gathered if it is used again within this many elements.")
          .AtLeast(0)
          .Alias("max_reuse_distance"));
  add(BoolKey(z + "stage3_gather_16bit_weights_on_model_save", ZT_FIELD(zero.gather_16bit_weights_on_model_save), false,
              "Stage 3: gather the full 16-bit weights when saving the model.")
          .Alias("gather_16bit_weights_on_model_save"));
  add(BoolKey(z + "ignore_unused_parameters", ZT_FIELD(zero.ignore_unused_parameters), true,
              "Stage 1/2: tolerate parameters that get no gradient (false: report them as an error).")
          .IgnoredHere("parameters that get no gradient are always tolerated (their gradient is zero)"));

  // DeepSpeed keys that only tune its Python implementation.
  add(BoolKey(z + "use_multi_rank_bucket_allreduce", {}, true,
              "DeepSpeed's bucket-merging all-reduce; accepted, no effect.")
          .NoEffect());
  add(BoolKey(z + "memory_efficient_linear", {}, true,
              "DeepSpeed replaces torch.nn.Linear at stage 3; accepted, no effect.")
          .NoEffect());
  add(BoolKey(z + "override_module_apply", {}, true,
              "DeepSpeed patches nn.Module.apply at stage 3; accepted, no effect.")
          .NoEffect());
  add(BoolKey(z + "log_trace_cache_warnings", {}, false,
              "DeepSpeed's stage-3 trace-cache logging; accepted, no effect.")
          .NoEffect());
  add(BoolKey(z + "enable_sanity_checks", {}, false, "DeepSpeed's internal checks; accepted, no effect.").NoEffect());

  add(IntKey(z + "mics_shard_size", ZT_FIELD(zero.mics_shard_size), -1,
             "MiCS / HSDP: shard parameters, gradients and optimizer state over groups of this many consecutive "
             "ranks and replicate across the groups (gradients reduce-scattered inside a group, then all-reduced "
             "across groups). The ranks per host keeps parameter gathers inside a host. Must divide the world "
             "size; stages 1-3. -1: shard over the whole world.")
          .AtLeast(-1));
  add(IntKey(z + "zero_hpz_partition_size", ZT_FIELD(zero.hpz_partition_size), 1,
             "ZeRO++ hpZ, stage 3: after a chunk's forward gather each rank keeps a secondary shard of it over "
             "groups of this many consecutive ranks (the ranks per host), and backward gathers from those inside "
             "the group instead of from every rank; costs the secondary shards' memory (parameters / this size, "
             "counted in Engine::memory()). Must divide the world size. 1: off.")
          .AtLeast(1));

  add(BoolKey(z + "zero_quantized_weights", ZT_FIELD(zero.quantized_weights), false,
              "ZeRO++ qwZ, stage 3: parameter all-gathers (forward, backward, evaluation, and hpZ's secondary "
              "gathers) send int8 blocks of 2048 elements with a float scale each instead of the model dtype, and "
              "every rank dequantizes them: about 1/4 of fp32's bytes, 1/2 of bf16's. Each gathered value is within "
              "half a scale (1/254 of its block's largest magnitude) of the shard's; master weights, optimizer "
              "state, checkpoints and GatheredParameters stay exact. Persistent parameters "
              "(stage3_param_persistence_threshold) are gathered in full precision."));
  add(BoolKey(z + "zero_quantized_nontrainable_weights", ZT_FIELD(zero.quantized_nontrainable_weights), false,
              "ZeRO++, stage 3: frozen parameters (requires_grad false: LoRA's base) are gathered as int8 blocks "
              "quantized once, at their first gather (again after a load), since they never change; the records "
              "take about 1/4 of the frozen shards' fp32 memory beside them (counted in Engine::memory())."));

  add(BoolKey(z + "zero_quantized_gradients", ZT_FIELD(zero.quantized_gradients), false,
              "ZeRO++ qgZ, stage 3: each gradient bucket is reduced by one all-to-all in which every rank sends "
              "each peer that peer's slice quantized (int8 blocks of 2048 elements with a float scale each, about "
              "1/4 of fp32's bytes), and each rank sums what it receives in fp32 with its own slice exact. No "
              "partial sum is quantized again: the averaged gradient is within the mean of the senders' half-scales "
              "of the exact one, whatever the number of ranks. With mics_shard_size the all-reduce across the "
              "replicas stays exact. DeepSpeed's qgZ sends 4 bits in two hops: see "
              "zero_quantized_gradients_bits."));
  add(IntKey(z + "zero_quantized_gradients_bits", ZT_FIELD(zero.quantized_gradients_bits), 8,
             "zerotorch's own key (DeepSpeed's qgZ always sends 4 bits): bits of qgZ's gradient blocks, 8 or 4. "
             "4 halves the bytes again and raises the rounding from 1/254 of each block's largest magnitude to "
             "1/14 (about 18x); zeropp_loco_param feeds the rounding back."));
  add(BoolKey(z + "mics_hierarchical_params_gather", ZT_FIELD(zero.mics_hierarchical_params_gather), false,
              "MiCS's hierarchical gather, stage 3: where the shard group spans hosts (mics_shard_size larger than "
              "the ranks per host, or the flat world on several hosts), parameters are all-gathered in two hops, "
              "first among the ranks with the same place on each host, then inside each host: each host sends "
              "(hosts - 1) / hosts of a buffer across instead of every rank's shard to every other host's ranks. "
              "Bitwise the one-hop gather. No effect where the shard group is inside a host."));
  add(BoolKey(z + "legacy_stage1", {}, false, "DeepSpeed's old stage-1 implementation").Unsupported("leave it false"));
  add(BoolKey(z + "pipeline_loading_checkpoint", {}, false, "loading checkpoints for pipeline parallelism")
          .Unsupported("leave it false"));
  add(IntKey(z + "stage3_module_granularity_threshold", {}, 0, "fetching small modules as one unit")
          .Alias("module_granularity_threshold")
          .Unsupported("leave it at 0"));
  add(BoolKey(z + "stage3_use_all_reduce_for_fetch_params", {}, false,
              "all-reduce instead of all-gather to fetch parameters")
          .Alias("use_all_reduce_for_fetch_params")
          .Unsupported("leave it false"));
  add(BoolKey(z + "stage3_allgather_sequential", {}, false, "per-parameter all-gather without buckets")
          .Alias("allgather_sequential")
          .Unsupported("leave it false"));
  add(ObjectKey(z + "zeropp_loco_param",
                "LoCo error feedback for qgZ (zero_quantized_gradients): each rank keeps what rounding lost on "
                "each peer slice (as int8, about 1/4 of the gradients' fp32 bytes per rank, counted in "
                "Engine::memory()) and adds it to the next reduction's slice. On when the block sets err_beta or "
                "reset_T; {} or null: off."));
  add(FloatKey(z + "zeropp_loco_param.err_beta", ZT_FIELD(zero.loco_err_beta), 0.8,
               "LoCo: the stored error becomes err_beta * error + (1 - err_beta) * this reduction's rounding.")
          .Range(0, 1));
  add(IntKey(z + "zeropp_loco_param.reset_T", ZT_FIELD(zero.loco_reset_t), 1024,
             "LoCo: reductions of a bucket after which its stored error is cleared.")
          .AtLeast(1));
  add(FeatureBlock(z + "zenflow", "ZenFlow asynchronous offloaded updates",
                   "use offload_optimizer with device \"cpu\""));
  add(FeatureBlock(z + "leaf_module", "modules gathered as one stage-3 unit",
                   "mark sharding units in the model code instead"));

  AddOffloadKeys(keys);

  legacy.push_back({"zero_optimization.stage3_gather_fp16_weights_on_model_save",
                    "zero_optimization.stage3_gather_16bit_weights_on_model_save", "same value", true});
  legacy.push_back({"zero_optimization.cpu_offload", "zero_optimization.offload_optimizer.device",
                    "true -> \"cpu\", false -> \"none\"", false});
  legacy.push_back({"zero_optimization.cpu_offload_param", "zero_optimization.offload_param.device",
                    "true -> \"cpu\", false -> \"none\"", false});
  legacy.push_back({"zero_optimization.cpu_offload_use_pin_memory",
                    "zero_optimization.offload_optimizer.pin_memory and zero_optimization.offload_param.pin_memory",
                    "the value goes to both, unless a block sets pin_memory itself", false});
  legacy.push_back({"zero_optimization", "zero_optimization.stage",
                    "`\"zero_optimization\": true` -> stage 1, false -> stage 0", false});
}

}  // namespace zt::config_internal
