// Key table, part 5: top-level DeepSpeed features zerotorch does not
// implement. Users keep these in their files switched off, so "off" is
// accepted; anything else is an error that says so plainly (DeepSpeed's
// runtime/config.py and constants.py list the keys).
#include "config/schema.h"

namespace zt::config_internal {

void AddUnsupportedKeys(std::vector<KeySpec>& keys) {
  struct Block {
    const char* name;
    const char* meaning;
    const char* hint;
  };
  static const Block kBlocks[] = {
      {"amp", "NVIDIA Apex automatic mixed precision", "use \"fp16\" or \"bf16\""},
      {"torch_autocast", "torch.autocast mixed precision", "use \"fp16\" or \"bf16\""},
      {"pipeline", "pipeline parallelism", "zerotorch is data-parallel (ZeRO) only"},
      {"moe", "mixture-of-experts parallelism", "zerotorch is data-parallel (ZeRO) only"},
      {"expert_parallel", "expert parallelism", "zerotorch is data-parallel (ZeRO) only"},
      {"tensor_parallel", "automatic tensor parallelism", "zerotorch is data-parallel (ZeRO) only"},
      {"hybrid_engine", "the RLHF hybrid training/inference engine", ""},
      {"compression_training", "compression (quantization, pruning, layer reduction)", ""},
      {"quantize_training", "mixture-of-quantization training (MoQ)", ""},
      {"weight_quantization", "weight quantization", ""},
      {"sparse_attention", "block-sparse attention kernels", "this is a model-level feature"},
      {"flops_profiler", "the FLOPs profiler", "use wall_clock_breakdown for step timings"},
      {"autotuning", "the autotuner", ""},
      {"elasticity", "elastic training", "resume at another world size from a checkpoint instead"},
      {"curriculum_learning", "curriculum learning (legacy form)", ""},
      {"data_efficiency", "data efficiency (curriculum sampling, random-LTD)", ""},
      {"progressive_layer_drop", "progressive layer dropping", ""},
      {"eigenvalue", "eigenvalue computation", ""},
      {"wandb", "the Weights & Biases monitor", "use tensorboard or csv_monitor"},
      {"comet", "the Comet monitor", "use tensorboard or csv_monitor"},
      {"trackio", "the Trackio monitor", "use tensorboard or csv_monitor"},
      {"comms_logger", "the communication logger", "zerotorch counts collective bytes itself"},
      {"nebula", "Nebula asynchronous checkpointing", "use checkpoint.async_save"},
      {"datastates", "DataStates asynchronous checkpointing", "use checkpoint.async_save"},
      {"compile", "DeepCompile / torch.compile", ""},
      {"timers", "DeepSpeed's throughput timers", "use wall_clock_breakdown"},
  };
  for (const Block& b : kBlocks) {
    keys.push_back(FeatureBlock(b.name, b.meaning, b.hint));
  }
  keys.push_back(BoolKey("sparse_gradients", {}, false, "sparse (CSR) gradients for embeddings")
                     .Unsupported("gradients are dense"));
  keys.push_back(
      BoolKey("disable_allgather", {}, false, "broadcast instead of all-gather").Unsupported("leave it false"));
  keys.push_back(
      BoolKey("graph_harvesting", {}, false, "CUDA graph capture of short kernels").Unsupported("leave it false"));
  keys.push_back(IntKey("sequence_parallel_size", {}, 1, "Ulysses sequence parallelism")
                     .Unsupported("zerotorch is data-parallel (ZeRO) only"));
  keys.push_back(EnumKey("seq_parallel_comm_data_type", {},
                         Choices({DType::kFloat32, DType::kFloat16, DType::kBFloat16}), "fp32",
                         "data type of sequence-parallel communication")
                     .Unsupported("zerotorch has no sequence parallelism"));
  keys.push_back(BoolKey("use_data_before_expert_parallelism", {}, false, "expert/data rank layout")
                     .Unsupported("zerotorch has no expert parallelism"));
}

}  // namespace zt::config_internal
