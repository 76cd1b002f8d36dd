// ZeRO++ qwZ (zero_quantized_weights, zero_quantized_nontrainable_weights):
// stage 3's parameter gathers send int8 records (zero/quantized_weights.h).
// What must hold, each checked so that a wrong layout or a stale copy fails
// loudly:
//  * the records round-trip within the format's bound (per block, scale/2);
//  * a quantized gather gives every rank the same values, each within the
//    bound of the exact parameters, with about 1/4 of fp32's bytes;
//  * hpZ's secondary records and the two-hop gather carry the same records:
//    training is bitwise the flat qwZ run's;
//  * frozen records are quantized once and refreshed when the values change
//    (GatheredParameters with a modifier, a load); trainable chunks stay
//    exact when only frozen ones are quantized;
//  * GatheredParameters, checkpoints and the master weights never hold a
//    rounded value.
// Off, nothing changes: the default path is the one engine_stage3_parity_test
// checks against a LibTorch reference.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "comm/init.h"
#include "engine/engine.h"
#include "engine/gathered_parameters.h"
#include "launch/rank_env.h"
#include "ops/quantize.h"
#include "tests/engine/parity_model.h"
#include "tests/engine/stage3_model.h"
#include "tests/testing/ranks.h"
#include "tests/testing/scratch_dir.h"
#include "tests/testing/test_config.h"
#include "util/status.h"
#include "zero/quantized_weights.h"
#include "zero/unit.h"

