// The estimator against the engine's own accounting and the allocator:
//  * the built-in models' shapes list exactly the parameters the modules
//    register (names, sizes, order);
//  * ranks build gpt2-tiny, llama-tiny, bert-tiny and mnist-cnn with an Engine at stages
//    0-3, fp32 and bf16, worlds 1/2/4, default and small bucket/persistence
//    settings (overlap_comm on and off), train two steps, and every estimated component (params, grads,
//    master, optimizer state, model states) must be within 5% of
//    Engine::memory() (they are exact by construction: the same layout
//    rules); the stage-3 gathered peak must match the coordinator's, and the
//    reduction buckets must bound the reducer's scratch within 5%;
//  * activations: one forward + backward of gpt2-tiny / llama-tiny / bert-tiny must peak
//    within 15% of the estimate on the counting allocator (the estimate
//    counts saved tensors and the loss's backward; smaller temporaries of
//    the kernels are not modeled).
#include <gtest/gtest.h>
#include <torch/torch.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <unordered_set>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "comm/init.h"
#include "engine/cpu_memory.h"
#include "engine/engine.h"
#include "estimate/builtin_models.h"
#include "estimate/memory_estimate.h"
#include "estimate/step_traffic.h"
#include "launch/rank_env.h"
#include "models/registry.h"
#include "tests/testing/ranks.h"
#include "util/status.h"

