// Key table, part 4: aio, activation_checkpointing, checkpoint, data_types
// and the monitors. Defaults follow DeepSpeed's aio_config.py, constants.py
// and monitor/config.py.
#include "config/schema.h"

namespace zt::config_internal {
namespace {

void AddMonitor(std::vector<KeySpec>& keys, const std::string& name, FieldRef<bool> enabled,
                FieldRef<std::string> output_path, FieldRef<std::string> job_name, const std::string& what) {
  auto add = [&](KeySpec spec) {
    spec.section = "Monitoring";
    keys.push_back(std::move(spec));
  };
  add(ObjectKey(name, what));
  add(BoolKey(name + ".enabled", enabled, false, "Write " + what + "."));
  add(StringKey(name + ".output_path", output_path, "", "Directory for the output; empty: the current directory."));
  add(StringKey(name + ".job_name", job_name, "DeepSpeedJobName", "Subdirectory of output_path for this run."));
}

}  // namespace

void AddRuntimeKeys(std::vector<KeySpec>& keys, std::vector<LegacySpelling>& legacy) {
  auto add = [&](const char* section, KeySpec spec) {
    spec.section = section;
    keys.push_back(std::move(spec));
  };
  add("aio", ObjectKey("aio", "NVMe I/O settings."));
  add("aio", IntKey("aio.block_size", ZT_FIELD(aio.block_size), 1048576, "Bytes per I/O request.").AtLeast(1));
  add("aio", IntKey("aio.queue_depth", ZT_FIELD(aio.queue_depth), 8, "I/O requests in flight per thread.").AtLeast(1));
  add("aio", IntKey("aio.intra_op_parallelism", ZT_FIELD(aio.intra_op_parallelism), 1,
                    "I/O threads per swap operation (DeepSpeed's older name: thread_count).")
                 .AtLeast(1));
  add("aio", BoolKey("aio.single_submit", ZT_FIELD(aio.single_submit), false,
                     "Submit requests one at a time instead of in batches."));
  add("aio", BoolKey("aio.overlap_events", ZT_FIELD(aio.overlap_events), true,
                     "Submit new requests while earlier ones complete."));
  add("aio", BoolKey("aio.use_gds", {}, false, "NVIDIA GPUDirect Storage")
                 .Unsupported("zerotorch reads NVMe into host memory with io_uring"));
  legacy.push_back({"aio.thread_count", "aio.intra_op_parallelism", "same value (renamed by DeepSpeed in 2025)", true});

  const char* ac = "activation_checkpointing";
  const std::string a = "activation_checkpointing.";
  add(ac, ObjectKey(ac, "Activation checkpointing."));
  add(ac, BoolKey(a + "partition_activations", ZT_FIELD(activation_checkpointing.partition_activations), false,
                  "Split each checkpointed activation across the data-parallel ranks."));
  add(ac, BoolKey(a + "cpu_checkpointing", ZT_FIELD(activation_checkpointing.cpu_checkpointing), false,
                  "Move the partitioned checkpoints to CPU memory (needs partition_activations)."));
  add(ac,
      BoolKey(a + "contiguous_memory_optimization", ZT_FIELD(activation_checkpointing.contiguous_memory_optimization),
              false, "Copy checkpoints into one preallocated buffer (less fragmentation)."));
  add(ac, IntKey(a + "number_checkpoints", ZT_FIELD(activation_checkpointing.number_checkpoints), nullptr,
                 "Checkpoints per forward pass, used to size the contiguous buffer; null: unknown.")
              .AtLeast(1)
              .Nullable());
  add(ac,
      BoolKey(a + "synchronize_checkpoint_boundary", ZT_FIELD(activation_checkpointing.synchronize_checkpoint_boundary),
              false, "Synchronize the device at each checkpoint boundary (for debugging and timing)."));
  add(ac, BoolKey(a + "profile", ZT_FIELD(activation_checkpointing.profile), false,
                  "Log the time spent in checkpointed forward and recompute."));

  add("checkpoint", ObjectKey("checkpoint", "Checkpoint options."));
  add("checkpoint", EnumKey("checkpoint.tag_validation", ZT_ENUM_FIELD(checkpoint.tag_validation),
                            Choices({TagValidation::kIgnore, TagValidation::kWarn, TagValidation::kFail}), "Warn",
                            "What to do when ranks save under different tags (matched case-insensitively)."));
  add("checkpoint", BoolKey("checkpoint.load_universal", ZT_FIELD(checkpoint.load_universal), false,
                            "Load a universal (world-size independent) checkpoint.")
                        .IgnoredHere("zerotorch loads its own checkpoints at any world size without conversion; "
                                     "DeepSpeed's universal-checkpoint folders are not read"));
  add("checkpoint",
      BoolKey("checkpoint.use_node_local_storage", ZT_FIELD(checkpoint.use_node_local_storage), false,
              "Each node writes its ranks' shards to its own local disk.")
          .IgnoredHere("every rank writes into the one checkpoint directory, which all nodes must share"));
  add("checkpoint",
      BoolKey("checkpoint.async_save", ZT_FIELD(checkpoint.async_save), false,
              "Asynchronous saves (PyTorch DCP's async_save): a save copies this rank's shards into host staging "
              "memory (one checkpoint's worth per rank, kept for the next save) and returns; a background thread "
              "writes the files while training goes on, and `latest` moves when every rank's files are complete. "
              "At most one save in flight: the next save, a load or an export waits for it."));
  add("checkpoint", FeatureBlock("checkpoint.parallel_write", "pipeline-stage parallel checkpoint writes",
                                 "zerotorch has no pipeline stages"));

  add("data_types", ObjectKey("data_types", "Internal data types."));
  add("data_types", EnumKey("data_types.grad_accum_dtype", ZT_OPT_ENUM_FIELD(grad_accum_dtype, DType),
                            Choices({DType::kFloat32, DType::kFloat16, DType::kBFloat16}), nullptr,
                            "Data type gradients are accumulated in across micro-batches.")
                        .Nullable()
                        .DefaultText("null (the model's dtype)"));

  AddMonitor(keys, "tensorboard", ZT_FIELD(tensorboard.enabled), ZT_FIELD(tensorboard.output_path),
             ZT_FIELD(tensorboard.job_name), "TensorBoard event files");
  AddMonitor(keys, "csv_monitor", ZT_FIELD(csv_monitor.enabled), ZT_FIELD(csv_monitor.output_path),
             ZT_FIELD(csv_monitor.job_name), "CSV files, one per metric");
}

}  // namespace zt::config_internal
