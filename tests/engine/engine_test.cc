// Single-process Engine behaviour: creation errors a user can act on,
// misuse of Backward/Step, accumulation-boundary bookkeeping, memory
// accounting (checked against a counting allocator) and the step log.
#include "engine/engine.h"

#include <gtest/gtest.h>
#include <torch/torch.h>
#include <unistd.h>

#include <fstream>

#include "absl/strings/match.h"
#include "comm/single_group.h"
#include "engine/cpu_memory.h"
#include "engine/gathered_parameters.h"
#include "tests/engine/parity_model.h"
#include "tests/testing/test_config.h"
#include "util/error.h"
#include "zero/activation_checkpoint.h"
#include "zero/unit.h"

namespace zt {
namespace {

using testing::ParityNet;

Config BaseConfig(int stage) { return testing::TestConfig(stage, /*micro_batch=*/4, /*accumulation=*/1); }

std::shared_ptr<comm::ProcessGroup> Single() { return std::make_shared<comm::SingleGroup>(); }

torch::Tensor Loss(ParityNet& model, int64_t rows = 4) {
  torch::Tensor x = torch::randn({rows, 13});
  return model->forward(x).pow(2).mean();
}

TEST(EngineCreate, RejectsWhatItCannotRun) {
  ParityNet model;
  Config no_opt = BaseConfig(1);
  no_opt.optimizer.present = false;
  auto r = Engine::Create(model, no_opt, Single());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("\"optimizer\""), std::string::npos) << r.status();

  // Partial offload (ratio < 1) is DeepSpeed's; this engine offloads all or nothing.
  Config partial = BaseConfig(3);
  partial.zero.offload_optimizer.device = OffloadDevice::kCpu;
  partial.zero.offload_optimizer.ratio = 0.5;
  auto p = Engine::Create(model, partial, Single());
  EXPECT_EQ(p.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(p.status().message().find("offload_optimizer.ratio"), std::string::npos) << p.status();

  Config batch = BaseConfig(1);
  batch.batch.train_batch_size = 6;  // 6 != 4 * 1 * 1
  auto b = Engine::Create(model, batch, Single());
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("world of 1"), std::string::npos) << b.status();

  EXPECT_FALSE(Engine::Create(std::shared_ptr<torch::nn::Module>(), BaseConfig(0), Single()).ok());
  EXPECT_FALSE(Engine::Create(model, BaseConfig(0), nullptr).ok());

  ParityNet frozen;
  for (auto& p : frozen->parameters()) p.set_requires_grad(false);
  for (int stage : {0, 3}) {
    auto f = Engine::Create(frozen, BaseConfig(stage), Single());
    ASSERT_FALSE(f.ok());
    EXPECT_NE(f.status().message().find("no trainable parameters"), std::string::npos) << f.status();
  }
}

TEST(EngineCreate, ParametersStayTheSameObjectsAndValues) {
  torch::manual_seed(3);
  ParityNet model;
  std::vector<torch::Tensor> before;
  std::vector<void*> impls;
  for (auto& p : model->parameters()) {
    before.push_back(p.detach().clone());
    impls.push_back(p.unsafeGetTensorImpl());
  }
  auto engine = ValueOrThrow(Engine::Create(model, BaseConfig(2), Single()));
  auto after = model->parameters();
  ASSERT_EQ(after.size(), before.size());
  for (size_t i = 0; i < after.size(); ++i) {
    EXPECT_EQ(after[i].unsafeGetTensorImpl(), impls[i]);
    EXPECT_TRUE(torch::equal(after[i].detach(), before[i]));
  }
}

TEST(EngineBackward, RejectsBadLosses) {
  ParityNet model;
  auto engine = ValueOrThrow(Engine::Create(model, BaseConfig(1), Single()));
  EXPECT_THROW(engine->Backward(torch::ones({2}, torch::requires_grad())), Error);
  EXPECT_THROW(engine->Backward(torch::ones({}, torch::kFloat)), Error);
  EXPECT_THROW(engine->Backward(torch::Tensor()), Error);
}

// loss.backward() instead of engine->Backward(loss) leaves gradients that
// were never averaged across ranks; every stage must refuse to step on them
// (stages 0/1 keep them in the same flat buffer as reduced ones).
class PlainLossBackward : public ::testing::TestWithParam<int> {};

TEST_P(PlainLossBackward, IsRefusedAtTheStepNamingAParameter) {
  ParityNet model;
  Config c = BaseConfig(GetParam());
  c.batch.gradient_accumulation_steps = 2;
  auto engine = ValueOrThrow(Engine::Create(model, c, Single()));
  Loss(model).backward();  // bypasses the engine: the gradients are never reduced
  engine->Step();          // not a boundary yet: nothing to check
  engine->Backward(Loss(model));
  try {
    engine->Step();
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("engine.Backward(loss) instead of loss.backward()"), std::string::npos) << what;
    EXPECT_NE(what.find("parameter '"), std::string::npos) << what;
  }
}

