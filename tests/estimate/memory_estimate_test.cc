// The estimator's arithmetic on its own: the ZeRO stage ratios, padding to
// 2 x ranks, fp32 vs bf16 (master aliasing), optimizer state counts, offload
// moving bytes off the accelerator, stage-3 persistence and gathering, totals,
// and the errors for bad options. tests/estimate/engine_validation_test.cc
// checks the same numbers against the engine.
#include "estimate/memory_estimate.h"

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "estimate/step_traffic.h"

namespace zt::estimate {
namespace {

// `layers` units of one weight [width x width] and one bias each.
ModelShape Chain(int layers, int64_t width) {
  ModelShape s;
  s.name = "chain";
  s.num_units = layers + 1;
  for (int i = 0; i < layers; ++i) {
    s.params.push_back({"w", width * width, i + 1, true});
    s.params.push_back({"b", width, i + 1, true});
    s.sequence.push_back(i + 1);
  }
  return s;
}

MemoryEstimate Estimate(const ModelShape& s, EstimateOptions o) {
  absl::StatusOr<MemoryEstimate> e = EstimateMemory(s, o);
  EXPECT_TRUE(e.ok()) << e.status();
  return e.ok() ? *e : MemoryEstimate();
}

TEST(MemoryEstimate, MixedPrecisionAdamFollowsZeroPaper) {
  const int64_t psi = 1 << 20;  // divisible by 2N: no padding
  const ModelShape s = CountOnlyShape(psi);
  EstimateOptions o;
  o.precision = Precision::kBf16;
  o.world_size = 8;
  const double n = 8;
  const double expected[4] = {16.0 * psi, 4.0 * psi + 12.0 * psi / n, 2.0 * psi + 14.0 * psi / n, 16.0 * psi / n};
  for (int stage = 0; stage < 4; ++stage) {
    o.stage = stage;
    const MemoryEstimate e = Estimate(s, o);
    EXPECT_EQ(e.model_states(), static_cast<int64_t>(expected[stage])) << "stage " << stage;
    EXPECT_EQ(e.master, (stage == 0 ? 4 : 4 / n) * psi) << "stage " << stage;
    EXPECT_EQ(e.optimizer_state, (stage == 0 ? 8 : 8 / n) * psi) << "stage " << stage;
  }
}

TEST(MemoryEstimate, Fp32MasterAliasesParameters) {
  const int64_t psi = 1 << 20;
  EstimateOptions o;
  o.world_size = 4;
  const double n = 4;
  const double expected[4] = {16.0 * psi, 8.0 * psi + 8.0 * psi / n, 4.0 * psi + 12.0 * psi / n, 16.0 * psi / n};
  for (int stage = 0; stage < 4; ++stage) {
    o.stage = stage;
    const MemoryEstimate e = Estimate(CountOnlyShape(psi), o);
    EXPECT_EQ(e.master, 0);
    EXPECT_EQ(e.model_states(), static_cast<int64_t>(expected[stage])) << "stage " << stage;
  }
}

TEST(MemoryEstimate, PadsEveryGroupToTwiceTheRanks) {
  EstimateOptions o;
  o.world_size = 3;
  o.stage = 2;
  // 1001 elements -> padded to 1002 (a multiple of 6), shards of 334.
  const MemoryEstimate e = Estimate(CountOnlyShape(1001), o);
  EXPECT_EQ(e.params, 1002 * 4);
  EXPECT_EQ(e.grads, 334 * 4);
  EXPECT_EQ(e.owned_numel, 334);
  EXPECT_EQ(e.optimizer_state, 334 * 8);
  // Stage 0 pads to 2 only.
  o.stage = 0;
  EXPECT_EQ(Estimate(CountOnlyShape(1001), o).params, 1002 * 4);
  EXPECT_EQ(Estimate(CountOnlyShape(1000), o).params, 1000 * 4);
  // Small buckets: each group is padded on its own.
  ModelShape s = Chain(3, 10);  // groups of 110 elements with bucket 110
  o.stage = 1;
  o.world_size = 4;
  o.reduce_bucket_size = 110;
  EXPECT_EQ(Estimate(s, o).params, 3 * 112 * 4);
}

TEST(MemoryEstimate, OptimizerStatesByType) {
  OptimizerConfig c;
  c.type = OptimizerType::kAdam;
  EXPECT_EQ(OptimizerStates(c), 2);
  c.type = OptimizerType::kLion;
  EXPECT_EQ(OptimizerStates(c), 1);
  c.type = OptimizerType::kAdagrad;
  EXPECT_EQ(OptimizerStates(c), 1);
  c.type = OptimizerType::kSGD;
  EXPECT_EQ(OptimizerStates(c), 0);
  c.momentum = 0.9;
  EXPECT_EQ(OptimizerStates(c), 1);
  EstimateOptions o;
  o.optimizer_states = 1;
  EXPECT_EQ(Estimate(CountOnlyShape(1000), o).optimizer_state, 4000);
}

TEST(MemoryEstimate, OffloadMovesMasterAndStateOffTheAccelerator) {
  const int64_t psi = 1 << 20;
  EstimateOptions o;
  o.precision = Precision::kBf16;
  o.world_size = 4;
  o.stage = 2;
  const MemoryEstimate on = Estimate(CountOnlyShape(psi), o);
  o.offload = Offload::kCpu;
  const MemoryEstimate cpu = Estimate(CountOnlyShape(psi), o);
  EXPECT_EQ(cpu.master, 0);
  EXPECT_EQ(cpu.optimizer_state, 0);
  EXPECT_EQ(cpu.offloaded_cpu, on.master + on.optimizer_state);
  EXPECT_EQ(cpu.model_states(), on.model_states() - cpu.offloaded_cpu);
  // fp32 on "cpu": DeepSpeed keeps an fp32 master copy there too.
  o.precision = Precision::kFp32;
  EXPECT_EQ(Estimate(CountOnlyShape(psi), o).offloaded_cpu, 12 * psi / 4);
  // Stage 0 has no offload (DeepSpeed needs stage >= 1).
  o.stage = 0;
  EXPECT_EQ(Estimate(CountOnlyShape(psi), o).offloaded_cpu, 0);
}

TEST(MemoryEstimate, NvmeOffloadCountsSwapFilesAndBuffers) {
  // 2^20 parameters over 4 ranks: 262144 owned elements per rank.
  const int64_t psi = 1 << 20;
  EstimateOptions o;
  o.precision = Precision::kBf16;
  o.world_size = 4;
  o.stage = 2;
  o.offload = Offload::kNvme;
  o.sub_group_size = 100000;  // rounded up to 100352 (98 x 1024): 3 sub-groups
  o.optimizer_buffer_count = 4;
  const MemoryEstimate nvme = Estimate(CountOnlyShape(psi), o);
  EXPECT_EQ(nvme.master, 0);
  EXPECT_EQ(nvme.optimizer_state, 0);
  EXPECT_EQ(nvme.offloaded_cpu, 0);
  // Three kinds (master, exp_avg, exp_avg_sq), three sub-groups each.
  EXPECT_EQ(nvme.offloaded_nvme, 3 * 3 * 100352 * 4);
  // 4 buffers hold one sub-group of three kinds: no pipelining.
  EXPECT_EQ(nvme.swap_buffers, 3 * 100352 * 4);
  o.pipeline_read = o.pipeline_write = true;
  EXPECT_EQ(Estimate(CountOnlyShape(psi), o).swap_buffers, 3 * 100352 * 4);
  o.optimizer_buffer_count = 9;
  EXPECT_EQ(Estimate(CountOnlyShape(psi), o).swap_buffers, 9 * 100352 * 4);
  // fp32: the parameters are the master, only the moments are swapped.
  o.precision = Precision::kFp32;
  EXPECT_EQ(Estimate(CountOnlyShape(psi), o).offloaded_nvme, 2 * 3 * 100352 * 4);
  // Too few buffers for one sub-group is the engine's error too.
  o.optimizer_buffer_count = 1;
  EXPECT_FALSE(EstimateMemory(CountOnlyShape(psi), o).ok());
}

TEST(MemoryEstimate, Stage3PersistenceAndGatheredWorkingSet) {
  const ModelShape s = Chain(8, 100);  // units of 10100 elements
  EstimateOptions o;
  o.stage = 3;
  o.world_size = 2;
  o.param_persistence_threshold = 100;  // the biases stay gathered
  o.prefetch_bucket_size = 0;
  o.max_reuse_distance = 0;
  MemoryEstimate e = Estimate(s, o);
  EXPECT_EQ(e.params, 8 * (10000 / 2 + 100) * 4);
  EXPECT_EQ(e.grads, 8 * (5000 + 50) * 4);
  EXPECT_EQ(e.gathered, 10000 * 4);  // one unit at a time
  o.prefetch_bucket_size = 2 * 10000;
  EXPECT_EQ(Estimate(s, o).gathered, 3 * 10000 * 4);  // the unit in use + two prefetched
  o.prefetch_bucket_size = 0;
  o.max_reuse_distance = 1000000000;  // everything is reused soon: kept through the forward
  EXPECT_EQ(Estimate(s, o).gathered, 8 * 10000 * 4);
  // A bare parameter count has no units to gather by.
  EXPECT_EQ(Estimate(CountOnlyShape(1000), o).gathered, -1);
}

TEST(MemoryEstimate, TotalsAndActivations) {
  ModelShape s = CountOnlyShape(1000);
  s.transformer = TransformerShape{Architecture::kGpt2, 2, 64, 4, 4, 256, 256};
  EstimateOptions o;
  o.stage = 2;
  o.micro_batch = 2;
  o.seq_len = 32;
  const MemoryEstimate e = Estimate(s, o);
  EXPECT_GT(e.activations, 0);
  EXPECT_EQ(e.total(), e.model_states() + e.buckets + e.activations);
  // Activations grow linearly in the batch; checkpointing keeps less.
  const int64_t one = ActivationBytes(*s.transformer, Precision::kFp32, 1, 32, false);
  EXPECT_EQ(ActivationBytes(*s.transformer, Precision::kFp32, 4, 32, false), 4 * one - 3 * (2 * 32 * 32 + 8 * 32));
  EXPECT_LT(ActivationBytes(*s.transformer, Precision::kFp32, 4, 32, true),
            ActivationBytes(*s.transformer, Precision::kFp32, 4, 32, false));
  EXPECT_LT(ActivationBytes(*s.transformer, Precision::kBf16, 4, 32, false),
            ActivationBytes(*s.transformer, Precision::kFp32, 4, 32, false));
  EXPECT_EQ(ActivationBytes(*s.transformer, Precision::kFp32, 0, 32, false), -1);
}

TEST(MemoryEstimate, PaperFormulaLines) {
  EstimateOptions o;
  o.precision = Precision::kBf16;
  o.world_size = 8;
  EXPECT_TRUE(absl::StartsWith(PaperFormula(0, o, 1000), "2Ψ + 2Ψ + 12Ψ = ")) << PaperFormula(0, o, 1000);
  EXPECT_TRUE(absl::StartsWith(PaperFormula(1, o, 1000), "4Ψ + 12Ψ/N = "));
  EXPECT_TRUE(absl::StartsWith(PaperFormula(2, o, 1000), "2Ψ + 14Ψ/N = "));
  EXPECT_TRUE(absl::StartsWith(PaperFormula(3, o, 1000), "16Ψ/N = "));
  o.offload = Offload::kCpu;
  EXPECT_TRUE(absl::StrContains(PaperFormula(1, o, 1000), "on CPU"));
}

TEST(MemoryEstimate, BadOptionsAreErrors) {
  EstimateOptions o;
  o.world_size = 0;
  EXPECT_TRUE(absl::StrContains(EstimateMemory(CountOnlyShape(10), o).status().message(), "world size"));
  o.world_size = 1;
  o.stage = 4;
  EXPECT_FALSE(EstimateMemory(CountOnlyShape(10), o).ok());
  o.stage = 0;
  ModelShape frozen = CountOnlyShape(10);
  frozen.params[0].trainable = false;
  EXPECT_FALSE(EstimateMemory(frozen, o).ok());
}

// Hierarchical sharding: every per-rank figure is flat ZeRO's over the
// shard group; a shard size that does not divide the world, or one at stage
// 0, is an error naming it.
TEST(MemoryEstimate, HierarchicalShardingShardsOverTheGroup) {
  EstimateOptions flat2;
  flat2.world_size = 2;
  flat2.stage = 3;
  EstimateOptions mics = flat2;
  mics.world_size = 8;
  mics.mics_shard_size = 2;
  const ModelShape shape = CountOnlyShape(1000000);
  const MemoryEstimate a = EstimateMemory(shape, flat2).value(), b = EstimateMemory(shape, mics).value();
  EXPECT_EQ(a.model_states(), b.model_states());
  EXPECT_EQ(a.owned_numel, b.owned_numel);
  mics.mics_shard_size = 3;
  EXPECT_TRUE(absl::StrContains(EstimateMemory(shape, mics).status().message(), "mics_shard_size 3 does not divide"));
  mics.mics_shard_size = 2;
  mics.stage = 0;
  EXPECT_FALSE(EstimateMemory(shape, mics).ok());
}

// The link model of each collective, checked by hand on 2 hosts x 2 ranks
// and a buffer of 400 bytes (100 per rank's slice).
TEST(StepTraffic, CollectivesSplitByHost) {
  const std::vector<int> world = {0, 1, 2, 3};
  // Ring all-gather: 300 bytes each to the next rank; 1 -> 2 and 3 -> 0 cross.
  std::vector<LinkBytes> ag = CollectiveLinkBytes(Collective::kAllGather, world, 400, 2);
  EXPECT_EQ(ag[0].inside, 300);
  EXPECT_EQ(ag[0].across, 0);
  EXPECT_EQ(ag[1].across, 300);
  EXPECT_EQ(ag[3].across, 300);
  // All-to-all reduce-scatter: 100 to each peer, two of them on the other host.
  std::vector<LinkBytes> rs = CollectiveLinkBytes(Collective::kReduceScatter, world, 400, 2);
  for (const LinkBytes& b : rs) {
    EXPECT_EQ(b.inside, 100);
    EXPECT_EQ(b.across, 200);
  }
  // A replica pair {1, 3} across hosts: all-reduce sends half, then half.
  std::vector<LinkBytes> ar = CollectiveLinkBytes(Collective::kAllReduce, {1, 3}, 200, 2);
  EXPECT_EQ(ar[0].across, 200);
  EXPECT_EQ(ar[0].inside, 0);
}

// Stage 3 on 2 hosts x 2 ranks, Ψ = 1000 fp32 elements (V = 4000 bytes): the
// busiest host sends 2 x 3V/4 (two ring gathers) + 2 x V/2 (the reduce-scatter)
// = 2.5V across flat, and 2 ranks x V/2 (the replica all-reduce of V/2) = V
// with mics_shard_size 2, which keeps the gathers and the reduce-scatter
// inside the host (1.5V per rank).
// mics_hierarchical_params_gather, same job: each gather crosses once per
// rank with a quarter of V (the column hop of V/2 between 2 hosts), V/2 per
// host instead of the ring's 3V/4: 2 x V/2 + V = 2V across, inside 2 x V/2
// per rank more (the host hop) and the same reduce-scatter. With the shard
// group inside a host it changes nothing.
TEST(StepTraffic, TheTwoHopGatherCrossesOncePerHost) {
  TrafficOptions o;
  o.stage = 3;
  o.world_size = 4;
  o.ranks_per_host = 2;
  o.two_hop_gather = true;
  const StepTraffic hops = EstimateStepTraffic(1000, 0, o).value();
  EXPECT_EQ(hops.host_across, 8000);
  o.two_hop_gather = false;
  const StepTraffic ring = EstimateStepTraffic(1000, 0, o).value();
  EXPECT_EQ(ring.host_across, 10000);
  // Per rank the gathers send what the ring sends (3V/4 each), split otherwise.
  EXPECT_EQ(hops.rank_inside + hops.rank_across, ring.rank_inside + ring.rank_across);
  o.two_hop_gather = true;
  o.mics_shard_size = 2;
  EXPECT_EQ(EstimateStepTraffic(1000, 0, o).value().host_across, 4000);
}

// qwZ: stage 3's two gathers carry a byte per element and a float per 2048
// (8192 fp32 elements: 8192 + 4 x 4 = 8208 bytes, the size of 2052 fp32
// elements), the reduce-scatter stays fp32. Per step stage 3 sends
// 2 AG(n) + RS(n) and stage 2 AG(n) + RS(n), so AG = s3 - s2 and
// RS = 2 s2 - s3, and the qwZ step must send 2 AG(2052) + RS(8192).
TEST(StepTraffic, QuantizedWeightsShrinkOnlyTheGathers) {
  TrafficOptions o;
  o.world_size = 4;
  o.ranks_per_host = 2;
  auto across = [&](int stage, int64_t n) {
    o.stage = stage;
    return EstimateStepTraffic(n, 0, o).value().host_across;
  };
  const int64_t gather_small = across(3, 2052) - across(2, 2052);
  const int64_t reduce_big = 2 * across(2, 8192) - across(3, 8192);
  o.quantized_weights = true;
  EXPECT_EQ(across(3, 8192), 2 * gather_small + reduce_big);
  // Frozen parameters are gathered too (quantized alike), not reduced.
  EXPECT_GT(EstimateStepTraffic(8192, 4096, o).value().host_across, across(3, 8192));
  // Stages 1 and 2 gather once per step, exactly: no effect.
  const int64_t s2 = across(2, 8192);
  o.quantized_weights = false;
  EXPECT_EQ(s2, across(2, 8192));
}

// qgZ: the reduce-scatter's slices become records. 2 hosts x 2 ranks,
// 8192 fp32 gradients: each rank sends 2 slices of 2048 across, so a host
// sends 4 records of 2048 int8 + 1 scale (2052 bytes) or 1024 + 4 (1028) at
// 4 bits, instead of 4 x 8192 bytes; the gathers are untouched.
TEST(StepTraffic, QuantizedGradientsShrinkOnlyTheReduceScatter) {
  TrafficOptions o;
  o.world_size = 4;
  o.ranks_per_host = 2;
  auto across = [&](int stage) {
    o.stage = stage;
    return EstimateStepTraffic(8192, 0, o).value().host_across;
  };
  const int64_t reduce = 2 * across(2) - across(3);
  ASSERT_EQ(reduce, 4 * 8192);
  const int64_t gathers = across(3) - reduce;
  o.quantized_gradient_bits = 8;
  EXPECT_EQ(across(3), gathers + 4 * 2052);
  o.quantized_gradient_bits = 4;
  EXPECT_EQ(across(3), gathers + 4 * 1028);
  o.quantized_weights = true;
  o.quantized_gradient_bits = 0;
  const int64_t qwz = across(3);
  o.quantized_gradient_bits = 8;
  EXPECT_EQ(across(3), qwz - reduce + 4 * 2052);
  // Stage 2 is exact; HSDP's cross-host all-reduce stays exact too.
  const int64_t s2 = across(2);
  o.quantized_gradient_bits = 0;
  EXPECT_EQ(across(2), s2);
  o.mics_shard_size = 2;
  const int64_t hsdp = across(3);
  o.quantized_gradient_bits = 8;
  EXPECT_EQ(across(3), hsdp);
  o.quantized_gradient_bits = 5;
  EXPECT_TRUE(absl::StrContains(EstimateStepTraffic(8192, 0, o).status().message(), "4 or 8"));
}

TEST(StepTraffic, HierarchicalShardingKeepsGathersInsideTheHost) {
  TrafficOptions o;
  o.stage = 3;
  o.world_size = 4;
  o.ranks_per_host = 2;
  const StepTraffic flat = EstimateStepTraffic(1000, 0, o).value();
  EXPECT_EQ(flat.host_across, 10000);
  o.mics_shard_size = 2;
  const StepTraffic mics = EstimateStepTraffic(1000, 0, o).value();
  EXPECT_EQ(mics.host_across, 4000);
  EXPECT_EQ(mics.rank_across, 2000);
  EXPECT_EQ(mics.rank_inside, 6000);
  // Accumulation repeats the shard group's collectives; the replicas
  // all-reduce the accumulated shard once per step.
  o.accumulation_steps = 3;
  EXPECT_EQ(EstimateStepTraffic(1000, 0, o).value().rank_across, 2000);
  EXPECT_EQ(EstimateStepTraffic(1000, 0, o).value().rank_inside, 18000);
  o.mics_shard_size = 3;
  EXPECT_TRUE(absl::StrContains(EstimateStepTraffic(1000, 0, o).status().message(), "does not divide"));
  // hpZ over the host's 2 ranks: forward's ring gather still crosses (3V/4
  // from one rank), backward's stays inside, the reduce-scatter crosses (V):
  // 1.75V per host.
  o.mics_shard_size = -1;
  o.accumulation_steps = 1;
  o.hpz_partition_size = 2;
  EXPECT_EQ(EstimateStepTraffic(1000, 0, o).value().host_across, 7000);
  o.hpz_partition_size = 3;
  EXPECT_TRUE(absl::StrContains(EstimateStepTraffic(1000, 0, o).status().message(), "zero_hpz_partition_size 3"));
  o.hpz_partition_size = 1;
  o.mics_shard_size = 2;
  o.ranks_per_host = 3;
  EXPECT_TRUE(absl::StrContains(EstimateStepTraffic(1000, 0, o).status().message(), "ranks per host 3"));
}

}  // namespace
}  // namespace zt::estimate