namespace zt::testing {
namespace {

TEST(QuantizedWeights, RecordsRoundTripWithinTheBoundInRankOrder) {
  const ops::QuantFormat f = zero::kWeightQuantFormat;
  for (int64_t n : {int64_t{1}, int64_t{7}, int64_t{2048}, int64_t{2049}, int64_t{5003}}) {
    for (auto dtype : {torch::kFloat, torch::kBFloat16}) {
      torch::manual_seed(n);
      const int ranks = 3;
      torch::Tensor exact = (torch::randn({ranks * n}) * torch::linspace(0.01, 5, ranks * n)).to(dtype);
      const int64_t rec = zero::QuantRecordBytes(n, f);
      ASSERT_EQ(rec % 4, 0);
      torch::Tensor wire = torch::full({ranks * rec}, 0xAB, torch::kByte);
      for (int r = 0; r < ranks; ++r) {
        zero::QuantizeRecord(exact.narrow(0, r * n, n), f, wire.narrow(0, r * rec, rec));
        // Padding is zeroed, never stale memory.
        const int64_t used = ops::QuantWireBytes(n, f);
        if (used < rec) {
          EXPECT_EQ(wire.narrow(0, r * rec + used, rec - used).sum().item<int64_t>(), 0);
        }
      }
      torch::Tensor out = torch::empty({ranks * n}, dtype);
      zero::DequantizeRecords(wire, ranks, n, f, out);
      const torch::Tensor x = exact.to(torch::kFloat), y = out.to(torch::kFloat);
      for (int64_t b = 0; b < ranks * ((n + f.block - 1) / f.block); ++b) {
        const int r = static_cast<int>(b / ((n + f.block - 1) / f.block));
        const int64_t k = b % ((n + f.block - 1) / f.block);
        const int64_t begin = r * n + k * f.block, len = std::min(f.block, n - k * f.block);
        const float scale = x.narrow(0, begin, len).abs().max().item<float>() / 127.0f;
        // bf16 adds the output's rounding (8 bits of mantissa) on top.
        const double bound = ops::QuantErrorBound(scale) +
                             (dtype == torch::kBFloat16 ? x.narrow(0, begin, len).abs().max().item<double>() / 256 : 0);
        const double err = (y.narrow(0, begin, len) - x.narrow(0, begin, len)).abs().max().item<double>();
        EXPECT_LE(err, bound) << "n " << n << " block " << b;
      }
      if (n > 1) {
        EXPECT_FALSE(torch::equal(x, y)) << "nothing was rounded (n " << n << ")";
      }
    }
  }
}

// A unit that records the parameter values its forward computes with.
struct ProbeImpl : torch::nn::Module {
  ProbeImpl(int64_t in, int64_t out, bool frozen) {
    lin = register_module("lin", torch::nn::Linear(in, out));
    if (frozen) {
      for (auto& p : parameters()) p.set_requires_grad(false);
    }
  }
  torch::Tensor forward(const torch::Tensor& x) {
    seen.push_back(torch::cat({lin->weight.detach().flatten(), lin->bias.detach().flatten()}).clone());
    return torch::tanh(lin(x));
  }
  torch::nn::Linear lin{nullptr};
  std::vector<torch::Tensor> seen;
};

struct ProbeNetImpl : torch::nn::Module {
  ProbeNetImpl() {
    // Sizes that divide by no world size; the middle unit is frozen.
    layers.push_back(register_module("a", zt::Unit<ProbeImpl>(37, 53, false)));
    layers.push_back(register_module("b", zt::Unit<ProbeImpl>(53, 61, true)));
    layers.push_back(register_module("c", zt::Unit<ProbeImpl>(61, 29, false)));
    // One block with an outlier: its scale is large, the others' are not.
    torch::NoGradGuard no_grad;
    layers[0]->lin->weight[3][5] = 40.0;
  }
  torch::Tensor forward(const torch::Tensor& x) {
    torch::Tensor h = x;
    for (auto& l : layers) h = l(h);
    return h;
  }
  std::vector<zt::Unit<ProbeImpl>> layers;
};
TORCH_MODULE(ProbeNet);

Config ProbeConfig(bool all, bool frozen) {
  Config c = TestConfig(3, /*micro_batch=*/2, /*accumulation=*/1, OptimizerType::kAdamW, 1e-2);
  c.zero.param_persistence_threshold = 0;
  c.zero.max_reuse_distance = 0;
  c.zero.prefetch_bucket_size = 0;
  c.zero.quantized_weights = all;
  c.zero.quantized_nontrainable_weights = frozen;
  return c;
}

// Each probe's exact values (GatheredParameters) and the largest magnitude
// of all of them, for the bound.
std::vector<torch::Tensor> ExactValues(Engine& engine, ProbeNet& net) {
  GatheredParameters full(engine);
  std::vector<torch::Tensor> v;
  for (auto& l : net->layers) v.push_back(torch::cat({l->lin->weight.flatten(), l->lin->bias.flatten()}).clone());
  return v;
}

// The largest difference between two values of the probes across the ranks
// (0: every rank computed with the same values).
absl::StatusOr<double> RankSpread(comm::ProcessGroup& pg, const torch::Tensor& t) {
  torch::Tensor hi = t.clone(), lo = t.clone();
  ZT_RETURN_IF_ERROR(pg.AllReduce(hi, comm::ReduceOp::kMax)->Wait());
  ZT_RETURN_IF_ERROR(pg.AllReduce(lo, comm::ReduceOp::kMin)->Wait());
  return (hi - lo).abs().max().item<double>();
}

ZT_RANK_WORKER(qwz_gather) {
  ZT_ASSIGN_OR_RETURN(comm::RankEnv env, comm::ReadRankEnv());
  ZT_ASSIGN_OR_RETURN(std::shared_ptr<comm::ProcessGroup> pg, comm::InitProcessGroup(env, {}));
  const torch::Tensor x = torch::randn({2, 37}, torch::Generator(at::detail::createCPUGenerator(5)));
  int64_t bytes[2] = {0, 0};
  for (int quantized = 0; quantized < 2; ++quantized) {
    torch::manual_seed(3);
    ProbeNet net;
    ZT_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine, Engine::Create(net.ptr(), ProbeConfig(quantized, false), pg));
    const std::vector<torch::Tensor> exact = ExactValues(*engine, net);
    double amax = 0;
    for (const auto& e : exact) amax = std::max(amax, e.abs().max().item<double>());
    const int64_t before = engine->comm_traffic().shard_sent;
    {
      torch::NoGradGuard no_grad;
      net->forward(x);
    }
    bytes[quantized] = engine->comm_traffic().shard_sent - before;
    double worst = 0;
    for (size_t i = 0; i < exact.size(); ++i) {
      const torch::Tensor& seen = net->layers[i]->seen.back();
      const double err = (seen - exact[i]).abs().max().item<double>();
      worst = std::max(worst, err);
      ZT_ASSIGN_OR_RETURN(double spread, RankSpread(*pg, seen));
      if (spread != 0) return absl::InternalError(absl::StrCat("ranks computed with different values: ", spread));
      if (!quantized && err != 0) return absl::InternalError(absl::StrCat("unquantized gather is off by ", err));
      if (quantized && err > ops::QuantErrorBound(static_cast<float>(amax / 127))) {
        return absl::InternalError(absl::StrFormat("unit %d: error %g over the bound of the largest block %g", i, err,
                                                   ops::QuantErrorBound(static_cast<float>(amax / 127))));
      }
    }
    if (quantized) {
      if (worst == 0) return absl::InternalError("qwZ rounded nothing");
      // The small-valued blocks got small scales: their errors are far below the outlier block's bound.
      const double small = (net->layers[2]->seen.back() - exact[2]).abs().max().item<double>();
      const double small_amax = exact[2].abs().max().item<double>();
      if (small > ops::QuantErrorBound(static_cast<float>(small_amax / 127))) {
        return absl::InternalError(absl::StrCat("unit c: error ", small, " for values up to ", small_amax));
      }
      if (engine->stage3_stats()->quantized_gathers == 0) return absl::InternalError("no quantized gathers counted");
      // GatheredParameters after qwZ gathers is exact: the master values.
      const std::vector<torch::Tensor> again = ExactValues(*engine, net);
      for (size_t i = 0; i < exact.size(); ++i) {
        if (!torch::equal(again[i], exact[i])) return absl::InternalError("GatheredParameters returned rounded values");
      }
    }
  }
  // int8 payload plus a scale per 2048 elements and the 4-byte padding: just over a quarter of fp32's bytes.
  const double ratio = static_cast<double>(bytes[1]) / static_cast<double>(bytes[0]);
  if (!(ratio > 0.25 && ratio < 0.26)) {
    return absl::InternalError(
        absl::StrCat("gather bytes: fp32 ", bytes[0], ", qwZ ", bytes[1], " (ratio ", ratio, ", want 0.25-0.26)"));
  }
  if (pg->rank() == 0)
    std::printf("gather bytes fp32 %lld, qwZ %lld (%.4fx)\n", (long long)bytes[0], (long long)bytes[1], ratio);
  return absl::OkStatus();
}

// Frozen records with the shards in memory, then with every shard in an
// NVMe swap file (a kept record is gathered without reading its shard).
absl::Status FrozenRecords(const std::shared_ptr<comm::ProcessGroup>& pg, const std::string& dir, bool nvme) {
  const torch::Tensor x = torch::randn({2, 37}, torch::Generator(at::detail::createCPUGenerator(5)));
  torch::manual_seed(3);
  ProbeNet net;
  Config c = ProbeConfig(false, true);
  if (nvme) {
    c.zero.offload_param.device = OffloadDevice::kNvme;
    c.zero.offload_param.nvme_path = dir + "/swap";
    c.zero.offload_param.buffer_count = 2;
    c.zero.offload_param.buffer_size = 8192;
    c.aio.block_size = 1;  // every shard goes to the swap file
    std::filesystem::create_directories(c.zero.offload_param.nvme_path);
  }
  ZT_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine, Engine::Create(net.ptr(), c, pg));
  auto forward_and_check = [&](const char* when) -> absl::Status {
    const std::vector<torch::Tensor> exact = ExactValues(*engine, net);
    {
      torch::NoGradGuard no_grad;
      net->forward(x);
    }
    for (size_t i = 0; i < exact.size(); ++i) {
      const torch::Tensor& seen = net->layers[i]->seen.back();
      const double err = (seen - exact[i]).abs().max().item<double>();
      const bool frozen = i == 1;
      const double bound = ops::QuantErrorBound(static_cast<float>(exact[i].abs().max().item<double>() / 127));
      if (!frozen && err != 0) return absl::InternalError(absl::StrCat(when, ": trainable unit ", i, " off by ", err));
      if (frozen && (err == 0 || err > bound)) {
        return absl::InternalError(absl::StrCat(when, ": frozen unit error ", err, " (want in (0, ", bound, "])"));
      }
    }
    return absl::OkStatus();
  };
  ZT_RETURN_IF_ERROR(forward_and_check("first forward"));
  const int64_t kept = engine->stage3_stats()->frozen_record_bytes;
  if (kept <= 0 || engine->memory().quantized_frozen != kept) {
    return absl::InternalError(
        absl::StrCat("frozen records: ", kept, " bytes, memory() says ", engine->memory().quantized_frozen));
  }
  // New frozen values from rank 0: a stale record would send the old ones.
  {
    GatheredParameters full(*engine, *net->layers[1], /*modifier_rank=*/0);
    torch::NoGradGuard no_grad;
    if (pg->rank() == 0) net->layers[1]->lin->weight.mul_(-3.0);
  }
  ZT_RETURN_IF_ERROR(forward_and_check("after GatheredParameters changed the frozen unit"));
  // A load replaces every value: the records go until the next gather.
  const std::string ckpt = dir + (nvme ? "/ckpt_nvme" : "/ckpt");
  ZT_RETURN_IF_ERROR(engine->SaveCheckpoint(ckpt));
  ZT_RETURN_IF_ERROR(engine->LoadCheckpoint(ckpt).status());
  if (engine->stage3_stats()->frozen_record_bytes != 0) return absl::InternalError("frozen records kept over a load");
  ZT_RETURN_IF_ERROR(forward_and_check("after a load"));
  if (nvme && engine->stage3_stats()->swapped_shards == 0) return absl::InternalError("no shard went to the swap file");
  return absl::OkStatus();
}

