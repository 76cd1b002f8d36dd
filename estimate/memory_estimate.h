// Per-rank memory estimate for ZeRO stages 0-3, before a run: what
// zt::Engine::memory() will report (parameters, gradients, fp32 master,
// optimizer state, reduction buckets, stage-3 gathered parameters) and the
// activations of the built-in transformers. No LibTorch: it replays the
// engine's layout rules (zero/layout.h, zero/unit_plan.h) over sizes only.
//
// Offload follows the engine (docs/offload.md): with "nvme" the optimizer
// state (and at stage 3 the parameter shards of at least aio.block_size) leave memory
// for swap files, and fixed swap buffer pools take their place; "cpu" is
// counted as DeepSpeed's accelerator view (master and optimizer state moved
// to host memory), which on a CPU-only build changes nothing.
// Limits: buckets assume one micro-step per optimizer step and no
// communication_data_type cast; activations assume the built-in models' ops
// on a CPU (docs/estimate.md).
//
//   zt::estimate::ModelShape shape = ...;       // e.g. from BuiltinModelShape
//   zt::estimate::EstimateOptions o = zt::estimate::OptionsFromConfig(config, /*world_size=*/8);
//   absl::StatusOr<zt::estimate::MemoryEstimate> e = zt::estimate::EstimateMemory(shape, o);
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "config/config.h"

namespace zt::estimate {

// One parameter tensor, in the module's named_parameters() order (a tied
// tensor once, where it first appears).
struct ParamShape {
  std::string name;
  int64_t numel = 0;
  int unit = 0;  // stage-3 sharding unit (zt::Unit) owning it; 0: outside every unit
  bool trainable = true;
};

// The dimensions that size a transformer's activations.
// kBert: a post-LN encoder with a classification head (logits per sequence,
// `classes` of them, instead of per token over the vocab).
enum class Architecture { kGpt2, kLlama, kBert };
struct TransformerShape {
  Architecture architecture = Architecture::kGpt2;
  int64_t layers = 0, hidden = 0, heads = 0, kv_heads = 0, intermediate = 0, vocab = 0;
  int64_t classes = 0;  // kBert
};

struct ModelShape {
  std::string name;
  std::vector<ParamShape> params;
  // Units in the order Engine::Create discovers them (pre-order over the
  // module tree); unit 0 holds the parameters outside every unit, which stage
  // 3 keeps gathered for good.
  int num_units = 1;
  // The unit whose forward wraps all the others (the model's top module when
  // it is a unit), or -1; `sequence`: the units run one after another inside
  // the forward, in order. Together they drive the stage-3 gather replay.
  int outer_unit = -1;
  std::vector<int> sequence;
  // False for a bare parameter count: no stage-3 working set is estimated.
  bool units_known = true;
  std::optional<TransformerShape> transformer;

