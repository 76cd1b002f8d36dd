// Implementation of estimate/memory_estimate.h. The groups, chunks and the
// gather replay run the engine's own rules from plan/ (PlanLayout,
// PlanUnitChunks, UnitTrace, the prefetch policy) over sizes.
// tests/estimate/engine_validation_test.cc checks the result against the engine.
#include "estimate/memory_estimate.h"

#include <algorithm>
#include <functional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "estimate/step_traffic.h"
#include "plan/layout.h"
#include "plan/param_swap.h"
#include "plan/prefetch_policy.h"
#include "plan/unit_plan.h"
#include "plan/unit_trace.h"
#include "util/status.h"
#include "util/strings.h"

namespace zt::estimate {
namespace {

// One flat buffer: a stage 0-2 group or a stage-3 chunk.
struct Group {
  int64_t numel = 0;
  int64_t padded = 0;
  int64_t shard = 0;
  int unit = 0;
  bool trainable = true;
  bool persistent = false;
};

Group FromLayout(const plan::GroupLayout& g) {
  Group out;
  out.numel = g.numel;
  out.padded = g.padded_numel;
  out.shard = g.shard_numel;
  return out;
}

// Stages 0-2: the engine's groups (plan::PlanLayout) over sizes alone.
std::vector<Group> PlanGroups(const std::vector<int64_t>& numels, int64_t bucket, int partitions) {
  std::vector<plan::ParamInfo> infos(numels.size());
  for (size_t i = 0; i < numels.size(); ++i) infos[i].numel = numels[i];
  std::vector<Group> groups;
  for (const plan::GroupLayout& g : plan::PlanLayout(infos, bucket, partitions).groups) groups.push_back(FromLayout(g));
  return groups;
}

// Stage 3: the engine's chunks (plan::PlanUnitChunks) for every unit, in unit
// order. Unit 0 is the root, persistent as a whole.
std::vector<Group> PlanChunks(const ModelShape& shape, const EstimateOptions& o) {
  std::vector<Group> chunks;
  int64_t persistent_used = 0;
  plan::PersistencePolicy policy;
  policy.param_threshold = o.param_persistence_threshold;
  policy.model_threshold = o.model_persistence_threshold;
  for (int u = 0; u < shape.num_units; ++u) {
    // Engine order: trainable parameters first, then frozen ones.
    std::vector<plan::UnitParam> params;
    for (int pass = 0; pass < 2; ++pass) {
      for (const ParamShape& p : shape.params) {
        if (p.unit != u || p.trainable != (pass == 0)) continue;
        plan::UnitParam up;
        up.param_index = static_cast<int>(params.size());
        up.numel = p.numel;
        up.trainable = p.trainable;
        params.push_back(up);
      }
    }
    for (const plan::ChunkLayout& c : plan::PlanUnitChunks(params, o.reduce_bucket_size, o.shard_ranks(), policy,
                                                           /*all_persistent=*/u == 0, &persistent_used)) {
      Group g = FromLayout(c.layout);
      g.unit = u;
      g.trainable = c.trainable;
      g.persistent = c.persistent;
      chunks.push_back(g);
    }
  }
  return chunks;
}

// The most non-persistent elements gathered at once over the first micro-step
// (no trace yet: one unit at a time) and the second (the trace is followed:
// prefetch window, reuse distance). The unit order is recorded and followed
// by the engine's plan::UnitTrace, and every gather/keep decision is the
// engine's plan/prefetch_policy.h; what remains here is the bookkeeping of
// zero/param_coordinator.cc (which units are gathered, the window's size).
int64_t GatheredPeakNumel(const ModelShape& shape, const std::vector<Group>& chunks, const EstimateOptions& o) {
  std::vector<int64_t> sharded(static_cast<size_t>(shape.num_units), 0);
  for (const Group& c : chunks) {
    if (!c.persistent) sharded[static_cast<size_t>(c.unit)] += c.padded;
  }
  auto numel_of = [&](int u) { return sharded[static_cast<size_t>(u)]; };
  plan::PrefetchLimits limits;
  limits.prefetch_bucket_numel = o.prefetch_bucket_size;
  limits.max_live_numel = o.max_live_parameters;
  limits.max_reuse_distance = o.max_reuse_distance;

  plan::UnitTrace trace;
  std::vector<char> gathered(sharded.size(), 0), ahead(sharded.size(), 0);
  int64_t live = 0, window = 0, peak = 0;
  auto gather = [&](int u) {
    if (gathered[static_cast<size_t>(u)] || numel_of(u) == 0) return;
    gathered[static_cast<size_t>(u)] = 1;
    live += numel_of(u);
    peak = std::max(peak, live);
  };
  auto release = [&](int u) {
    if (!gathered[static_cast<size_t>(u)]) return;
    gathered[static_cast<size_t>(u)] = 0;
    live -= numel_of(u);
  };
  // ParamCoordinator::ObserveLocked + PrefetchLocked.
  auto observe = [&](int u) {
    trace.Observe(u);
    if (ahead[static_cast<size_t>(u)]) {
      ahead[static_cast<size_t>(u)] = 0;
      window -= numel_of(u);
    }
    gather(u);
    if (!trace.following()) return;
    const std::vector<int>& order = trace.order();
    for (size_t i = trace.position(); i < order.size(); ++i) {
      const int v = order[i];
      const int64_t n = numel_of(v);
      if (n == 0 || gathered[static_cast<size_t>(v)]) continue;
      if (!plan::FitsPrefetch(window, live, n, limits)) break;
      gather(v);
      ahead[static_cast<size_t>(v)] = 1;
      window += n;
    }
  };
  // ParamCoordinator::PostForward.
  auto post_forward = [&](int u) {
    if (!plan::KeepAfterForward(trace.ReuseDistance(u, numel_of), live, limits)) release(u);
  };
  for (int step = 0; step < 2; ++step) {
    window = 0;
    std::fill(ahead.begin(), ahead.end(), 0);
    if (shape.outer_unit >= 0) observe(shape.outer_unit);
    for (int u : shape.sequence) {
      observe(u);
      post_forward(u);
    }
    if (shape.outer_unit >= 0) post_forward(shape.outer_unit);
    if (shape.outer_unit >= 0) observe(shape.outer_unit);
    for (auto it = shape.sequence.rbegin(); it != shape.sequence.rend(); ++it) {
      observe(*it);
      release(*it);  // its gradients are complete
    }
    for (size_t u = 0; u < gathered.size(); ++u) release(static_cast<int>(u));
    trace.EndMicroStep();
  }
  return peak;
}

int64_t SumLargest(std::vector<int64_t> v, size_t k) {
  std::sort(v.rbegin(), v.rend());
  int64_t s = 0;
  for (size_t i = 0; i < v.size() && i < k; ++i) s += v[i];
  return s;
}

int64_t Bytes16(Precision p) { return p == Precision::kFp32 ? 4 : 2; }

}  // namespace

int64_t ModelShape::numel() const {
  int64_t n = 0;
  for (const ParamShape& p : params) n += p.numel;
  return n;
}

ModelShape CountOnlyShape(int64_t num_params) {
  ModelShape s;
  s.name = absl::StrCat(num_params, " parameters");
  s.params.push_back(ParamShape{"params", num_params, 1, true});
  s.num_units = 2;
  s.sequence = {1};
  s.units_known = false;
  return s;
}

int OptimizerStates(const OptimizerConfig& optimizer) {
  switch (optimizer.type) {
    case OptimizerType::kAdam:
    case OptimizerType::kAdamW: return 2;
    case OptimizerType::kLion:
    case OptimizerType::kAdagrad: return 1;
    case OptimizerType::kSGD: return optimizer.momentum != 0.0 ? 1 : 0;
  }
  return 2;
}

EstimateOptions OptionsFromConfig(const Config& config, int world_size) {
  EstimateOptions o;
  o.world_size = world_size;
  o.stage = config.zero.stage;
  o.mics_shard_size = config.zero.mics_shard_size;
  o.hpz_partition_size = config.zero.hpz_partition_size;
  o.error_feedback = config.zero.stage == 3 && config.zero.quantized_gradients && config.zero.loco;
  o.precision = config.fp16.enabled ? Precision::kFp16 : config.bf16.enabled ? Precision::kBf16 : Precision::kFp32;
  switch (config.zero.offload_optimizer.device) {
    case OffloadDevice::kNone: o.offload = Offload::kNone; break;
    case OffloadDevice::kCpu: o.offload = Offload::kCpu; break;
    case OffloadDevice::kNvme: o.offload = Offload::kNvme; break;
  }
  o.optimizer_states = OptimizerStates(config.optimizer);
  const OffloadOptimizerConfig& oo = config.zero.offload_optimizer;
  o.sub_group_size = config.zero.sub_group_size;
  o.optimizer_buffer_count = oo.buffer_count;
  o.pipeline_read = oo.pipeline_read;
  o.pipeline_write = oo.pipeline_write;
  const OffloadParamConfig& op = config.zero.offload_param;
  o.param_offload = op.device == OffloadDevice::kNvme  ? Offload::kNvme
                    : op.device == OffloadDevice::kCpu ? Offload::kCpu
                                                       : Offload::kNone;
  o.param_buffer_count = op.buffer_count;
  o.param_buffer_size = op.buffer_size;
  o.aio_block_size = config.aio.block_size;
  o.reduce_bucket_size = config.zero.reduce_bucket_size;
  o.overlap_comm = config.zero.overlap_comm;
  o.param_persistence_threshold = config.zero.param_persistence_threshold;
  o.model_persistence_threshold = config.zero.model_persistence_threshold;
  o.prefetch_bucket_size = config.zero.prefetch_bucket_size;
  o.max_live_parameters = config.zero.max_live_parameters;
  o.max_reuse_distance = config.zero.max_reuse_distance;
  return o;
}

int64_t MemoryEstimate::total() const {
  return model_states() + buckets + std::max<int64_t>(gathered, 0) + std::max<int64_t>(activations, 0) + swap_buffers;
}

namespace {

constexpr int64_t kIoAlign = 4096;  // offload/io_engine.h kIoAlignment
int64_t AlignUp(int64_t n, int64_t a) { return (n + a - 1) / a * a; }

// offload/optimizer_swapper.cc: sub-groups of S elements (a multiple of 1024,
// at most the state rounded up), one file per kind, buffer_count / kinds
// sub-groups of buffers. Sets the NVMe bytes and buffers.
absl::Status SwapOptimizer(int64_t owned, int kinds, const EstimateOptions& o, MemoryEstimate& e) {
  if (kinds == 0 || owned == 0) return absl::OkStatus();
  if (o.optimizer_buffer_count < kinds) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "offload_optimizer.buffer_count is %d, but one sub-group needs %d buffers; set it to at least %d",
        o.optimizer_buffer_count, kinds, kinds));
  }
  const int64_t block = kIoAlign / 4;
  const int64_t s = std::max(block, std::min(AlignUp(o.sub_group_size, block), AlignUp(owned, block)));
  const int64_t sub_groups = (owned + s - 1) / s;
  e.optimizer_nvme = kinds * sub_groups * s * 4;
  e.offloaded_nvme += e.optimizer_nvme;
  // Every sub-group the pool holds is allocated (they keep the state between
  // steps), whatever the pipelining, but never more than there are.
  const int slots =
      static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(o.optimizer_buffer_count / kinds, sub_groups)));
  e.optimizer_swap_buffers = static_cast<int64_t>(slots) * kinds * s * 4;
  e.swap_buffers += e.optimizer_swap_buffers;
  return absl::OkStatus();
}