ZT_RANK_WORKER(qwz_frozen) {
  ZT_ASSIGN_OR_RETURN(comm::RankEnv env, comm::ReadRankEnv());
  ZT_ASSIGN_OR_RETURN(std::shared_ptr<comm::ProcessGroup> pg, comm::InitProcessGroup(env, {}));
  ZT_RETURN_IF_ERROR(FrozenRecords(pg, ctx.arg, /*nvme=*/false));
  return FrozenRecords(pg, ctx.arg, /*nvme=*/true);
}

// A training run of the tiny GPT (tied embedding, frozen adapter) at stage 3.
struct Trained {
  torch::Tensor params;  // exact values after training (GatheredParameters)
  zero::CoordinatorStats stats;
  CommTraffic traffic;
};

absl::StatusOr<Trained> TrainGpt(const std::shared_ptr<comm::ProcessGroup>& pg, bool quantized, int hpz, bool two_hop,
                                 const std::string& save_dir = "") {
  Config c = TestConfig(3, /*micro_batch=*/2, /*accumulation=*/2, OptimizerType::kAdamW, 1e-2);
  c.zero.reduce_bucket_size = 300;
  c.zero.param_persistence_threshold = 0;
  c.zero.max_reuse_distance = 0;
  c.zero.prefetch_bucket_size = 0;
  c.zero.overlap_comm = true;
  c.zero.hpz_partition_size = hpz;
  c.zero.mics_hierarchical_params_gather = two_hop;
  c.zero.quantized_weights = quantized;
  c.zero.quantized_nontrainable_weights = quantized;
  TinyGptOptions o;
  torch::manual_seed(7);
  TinyGptHandle h = MakeTinyGpt(o, /*root_is_unit=*/false);
  const ParityData data = MakeTokenData(64, o, 11);
  ZT_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine, Engine::Create(h.module, c, pg));
  for (int64_t s = 0; s < 4; ++s) {
    for (int64_t k = 0; k < 2; ++k) {
      const int64_t start = ((s * 2 + k) * pg->size() + pg->rank()) * 2 % 62;
      torch::Tensor logits = h.forward(data.x.narrow(0, start, 2));
      torch::Tensor loss =
          torch::cross_entropy_loss(logits.reshape({-1, logits.size(-1)}), data.y.narrow(0, start, 2).reshape({-1}));
      engine->Backward(loss);
      engine->Step();
    }
  }
  if (!save_dir.empty()) ZT_RETURN_IF_ERROR(engine->SaveCheckpoint(save_dir));
  Trained t;
  t.stats = *engine->stage3_stats();
  t.traffic = engine->comm_traffic();
  GatheredParameters full(*engine);
  std::vector<torch::Tensor> flat;
  for (const auto& p : h.module->parameters()) flat.push_back(p.detach().flatten().clone());
  t.params = torch::cat(flat);
  return t;
}