namespace zt::testing {
namespace {

absl::Status Within(const std::string& where, const char* what, double actual, double expected, double rel) {
  if (std::abs(actual - expected) > rel * std::abs(expected) + 1.0) {
    return absl::InternalError(absl::StrFormat("%s: %s: engine %.0f bytes, estimate %.0f (tolerance %.0f%%)", where,
                                               what, actual, expected, 100 * rel));
  }
  return absl::OkStatus();
}

// Input and loss for one micro-batch of `model`, as zt train computes them.
at::Tensor Loss(models::Model& model, bool bf16, int64_t batch, int64_t seq) {
  if (model.info().task == models::Task::kImageClassification) {
    at::Tensor x = torch::randn({batch, 1, 28, 28});
    if (bf16) x = x.to(torch::kBFloat16);
    at::Tensor y = torch::randint(0, 10, {batch}, torch::kLong);
    return torch::nll_loss(model.Forward(x).to(at::kFloat), y);
  }
  const int64_t vocab = model.info().vocab_size;
  if (model.info().task == models::Task::kSequenceClassification) {
    at::Tensor x = torch::randint(0, vocab, {batch, seq}, torch::kLong);
    at::Tensor y = torch::randint(0, model.info().num_classes, {batch}, torch::kLong);
    return torch::cross_entropy_loss(model.ForwardMasked(x, torch::ones_like(x)).to(at::kFloat), y);
  }
  at::Tensor x = torch::randint(0, vocab, {batch, seq}, torch::kLong);
  at::Tensor y = torch::randint(0, vocab, {batch, seq}, torch::kLong);
  at::Tensor out = model.Forward(x).to(at::kFloat);
  return torch::cross_entropy_loss(out.reshape({-1, out.size(-1)}), y.reshape({-1}));
}

// "llama-tiny", or "llama-tiny+lora": LoRA r=4 on every linear layer but the
// head (GPT-2: on c_attn, BERT: on query and value, the defaults), the base
// frozen. bert-tiny runs with a vocab of 1000 to keep the runs short.
models::ModelSpec SpecOf(const std::string& arg) {
  models::ModelSpec spec{arg, {}, 1, {}};
  if (absl::EndsWith(arg, "+lora")) {
    spec.name = arg.substr(0, arg.size() - 5);
    spec.lora.r = 4;
    if (spec.name == "llama-tiny") spec.lora.targets = {"all-linear"};
  }
  if (spec.name == "bert-tiny") spec.overrides["vocab"] = 1000;
  return spec;
}

absl::Status CheckModelStates(const std::string& model_name, const std::shared_ptr<comm::ProcessGroup>& pg) {
  ZT_ASSIGN_OR_RETURN(estimate::ModelShape shape, estimate::BuiltinModelShape(SpecOf(model_name)));
  for (int stage : {0, 1, 2, 3}) {
    for (bool bf16 : {false, true}) {
      for (bool small : {false, true}) {
        const std::string where = absl::StrFormat("%s, stage %d, %s, world %d, %s buckets", model_name, stage,
                                                  bf16 ? "bf16" : "fp32", pg->size(), small ? "small" : "default");
        Config c;
        c.batch.train_micro_batch_size_per_gpu = 2;
        c.batch.gradient_accumulation_steps = 1;
        c.steps_per_print = 1000;
        c.optimizer.present = true;
        c.zero.stage = stage;
        // The parser's default (on at stage 3 only), and the other way round.
        c.zero.overlap_comm = small ? stage != 3 : stage == 3;
        c.bf16.enabled = bf16;
        if (small) {
          c.zero.reduce_bucket_size = 5000;
          c.zero.param_persistence_threshold = 500;
          c.zero.prefetch_bucket_size = 20000;
        }
        ZT_ASSIGN_OR_RETURN(std::unique_ptr<models::Model> model, models::CreateModel(SpecOf(model_name)));
        ZT_ASSIGN_OR_RETURN(auto engine, Engine::Create(model->module(), c, pg));
        for (int step = 0; step < 2; ++step) {
          engine->Backward(Loss(*model, bf16, 2, 16));
          engine->Step();
        }
        const ModelStateBytes m = engine->memory();
        ZT_ASSIGN_OR_RETURN(estimate::MemoryEstimate e,
                            estimate::EstimateMemory(shape, estimate::OptionsFromConfig(c, pg->size())));
        ZT_RETURN_IF_ERROR(Within(where, "params", m.params, e.params, 0.05));
        ZT_RETURN_IF_ERROR(Within(where, "grads", m.grads, e.grads, 0.05));
        ZT_RETURN_IF_ERROR(Within(where, "master", m.master, e.master, 0.05));
        ZT_RETURN_IF_ERROR(Within(where, "optimizer state", m.optimizer_state, e.optimizer_state, 0.05));
        ZT_RETURN_IF_ERROR(Within(where, "model states", m.model_states(), e.model_states(), 0.05));
        if (stage == 3) ZT_RETURN_IF_ERROR(Within(where, "gathered peak", m.peak_gathered, e.gathered, 0.05));
        if (m.peak_buckets > e.buckets * 1.05 + 1) {
          return absl::InternalError(absl::StrFormat("%s: reduce buckets: engine %d bytes above the estimate %d", where,
                                                     m.peak_buckets, e.buckets));
        }
        if (pg->rank() == 0) {
          std::printf("%s: model states %lld = estimate %lld; gathered %lld / %lld; buckets %lld / %lld\n",
                      where.c_str(), static_cast<long long>(m.model_states()), static_cast<long long>(e.model_states()),
                      static_cast<long long>(m.peak_gathered), static_cast<long long>(e.gathered),
                      static_cast<long long>(m.peak_buckets), static_cast<long long>(e.buckets));
        }
      }
    }
  }
  return absl::OkStatus();
}

// NVMe offload: the swap files and pools the engine reports must be what the
// estimator replays, to the byte, and the model states left in memory too.
absl::Status CheckNvmeOffload(const std::string& model_name, const std::shared_ptr<comm::ProcessGroup>& pg) {
  ZT_ASSIGN_OR_RETURN(estimate::ModelShape shape, estimate::BuiltinModelShape(SpecOf(model_name)));
  const std::string dir = absl::StrCat("/tmp/zt_estimate_offload_", ::getppid());
  std::filesystem::create_directories(dir);
  struct Case {
    int stage;
    bool bf16;
    bool params;
  };
  for (const Case& k : {Case{1, true, false}, Case{2, true, false}, Case{3, true, true}, Case{3, false, true}}) {
    const std::string where = absl::StrFormat("%s, stage %d, %s, world %d, NVMe%s", model_name, k.stage,
                                              k.bf16 ? "bf16" : "fp32", pg->size(), k.params ? " + params" : "");
    Config c;
    c.batch.train_micro_batch_size_per_gpu = 2;
    c.batch.gradient_accumulation_steps = 1;
    c.steps_per_print = 1000;
    c.optimizer.present = true;
    c.zero.stage = k.stage;
    c.zero.overlap_comm = k.stage == 3;
    c.bf16.enabled = k.bf16;
    c.zero.reduce_bucket_size = 5000;
    c.zero.param_persistence_threshold = 500;
    c.zero.sub_group_size = 3000;
    auto& oo = c.zero.offload_optimizer;
    oo.device = OffloadDevice::kNvme;
    oo.nvme_path = dir;
    oo.buffer_count = 7;  // room for read-ahead only
    oo.pipeline_read = oo.pipeline_write = true;
    if (k.params) {
      auto& op = c.zero.offload_param;
      op.device = OffloadDevice::kNvme;
      op.nvme_path = dir;
      op.buffer_count = 4;
      op.buffer_size = 1 << 20;
      c.aio.block_size = 4096;  // shards below 4 KiB stay in memory (plan/param_swap.h)
    }
    ZT_ASSIGN_OR_RETURN(std::unique_ptr<models::Model> model, models::CreateModel(SpecOf(model_name)));
    ZT_ASSIGN_OR_RETURN(auto engine, Engine::Create(model->module(), c, pg));
    for (int step = 0; step < 2; ++step) {
      engine->Backward(Loss(*model, k.bf16, 2, 16));
      engine->Step();
    }
    const ModelStateBytes m = engine->memory();
    ZT_ASSIGN_OR_RETURN(estimate::MemoryEstimate e,
                        estimate::EstimateMemory(shape, estimate::OptionsFromConfig(c, pg->size())));
    ZT_RETURN_IF_ERROR(Within(where, "params", m.params, e.params, 0.0));
    ZT_RETURN_IF_ERROR(Within(where, "model states", m.model_states(), e.model_states(), 0.0));
    ZT_RETURN_IF_ERROR(Within(where, "on NVMe", m.nvme, e.offloaded_nvme, 0.0));
    ZT_RETURN_IF_ERROR(Within(where, "swap buffers", m.swap_buffers, e.swap_buffers, 0.0));
    if (pg->rank() == 0) {
      std::printf("%s: model states %lld, NVMe %lld, swap buffers %lld (= estimate)\n", where.c_str(),
                  static_cast<long long>(m.model_states()), static_cast<long long>(m.nvme),
                  static_cast<long long>(m.swap_buffers));
    }
  }
  return absl::OkStatus();
}

// Hierarchical sharding at world 4 (mics_shard_size 2, as on 2 hosts x 2
// ranks): the model states are flat ZeRO's over 2 ranks, and the bytes a
// step sends per rank are what the traffic estimate says: across replicas
// (the gradient all-reduce, once per step) to 1%, inside the shard group to
// 1% at stages 1/2; at stage 3 between one gather per step (the coordinator
// keeps a small model gathered from forward to backward and across
// micro-steps) and the estimate's two per micro-step. With and without
// gradient accumulation.
absl::Status CheckHierarchical(const std::string& model_name, const std::shared_ptr<comm::ProcessGroup>& pg) {
  ZT_ASSIGN_OR_RETURN(estimate::ModelShape shape, estimate::BuiltinModelShape(SpecOf(model_name)));
  for (const auto& [stage, accumulation] : std::vector<std::pair<int, int>>{{1, 1}, {2, 1}, {3, 1}, {2, 3}, {3, 3}}) {
    const std::string where = absl::StrFormat("%s, stage %d, accumulation %d, world %d, mics_shard_size 2", model_name,
                                              stage, accumulation, pg->size());
    Config c;
    c.batch.train_micro_batch_size_per_gpu = 2;
    c.batch.gradient_accumulation_steps = accumulation;
    c.steps_per_print = 1000;
    c.optimizer.present = true;
    c.zero.stage = stage;
    c.zero.overlap_comm = stage == 3;
    c.zero.mics_shard_size = 2;
    ZT_ASSIGN_OR_RETURN(std::unique_ptr<models::Model> model, models::CreateModel(SpecOf(model_name)));
    ZT_ASSIGN_OR_RETURN(auto engine, Engine::Create(model->module(), c, pg));
    auto step = [&] {
      for (int k = 0; k < accumulation; ++k) {
        engine->Backward(Loss(*model, false, 2, 16));
        engine->Step();
      }
    };
    step();
    const CommTraffic before = engine->comm_traffic();
    constexpr int kSteps = 2;
    for (int k = 0; k < kSteps; ++k) step();
    const CommTraffic after = engine->comm_traffic();
    if (!after.hierarchical) return absl::InternalError(absl::StrCat(where, ": the engine is not hierarchical"));
    const ModelStateBytes m = engine->memory();
    ZT_ASSIGN_OR_RETURN(estimate::MemoryEstimate e,
                        estimate::EstimateMemory(shape, estimate::OptionsFromConfig(c, pg->size())));
    ZT_RETURN_IF_ERROR(Within(where, "model states", m.model_states(), e.model_states(), 0.05));
    estimate::TrafficOptions t;
    t.stage = stage;
    t.world_size = pg->size();
    t.ranks_per_host = 2;
    t.mics_shard_size = 2;
    t.accumulation_steps = accumulation;
    int64_t trainable = 0, frozen = 0;
    for (const estimate::ParamShape& p : shape.params) (p.trainable ? trainable : frozen) += p.numel;
    ZT_ASSIGN_OR_RETURN(estimate::StepTraffic est, estimate::EstimateStepTraffic(trainable, frozen, t));
    const int64_t across = (after.replica_sent - before.replica_sent) / kSteps;
    const int64_t inside = (after.shard_sent - before.shard_sent) / kSteps;
    ZT_RETURN_IF_ERROR(Within(where, "bytes across replicas per step", across, est.rank_across, 0.01));
    if (stage < 3) {
      ZT_RETURN_IF_ERROR(Within(where, "bytes inside the shard group per step", inside, est.rank_inside, 0.01));
    } else {
      // Stage 3 gathers each chunk at least once per step and at most twice
      // per micro-step (the estimate); once per step is stage 2's traffic.
      estimate::TrafficOptions once = t;
      once.stage = 2;
      ZT_ASSIGN_OR_RETURN(estimate::StepTraffic least, estimate::EstimateStepTraffic(trainable, frozen, once));
      if (inside > est.rank_inside * 1.01 || inside < least.rank_inside * 0.99) {
        return absl::InternalError(absl::StrFormat(
            "%s: %d bytes inside the shard group per step, outside [%d (one gather per step), %d (the estimate: "
            "two per micro-step)]",
            where, inside, least.rank_inside, est.rank_inside));
      }
    }
    if (pg->rank() == 0) {
      std::printf(
          "%s: model states %lld (estimate %lld); sent per step inside %lld (estimate %lld), across %lld "
          "(estimate %lld)\n",
          where.c_str(), static_cast<long long>(m.model_states()), static_cast<long long>(e.model_states()),
          static_cast<long long>(inside), static_cast<long long>(est.rank_inside), static_cast<long long>(across),
          static_cast<long long>(est.rank_across));
    }
  }
  return absl::OkStatus();
}

// A stage-3 config of two steps for the accounting checks below.
Config StageThreeConfig() {
  Config c;
  c.batch.train_micro_batch_size_per_gpu = 2;
  c.batch.gradient_accumulation_steps = 1;
  c.steps_per_print = 1000;
  c.optimizer.present = true;
  c.zero.stage = 3;
  c.zero.overlap_comm = true;
  return c;
}

// Two steps of `model_name` under `c`, then the engine's accounting and the
// estimate's for the same config; `field` picks the part under test, which
// must be kept (> 0) and equal to the byte, and so must the model states
// that include it.
absl::Status CheckAccountedPart(const std::string& model_name, const std::shared_ptr<comm::ProcessGroup>& pg,
                                const Config& c, const std::string& what, int64_t ModelStateBytes::*engine_field,
                                int64_t estimate::MemoryEstimate::*estimate_field) {
  ZT_ASSIGN_OR_RETURN(estimate::ModelShape shape, estimate::BuiltinModelShape(SpecOf(model_name)));
  const std::string where = absl::StrFormat("%s, stage 3, world %d, %s", model_name, pg->size(), what);
  ZT_ASSIGN_OR_RETURN(std::unique_ptr<models::Model> model, models::CreateModel(SpecOf(model_name)));
  ZT_ASSIGN_OR_RETURN(auto engine, Engine::Create(model->module(), c, pg));
  for (int step = 0; step < 2; ++step) {
    engine->Backward(Loss(*model, false, 2, 16));
    engine->Step();
  }
  const ModelStateBytes m = engine->memory();
  ZT_ASSIGN_OR_RETURN(estimate::MemoryEstimate e,
                      estimate::EstimateMemory(shape, estimate::OptionsFromConfig(c, pg->size())));
  if (m.*engine_field <= 0) return absl::InternalError(absl::StrCat(where, ": the engine kept none"));
  ZT_RETURN_IF_ERROR(Within(where, what.c_str(), m.*engine_field, e.*estimate_field, 0.0));
  ZT_RETURN_IF_ERROR(Within(where, "model states", m.model_states(), e.model_states(), 0.0));
  if (pg->rank() == 0) {
    std::printf("%s: %lld = estimate; model states %lld = estimate\n", where.c_str(),
                static_cast<long long>(m.*engine_field), static_cast<long long>(m.model_states()));
  }
  return absl::OkStatus();
}

// hpZ at world 4 (zero_hpz_partition_size 2), stage 3, every chunk sharded:
// the secondary shards the engine allocates are the estimate's, to the
// byte, and so are the model states that include them.
absl::Status CheckHpz(const std::string& model_name, const std::shared_ptr<comm::ProcessGroup>& pg) {
  Config c = StageThreeConfig();
  c.zero.param_persistence_threshold = 0;
  c.zero.hpz_partition_size = 2;
  return CheckAccountedPart(model_name, pg, c, "hpZ secondary shards", &ModelStateBytes::hpz_secondary,
                            &estimate::MemoryEstimate::hpz_secondary);
}

// qgZ with LoCo at world 4, stage 3: the error records the reducer keeps
// after two steps are the estimate's, to the byte, and so are the model
// states that include them.
absl::Status CheckLoco(const std::string& model_name, const std::shared_ptr<comm::ProcessGroup>& pg) {
  Config c = StageThreeConfig();
  c.zero.quantized_gradients = true;
  c.zero.loco = true;
  return CheckAccountedPart(model_name, pg, c, "LoCo error records", &ModelStateBytes::error_feedback,
                            &estimate::MemoryEstimate::error_feedback);
}

// Runs `check` for each model named in `models` (comma-separated) in the same
// ranks (RunEachInTheseRanks: the error lists every model that failed).
absl::Status ForEachModel(
    const std::string& models,
    const std::function<absl::Status(const std::string&, const std::shared_ptr<comm::ProcessGroup>&)>& check) {
  ZT_ASSIGN_OR_RETURN(comm::RankEnv env, comm::ReadRankEnv());
  ZT_ASSIGN_OR_RETURN(auto pg, comm::InitProcessGroup(env, {}));
  return RunEachInTheseRanks(absl::StrSplit(models, ','), [&](const std::string& model) { return check(model, pg); });
}

// ctx.arg: comma-separated model names.
ZT_RANK_WORKER(estimate_vs_engine) { return ForEachModel(ctx.arg, CheckModelStates); }
ZT_RANK_WORKER(estimate_vs_engine_offload) { return ForEachModel(ctx.arg, CheckNvmeOffload); }
// Both checks over one process group: a second rendezvous on the same port
// in the same processes could reach rank 0's first store before it is torn
// down and find its own ranks' claims there.
ZT_RANK_WORKER(estimate_vs_engine_hierarchical) {
  return ForEachModel(ctx.arg, [](const std::string& model, const std::shared_ptr<comm::ProcessGroup>& pg) {
    ZT_RETURN_IF_ERROR(CheckHierarchical(model, pg));
    ZT_RETURN_IF_ERROR(CheckHpz(model, pg));
    return CheckLoco(model, pg);
  });
}

TEST(EstimateVsEngine, HierarchicalShardingHpzAndLocoMatchEngineAccounting) {
  RankRunOptions o;
  o.world_size = 4;
  o.arg = "gpt2-tiny,llama-tiny";
  o.timeout = std::chrono::seconds(600);
  RankRunResult r = RunRanks("estimate_vs_engine_hierarchical", o);
  EXPECT_TRUE(r.ok()) << r.Summary();
}

TEST(EstimateVsEngine, NvmeOffloadMatchesEngineAccounting) {
  for (int world : {1, 2}) {
    RankRunOptions o;
    o.world_size = world;
    o.arg = "gpt2-tiny,llama-tiny,bert-tiny";
    o.timeout = std::chrono::seconds(600);
    RankRunResult r = RunRanks("estimate_vs_engine_offload", o);
    std::error_code ignored;
    std::filesystem::remove_all(absl::StrCat("/tmp/zt_estimate_offload_", ::getpid()), ignored);
    EXPECT_TRUE(r.ok()) << "world " << world << ": " << r.Summary();
  }
}

TEST(EstimateVsEngine, ModelStatesMatchEngineAccounting) {
  for (int world : {1, 2, 4}) {
    RankRunOptions o;
    o.world_size = world;
    o.arg = "gpt2-tiny,llama-tiny,mnist-cnn,llama-tiny+lora,gpt2-tiny+lora,bert-tiny,bert-tiny+lora";
    o.timeout = std::chrono::seconds(900);
    RankRunResult r = RunRanks("estimate_vs_engine", o);
    EXPECT_TRUE(r.ok()) << "world " << world << ": " << r.Summary();
  }
}

TEST(BuiltinShapes, ListTheModulesParameters) {
  const std::vector<models::ModelSpec> specs = {
      {"gpt2-tiny", {}, 1},
      {"gpt2-mini", {{"n_layer", 3}, {"seq_len", 64}}, 1},
      {"llama-tiny", {}, 1},
      {"llama-mini", {{"n_kv_head", 4}, {"intermediate", 100}}, 1},
      {"mnist-cnn", {}, 1},
      SpecOf("llama-tiny+lora"),
      SpecOf("gpt2-tiny+lora"),
      {"bert-tiny", {}, 1},
      {"bert-mini", {{"n_layer", 2}, {"intermediate", 100}, {"num_labels", 4}, {"vocab", 500}}, 1},
      SpecOf("bert-tiny+lora")};
  for (const models::ModelSpec& spec : specs) {
    absl::StatusOr<estimate::ModelShape> shape = estimate::BuiltinModelShape(spec);
    ASSERT_TRUE(shape.ok()) << shape.status();
    absl::StatusOr<std::unique_ptr<models::Model>> model = models::CreateModel(spec);
    ASSERT_TRUE(model.ok()) << model.status();
    std::vector<std::pair<std::string, int64_t>> actual;
    std::unordered_set<const void*> seen;
    for (const auto& p : (*model)->module()->named_parameters(/*recurse=*/true)) {
      if (seen.insert(p.value().unsafeGetTensorImpl()).second) actual.emplace_back(p.key(), p.value().numel());
    }
    std::vector<bool> trainable;
    seen.clear();
    for (const auto& p : (*model)->module()->named_parameters(/*recurse=*/true)) {
      if (seen.insert(p.value().unsafeGetTensorImpl()).second) trainable.push_back(p.value().requires_grad());
    }
    ASSERT_EQ(actual.size(), shape->params.size()) << spec.name;
    for (size_t i = 0; i < actual.size(); ++i) {
      EXPECT_EQ(actual[i].first, shape->params[i].name) << spec.name << " #" << i;
      EXPECT_EQ(actual[i].second, shape->params[i].numel) << spec.name << " " << actual[i].first;
      EXPECT_EQ(trainable[i], shape->params[i].trainable) << spec.name << " " << actual[i].first;
    }
  }
  EXPECT_FALSE(estimate::BuiltinModelShape({"gpt2-tiny", {{"n_layers", 2}}, 1}).ok());
}

// The peak of one forward + backward on the counting allocator, gradients
// allocated beforehand (as the engine's flat buffers are), with LibTorch's
// oneDNN kernels on or off.
void MeasureActivationPeak(const std::string& name, bool bf16, int64_t batch, int64_t seq, bool checkpointing,
                           bool onednn, double* measured) {
  ASSERT_TRUE(InstallCountingCpuAllocator());
  absl::StatusOr<std::unique_ptr<models::Model>> model = models::CreateModel(SpecOf(name));
  ASSERT_TRUE(model.ok()) << model.status();
  if (bf16) (*model)->module()->to(torch::kBFloat16);
  if (checkpointing) (*model)->CheckpointActivations(0);
  at::globalContext().setUserEnabledMkldnn(onednn);
  Loss(**model, bf16, batch, seq).backward();  // allocates .grad
  const int64_t before = CpuMemory().current_bytes;
  ResetCpuMemoryPeak();
  Loss(**model, bf16, batch, seq).backward();
  *measured = static_cast<double>(CpuMemory().peak_bytes - before);
  at::globalContext().setUserEnabledMkldnn(true);
}

// The measured peak against ActivationBytes. The estimate models ATen's own
// CPU kernels. LibTorch hands some ops to oneDNN instead, depending on the
// CPU (bf16 ones only where it has AVX-512 BW/VL/DQ), and oneDNN's bf16 GELU
// holds more: bert-tiny's bf16 step measured 1.25x the estimate on an
// AVX-512 Xeon with oneDNN, 1.08x without. So the estimate is held to 15%
// of the native kernels (oneDNN off: what CPUs without AVX-512 run for
// bf16), and the default path, whatever this CPU picks, to 30%.
void CheckActivations(const std::string& name, bool bf16, int64_t batch, int64_t seq, bool checkpointing) {
  absl::StatusOr<estimate::ModelShape> shape = estimate::BuiltinModelShape(SpecOf(name));
  ASSERT_TRUE(shape.ok()) << shape.status();
  const double estimated = static_cast<double>(estimate::ActivationBytes(
      *shape->transformer, bf16 ? estimate::Precision::kBf16 : estimate::Precision::kFp32, batch, seq, checkpointing));
  double native = 0, by_default = 0;
  MeasureActivationPeak(name, bf16, batch, seq, checkpointing, /*onednn=*/false, &native);
  MeasureActivationPeak(name, bf16, batch, seq, checkpointing, /*onednn=*/true, &by_default);
  std::printf("%s %s B=%lld L=%lld%s: measured %.0f bytes (%.0f with oneDNN), estimated %.0f (%.3f, %.3f)\n",
              name.c_str(), bf16 ? "bf16" : "fp32", static_cast<long long>(batch), static_cast<long long>(seq),
              checkpointing ? " checkpointed" : "", native, by_default, estimated, native / estimated,
              by_default / estimated);
  EXPECT_NEAR(native, estimated, 0.15 * estimated) << name << (bf16 ? " bf16" : " fp32");
  EXPECT_NEAR(by_default, estimated, 0.30 * estimated) << name << (bf16 ? " bf16" : " fp32") << " with oneDNN";
}

TEST(Activations, Gpt2TinyMatchesAllocatorPeak) {
  CheckActivations("gpt2-tiny", false, 4, 128, false);
  CheckActivations("gpt2-tiny", true, 4, 128, false);
  CheckActivations("gpt2-tiny", false, 8, 64, false);
}

TEST(Activations, BertTinyMatchesAllocatorPeak) {
  CheckActivations("bert-tiny", false, 4, 128, false);
  CheckActivations("bert-tiny", true, 4, 128, false);
}

TEST(Activations, LlamaTinyMatchesAllocatorPeak) {
  CheckActivations("llama-tiny", false, 4, 128, false);
  CheckActivations("llama-tiny", true, 4, 128, false);
}

}  // namespace
}  // namespace zt::testing

int main(int argc, char** argv) { return zt::testing::RankTestMain(argc, argv); }