// The options and shape EstimateMemory accepts: a world, a stage 0-3, a
// positive bucket, parameters in known units, something to train.
absl::Status CheckEstimateInputs(const ModelShape& shape, const EstimateOptions& o) {
  if (o.world_size < 1) return absl::InvalidArgumentError(absl::StrCat("world size must be >= 1, got ", o.world_size));
  if (o.stage < 0 || o.stage > 3) return absl::InvalidArgumentError(absl::StrCat("stage must be 0..3, got ", o.stage));
  if (o.mics_shard_size > 0 && o.mics_shard_size < o.world_size) {
    if (o.world_size % o.mics_shard_size != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("mics_shard_size ", o.mics_shard_size, " does not divide the world size ", o.world_size));
    }
    if (o.stage == 0) return absl::InvalidArgumentError("mics_shard_size needs stage 1, 2 or 3");
  }
  if (o.reduce_bucket_size <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("reduce_bucket_size must be > 0, got ", o.reduce_bucket_size));
  }
  int64_t trainable = 0;
  for (const ParamShape& p : shape.params) {
    if (p.numel < 0 || p.unit < 0 || p.unit >= shape.num_units) {
      return absl::InvalidArgumentError(absl::StrCat("parameter '", p.name, "' has a bad size or unit"));
    }
    if (p.trainable) trainable += p.numel;
  }
  if (trainable == 0) return absl::InvalidArgumentError("the model has no trainable parameters");
  return absl::OkStatus();
}