  int64_t numel() const;
};

// A model known only by its parameter count (one tensor, no units).
ModelShape CountOnlyShape(int64_t num_params);

enum class Precision { kFp32, kBf16, kFp16 };
enum class Offload { kNone, kCpu, kNvme };

struct EstimateOptions {
  int world_size = 1;
  int stage = 0;
  // zero_optimization.mics_shard_size: stages 1-3 shard over groups of this
  // many ranks (hierarchical sharding) instead of the world; <= 0 or the
  // world size: flat. Must divide the world size.
  int mics_shard_size = -1;
  // The ranks sharing a shard: the world, or mics_shard_size.
  // zero_hpz_partition_size (stage 3): secondary shards over groups of this
  // many ranks; 1: off.
  int hpz_partition_size = 1;
  // zero_quantized_gradients with zeropp_loco_param (stage 3): LoCo's error
  // records (zero/quantized_gradients.h).
  bool error_feedback = false;
  int shard_ranks() const { return mics_shard_size > 0 && mics_shard_size < world_size ? mics_shard_size : world_size; }
  Precision precision = Precision::kFp32;
  Offload offload = Offload::kNone;  // offload_optimizer.device
  // NVMe optimizer offload (offload_optimizer and zero_optimization keys).
  int64_t sub_group_size = ZeroConfig().sub_group_size;
  int optimizer_buffer_count = OffloadOptimizerConfig().buffer_count;
  bool pipeline_read = false;
  bool pipeline_write = false;
  // Stage-3 parameter offload (offload_param; kCpu changes nothing on a CPU build).
  Offload param_offload = Offload::kNone;
  int param_buffer_count = OffloadParamConfig().buffer_count;
  int64_t param_buffer_size = OffloadParamConfig().buffer_size;  // elements
  int64_t aio_block_size = AioConfig().block_size;               // smaller parameter shards stay in memory
  // fp32 tensors of optimizer state per owned element (Adam/AdamW 2, Lion 1,
  // Adagrad 1, SGD 1 with momentum else 0).
  int optimizer_states = 2;
  int64_t reduce_bucket_size = ZeroConfig().reduce_bucket_size;  // elements
  bool overlap_comm = false;                                     // as the engine resolved it
  int64_t param_persistence_threshold = 100000;
  int64_t model_persistence_threshold = std::numeric_limits<int64_t>::max();
  int64_t prefetch_bucket_size = 50000000;  // elements
  int64_t max_live_parameters = 1000000000;
  int64_t max_reuse_distance = 1000000000;
  // Activations (0: not estimated).
  int64_t micro_batch = 0;
  int64_t seq_len = 0;
  bool activation_checkpointing = false;
};

// Precision, optimizer, bucket sizes, stage-3 thresholds and offload from a
// parsed config; the world size from the caller.
EstimateOptions OptionsFromConfig(const Config& config, int world_size);
// fp32 state tensors per element the optimizer keeps (see EstimateOptions).
int OptimizerStates(const OptimizerConfig& optimizer);

// Bytes per rank. Fields mirror zt::ModelStateBytes.
struct MemoryEstimate {
  int stage = 0;
  int64_t params = 0;           // model dtype, padding included; stage 3: shards + persistent in full
  int64_t grads = 0;            // full flat gradients (stages 0/1) or the local shard (2/3)
  int64_t master = 0;           // fp32 master on the accelerator (0 when it aliases fp32 params or is offloaded)
  int64_t optimizer_state = 0;  // on the accelerator (0 when offloaded)
  int64_t buckets = 0;          // reduction scratch (peak)
  int64_t gathered = -1;        // stage 3: most gathered parameter bytes at once; -1 unknown / not stage 3
  int64_t activations = -1;     // -1 unknown
  int64_t offloaded_cpu = 0;    // master + optimizer state moved to CPU memory
  int64_t offloaded_nvme = 0;   // bytes in swap files (Engine::memory().nvme): optimizer state, parameter shards
  int64_t swap_buffers = 0;     // host memory of the swap pools (Engine::memory().swap_buffers)
  // The same split by what is swapped, for plan::NvmeOffloadNote.
  int64_t optimizer_nvme = 0, optimizer_swap_buffers = 0;
  int64_t param_nvme = 0, param_swap_buffers = 0;
  int64_t owned_numel = 0;    // elements this rank updates (its shard; everything at stage 0)
  int64_t hpz_secondary = 0;  // stage 3 with hpZ: the secondary shards (Engine::memory().hpz_secondary)
  // Stage 3 with qgZ and LoCo: the int8 error records of every trainable
  // chunk's slices, per rank and unsharded (Engine::memory().error_feedback).
  int64_t error_feedback = 0;
  int64_t model_states() const { return params + grads + master + optimizer_state + hpz_secondary + error_feedback; }
  // Accelerator bytes: model states + buckets + gathered + activations +
  // swap buffers.
  int64_t total() const;
};

// InvalidArgument (naming the option) for a world size < 1, a stage outside
// 0..3, a mics_shard_size that does not divide the world (or at stage 0), an
// empty model or non-positive sizes. Under hierarchical sharding every
// per-rank figure is that of flat ZeRO over mics_shard_size ranks.
absl::StatusOr<MemoryEstimate> EstimateMemory(const ModelShape& shape, const EstimateOptions& options);

// Activation bytes for one micro-batch (forward + backward peak above the
// model states), -1 when the model has no transformer shape or B/L are 0.
int64_t ActivationBytes(const TransformerShape& t, Precision precision, int64_t micro_batch, int64_t seq_len,
                        bool checkpointing);

// The ZeRO paper's line for `stage`, e.g. "4Ψ + 12Ψ/N = 2.25 GiB" for stage 1
// in mixed precision with Adam (Ψ parameters, N ranks); with offload, the
// K part is shown as moved off the accelerator.
std::string PaperFormula(int stage, const EstimateOptions& options, int64_t num_params);

}  // namespace zt::estimate