TEST_P(PlainLossBackward, EngineBackwardAloneIsAccepted) {
  ParityNet model;
  auto engine = ValueOrThrow(Engine::Create(model, BaseConfig(GetParam()), Single()));
  for (int i = 0; i < 3; ++i) {
    engine->Backward(Loss(model));
    EXPECT_NO_THROW(engine->Step());
  }
}

INSTANTIATE_TEST_SUITE_P(Stages, PlainLossBackward, ::testing::Values(0, 1, 2, 3),
                         [](const auto& info) { return "stage" + std::to_string(info.param); });

TEST(EngineStep, AccumulationBoundaryAndCounters) {
  ParityNet model;
  Config c = BaseConfig(1);
  c.batch.gradient_accumulation_steps = 3;
  auto engine = ValueOrThrow(Engine::Create(model, c, Single()));
  for (int i = 0; i < 7; ++i) {
    EXPECT_EQ(engine->IsAccumulationBoundary(), i % 3 == 2) << i;
    engine->Backward(Loss(model));
    engine->Step();
  }
  EXPECT_EQ(engine->global_steps(), 2);
  EXPECT_EQ(engine->micro_steps(), 7);
  EXPECT_EQ(engine->global_samples(), 2 * 12);
  const double mean = engine->TrainBatch([&](int64_t) { return Loss(model); });
  EXPECT_TRUE(std::isfinite(mean));
  // 7 micro-steps + 3 more: the TrainBatch crossed one boundary (at micro-step 9).
  EXPECT_EQ(engine->global_steps(), 3);
}

TEST(EngineStep, ParametersMoveAndGradientsAreCleared) {
  for (int stage : {0, 1, 2}) {
    torch::manual_seed(5);
    ParityNet model;
    auto engine = ValueOrThrow(Engine::Create(model, BaseConfig(stage), Single()));
    torch::Tensor w0 = model->fc1->weight.detach().clone();
    engine->Backward(Loss(model));
    engine->Step();
    EXPECT_FALSE(torch::equal(model->fc1->weight.detach(), w0)) << "stage " << stage;
    for (auto& p : model->parameters()) {
      if (p.grad().defined()) {
        EXPECT_EQ(p.grad().abs().max().item<float>(), 0.0f) << "stage " << stage;
      }
    }
  }
}

TEST(EngineLog, PrintsEveryStepsPerPrintWithBreakdown) {
  ParityNet model;
  Config c = BaseConfig(1);
  c.steps_per_print = 2;
  c.wall_clock_breakdown = true;
  auto engine = ValueOrThrow(Engine::Create(model, c, Single()));
  ::testing::internal::CaptureStderr();
  for (int i = 0; i < 5; ++i) {
    engine->Backward(Loss(model));
    engine->Step();
  }
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(log.find("step 2 | loss"), std::string::npos) << log;
  EXPECT_NE(log.find("step 4 | loss"), std::string::npos) << log;
  EXPECT_EQ(log.find("step 3 |"), std::string::npos) << log;
  EXPECT_EQ(log.find("step 5 |"), std::string::npos) << log;
  for (const char* field : {"lr ", "loss scale", "samples/s", "model states", "forward", "backward", "reduce"}) {
    EXPECT_NE(log.find(field), std::string::npos) << field << " missing in: " << log;
  }
}

// The config's notes (here: a key this build ignores, set off its default)
// reach the log at Create, as DeepSpeed's warnings do, unless the caller
// prints them itself.
TEST(EngineLog, ConfigNotesReachTheLog) {
  ParseOptions po;
  ParseResult parsed = ParseConfig(R"({"train_micro_batch_size_per_gpu": 4, "optimizer": {"type": "AdamW",
      "params": {"lr": 0.001}}, "zero_optimization": {"stage": 1, "contiguous_gradients": false}})",
                                   po);
  ASSERT_TRUE(parsed.config.has_value());
  ASSERT_FALSE(parsed.config->notes.empty());
  for (bool log_notes : {true, false}) {
    ParityNet model;
    EngineOptions eo;
    eo.log_config_notes = log_notes;
    ::testing::internal::CaptureStderr();
    auto engine = ValueOrThrow(Engine::Create(model, *parsed.config, Single(), eo));
    const std::string log = ::testing::internal::GetCapturedStderr();
    EXPECT_EQ(absl::StrContains(log, "config: zero_optimization.contiguous_gradients: accepted, ignored by this build"),
              log_notes)
        << log;
  }
}