// Stages 0-2: parameters, gradients and buckets of the engine's groups into
// `e`. Returns the trainable elements this rank owns (its optimizer shard).
int64_t EstimateGroups(const ModelShape& shape, const EstimateOptions& o, MemoryEstimate& e) {
  const int64_t p = Bytes16(o.precision);  // parameters and gradients
  std::vector<int64_t> numels;
  for (const ParamShape& q : shape.params) {
    if (q.trainable) numels.push_back(q.numel);
  }
  const int partitions = o.stage >= 1 ? o.shard_ranks() : 1;
  int64_t padded = 0, owned = 0, largest = 0, largest_shard = 0;
  const std::vector<Group> groups = PlanGroups(numels, o.reduce_bucket_size, partitions);
  for (const Group& g : groups) {
    padded += g.padded;
    owned += o.stage >= 1 ? g.shard : g.padded;
    largest = std::max(largest, g.padded);
    largest_shard = std::max(largest_shard, g.shard);
  }
  e.params = padded * p;
  e.grads = (o.stage <= 1 ? padded : owned) * p;
  if (o.stage == 1) e.buckets = owned * p;  // reduce-scatter outputs of every group
  // Stage 2 reduces each bucket as soon as it is complete
  // (zero/grad_reducer.h): with overlap_comm one bucket is reduced while the
  // next fills, without it each is reduced before the next fills. One more
  // may stay open where backward's order crosses the groups (a parameter
  // used before those registered ahead of it, as LLaMA's norms are). Each
  // reduced bucket may need a reduce-scatter output (when accumulating). A
  // pool buffer may have served the largest group, so all are counted at
  // that size; never more than every bucket at once.
  if (o.stage == 2) {
    const int64_t reduced = o.overlap_comm ? 2 : 1;
    const int64_t slots = std::min<int64_t>(reduced + 1, static_cast<int64_t>(groups.size()));
    e.buckets = std::min(slots * largest, padded) * p + reduced * largest_shard * p;
  }
  return owned;
}

