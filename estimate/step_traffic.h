// Bytes a training step moves between ranks, split by whether they stay
// inside a host or cross to another, for flat and hierarchical sharding
// (zero_optimization.mics_shard_size). LibTorch-free: sizes only.
//
// The collectives as comm/ runs them over Gloo (comm/gloo_collectives.h):
//   all-gather      ring in group-rank order: each rank sends (n-1)/n of the
//                   buffer to the next rank of the group;
//   reduce-scatter  all-to-all (the default algorithm): each rank sends every
//                   other member that member's 1/n slice;
//   all-reduce      a reduce-scatter, then an all-gather of the result.
// Hosts hold consecutive world ranks, `ranks_per_host` each (how zt launch
// numbers them); hierarchical shard groups are consecutive ranks, replica
// groups strided (comm/shard_groups.h).
//
// Per optimizer step with A micro-steps, Ψ trainable and Ψf frozen elements
// of p bytes, sharded over the shard group (the world, or K ranks):
//   stage 0  all-reduce of Ψ (once per step: gradients accumulate locally)
//   stage 1  reduce-scatter of Ψ at the step, all-gather of Ψ after it
//   stage 2  reduce-scatter of Ψ every micro-step, all-gather of Ψ after it
//   stage 3  per micro-step: all-gather of Ψ + Ψf in forward and again in
//            backward, reduce-scatter of Ψ (DeepSpeed's 3Ψ count). An upper
//            bound: the coordinator keeps a chunk gathered while its reuse
//            distance is under stage3_max_reuse_distance and the live total
//            under stage3_max_live_parameters, so a model that fits gathers
//            once per step (stage 2's traffic: the lower bound)
//   qwZ (stage 3, zero_quantized_weights): the gathers above at 1 + 4/2048
//            bytes per element (int8 and the block scales)
//   qgZ (stage 3, zero_quantized_gradients): the reduce-scatter's slices
//            as records of b-bit integers and a float per 2048 elements
//            (one all-to-all: the same destinations); the all-reduce across
//            replicas stays exact
//   hpZ (stage 3, zero_hpz_partition_size H): as flat, with backward's
//            gather over H consecutive ranks (the secondary shards)
//   hierarchical (stages 1-3): the same over the shard group, plus an
//            all-reduce of each rank's accumulated Ψ/K gradient shard over
//            its replicas, once per step (as DeepSpeed's MiCS).
// Chunk and bucket padding (a few elements per group) is left out.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"

namespace zt::estimate {

// Bytes one collective makes each member send, split by destination.
struct LinkBytes {
  int64_t inside = 0;  // to ranks of the sender's host
  int64_t across = 0;  // to ranks of other hosts
};
enum class Collective { kAllGather, kReduceScatter, kAllReduce };
// What world rank members[i] sends in a collective of `kind` over a buffer
// of `bytes` among `members` (world ranks, in group-rank order), each host
// holding `ranks_per_host` consecutive world ranks. One entry per member.
std::vector<LinkBytes> CollectiveLinkBytes(Collective kind, const std::vector<int>& members, int64_t bytes,
                                           int ranks_per_host);

struct TrafficOptions {
  int stage = 3;
  int world_size = 1;
  int ranks_per_host = 1;      // must divide world_size
  int mics_shard_size = -1;    // <= 0 or world_size: flat
  int hpz_partition_size = 1;  // stage 3, flat: backward's gather over groups of this many ranks (1: off)
  // mics_hierarchical_params_gather: stage 3's parameter gathers over a
  // shard group spanning hosts go across hosts among the ranks of one place,
  // then inside each host (comm/two_hop_gather.h).
  bool two_hop_gather = false;
  // ZeRO++ qwZ (zero_quantized_weights): stage 3's parameter gathers carry
  // int8 records, a byte per element plus a float scale per 2048 elements
  // (zero/quantized_weights.h), whatever element_bytes is.
  bool quantized_weights = false;
  // ZeRO++ qgZ (zero_quantized_gradients): stage 3's reduce-scatter sends
  // each destination its slice as a record of this many bits per element
  // plus a float per 2048 (zero/quantized_gradients.h); 0: off.
  int quantized_gradient_bits = 0;
  int64_t element_bytes = 4;  // parameters and gradients (communication dtype)
  int64_t accumulation_steps = 1;
};

struct StepTraffic {
  // Averages over the ranks, per step.
  int64_t rank_inside = 0;
  int64_t rank_across = 0;
  // What the busiest host sends to other hosts per step (its link's load).
  int64_t host_across = 0;
};

// Bytes of one quantized record of `n` elements at `bits` (8 or 4): the
// payload, a float scale per 2048 elements, padded to 4 bytes
// (zero/quantized_weights.h's layout; estimate/ links no zero/).
int64_t QuantizedRecordBytes(int64_t n, int bits);

// InvalidArgument naming the option for a world < 1, ranks_per_host, a shard
// size or an hpZ size that does not divide it, a stage outside 0..3, or
// hierarchical sharding at stage 0.
absl::StatusOr<StepTraffic> EstimateStepTraffic(int64_t trainable_numel, int64_t frozen_numel,
                                                const TrafficOptions& options);

}  // namespace zt::estimate
