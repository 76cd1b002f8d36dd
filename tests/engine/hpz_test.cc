// ZeRO++ hpZ (zero_hpz_partition_size): at stage 3, backward's re-gathers
// come from secondary shards inside groups of H ranks. The parameters
// gathered that way are the same values, so a run with hpZ must train
// bitwise as the flat stage-3 run does (itself checked against a LibTorch
// reference in engine_stage3_parity_test), while its gathers use the
// secondary path (counted), the world group carries fewer bytes, and the
// secondary shards' memory is what Engine::memory() and the estimate say.
// A secondary shard left stale after a step would make the runs differ.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "comm/init.h"
#include "engine/engine.h"
#include "engine/gathered_parameters.h"
#include "launch/rank_env.h"
#include "tests/engine/parity_model.h"
#include "tests/engine/stage3_model.h"
#include "tests/testing/ranks.h"
#include "tests/testing/test_config.h"
#include "util/status.h"

namespace zt::testing {
namespace {

struct Run {
  torch::Tensor params;  // every parameter, flattened, after training
  CommTraffic traffic;
  ModelStateBytes memory;
  int64_t secondary_gathers = 0;
  int64_t gathers = 0;
};

absl::StatusOr<Run> Train(const std::shared_ptr<comm::ProcessGroup>& pg, int hpz, int64_t steps, bool two_hop = false) {
  Config c = TestConfig(3, /*micro_batch=*/2, /*accumulation=*/2, OptimizerType::kAdamW, 1e-2);
  c.zero.reduce_bucket_size = 300;
  c.zero.param_persistence_threshold = 0;
  // Release every unit after its forward, so backward gathers again.
  c.zero.max_reuse_distance = 0;
  c.zero.prefetch_bucket_size = 0;
  c.zero.overlap_comm = true;
  c.zero.hpz_partition_size = hpz;
  c.zero.mics_hierarchical_params_gather = two_hop;
  TinyGptOptions o;
  torch::manual_seed(7);
  TinyGptHandle h = MakeTinyGpt(o, /*root_is_unit=*/false);
  const ParityData data = MakeTokenData(64, o, 11);
  ZT_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine, Engine::Create(h.module, c, pg));
  const CommTraffic before = engine->comm_traffic();
  const int64_t accumulation = engine->config().batch.accumulation_steps;
  for (int64_t s = 0; s < steps; ++s) {
    for (int64_t k = 0; k < accumulation; ++k) {
      const int64_t start = ((s * accumulation + k) * pg->size() + pg->rank()) * 2 % 62;
      torch::Tensor logits = h.forward(data.x.narrow(0, start, 2));
      torch::Tensor loss =
          torch::cross_entropy_loss(logits.reshape({-1, logits.size(-1)}), data.y.narrow(0, start, 2).reshape({-1}));
      engine->Backward(loss);
      engine->Step();
    }
  }
  if (engine->global_steps() != steps) return absl::InternalError("the run did not take its steps");
  Run r;
  r.traffic = engine->comm_traffic();
  r.traffic.shard_sent -= before.shard_sent;
  r.traffic.hpz_sent -= before.hpz_sent;
  r.memory = engine->memory();
  r.secondary_gathers = engine->stage3_stats()->secondary_gathers;
  r.gathers = engine->stage3_stats()->gathers;
  {
    GatheredParameters full(*engine);
    std::vector<torch::Tensor> flat;
    for (const auto& p : h.module->parameters()) flat.push_back(p.detach().flatten().clone());
    r.params = torch::cat(flat);
  }
  return r;
}

ZT_RANK_WORKER(hpz_bitwise) {
  ZT_ASSIGN_OR_RETURN(comm::RankEnv env, comm::ReadRankEnv());
  ZT_ASSIGN_OR_RETURN(std::shared_ptr<comm::ProcessGroup> pg, comm::InitProcessGroup(env, {}));
  constexpr int64_t kSteps = 4;
  ZT_ASSIGN_OR_RETURN(Run flat, Train(pg, 1, kSteps));
  ZT_ASSIGN_OR_RETURN(Run hpz, Train(pg, 2, kSteps));
  if (!torch::equal(flat.params, hpz.params)) {
    return absl::InternalError(absl::StrFormat("hpZ trained other weights than flat stage 3: max diff %g",
                                               (flat.params - hpz.params).abs().max().item<double>()));
  }
  if (flat.secondary_gathers != 0 || hpz.secondary_gathers == 0) {
    return absl::InternalError(absl::StrCat("secondary gathers: flat ", flat.secondary_gathers, ", hpZ ",
                                            hpz.secondary_gathers, " of ", hpz.gathers, " (want 0 and > 0)"));
  }
  // Backward's gathers left the world group for the pairs: fewer bytes there.
  if (hpz.traffic.hpz_sent == 0 || hpz.traffic.shard_sent >= flat.traffic.shard_sent) {
    return absl::InternalError(absl::StrCat("bytes sent: flat ", flat.traffic.shard_sent, " to the world; hpZ ",
                                            hpz.traffic.shard_sent, " to the world and ", hpz.traffic.hpz_sent,
                                            " inside its pair"));
  }
  // The secondary shards: half of every (non-persistent) chunk, in fp32.
  if (hpz.memory.hpz_secondary <= 0 || flat.memory.hpz_secondary != 0 ||
      hpz.memory.model_states() != flat.memory.model_states() + hpz.memory.hpz_secondary) {
    return absl::InternalError(absl::StrCat("memory: flat ", flat.memory.model_states(), ", hpZ ",
                                            hpz.memory.model_states(), " with ", hpz.memory.hpz_secondary,
                                            " of secondary shards"));
  }
  if (pg->rank() == 0) {
    std::printf(
        "bitwise equal; %lld gathers from secondary shards; world bytes %lld -> %lld, pair bytes %lld; "
        "secondary shards %lld bytes\n",
        static_cast<long long>(hpz.secondary_gathers), static_cast<long long>(flat.traffic.shard_sent),
        static_cast<long long>(hpz.traffic.shard_sent), static_cast<long long>(hpz.traffic.hpz_sent),
        static_cast<long long>(hpz.memory.hpz_secondary));
  }
  return absl::OkStatus();
}

// mics_hierarchical_params_gather on flat stage 3 across 2 "hosts" of 2
// ranks (the launch layout says so: LOCAL_WORLD_SIZE 2): every gather goes
// in two hops, across then inside, and training is bitwise flat stage 3's.
ZT_RANK_WORKER(two_hop_bitwise) {
  ZT_ASSIGN_OR_RETURN(comm::RankEnv env, comm::ReadRankEnv());
  ZT_ASSIGN_OR_RETURN(std::shared_ptr<comm::ProcessGroup> pg, comm::InitProcessGroup(env, {}));
  // The layout the engine reads for the hosts: ranks 0-1 and 2-3.
  ::setenv("LOCAL_WORLD_SIZE", "2", 1);
  ::setenv("LOCAL_RANK", std::to_string(pg->rank() % 2).c_str(), 1);
  constexpr int64_t kSteps = 4;
  const int64_t world_gathers0 = pg->stats()[comm::CollectiveKind::kAllGather].calls;
  ZT_ASSIGN_OR_RETURN(Run flat, Train(pg, 1, kSteps));
  const int64_t world_gathers1 = pg->stats()[comm::CollectiveKind::kAllGather].calls;
  ZT_ASSIGN_OR_RETURN(Run two_hop, Train(pg, 1, kSteps, /*two_hop=*/true));
  const int64_t world_gathers2 = pg->stats()[comm::CollectiveKind::kAllGather].calls;
  if (!torch::equal(flat.params, two_hop.params)) {
    return absl::InternalError(
        absl::StrFormat("the two-hop gather trained other weights than flat stage 3: max diff %g",
                        (flat.params - two_hop.params).abs().max().item<double>()));
  }
  // The parameter gathers left the world group (the hops run on its
  // sub-groups; set-up's agreement all-gathers stay), and the engine counts
  // the hops' bytes as the shard group's.
  const int64_t flat_gathers = world_gathers1 - world_gathers0, hop_gathers = world_gathers2 - world_gathers1;
  if (flat_gathers - hop_gathers < two_hop.gathers || two_hop.traffic.shard_sent <= 0) {
    return absl::InternalError(absl::StrCat("world all-gathers: flat run ", flat_gathers, ", two-hop run ", hop_gathers,
                                            " (want ", two_hop.gathers, " fewer); two-hop bytes ",
                                            two_hop.traffic.shard_sent));
  }
  if (pg->rank() == 0) {
    std::printf("bitwise equal; %lld gathers, each in two hops; shard-group bytes %lld (flat) and %lld (two hops)\n",
                static_cast<long long>(two_hop.gathers), static_cast<long long>(flat.traffic.shard_sent),
                static_cast<long long>(two_hop.traffic.shard_sent));
  }
  return absl::OkStatus();
}

TEST(MicsHierarchicalGather, TrainsBitwiseAsFlatStage3InTwoHops) {
  RankRunResult r = RunRanks("two_hop_bitwise", 4, std::chrono::seconds(300));
  EXPECT_TRUE(r.ok()) << r.Summary();
}

TEST(Hpz, TrainsBitwiseAsFlatStage3WithBackwardGathersInsideThePair) {
  RankRunResult r = RunRanks("hpz_bitwise", 4, std::chrono::seconds(300));
  EXPECT_TRUE(r.ok()) << r.Summary();
}

}  // namespace
}  // namespace zt::testing

int main(int argc, char** argv) { return zt::testing::RankTestMain(argc, argv); }