// Stage 3: parameters (less those swapped to NVMe), gradients, buckets and
// gathered parameters of the engine's chunks into `e`. Returns the trainable
// elements this rank owns.
absl::StatusOr<int64_t> EstimateChunks(const ModelShape& shape, const EstimateOptions& o, MemoryEstimate& e) {
  const int64_t p = Bytes16(o.precision);  // parameters and gradients
  const std::vector<Group> chunks = PlanChunks(shape, o);
  std::vector<int64_t> bucket_sizes;  // padded numel of each reduction chunk
  std::vector<int64_t> unit_chunk_count(static_cast<size_t>(shape.num_units), 0);
  // The engine's rule (plan/param_swap.h): shards of at least the aio block
  // size move to the swap file.
  int64_t owned = 0, largest_swapped = 0, swapped = 0;
  const bool swap_params = o.param_offload == Offload::kNvme && o.stage == 3;
  for (const Group& c : chunks) {
    if (swap_params && !c.persistent && plan::ParamShardGoesToSwap(c.shard * p, o.aio_block_size)) {
      swapped += c.shard * p;
      largest_swapped = std::max(largest_swapped, c.shard);
    }
    e.params += (c.persistent ? c.padded : c.shard) * p;
    // hpZ keeps 1/H of every non-persistent chunk (zero/param_coordinator.h).
    if (o.hpz_partition_size > 1 && o.hpz_partition_size < o.world_size && !c.persistent) {
      e.hpz_secondary += c.padded / o.hpz_partition_size * p;
    }
    if (!c.trainable) continue;
    // LoCo keeps one int8 record (a byte per element, a float per 2048,
    // padded to 4 bytes) per shard-group rank's slice of every trainable
    // chunk (zero/quantized_gradients.h).
    if (o.error_feedback && o.stage == 3 && o.shard_ranks() > 1) {
      e.error_feedback += o.shard_ranks() * QuantizedRecordBytes((c.padded + o.shard_ranks() - 1) / o.shard_ranks(), 8);
    }
    owned += c.shard;
    bucket_sizes.push_back(c.padded);
    ++unit_chunk_count[static_cast<size_t>(c.unit)];
  }
  const int64_t unit_chunks = SumLargest(unit_chunk_count, 1);
  e.grads = owned * p;
  // With overlap_comm up to three chunks are reduced at once; without it a
  // unit's chunks fill together and go one at a time. The reducer's pool
  // grows a free buffer to the size asked for, so after a few steps each of
  // its buffers may be as large as the largest chunk: an upper bound.
  const int64_t slots =
      std::min<int64_t>(o.overlap_comm ? 3 : unit_chunks + 1, static_cast<int64_t>(bucket_sizes.size()));
  e.buckets = slots * SumLargest(bucket_sizes, 1) * p;
  if (shape.units_known) e.gathered = GatheredPeakNumel(shape, chunks, o) * p;
  if (swapped > 0) {
    if (largest_swapped > o.param_buffer_size) {
      return absl::InvalidArgumentError(absl::StrFormat("offload_param.buffer_size is %d elements, but a shard has %d",
                                                        o.param_buffer_size, largest_swapped));
    }
    e.params -= swapped;
    e.param_nvme = swapped;
    e.param_swap_buffers = o.param_buffer_count * AlignUp(std::min(o.param_buffer_size, largest_swapped) * p, kIoAlign);
    e.offloaded_nvme += e.param_nvme;
    e.swap_buffers += e.param_swap_buffers;
  }
  return owned;
}

