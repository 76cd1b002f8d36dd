// Model-state memory per rank against the ZeRO formulas (Psi parameters, N
// ranks, Adam). Mixed precision (bf16) is the paper's case:
//   stage 0: 16 Psi    stage 1: 4 Psi + 12 Psi / N    stage 2: 2 Psi + 14 Psi / N
// fp32 keeps no separate master copy (the optimizer updates the fp32
// parameters in place), so it holds 4 bytes less per owned element:
//   stage 0: 16 Psi    stage 1: 8 Psi + 8 Psi / N     stage 2: 4 Psi + 12 Psi / N
// Each component must be within 5% of its formula (padding is the only
// difference), and the counting allocator must agree with the accounting
// within 5% plus the reduction buckets.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "comm/init.h"
#include "comm/rank_env.h"
#include "engine/cpu_memory.h"
#include "engine/engine.h"
#include "tests/testing/ranks.h"
#include "util/error.h"
#include "util/status.h"

namespace zt::testing {
namespace {

struct MlpImpl : torch::nn::Module {
  MlpImpl() {
    a = register_module("a", torch::nn::Linear(256, 300));
    b = register_module("b", torch::nn::Linear(300, 129));
  }
  torch::Tensor forward(const torch::Tensor& x) { return b(torch::tanh(a(x))); }
  torch::nn::Linear a{nullptr}, b{nullptr};
};
TORCH_MODULE(Mlp);

constexpr double kPsi = 256 * 300 + 300 + 300 * 129 + 129;

absl::Status Within(const char* what, double actual, double expected, const std::string& where) {
  if (std::abs(actual - expected) > 0.05 * expected + 1.0) {
    return absl::InternalError(
        absl::StrFormat("%s: %s is %.0f bytes, formula says %.0f", where, what, actual, expected));
  }
  return absl::OkStatus();
}

ZT_RANK_WORKER(memory) {
  ZT_ASSIGN_OR_RETURN(comm::RankEnv env, comm::ReadRankEnv());
  ZT_ASSIGN_OR_RETURN(auto pg, comm::InitProcessGroup(env, {}));
  if (!InstallCountingCpuAllocator()) return absl::InternalError("could not install the counting allocator");
  const double n = pg->size();
  for (int stage : {0, 1, 2}) {
    for (bool bf16 : {false, true}) {
      for (int64_t bucket : {int64_t{500000000}, int64_t{20000}}) {
        const std::string where =
            absl::StrFormat("stage %d, %s, world %d, bucket %d", stage, bf16 ? "bf16" : "fp32", pg->size(), bucket);
        Config c;
        c.batch.train_micro_batch_size_per_gpu = 4;
        c.batch.gradient_accumulation_steps = 1;
        c.steps_per_print = 1000;
        c.optimizer.present = true;
        c.zero.stage = stage;
        c.zero.reduce_bucket_size = bucket;
        c.bf16.enabled = bf16;
        torch::Tensor x = torch::randn({4, 256});
        if (bf16) x = x.to(torch::kBFloat16);
        const int64_t baseline = CpuMemory().current_bytes;
        Mlp model;
        ZT_ASSIGN_OR_RETURN(auto engine, Engine::Create(model, c, pg));
        engine->Backward(model->forward(x).to(torch::kFloat).pow(2).mean());
        engine->Step();
        const ModelStateBytes m = engine->memory();

        const double p = bf16 ? 2 : 4;  // bytes per parameter / gradient element
        const double owned = stage == 0 ? 1.0 : 1.0 / n;
        ZT_RETURN_IF_ERROR(Within("parameters", m.params, p * kPsi, where));
        ZT_RETURN_IF_ERROR(Within("gradients", m.grads, p * kPsi * (stage == 2 ? 1.0 / n : 1.0), where));
        ZT_RETURN_IF_ERROR(Within("optimizer state", m.optimizer_state, 8 * kPsi * owned, where));
        if (bf16) {
          ZT_RETURN_IF_ERROR(Within("fp32 master", m.master, 4 * kPsi * owned, where));
        } else if (m.master != 0) {
          return absl::InternalError(where + ": fp32 master should alias the parameters");
        }
        double formula = 0;
        if (bf16) {
          formula = stage == 0 ? 16 : stage == 1 ? 4 + 12 / n : 2 + 14 / n;
        } else {
          formula = stage == 0 ? 16 : stage == 1 ? 8 + 8 / n : 4 + 12 / n;
        }
        ZT_RETURN_IF_ERROR(Within("model states", m.model_states(), formula * kPsi, where));

        const double held = static_cast<double>(CpuMemory().current_bytes - baseline);
        if (std::abs(held - m.model_states()) > 0.05 * m.model_states() + m.peak_buckets + 65536) {
          return absl::InternalError(absl::StrFormat("%s: the allocator holds %.0f bytes, the engine accounts %d",
                                                     where, held, m.model_states()));
        }
        if (pg->rank() == 0) {
          std::printf("%s: model states %.2f bytes/param (formula %.2f), peak buckets %lld B\n", where.c_str(),
                      m.model_states() / kPsi, formula, static_cast<long long>(m.peak_buckets));
        }
      }
    }
  }
  return absl::OkStatus();
}

TEST(MemoryTest, ModelStatesMatchZeroFormulas) {
  for (int world : {1, 2, 4}) {
    RankRunOptions o;
    o.world_size = world;
    RankRunResult r = RunRanks("memory", o);
    EXPECT_TRUE(r.ok()) << r.Summary();
  }
}

}  // namespace
}  // namespace zt::testing

int main(int argc, char** argv) { return zt::testing::RankTestMain(argc, argv); }