// A program of the user's own gets the config's monitors from the engine,
// as DeepSpeed's engine writes them: one row per optimizer step, x = global
// samples, for loss, lr and loss scale; none when the caller opts out.
TEST(EngineMonitors, CsvMonitorRowsForEveryStep) {
  const std::string dir = ::testing::TempDir() + "zt_engine_monitors_" + std::to_string(::getpid());
  for (bool write : {true, false}) {
    ParityNet model;
    Config c = BaseConfig(1);
    c.csv_monitor.enabled = true;
    c.csv_monitor.output_path = dir;
    c.csv_monitor.job_name = write ? "on" : "off";
    EngineOptions eo;
    eo.write_monitors = write;
    {
      auto engine = ValueOrThrow(Engine::Create(model, c, Single(), eo));
      for (int i = 0; i < 3; ++i) {
        engine->Backward(Loss(model));
        engine->Step();
      }
    }
    const std::string csv = dir + "/" + c.csv_monitor.job_name + "/Train_Samples_train_loss.csv";
    std::ifstream in(csv);
    EXPECT_EQ(static_cast<bool>(in), write) << csv;
    if (!write) continue;
    std::vector<std::string> lines;
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    ASSERT_EQ(lines.size(), 4u) << "header and one row per step";
    EXPECT_EQ(lines[1].rfind("4,", 0), 0u) << lines[1];  // micro batch 4, one rank: 4 samples per step
    EXPECT_EQ(lines[3].rfind("12,", 0), 0u) << lines[3];
    for (const char* tag : {"Train_Samples_lr.csv", "Train_Samples_loss_scale.csv"}) {
      EXPECT_TRUE(std::ifstream(dir + "/on/" + tag).good()) << tag;
    }
  }
}

// A config parsed with run-time "auto" values allowed (what `zt config
// check` does) cannot train until they are filled: Create names the key.
TEST(EngineCreate, RefusesAutoValuesLeftToRunTime) {
  ParseOptions po;
  po.allow_run_time_autos = true;
  ParseResult parsed = ParseConfig(R"({"train_micro_batch_size_per_gpu": 4, "optimizer": {"type": "AdamW",
      "params": {"lr": 0.001}}, "scheduler": {"type": "WarmupDecayLR", "params": {"total_num_steps": "auto"}},
      "zero_optimization": {"stage": 1}})",
                                   po);
  ASSERT_TRUE(parsed.config.has_value()) << parsed.status();
  ParityNet model;
  auto engine = Engine::Create(model, *parsed.config, Single());
  ASSERT_FALSE(engine.ok());
  EXPECT_TRUE(absl::StrContains(engine.status().message(), "scheduler.params.total_num_steps")) << engine.status();
}

TEST(EngineLog, Stage3LineReportsGatheredPeakAndPrefetch) {
  zt::Unit<testing::ParityNetImpl> model;
  Config c = BaseConfig(3);
  c.steps_per_print = 2;
  c.zero.param_persistence_threshold = 0;
  auto engine = ValueOrThrow(Engine::Create(model, c, Single()));
  ::testing::internal::CaptureStderr();
  for (int i = 0; i < 4; ++i) {
    engine->Backward(model(torch::randn({4, 13})).pow(2).mean());
    engine->Step();
  }
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(log.find("step 4 | loss"), std::string::npos) << log;
  EXPECT_NE(log.find("gathered peak"), std::string::npos) << log;
  EXPECT_NE(log.find("units prefetched"), std::string::npos) << log;
}

TEST(EngineLog, ActivationCheckpointProfile) {
  zt::Unit<testing::ParityNetImpl> model;
  model->set_activation_checkpointing(true);
  Config c = BaseConfig(0);
  c.steps_per_print = 2;
  c.activation_checkpointing.profile = true;
  auto engine = ValueOrThrow(Engine::Create(model, c, Single()));
  ::testing::internal::CaptureStderr();
  for (int i = 0; i < 2; ++i) {
    engine->Backward(model(torch::randn({4, 13})).pow(2).mean());
    engine->Step();
  }
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(log.find("checkpoints per step: 1.0, forward"), std::string::npos) << log;
  EXPECT_NE(log.find("recompute"), std::string::npos) << log;
  ConfigureActivationCheckpointing({});
}

// Units must not restrict what the code around them does: in-place ops on a
// unit's result and inside a unit on its argument, a unit called twice in
// one forward, and a result struct the unit learns about from UnitTensors.
struct ScaleBlockImpl : torch::nn::Module {
  ScaleBlockImpl() { fc = register_module("fc", torch::nn::Linear(13, 13)); }
  torch::Tensor forward(torch::Tensor x) {
    x.add_(0.25);  // in place on the argument
    return fc(torch::tanh(x));
  }
  torch::nn::Linear fc{nullptr};
};

struct PairOut {
  torch::Tensor a, b;
};

}  // namespace
}  // namespace zt