// The fp32 master and optimizer state of `owned` elements into `e`: in
// memory, in CPU memory (offload "cpu") or in swap files (offload "nvme").
absl::Status EstimateOptimizer(int64_t owned, const EstimateOptions& o, MemoryEstimate& e) {
  const bool offload = o.offload != Offload::kNone && o.stage >= 1;
  const int64_t state = owned * 4 * o.optimizer_states;
  if (offload && o.offload == Offload::kNvme) {
    // The engine's swap files: the master only where it is a copy (fp32
    // parameters are their own master), then the optimizer's state tensors.
    const int kinds = (o.precision != Precision::kFp32 ? 1 : 0) + o.optimizer_states;
    ZT_RETURN_IF_ERROR(SwapOptimizer(owned, kinds, o, e));
  } else if (offload) {
    // DeepSpeed keeps an fp32 master on the CPU for every precision.
    e.offloaded_cpu = owned * 4 + state;
  } else {
    const int64_t master = o.precision != Precision::kFp32 ? owned * 4 : 0;
    e.master = master;
    e.optimizer_state = state;
  }
  return absl::OkStatus();
}

}  // namespace

int64_t ActivationBytes(const TransformerShape& t, Precision precision, int64_t micro_batch, int64_t seq_len,
                        bool checkpointing) {
  if (micro_batch <= 0 || seq_len <= 0 || t.layers <= 0) return -1;
  const int64_t s = Bytes16(precision);
  const bool fp32 = precision == Precision::kFp32;
  const int64_t tokens = micro_batch * seq_len;
  const int64_t h = t.hidden, v = t.vocab;
  // Attention probabilities: softmax runs in fp32 and saves its output; in
  // 16 bits the cast copy that multiplies V is saved too. Plus the causal
  // mask (bool [L, L]) each layer builds.
  const int64_t scores = micro_batch * t.heads * seq_len * seq_len * (fp32 ? 4 : 6) + seq_len * seq_len;
  int64_t layer = 0, head = 0;
  if (t.architecture == Architecture::kGpt2) {
    // ln_1 input, ln_1 output, qkv (3h), attention output, residual, ln_2
    // output, c_fc output (4h), gelu output (4h): 16h elements per token.
    layer = tokens * 16 * h * s + scores;
    // ln_f input and output; token and position ids.
    head = tokens * 2 * h * s + tokens * 8 + seq_len * 8;
  } else if (t.architecture == Architecture::kBert) {
    // The layer input (read by query, key, value), q, k, v (3h), the
    // attention context, the first LayerNorm's input and output, the second's
    // input (8h with the input), the intermediate output and its GELU (2 x
    // intermediate). Dropout (off by default) is not counted.
    layer = tokens * (8 * h + 2 * t.intermediate) * s + scores;
    // The embeddings' LayerNorm input, the last layer's output (the pooler
    // reads its first position, a view that keeps it), ids, mask and the
    // additive key mask.
    head = tokens * 2 * h * s + tokens * 16 + tokens * s;
  } else {
    // RMSNorm keeps its (fp32) input and normalized values, plus its output
    // (x2); q after rotary, k and v as attention reads them, the attention
    // output (4h); SwiGLU: gate, silu, up, product (4 x intermediate).
    const int64_t norm = fp32 ? 3 * h * 4 : (4 + 2 + 2) * h;
    layer = tokens * (2 * norm + 4 * h * s + 4 * t.intermediate * s) + scores;
    const int64_t head_dim = t.heads > 0 ? h / t.heads : 0;
    layer += 2 * seq_len * head_dim * (fp32 ? 4 : 6);  // rotary cos/sin
    head = tokens * norm + tokens * 8;
  }
  // The loss: log_softmax's fp32 output is saved; its backward then holds the
  // gradients of the log-probabilities and of the logits (fp32) at once.
  // A sequence classifier has one row of logits per sequence.
  const int64_t logit_rows = t.architecture == Architecture::kBert ? micro_batch * t.classes : tokens * v;
  const int64_t logits_saved = logit_rows * 4;
  const int64_t logits_backward = 2 * logit_rows * 4;
  if (!checkpointing) return t.layers * layer + head + logits_saved + logits_backward;
  // Checkpointed blocks keep their input; backward recomputes one block at a
  // time, after the loss's gradients are gone.
  const int64_t inputs = t.layers * tokens * h * s;
  return inputs + head + std::max(logits_saved + logits_backward, layer);
}

