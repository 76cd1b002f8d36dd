// GradReducer with qgZ (GradReducerOptions::quantized_gradients) on real
// ranks: every rank's reduced gradient shard against the exact average of
// every rank's gradients, element by element, within the bound of
// zero/quantized_gradients.h computed here from the inputs (each sender's
// block amax / qmax / 2, averaged over the ranks), through the reducer's
// own paths: gradient_predivide_factor (scaled before quantizing and after
// summing, once each), two micro-steps accumulated into the shard, a bf16
// model (cast to fp32 for the wire, the shard rounded to bf16 once per
// micro-step), and uneven worlds. With qgZ off the same harness must give
// the exact average (the reference checks itself), and with it on the
// result must differ from that (something was rounded).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "comm/init.h"
#include "launch/rank_env.h"
#include "plan/layout.h"
#include "tests/testing/ranks.h"
#include "util/status.h"
#include "zero/flat_group.h"
#include "zero/grad_reducer.h"

namespace zt::testing {
namespace {

using comm::ShardBegin;
using comm::ShardEnd;

// Rank s's gradient of parameter p in micro-step m, the same on every rank.
torch::Tensor Grad(const torch::Tensor& param, int s, int m, int p) {
  torch::manual_seed(1000 * s + 100 * m + p);
  torch::Tensor g = torch::randn(param.sizes()) * 1e-3;
  g.view({-1})[7] = 0.02 * (s + 1);  // one block per parameter with a larger scale
  return g;
}

struct Variant {
  bool quantized = true;
  bool bf16 = false;
  int micro_steps = 1;
  double predivide = 1.0;
  int bits = 8;
};

// "q=1,bf16=0,micro=2,pre=2,bits=8"
Variant ParseVariant(const std::string& arg) {
  Variant v;
  for (absl::string_view kv : absl::StrSplit(arg, ',', absl::SkipEmpty())) {
    const std::vector<std::string> p = absl::StrSplit(kv, '=');
    if (p.size() != 2) continue;
    if (p[0] == "q") v.quantized = p[1] == "1";
    if (p[0] == "bf16") v.bf16 = p[1] == "1";
    if (p[0] == "micro") ZT_CHECK(absl::SimpleAtoi(p[1], &v.micro_steps));
    if (p[0] == "pre") ZT_CHECK(absl::SimpleAtod(p[1], &v.predivide));
    if (p[0] == "bits") ZT_CHECK(absl::SimpleAtoi(p[1], &v.bits));
  }
  return v;
}

ZT_RANK_WORKER(qgz_reducer) {
  const Variant v = ParseVariant(ctx.arg);
  ZT_ASSIGN_OR_RETURN(comm::RankEnv env, comm::ReadRankEnv());
  comm::GroupOptions go;
  go.timeout = std::chrono::seconds(60);
  ZT_ASSIGN_OR_RETURN(std::shared_ptr<comm::ProcessGroup> pg, comm::InitProcessGroup(env, go));
  const int n = pg->size(), r = pg->rank();
  const auto dtype = v.bf16 ? torch::kBFloat16 : torch::kFloat;

  // Two parameters, 6,000 and 61 elements: several blocks, a padded tail.
  std::vector<torch::Tensor> params = {torch::zeros({3, 2000}, dtype).requires_grad_(),
                                       torch::zeros({61}, dtype).requires_grad_()};
  const std::vector<plan::ParamInfo> infos = {{"w", {3, 2000}, 6000}, {"b", {61}, 61}};
  const plan::Layout layout = plan::PlanLayout(infos, /*bucket_numel=*/1 << 20, /*partitions=*/n);
  if (layout.groups.size() != 1) return absl::InternalError("expected one group");
  std::vector<zero::FlatGroup> groups;
  groups.push_back(zero::FlattenParams(layout.groups[0], params, r, zero::ParamResidency::kOwnsSliceOfFull));
  zero::FlatGroup& g = groups[0];
  g.grad_shard = torch::zeros({g.layout.shard_numel}, g.params.options());
  g.grad_residency = zero::GradResidency::kShardOnly;

  zero::GradReducerOptions ro;
  ro.sharding = plan::StageSharding(3);
  ro.gradient_predivide_factor = v.predivide;
  if (v.quantized) ro.quantized_gradients = ops::QuantFormat{v.bits, 2048};
  zero::GradReducer reducer(groups, params, pg, ro);

  // Every rank's flat gradient per micro-step (the layout's slots), in fp32
  // of the model dtype's values: what the wire starts from.
  auto flat_of = [&](int s, int m) {
    torch::Tensor flat = torch::zeros({g.layout.padded_numel});
    for (size_t i = 0; i < params.size(); ++i) {
      const plan::ParamSlot& slot = g.layout.slots[i];
      zero::SlotView(flat, slot, params[i]).copy_(Grad(params[i], s, m, static_cast<int>(i)).to(dtype));
    }
    return flat;
  };
  for (int m = 0; m < v.micro_steps; ++m) {
    reducer.BeginBackward(/*reduce=*/m + 1 == v.micro_steps);
    torch::Tensor loss = torch::zeros({}, torch::kFloat);
    for (size_t i = 0; i < params.size(); ++i) {
      loss =
          loss +
          (params[i].to(torch::kFloat) * Grad(params[i], r, m, static_cast<int>(i)).to(dtype).to(torch::kFloat)).sum();
    }
    loss.backward();
    reducer.FinishBackward();
  }

  const int64_t b = ShardBegin(g.layout.padded_numel, n, r);
  const int64_t len = g.layout.shard_numel;
  const double qmax = v.bits == 8 ? 127 : 7;
  torch::Tensor exact = torch::zeros({len}, torch::kDouble);
  torch::Tensor bound = torch::zeros({len}, torch::kDouble);
  torch::Tensor magnitude = torch::zeros({len}, torch::kDouble);
  for (int m = 0; m < v.micro_steps; ++m) {
    for (int s = 0; s < n; ++s) {
      // As the reducer sends it: divided by the predivide factor first.
      const torch::Tensor slice = (flat_of(s, m) / v.predivide).narrow(0, b, len).to(torch::kDouble);
      exact += slice * (v.predivide / n);
      magnitude += slice.abs() * (v.predivide / n);
      if (s == r || !v.quantized) continue;
      for (int64_t lo = 0; lo < len; lo += 2048) {
        const int64_t hi = std::min(len, lo + 2048);
        const double amax = slice.narrow(0, lo, hi - lo).abs().max().item<double>();
        bound.narrow(0, lo, hi - lo) += amax / qmax * (0.5 + 1e-4) * (v.predivide / n);
      }
    }
  }
  // The fp32 sums' rounding, and a bf16 shard's (half an ulp of 2^-8 per
  // micro-step's write).
  bound += (magnitude + bound) * (8 * n * 1.2e-7 + (v.bf16 ? v.micro_steps * 4.0 / 256 : 0.0));
  const torch::Tensor got = g.grad_shard.to(torch::kDouble);
  const torch::Tensor err = (got - exact).abs();
  const torch::Tensor over = err > bound;
  if (over.any().item<bool>()) {
    const int64_t i = over.nonzero()[0][0].item<int64_t>();
    return absl::InternalError(absl::StrCat("rank ", r, " element ", i, ": ", got[i].item<double>(), " vs exact ",
                                            exact[i].item<double>(), ", error ", err[i].item<double>(), " > bound ",
                                            bound[i].item<double>()));
  }
  // Something must have been rounded where qgZ is on (more than float sums do).
  const double worst = err.max().item<double>();
  if (v.quantized && !v.bf16 && worst < 1e-7) {
    return absl::InternalError(absl::StrCat("rank ", r, ": qgZ changed nothing (largest error ", worst, ")"));
  }
  std::printf("rank %d: largest error %.3g, largest bound %.3g\n", r, worst, bound.max().item<double>());
  return absl::OkStatus();
}

TEST(QgzReducer, ShardsWithinTheBoundOfTheExactAverage) {
  const std::vector<std::pair<int, std::string>> runs = {
      {4, "q=0"},  // the harness's own reference
      {4, "q=1"},
      {3, "q=1"},  // an uneven world
      {4, "q=1,bits=4"},
      {2, "q=1,micro=2,pre=2"},
      {4, "q=1,micro=2,pre=2"},  // scaled once each way, accumulated
      {3, "q=1,bf16=1"},
  };
  for (const auto& [world, arg] : runs) {
    auto result = RunRanks("qgz_reducer", world, std::chrono::seconds(120), arg);
    EXPECT_TRUE(result.ok()) << "world " << world << " " << arg << ": " << result.Summary();
  }
}

}  // namespace
}  // namespace zt::testing

int main(int argc, char** argv) { return zt::testing::RankTestMain(argc, argv); }