template <>
struct zt::UnitTensors<zt::PairOut> {
  static constexpr bool kKnown = true;
  template <typename F>
  static void ForEach(zt::PairOut& o, F&& f) {
    f(o.a);
    f(o.b);
  }
};

namespace zt {
namespace {

struct SplitBlockImpl : torch::nn::Module {
  SplitBlockImpl() { fc = register_module("fc", torch::nn::Linear(13, 26)); }
  PairOut forward(const torch::Tensor& x) {
    std::vector<torch::Tensor> parts = fc(x).chunk(2, -1);
    return {parts[0], parts[1]};
  }
  torch::nn::Linear fc{nullptr};
};

struct InPlaceNetImpl : torch::nn::Module {
  InPlaceNetImpl() {
    a = register_module("a", zt::Unit<ScaleBlockImpl>());
    b = register_module("b", zt::Unit<ScaleBlockImpl>());
    s = register_module("s", zt::Unit<SplitBlockImpl>());
  }
  torch::Tensor forward(const torch::Tensor& x) {
    torch::Tensor h = a(x * 1.0);
    h.mul_(0.5);  // in place on a unit's result
    h = b(b(h));  // the same unit twice
    PairOut o = s(h);
    return o.a * o.b;
  }
  zt::Unit<ScaleBlockImpl> a{nullptr}, b{nullptr};
  zt::Unit<SplitBlockImpl> s{nullptr};
};
TORCH_MODULE(InPlaceNet);

TEST(EngineStage3, InPlaceOpsRepeatedUnitsAndCustomResultsMatchStage0) {
  std::vector<torch::Tensor> finals;
  for (int stage : {0, 3}) {
    torch::manual_seed(5);
    InPlaceNet model;
    Config c = BaseConfig(stage);
    c.zero.param_persistence_threshold = 0;
    auto engine = ValueOrThrow(Engine::Create(model, c, Single()));
    torch::manual_seed(6);
    for (int i = 0; i < 3; ++i) {
      engine->Backward(model->forward(torch::randn({4, 13})).pow(2).mean());
      engine->Step();
    }
    GatheredParameters full(*engine);
    std::vector<torch::Tensor> flat;
    for (const auto& p : model->parameters()) flat.push_back(p.detach().flatten().clone());
    finals.push_back(torch::cat(flat));
    full.Release();
  }
  EXPECT_TRUE(torch::allclose(finals[0], finals[1], 1e-6, 1e-7))
      << "max diff " << (finals[0] - finals[1]).abs().max().item<double>();
}

// Accounted model-state bytes must match what the allocator really holds.
TEST(EngineMemory, AccountingMatchesTheAllocator) {
  ASSERT_TRUE(InstallCountingCpuAllocator());
  for (int stage : {0, 1, 2, 3}) {
    for (bool bf16 : {false, true}) {
      torch::Tensor x = torch::randn({4, 13});
      const int64_t baseline = CpuMemory().current_bytes;
      {
        zt::Unit<testing::ParityNetImpl> model;  // a sharded unit at stage 3, a plain module below
        Config c = BaseConfig(stage);
        c.bf16.enabled = bf16;
        c.zero.reduce_bucket_size = 100;
        c.zero.param_persistence_threshold = 0;
        auto engine = ValueOrThrow(Engine::Create(model, c, Single()));
        torch::Tensor in = bf16 ? x.to(torch::kBFloat16) : x;
        engine->Backward(model(in).to(torch::kFloat).pow(2).mean());
        engine->Step();
        const ModelStateBytes m = engine->memory();
        // Stage 3 also keeps the released gather buffers for reuse.
        const int64_t held = CpuMemory().current_bytes - baseline - m.gather_cache;
        const int64_t numel = 13 * 17 + 17 + 17 * 5 + 5;
        // The model is tiny, so padding (< 2 elements per group here) matters: allow it.
        EXPECT_GE(m.params, numel * (bf16 ? 2 : 4));
        EXPECT_LE(std::abs(held - m.model_states()), m.model_states() / 20 + 4096)
            << "stage " << stage << " bf16 " << bf16 << ": allocator holds " << held << " bytes, engine accounts "
            << m.model_states();
      }
      EXPECT_LE(CpuMemory().current_bytes - baseline, 0) << "engine leaked memory";
    }
  }
}

TEST(CountingAllocator, CountsAllocationsAndFrees) {
  ASSERT_TRUE(InstallCountingCpuAllocator());
  const int64_t before = CpuMemory().current_bytes;
  ResetCpuMemoryPeak();
  {
    torch::Tensor t = torch::empty({1 << 20}, torch::kFloat);
    EXPECT_EQ(CpuMemory().current_bytes - before, 4 << 20);
  }
  EXPECT_EQ(CpuMemory().current_bytes, before);
  EXPECT_GE(CpuMemory().peak_bytes - before, 4 << 20);
}

}  // namespace
}  // namespace zt