absl::StatusOr<MemoryEstimate> EstimateMemory(const ModelShape& shape, const EstimateOptions& o) {
  ZT_RETURN_IF_ERROR(CheckEstimateInputs(shape, o));
  MemoryEstimate e;
  e.stage = o.stage;
  int64_t owned = 0;
  if (o.stage < 3) {
    owned = EstimateGroups(shape, o, e);
  } else {
    ZT_ASSIGN_OR_RETURN(owned, EstimateChunks(shape, o, e));
  }
  e.owned_numel = owned;
  ZT_RETURN_IF_ERROR(EstimateOptimizer(owned, o, e));
  if (shape.transformer) {
    e.activations =
        ActivationBytes(*shape.transformer, o.precision, o.micro_batch, o.seq_len, o.activation_checkpointing);
  }
  return e;
}

std::string PaperFormula(int stage, const EstimateOptions& o, int64_t num_params) {
  const int p = static_cast<int>(Bytes16(o.precision));
  const int k = (o.precision != Precision::kFp32 ? 4 : 0) + 4 * o.optimizer_states;
  const bool offload = o.offload != Offload::kNone && stage >= 1;
  const double n = o.shard_ranks(), psi = static_cast<double>(num_params);
  std::string text;
  double bytes = 0;
  switch (stage) {
    case 0:
      text = absl::StrFormat("%dΨ + %dΨ + %dΨ", p, p, k);
      bytes = (2 * p + k) * psi;
      break;
    case 1:
      text = absl::StrFormat("%dΨ + %dΨ/N", 2 * p, k);
      bytes = 2 * p * psi + (offload ? 0 : k * psi / n);
      break;
    case 2:
      text = absl::StrFormat("%dΨ + %dΨ/N", p, p + k);
      bytes = p * psi + (offload ? p : p + k) * psi / n;
      break;
    default:
      text = absl::StrFormat("%dΨ/N", 2 * p + k);
      bytes = (offload ? 2 * p : 2 * p + k) * psi / n;
      break;
  }
  const char* where = o.offload == Offload::kNvme ? "NVMe" : "CPU";
  if (offload) absl::StrAppend(&text, absl::StrFormat(" (the %dΨ/N part on %s)", k, where));
  return absl::StrCat(text, " = ", HumanBytes(bytes));
}

}  // namespace zt::estimate