ZT_RANK_WORKER(qwz_training) {
  ZT_ASSIGN_OR_RETURN(comm::RankEnv env, comm::ReadRankEnv());
  ZT_ASSIGN_OR_RETURN(std::shared_ptr<comm::ProcessGroup> pg, comm::InitProcessGroup(env, {}));
  // Two "hosts" of 2 ranks, for the two-hop gather.
  ::setenv("LOCAL_WORLD_SIZE", "2", 1);
  ::setenv("LOCAL_RANK", std::to_string(pg->rank() % 2).c_str(), 1);
  const std::string& dir = ctx.arg;
  ZT_ASSIGN_OR_RETURN(Trained exact, TrainGpt(pg, false, 1, false));
  ZT_ASSIGN_OR_RETURN(Trained flat, TrainGpt(pg, true, 1, false, dir));
  ZT_ASSIGN_OR_RETURN(Trained hpz, TrainGpt(pg, true, 2, false));
  ZT_ASSIGN_OR_RETURN(Trained hops, TrainGpt(pg, true, 1, true));
  // Rounded compute weights change the training a little, not nothing.
  const double drift = (flat.params - exact.params).abs().max().item<double>();
  if (drift == 0 || drift > 0.05)
    return absl::InternalError(absl::StrCat("qwZ vs fp32 weights after 4 steps: ", drift));
  if (!torch::equal(flat.params, hpz.params)) {
    return absl::InternalError(absl::StrFormat("qwZ with hpZ trained other weights than flat qwZ: max diff %g",
                                               (flat.params - hpz.params).abs().max().item<double>()));
  }
  if (hpz.stats.secondary_gathers == 0) return absl::InternalError("hpZ served no gather from its secondary records");
  if (!torch::equal(flat.params, hops.params)) {
    return absl::InternalError(absl::StrFormat("qwZ in two hops trained other weights than flat qwZ: max diff %g",
                                               (flat.params - hops.params).abs().max().item<double>()));
  }
  // The checkpoint holds the exact master weights: an unquantized engine
  // loading it has the qwZ run's values bitwise.
  {
    Config c = TestConfig(3, 2, 2, OptimizerType::kAdamW, 1e-2);
    c.zero.reduce_bucket_size = 300;
    c.zero.param_persistence_threshold = 0;
    TinyGptOptions o;
    torch::manual_seed(99);
    TinyGptHandle h = MakeTinyGpt(o, false);
    ZT_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine, Engine::Create(h.module, c, pg));
    ZT_RETURN_IF_ERROR(engine->LoadCheckpoint(dir).status());
    GatheredParameters full(*engine);
    std::vector<torch::Tensor> flat_params;
    for (const auto& p : h.module->parameters()) flat_params.push_back(p.detach().flatten().clone());
    if (!torch::equal(torch::cat(flat_params), flat.params)) {
      return absl::InternalError("the qwZ run's checkpoint does not hold its exact weights");
    }
  }
  if (pg->rank() == 0) {
    std::printf(
        "qwZ vs fp32 after 4 steps: %g; hpZ %lld secondary gathers, bitwise; two hops bitwise; world bytes "
        "fp32 %lld, qwZ %lld\n",
        drift, static_cast<long long>(hpz.stats.secondary_gathers), static_cast<long long>(exact.traffic.shard_sent),
        static_cast<long long>(flat.traffic.shard_sent));
  }
  return absl::OkStatus();
}

TEST(Qwz, GathersEveryRankTheSameValuesWithinTheBoundInAQuarterOfTheBytes) {
  RankRunResult r = RunRanks("qwz_gather", 4, std::chrono::seconds(300));
  EXPECT_TRUE(r.ok()) << r.Summary();
}

TEST(Qwz, FrozenRecordsAreQuantizedOnceAndRefreshedWhenTheValuesChange) {
  ScratchDir dir("zt_qwz_frozen");
  RankRunResult r = RunRanks("qwz_frozen", 3, std::chrono::seconds(300), dir.path());
  EXPECT_TRUE(r.ok()) << r.Summary();
}

TEST(Qwz, HpzAndTwoHopCarryTheSameRecordsAndCheckpointsStayExact) {
  ScratchDir dir("zt_qwz_training");
  RankRunResult r = RunRanks("qwz_training", 4, std::chrono::seconds(300), dir.path());
  EXPECT_TRUE(r.ok()) << r.Summary();
}

}  // namespace
}  // namespace zt::testing

int main(int argc, char** argv) { return zt::testing::RankTestMain(argc, argv); }
