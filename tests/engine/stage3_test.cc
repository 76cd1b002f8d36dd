// Stage 3 beyond parity: memory, communication volume, construction-time
// sharding and the errors users hit.
//
//  * Model states per rank are 16 Psi / N (fp32: 4 shard + 4 grad shard + 8
//    Adam state; bf16: 2 + 2 + 4 master + 8), each component within 5%.
//  * Gathered parameters never exceed the unit in use plus the prefetch
//    window (the coordinator's exact count), the counting allocator agrees
//    (forward: gathered + activations; a whole step: + gradient buckets),
//    and every gathered byte returns to the allocator after the step.
//  * Bytes sent per step are 3 Psi (N-1)/N (all-gather in forward and in
//    backward, reduce-scatter) within 2% when nothing is kept between uses.
//  * zt::ShardedInit keeps construction near one unit plus the shards, and
//    the model it builds trains exactly like one built whole.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "comm/init.h"
#include "engine/cpu_memory.h"
#include "engine/engine.h"
#include "engine/gathered_parameters.h"
#include "launch/rank_env.h"
#include "tests/engine/parity_model.h"
#include "tests/testing/ranks.h"
#include "tests/testing/test_config.h"
#include "util/error.h"
#include "util/status.h"
#include "zero/sharded_init.h"
#include "zero/unit.h"

namespace zt::testing {
namespace {

constexpr int64_t kWidth = 256;
constexpr int64_t kLayers = 16;
constexpr double kUnitNumel = kWidth * kWidth + kWidth;
constexpr double kPsi = kLayers * kUnitNumel;

struct LayerImpl : torch::nn::Module {
  LayerImpl() { fc = register_module("fc", torch::nn::Linear(kWidth, kWidth)); }
  torch::Tensor forward(const torch::Tensor& x) { return torch::tanh(fc(x)); }
  torch::nn::Linear fc{nullptr};
};

// kLayers units and no parameter outside them.
struct ChainImpl : torch::nn::Module {
  ChainImpl() {
    for (int64_t i = 0; i < kLayers; ++i)
      layers.push_back(register_module("l" + std::to_string(i), zt::Unit<LayerImpl>()));
  }
  torch::Tensor forward(torch::Tensor x) {
    for (auto& l : layers) x = l(x);
    return x;
  }
  std::vector<zt::Unit<LayerImpl>> layers;
};
TORCH_MODULE(Chain);

Config Stage3Config(bool bf16) {
  Config c = TestConfig(/*stage=*/3, /*micro_batch=*/2, /*accumulation=*/1);
  c.zero.param_persistence_threshold = 0;
  c.zero.max_reuse_distance = 0;
  c.zero.prefetch_bucket_size = 0;
  c.bf16.enabled = bf16;
  return c;
}

absl::Status Within(const char* what, double actual, double expected, const std::string& where, double rel = 0.05) {
  if (std::abs(actual - expected) > rel * expected + 1.0) {
    return absl::InternalError(
        absl::StrFormat("%s: %s is %.0f, expected %.0f (within %.0f%%)", where, what, actual, expected, 100 * rel));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<comm::ProcessGroup>> Group() {
  ZT_ASSIGN_OR_RETURN(comm::RankEnv env, comm::ReadRankEnv());
  comm::GroupOptions options;
  options.timeout = std::chrono::seconds(60);
  return comm::InitProcessGroup(env, options);
}

torch::Tensor Input(bool bf16) {
  torch::Tensor x = torch::randn({2, kWidth});
  return bf16 ? x.to(torch::kBFloat16) : x;
}

ZT_RANK_WORKER(stage3_memory) {
  ZT_ASSIGN_OR_RETURN(auto pg, Group());
  if (!InstallCountingCpuAllocator()) return absl::InternalError("could not install the counting allocator");
  const double n = pg->size();
  const int64_t align = 2 * pg->size();
  const int64_t unit_numel = (static_cast<int64_t>(kUnitNumel) + align - 1) / align * align;  // padded to 2N
  for (bool bf16 : {false, true}) {
    const double p = bf16 ? 2 : 4;
    const double unit_bytes = p * static_cast<double>(unit_numel);
    for (int64_t window_units : {0, 1, 3}) {
      const std::string where =
          absl::StrFormat("%s, world %d, prefetch window %d units", bf16 ? "bf16" : "fp32", pg->size(), window_units);
      Config c = Stage3Config(bf16);
      c.zero.prefetch_bucket_size = window_units * unit_numel;
      Chain model;
      ZT_ASSIGN_OR_RETURN(auto engine, Engine::Create(model, c, pg));
      torch::Tensor x = Input(bf16);
      // Step 1 records the unit order; step 2 prefetches along it.
      for (int step = 0; step < 2; ++step) {
        engine->ResetGatheredPeak();
        const int64_t before = CpuMemory().current_bytes;
        ResetCpuMemoryPeak();
        torch::Tensor loss = model->forward(x).to(torch::kFloat).pow(2).mean();
        const int64_t forward_peak = CpuMemory().peak_bytes - before;
        const double gathered_bound = unit_bytes * static_cast<double>(1 + (step == 0 ? 0 : window_units));
        const double gathered_forward = static_cast<double>(engine->stage3_stats()->peak_gathered_bytes);
        engine->Backward(loss);
        engine->Step();
        const ModelStateBytes m = engine->memory();
        const zero::CoordinatorStats s = *engine->stage3_stats();
        const double activations = 64.0 * 1024;  // [2, 256] per layer, a few copies, far below one unit
        if (s.peak_gathered_bytes > gathered_bound || gathered_forward > gathered_bound) {
          return absl::InternalError(
              absl::StrFormat("%s, step %d: %d bytes gathered at once, bound %.0f (unit + "
                              "window)",
                              where, step + 1, s.peak_gathered_bytes, gathered_bound));
        }
        if (window_units == 0 && s.peak_gathered_bytes != static_cast<int64_t>(unit_bytes)) {
          return absl::InternalError(
              absl::StrFormat("%s: without prefetch exactly one unit should be gathered at "
                              "a time, saw %d bytes",
                              where, s.peak_gathered_bytes));
        }
        if (static_cast<double>(forward_peak) > gathered_bound + activations) {
          return absl::InternalError(
              absl::StrFormat("%s, step %d: the allocator's forward peak is %d bytes above "
                              "the step's start, bound %.0f",
                              where, step + 1, forward_peak, gathered_bound + activations));
        }
        // Backward adds each layer's .grad before it is copied into a bucket,
        // and up to three buckets (two in flight, one filling).
        const int64_t step_peak = CpuMemory().peak_bytes - before;
        if (static_cast<double>(step_peak) > gathered_bound + 4 * unit_bytes + activations) {
          return absl::InternalError(absl::StrFormat("%s, step %d: the allocator's step peak is %d bytes, bound %.0f",
                                                     where, step + 1, step_peak,
                                                     gathered_bound + 4 * unit_bytes + activations));
        }
        // Released buffers wait in the gather cache (never more than was
        // gathered at once); ReleaseCachedMemory hands them back.
        if (s.gathered_bytes != 0 || m.gather_cache > s.peak_gathered_bytes ||
            CpuMemory().current_bytes - before > m.peak_buckets + m.gather_cache + 65536) {
          return absl::InternalError(absl::StrFormat(
              "%s, step %d: %d bytes still gathered, cache %d bytes (peak gathered %d), allocator +%d bytes "
              "(scratch %d)",
              where, step + 1, s.gathered_bytes, m.gather_cache, s.peak_gathered_bytes,
              CpuMemory().current_bytes - before, m.peak_buckets));
        }
        engine->ReleaseCachedMemory();
        const int64_t after = CpuMemory().current_bytes;
        if (after - before > m.peak_buckets + 65536) {
          return absl::InternalError(
              absl::StrFormat("%s, step %d: memory did not return to the allocator: +%d bytes (scratch %d)", where,
                              step + 1, after - before, m.peak_buckets));
        }
      }
      if (window_units > 0 && engine->stage3_stats()->prefetched_units == 0) {
        return absl::InternalError(absl::StrCat(where, ": nothing was prefetched"));
      }

      // Model states: 16 Psi / N.
      const ModelStateBytes m = engine->memory();
      ZT_RETURN_IF_ERROR(Within("parameter shards", m.params, p * kPsi / n, where));
      ZT_RETURN_IF_ERROR(Within("gradient shards", m.grads, p * kPsi / n, where));
      ZT_RETURN_IF_ERROR(Within("optimizer state", m.optimizer_state, 8 * kPsi / n, where));
      ZT_RETURN_IF_ERROR(Within("fp32 master", m.master, bf16 ? 4 * kPsi / n : 0.0, where));
      ZT_RETURN_IF_ERROR(Within("model states", m.model_states(), 16 * kPsi / n, where));
      if (pg->rank() == 0) {
        std::printf("%s: model states %.2f bytes/param (16/N = %.2f), peak gathered %lld B (%.2f units)\n",
                    where.c_str(), m.model_states() / kPsi, 16 / n, static_cast<long long>(m.peak_gathered),
                    m.peak_gathered / unit_bytes);
      }
    }
  }
  return absl::OkStatus();
}

// LoRA-style: every layer but the first frozen. Frozen layers get no
// gradient hook, so only the end of their backward through the unit (the
// hook on their argument's producer) can free them: without it they would
// pile up until backward ends.
ZT_RANK_WORKER(stage3_frozen_memory) {
  ZT_ASSIGN_OR_RETURN(auto pg, Group());
  const int64_t align = 2 * pg->size();
  const int64_t unit_bytes = 4 * ((static_cast<int64_t>(kUnitNumel) + align - 1) / align * align);
  Chain model;
  for (size_t i = 1; i < model->layers.size(); ++i) {
    for (auto& p : model->layers[i]->parameters()) p.set_requires_grad(false);
  }
  ZT_ASSIGN_OR_RETURN(auto engine, Engine::Create(model, Stage3Config(false), pg));
  for (int step = 0; step < 2; ++step) {
    engine->ResetGatheredPeak();
    engine->Backward(model->forward(Input(false)).pow(2).mean());
    engine->Step();
    const zero::CoordinatorStats s = *engine->stage3_stats();
    if (s.peak_gathered_bytes != unit_bytes || s.gathered_bytes != 0) {
      return absl::InternalError(
          absl::StrFormat("world %d, step %d: frozen layers: %d bytes gathered at once (one "
                          "unit is %d), %d still gathered",
                          pg->size(), step + 1, s.peak_gathered_bytes, unit_bytes, s.gathered_bytes));
    }
  }
  return absl::OkStatus();
}

ZT_RANK_WORKER(stage3_comm_volume) {
  ZT_ASSIGN_OR_RETURN(auto pg, Group());
  const double n = pg->size();
  for (bool bf16 : {false, true}) {
    for (bool reuse : {false, true}) {
      const std::string where = absl::StrFormat("%s, world %d, %s", bf16 ? "bf16" : "fp32", pg->size(),
                                                reuse ? "default reuse distance" : "no reuse");
      Config c = Stage3Config(bf16);
      c.zero.prefetch_bucket_size = 50000000;
      c.zero.max_reuse_distance = reuse ? 1000000000 : 0;
      Chain model;
      ZT_ASSIGN_OR_RETURN(auto engine, Engine::Create(model, c, pg));
      torch::Tensor x = Input(bf16);
      for (int step = 0; step < 3; ++step) {
        pg->ResetStats();
        engine->Backward(model->forward(x).to(torch::kFloat).pow(2).mean());
        engine->Step();
        const comm::CommStats st = pg->stats();
        const double sent = static_cast<double>(st[comm::CollectiveKind::kAllGather].bytes_sent +
                                                st[comm::CollectiveKind::kReduceScatter].bytes_sent);
        const double p = bf16 ? 2 : 4;
        const double paper = 3 * kPsi * p * (n - 1) / n;
        if (pg->size() == 1) {
          if (sent != 0) return absl::InternalError(absl::StrCat(where, ": a single rank sent ", sent, " bytes"));
          continue;
        }
        if (!reuse) {
          ZT_RETURN_IF_ERROR(
              Within("bytes sent per step", sent, paper, absl::StrCat(where, ", step ", step + 1), 0.02));
        } else if (sent > paper * 1.02 || sent < paper * 2.0 / 3.0) {
          // Keeping the last unit from forward into backward saves one gather.
          return absl::InternalError(absl::StrFormat("%s: %.0f bytes sent, expected between 2 and 3 Psi", where, sent));
        }
        if (pg->rank() == 0 && step == 2) {
          std::printf("%s: sent %.0f bytes per step = %.4f x 3 Psi (N-1)/N\n", where.c_str(), sent, sent / paper);
        }
      }
    }
  }
  return absl::OkStatus();
}

ZT_RANK_WORKER(stage3_sharded_init) {
  ZT_ASSIGN_OR_RETURN(auto pg, Group());
  if (!InstallCountingCpuAllocator()) return absl::InternalError("could not install the counting allocator");
  const double n = pg->size();
  Config c = Stage3Config(false);
  // SGD with momentum: this deep tanh chain has near-zero gradients in its
  // early layers, where Adam would turn rounding noise into full steps.
  c.optimizer.type = OptimizerType::kSGD;
  c.optimizer.lr = 0.1;
  c.optimizer.momentum = 0.9;
  c.optimizer.weight_decay = 0.0;
  ZT_RETURN_IF_ERROR(ResolveBatch(c.batch, pg->size()));

  // Construction: near one unit (its tensors plus the flat copy) + shards.
  const int64_t before = CpuMemory().current_bytes;
  ResetCpuMemoryPeak();
  torch::manual_seed(7 + static_cast<uint64_t>(pg->rank()));  // rank 0's values must win
  std::unique_ptr<Chain> model;
  {
    ShardedInit init(pg, c);
    model = std::make_unique<Chain>();
  }
  const double unit_bytes = 4 * kUnitNumel;
  const double shards = 4 * kPsi / n;
  const double peak = static_cast<double>(CpuMemory().peak_bytes - before);
  if (peak > 2 * unit_bytes + shards + 65536) {
    return absl::InternalError(
        absl::StrFormat("world %d: construction peaked at %.0f bytes; one unit (twice) plus "
                        "the shards is %.0f (the whole model: %.0f)",
                        pg->size(), peak, 2 * unit_bytes + shards, 4 * kPsi));
  }
  if (pg->rank() == 0) {
    std::printf("world %d: ShardedInit construction peak %.0f bytes = %.2f x the model (bound %.0f)\n", pg->size(),
                peak, peak / (4 * kPsi), 2 * unit_bytes + shards);
  }

  // Running it before an engine adopts the shards is a clear error.
  try {
    (*model)->forward(Input(false));
    return absl::InternalError("forward before Engine::Create should fail");
  } catch (const Error& e) {
    if (!absl::StrContains(e.what(), "no engine is attached")) return absl::InternalError(e.what());
  }

  // A config that plans differently is refused, naming the key.
  Config other = c;
  other.zero.reduce_bucket_size = 1000;
  auto refused = Engine::Create(*model, other, pg);
  if (refused.ok() || !absl::StrContains(refused.status().message(), "reduce_bucket_size")) {
    return absl::InternalError(
        absl::StrCat("a different reduce_bucket_size should be refused, got: ", refused.status().ToString()));
  }

  // Trains exactly like a model built whole (rank 0's initial values).
  torch::manual_seed(7);
  Chain reference;
  torch::manual_seed(7);
  Chain truth;
  ZT_ASSIGN_OR_RETURN(auto engine, Engine::Create(*model, c, pg));
  const int64_t steps = 3;
  ParityData data;
  torch::manual_seed(11);
  data.x = torch::randn({steps * c.batch.train_batch, kWidth});
  data.y = torch::randn({steps * c.batch.train_batch, kWidth});
  for (int64_t s = 0; s < steps; ++s) {
    const int64_t start = MicroBatchStart(c.batch, s, 0, pg->rank());
    torch::Tensor out = (*model)->forward(data.x.narrow(0, start, c.batch.micro_batch));
    engine->Backward(torch::mse_loss(out, data.y.narrow(0, start, c.batch.micro_batch)));
    engine->Step();
  }
  TrainReference(
      *reference, [&](const torch::Tensor& x) { return reference->forward(x); }, data, c, steps);
  TrainReference(
      *truth, [&](const torch::Tensor& x) { return truth->forward(x); }, data, c, steps, RefArith::kFloat64);
  GatheredParameters full(*engine);
  // Rounding-aware parity, as in parity_test.cc (docs/testing.md).
  const TruthComparison cmp = CompareWithTruth(**model, *reference, *truth, {/*multiple=*/4.0, /*floor=*/1e-6});
  full.Release();
  if (!cmp.failure.empty()) {
    return absl::InternalError(absl::StrCat("world ", pg->size(), ": ShardedInit model: ", cmp.failure));
  }
  return absl::OkStatus();
}

ZT_RANK_WORKER(stage3_errors) {
  ZT_ASSIGN_OR_RETURN(auto pg, Group());
  Config c = Stage3Config(false);
  // A sharded model cannot run once its engine is gone.
  Chain model;
  {
    ZT_ASSIGN_OR_RETURN(auto engine, Engine::Create(model, c, pg));
    try {
      GatheredParameters bad(*engine, pg->size());
      return absl::InternalError("a modifier rank outside the group should be refused");
    } catch (const Error& e) {
      if (!absl::StrContains(e.what(), "modifier rank")) return absl::InternalError(e.what());
    }
  }
  try {
    model->forward(Input(false));
    return absl::InternalError("forward after the engine was destroyed should fail");
  } catch (const Error& e) {
    if (!absl::StrContains(e.what(), "no engine is attached")) return absl::InternalError(e.what());
  }
  // ShardedInit is for stage 3 only.
  Config stage2 = c;
  stage2.zero.stage = 2;
  try {
    ShardedInit init(pg, stage2);
    return absl::InternalError("ShardedInit with stage 2 should fail");
  } catch (const Error& e) {
    if (!absl::StrContains(e.what(), "stage")) return absl::InternalError(e.what());
  }
  // Freezing a parameter after ShardedInit planned it as trainable.
  std::unique_ptr<Chain> frozen_late;
  {
    ShardedInit init(pg, c);
    frozen_late = std::make_unique<Chain>();
  }
  (*frozen_late)->layers[0]->fc->bias.set_requires_grad(false);
  auto refused = Engine::Create(*frozen_late, c, pg);
  if (refused.ok() || !absl::StrContains(refused.status().message(), "l0.fc.bias")) {
    return absl::InternalError(absl::StrCat("freezing after ShardedInit should be refused naming the parameter, got: ",
                                            refused.status().ToString()));
  }
  return absl::OkStatus();
}

// Rank 0 evaluates alone (the DDP habit) while the others train on: every
// rank's first mismatched gather is a named error that says which unit and
// phase each rank was in, within seconds rather than at the 60 s transfer
// timeout, and never a silent exchange of the wrong parameters (the units
// here are all the same size, so sizes alone would not tell).
ZT_RANK_WORKER(stage3_rank0_evaluates_alone) {
  ZT_ASSIGN_OR_RETURN(auto pg, Group());
  Chain model;
  ZT_ASSIGN_OR_RETURN(auto engine, Engine::Create(model, Stage3Config(false), pg));
  torch::manual_seed(3);
  torch::Tensor x = Input(false);
  engine->Backward(model->forward(x).pow(2).mean());
  engine->Step();
  const auto start = std::chrono::steady_clock::now();
  std::string error;
  try {
    if (pg->rank() == 0) {
      torch::NoGradGuard no_grad;
      model->forward(x);
    }
    engine->Backward(model->forward(x).pow(2).mean());
    engine->Step();
  } catch (const std::exception& e) {
    error = e.what();
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("rank %d after %.2f s: %s\n", pg->rank(), seconds, error.c_str());
  for (const char* want : {"ranks disagree on collective #", "for parameters of unit 'l0' (evaluation)",
                           "for parameters of unit 'l0' (forward)"}) {
    if (!absl::StrContains(error, want)) {
      return absl::InternalError(absl::StrCat("expected an error containing \"", want, "\", got: ", error));
    }
  }
  if (seconds > 20.0) return absl::InternalError(absl::StrFormat("the error came after %.1f s", seconds));
  return absl::OkStatus();
}

// A model with no zt::Unit at stage 3 shards nothing of its parameters: the
// engine says so once, with the memory it costs; a model with units does not
// hear it.
ZT_RANK_WORKER(stage3_without_units) {
  ZT_ASSIGN_OR_RETURN(auto pg, Group());
  {
    ParityNet plain;
    ZT_ASSIGN_OR_RETURN(auto engine, Engine::Create(plain, Stage3Config(false), pg));
  }
  // On stderr, the log's own stream: stdout and stderr reach the harness
  // through separate pipes, so only one stream keeps the order.
  std::fprintf(stderr, "--- with units ---\n");
  Chain with_units;
  ZT_ASSIGN_OR_RETURN(auto engine, Engine::Create(with_units, Stage3Config(false), pg));
  return absl::OkStatus();
}

// LibTorch's ModuleList idiom, `list[i]->as<LayerImpl>()->forward(x)`,
// reaches the inner module and skips the unit's gather. Under a root that is
// a unit the failure names the unit and the right call; the engine also says
// so when it is created (the only place it can when the root is no unit);
// `list[i]->as<zt::UnitImpl<LayerImpl>>()` trains.
template <bool kThroughUnit>
struct ListNetImpl : torch::nn::Module {
  ListNetImpl() {
    for (int i = 0; i < 3; ++i) list->push_back(zt::Unit<LayerImpl>());
    register_module("list", list);
  }
  torch::Tensor forward(torch::Tensor x) {
    for (size_t i = 0; i < list->size(); ++i) {
      if constexpr (kThroughUnit) {
        x = list[i]->as<zt::UnitImpl<LayerImpl>>()->forward(x);
      } else {
        x = list[i]->as<LayerImpl>()->forward(x);
      }
    }
    return x;
  }
  torch::nn::ModuleList list;
};

ZT_RANK_WORKER(stage3_module_list) {
  ZT_ASSIGN_OR_RETURN(auto pg, Group());
  const Config c = Stage3Config(false);
  const torch::Tensor x = torch::randn({2, kWidth});
  {
    zt::Unit<ListNetImpl<false>> wrong;  // root is a unit: the failure is translated
    ZT_ASSIGN_OR_RETURN(auto engine, Engine::Create(wrong, c, pg));
    try {
      wrong(x);
      return absl::InternalError("calling the inner module of a sharded unit should fail");
    } catch (const std::exception& e) {
      std::fprintf(stderr, "rooted: %s\n", e.what());
      if (!absl::StrContains(e.what(), "list.0") || !absl::StrContains(e.what(), "as<zt::UnitImpl<"))
        return absl::InternalError(absl::StrCat("the error should name the unit and the call: ", e.what()));
    }
  }
  {
    auto wrong = std::make_shared<ListNetImpl<false>>();  // root is no unit
    ZT_ASSIGN_OR_RETURN(auto engine, Engine::Create(wrong, c, pg));
    try {
      wrong->forward(x);
      return absl::InternalError("calling the inner module of a sharded unit should fail");
    } catch (const std::exception& e) {
      std::fprintf(stderr, "unrooted: %s\n", e.what());
    }
  }
  auto right = std::make_shared<ListNetImpl<true>>();
  ZT_ASSIGN_OR_RETURN(auto engine, Engine::Create(right, c, pg));
  for (int step = 0; step < 2; ++step) {
    engine->Backward(right->forward(x).square().mean());
    engine->Step();
  }
  return absl::OkStatus();
}

void RunWorlds(const char* worker, std::vector<int> worlds) {
  for (int world : worlds) {
    RankRunOptions o;
    o.world_size = world;
    o.timeout = std::chrono::seconds(300);
    RankRunResult r = RunRanks(worker, o);
    EXPECT_TRUE(r.ok()) << r.Summary();
    // Rank 0's measurements (lines that are not log lines), for the test log.
    for (absl::string_view line : absl::StrSplit(r.outputs.empty() ? "" : r.outputs[0], '\n')) {
      if (!line.empty() && !absl::StartsWith(line, "[zt"))
        std::printf("  %.*s\n", static_cast<int>(line.size()), line.data());
    }
  }
}

TEST(Stage3Test, MemoryStaysWithinUnitPlusPrefetchWindow) { RunWorlds("stage3_memory", {1, 2, 4}); }
TEST(Stage3Test, FrozenUnitsAreFreedDuringBackward) { RunWorlds("stage3_frozen_memory", {1, 2}); }
TEST(Stage3Test, BytesPerStepAreThreePsi) { RunWorlds("stage3_comm_volume", {1, 2, 3, 4}); }
TEST(Stage3Test, ShardedInitBuildsWithinOneUnitAndTrainsTheSame) { RunWorlds("stage3_sharded_init", {1, 2, 4}); }
TEST(Stage3Test, ClearErrors) { RunWorlds("stage3_errors", {1, 2}); }
TEST(Stage3Test, RankEvaluatingAloneIsNamedAtItsFirstGather) { RunWorlds("stage3_rank0_evaluates_alone", {2, 3}); }

}  // namespace
}  // namespace zt::testing

int main(int argc, char** argv) { return zt::testing::RankTestMain(argc, argv); }

namespace zt::testing {
namespace {

// Runs `worker` on 2 ranks (2 minutes at most).
RankRunResult RunOnTwoRanks(const char* worker) {
  RankRunOptions o;
  o.world_size = 2;
  o.timeout = std::chrono::seconds(120);
  return RunRanks(worker, o);
}

TEST(Stage3Test, ModuleListEntriesCalledPastTheirUnitAreNamed) {
  RankRunResult r = RunOnTwoRanks("stage3_module_list");
  ASSERT_TRUE(r.ok()) << r.Summary();
  const std::string& out = r.outputs[0];
  EXPECT_TRUE(absl::StrContains(out, "3 zt::Unit(s) sit in a torch::nn::ModuleList ('list.0' ... 'list.2')")) << out;
  EXPECT_TRUE(absl::StrContains(out, "as<zt::UnitImpl<")) << out;
  // Warned only where nothing else can name the unit: not for the rooted
  // model (its messages come first; the log and the worker share stderr).
  ASSERT_TRUE(absl::StrContains(out, "rooted: unit 'list.0'")) << out;
  EXPECT_GT(out.find("sit in a torch::nn::ModuleList"), out.find("rooted: unit 'list.0'")) << out;
}

TEST(Stage3Test, AModelWithoutUnitsIsWarnedWithTheMemoryItCosts) {
  RankRunResult r = RunOnTwoRanks("stage3_without_units");
  ASSERT_TRUE(r.ok()) << r.Summary();
  const std::string& out = r.outputs[0];
  const size_t split = out.find("--- with units ---");
  ASSERT_NE(split, std::string::npos) << out;
  const std::string without = out.substr(0, split), with = out.substr(split);
  EXPECT_TRUE(absl::StrContains(without, "stage 3 without any zt::Unit in the model: all")) << without;
  EXPECT_TRUE(absl::StrContains(without, "more than sharded over 2 ranks")) << without;
  EXPECT_FALSE(absl::StrContains(with, "without any zt::Unit")) << with;
  EXPECT_FALSE(absl::StrContains(r.outputs[1], "without any zt::Unit")) << "only rank 0 warns: " << r.outputs[1];
}

}  // namespace
}  // namespace zt::testing
