// bf16's cost on this CPU: one built-in model (zt train's default, gpt2-mini
// at ZeRO stage 3) trained in fp32, in bf16 with LibTorch's own bf16 kernels,
// and in bf16 with fp32 arithmetic (EngineOptions::bf16_compute,
// engine/bf16_compute.h), one after another in the same process group:
// median step time and its ratio to the same run's fp32 step, peak CPU
// memory, model states and bytes sent per step.
//
//   zt launch --nproc-per-node 2 -- build/bin/zt_bench_bf16_compute [--onednn off]
//
// --onednn off turns LibTorch's oneDNN off (at::globalContext()
// .setUserEnabledMkldnn(false)): LibTorch then takes the path it takes on a
// CPU without AVX-512, where no bf16 GEMM reaches oneDNN -- its reference
// bf16 loops -- so the AVX2 case can be measured on any x86 machine. The
// other bf16 kernels (element-wise, softmax) are LibTorch's either way.
// Limits: CPU and Gloo only; memory counts LibTorch CPU allocations (the
// counting allocator), not Gloo's buffers or the allocator's slack.
#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <algorithm>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "benchmarks/median.h"
#include "cli/flags.h"
#include "comm/init.h"
#include "comm/process_group.h"
#include "engine/bf16_compute.h"
#include "engine/cpu_memory.h"
#include "engine/engine.h"
#include "launch/rank_env.h"
#include "models/registry.h"
#include "util/error.h"
#include "util/status.h"
#include "util/system_info.h"

namespace zt {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

struct BenchOptions {
  std::string model = "gpt2-mini";
  int64_t seq_len = 128;
  int64_t global_batch = 32;
  int64_t warmup = 2;
  int64_t steps = 8;
  int64_t rounds = 1;
  int stage = 3;
  bool onednn = true;
  uint64_t seed = 1234;
  std::vector<std::string> runs;  // "fp32", "bf16" (LibTorch's kernels), "bf16-fp32", "bf16-auto"
};

struct RunSpec {
  std::string name;
  bool bf16 = false;
  Bf16Compute compute = Bf16Compute::kAuto;
};

absl::StatusOr<RunSpec> ParseRun(absl::string_view name) {
  RunSpec r;
  r.name = std::string(name);
  if (name == "fp32") return r;
  r.bf16 = true;
  if (name == "bf16") {
    r.compute = Bf16Compute::kBf16;
  } else if (name == "bf16-fp32") {
    r.compute = Bf16Compute::kFp32;
  } else if (name == "bf16-auto") {
    r.compute = Bf16Compute::kAuto;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("--runs: '", name, "' is not a run this benchmark knows (fp32, bf16, bf16-fp32, bf16-auto)"));
  }
  return r;
}

struct RankResult {
  double step_ms = 0;
  double peak_bytes = 0;
  double sent_per_step = 0;
  double model_state_bytes = 0;
  double final_loss = 0;
};
constexpr int64_t kFields = 5;

using bench::Median;

Config MakeConfig(const BenchOptions& o, const RunSpec& run) {
  Config c;
  c.batch.train_batch_size = o.global_batch;
  c.batch.gradient_accumulation_steps = 1;
  c.steps_per_print = 0;
  c.optimizer.present = true;
  c.optimizer.type = OptimizerType::kAdamW;
  c.optimizer.lr = 1e-3;
  c.optimizer.weight_decay = 0.01;
  c.optimizer.adam_w_mode = true;
  c.bf16.enabled = run.bf16;
  c.zero.stage = o.stage;
  c.zero.param_persistence_threshold = 10000;  // as zt train's built-in config (configs/zero3.json)
  return c;
}

// A few distinct micro-batches of token ids, cycled; next-token targets.
struct RankData {
  std::vector<torch::Tensor> ids;
};

RankData MakeData(const BenchOptions& o, int rank, int64_t micro, int64_t vocab) {
  RankData d;
  torch::manual_seed(o.seed + 1000 + static_cast<uint64_t>(rank));
  for (int i = 0; i < 4; ++i) d.ids.push_back(torch::randint(vocab, {micro, o.seq_len + 1}, torch::kLong));
  return d;
}

absl::StatusOr<RankResult> RunOne(const BenchOptions& o, const RunSpec& run,
                                  const std::shared_ptr<comm::ProcessGroup>& pg, const RankData& data) {
  RankResult r;
  const int64_t baseline = CpuMemory().current_bytes;
  {
    ZT_ASSIGN_OR_RETURN(std::unique_ptr<models::Model> model,
                        models::CreateModel(models::ModelSpec{o.model, {{"seq_len", o.seq_len}}, o.seed}));
    EngineOptions eo;
    eo.bf16_compute = run.compute;
    eo.write_monitors = false;
    ZT_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine, Engine::Create(model->module(), MakeConfig(o, run), pg, eo));
    using Clock = std::chrono::steady_clock;
    int64_t index = 0;
    auto step = [&]() {
      const torch::Tensor& ids = data.ids[static_cast<size_t>(index++ % static_cast<int64_t>(data.ids.size()))];
      const torch::Tensor input = ids.narrow(1, 0, o.seq_len);
      const torch::Tensor target = ids.narrow(1, 1, o.seq_len).reshape({-1});
      const torch::Tensor logits = model->Forward(input);
      torch::Tensor loss = torch::nn::functional::cross_entropy(logits.reshape({-1, logits.size(-1)}), target);
      engine->Backward(loss);
      engine->Step();
      return loss.item<double>();
    };
    for (int64_t s = 0; s < o.warmup; ++s) step();
    ZT_RETURN_IF_ERROR(pg->Barrier()->Wait());
    pg->ResetStats();
    ResetCpuMemoryPeak();
    std::vector<double> times;
    for (int64_t s = 0; s < o.steps; ++s) {
      const auto t0 = Clock::now();
      r.final_loss = step();
      times.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    }
    r.step_ms = Median(times);
    r.peak_bytes = static_cast<double>(CpuMemory().peak_bytes - baseline);
    r.sent_per_step = static_cast<double>(pg->stats().total_bytes_sent()) / static_cast<double>(o.steps);
    r.model_state_bytes = static_cast<double>(engine->memory().model_states());
  }
  ZT_RETURN_IF_ERROR(pg->Barrier()->Wait());
  return r;
}

// The worst rank of each measure, gathered to every rank (a collective).
absl::StatusOr<RankResult> WorstRank(const RankResult& mine, comm::ProcessGroup& pg) {
  const int n = pg.size();
  torch::Tensor flat = torch::zeros({kFields * n}, torch::kDouble);
  torch::Tensor shard = flat.narrow(0, kFields * pg.rank(), kFields);
  const double values[kFields] = {mine.step_ms, mine.peak_bytes, mine.sent_per_step, mine.model_state_bytes,
                                  mine.final_loss};
  for (int64_t i = 0; i < kFields; ++i) shard[i] = values[i];
  ZT_RETURN_IF_ERROR(pg.AllGather(shard, flat)->Wait());
  auto a = flat.accessor<double, 1>();
  RankResult w = mine;
  for (int k = 0; k < n; ++k) {
    const int64_t b = kFields * k;
    w.step_ms = std::max(w.step_ms, a[b]);
    w.peak_bytes = std::max(w.peak_bytes, a[b + 1]);
    w.sent_per_step = std::max(w.sent_per_step, a[b + 2]);
    w.model_state_bytes = std::max(w.model_state_bytes, a[b + 3]);
  }
  w.final_loss = a[4];  // rank 0's
  return w;
}

absl::StatusOr<BenchOptions> ParseOptions(int argc, char** argv) {
  cli::Flags flags("zt_bench_bf16_compute");
  flags.String("model", "gpt2-mini", "built-in model (zt train --list-models)");
  flags.Int("seq-len", 128, "tokens per sample");
  flags.Int("global-batch", 32, "samples per optimizer step over all ranks (divisible by the world size)");
  flags.Int("warmup", 2, "untimed steps per run");
  flags.Int("steps", 8, "timed steps per run");
  flags.Int("rounds", 1,
            "times the whole --runs list is repeated; each run's step time is the median over rounds and its ratio "
            "the median of the rounds' own ratios to that round's fp32 (a slow spell of the machine hits both sides)");
  flags.Int("stage", 3, "zero_optimization.stage (0-3)");
  flags.String("onednn", "on", "on, or off: LibTorch's path on a CPU without AVX-512 (no bf16 GEMM in oneDNN)");
  flags.Int("seed", 1234, "seed of the weights and the data");
  flags.String("runs", "fp32,bf16,bf16-fp32,bf16-auto",
               "comma-separated runs, in order: fp32, bf16 (LibTorch's bf16 kernels), bf16-fp32 (fp32 arithmetic), "
               "bf16-auto (what zt train picks here)");
  std::vector<std::string> args(argv + 1, argv + argc);
  ZT_RETURN_IF_ERROR(flags.Parse(args));
  if (flags.help_requested()) {
    std::cout << flags.Usage("[flags]   (one rank each: zt launch --nproc-per-node N -- zt_bench_bf16_compute ...)");
    std::exit(0);
  }
  BenchOptions o;
  o.model = flags.GetString("model");
  o.seq_len = flags.GetInt("seq-len");
  o.global_batch = flags.GetInt("global-batch");
  o.warmup = flags.GetInt("warmup");
  o.steps = flags.GetInt("steps");
  o.rounds = flags.GetInt("rounds");
  o.stage = static_cast<int>(flags.GetInt("stage"));
  o.seed = static_cast<uint64_t>(flags.GetInt("seed"));
  const std::string onednn = flags.GetString("onednn");
  if (onednn != "on" && onednn != "off") {
    return absl::InvalidArgumentError(absl::StrCat("--onednn is on or off, got '", onednn, "'"));
  }
  o.onednn = onednn == "on";
  if (o.seq_len < 1 || o.global_batch < 1 || o.warmup < 0 || o.steps < 1 || o.rounds < 1 || o.stage < 0 ||
      o.stage > 3) {
    return absl::InvalidArgumentError(
        "--seq-len, --global-batch, --steps and --rounds must be >= 1, --warmup >= 0, --stage 0-3");
  }
  for (absl::string_view s : absl::StrSplit(flags.GetString("runs"), ',', absl::SkipEmpty())) {
    ZT_RETURN_IF_ERROR(ParseRun(s).status());
    o.runs.push_back(std::string(s));
  }
  if (o.runs.empty()) return absl::InvalidArgumentError("--runs is empty; give e.g. --runs fp32,bf16-fp32");
  return o;
}

absl::Status Run(int argc, char** argv) {
  if (!InstallCountingCpuAllocator()) {
    return absl::FailedPreconditionError("could not install the counting CPU allocator");
  }
  ZT_ASSIGN_OR_RETURN(BenchOptions o, ParseOptions(argc, argv));
  at::globalContext().setUserEnabledMkldnn(o.onednn);
  ZT_ASSIGN_OR_RETURN(comm::RankEnv env, comm::ReadRankEnv());
  ZT_ASSIGN_OR_RETURN(std::shared_ptr<comm::ProcessGroup> pg, comm::InitProcessGroup(env, {}));
  const int world = pg->size();
  const int rank = pg->rank();
  if (o.global_batch % world != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--global-batch ", o.global_batch, " does not divide by the world size ", world));
  }
  int64_t vocab = 0, params = 0;
  {
    ZT_ASSIGN_OR_RETURN(std::unique_ptr<models::Model> probe,
                        models::CreateModel(models::ModelSpec{o.model, {{"seq_len", o.seq_len}}, o.seed}));
    vocab = probe->info().vocab_size;
    for (const auto& p : probe->module()->parameters()) params += p.numel();
    (void)torch::mm(torch::ones({8, 8}), torch::ones({8, 8}));  // loads the BLAS before SystemInfoLine reads it
  }
  if (vocab <= 0) return absl::InvalidArgumentError(absl::StrCat("--model ", o.model, " is not a language model"));
  const RankData data = MakeData(o, rank, o.global_batch / world, vocab);
  const plan::CpuBf16Support cpu = DetectCpuBf16Support();
  if (rank == 0) {
    std::cout << SystemInfoLine() << "\n";
    std::cout << absl::StrFormat("bf16 on this CPU: oneDNN %s, AVX-512 BW/VL/DQ %s, AVX512-BF16 or AMX %s; %s\n",
                                 cpu.onednn_enabled ? "on" : "off", cpu.avx512_core ? "yes" : "no",
                                 cpu.bf16_instructions ? "yes" : "no",
                                 plan::ResolveBf16Compute(Bf16Compute::kAuto, cpu).reason);
    std::cout << absl::StrFormat(
        "model %s (%d parameters), seq %d, global batch %d over %d ranks, ZeRO stage %d, AdamW; %d intra-op threads "
        "per rank, %d warm-up + %d timed steps per run, %d rounds\n",
        o.model, params, o.seq_len, o.global_batch, world, o.stage, at::get_num_threads(), o.warmup, o.steps, o.rounds);
    std::cout.flush();
  }
  // rounds[k][i]: run i of round k.
  std::vector<std::vector<RankResult>> rounds;
  for (int64_t k = 0; k < o.rounds; ++k) {
    rounds.emplace_back();
    for (const std::string& name : o.runs) {
      ZT_ASSIGN_OR_RETURN(RunSpec run, ParseRun(name));
      ZT_ASSIGN_OR_RETURN(RankResult mine, RunOne(o, run, pg, data));
      ZT_ASSIGN_OR_RETURN(RankResult worst, WorstRank(mine, *pg));
      rounds.back().push_back(worst);
    }
  }
  if (rank != 0) return absl::OkStatus();

  // Per run: the median step over rounds, the median of the rounds' ratios
  // to their own fp32 run, and the last round's memory and bytes (the same
  // every round).
  std::vector<std::pair<RunSpec, RankResult>> results;
  std::vector<double> step_ratio;
  size_t fp32_index = o.runs.size();
  for (size_t i = 0; i < o.runs.size(); ++i) {
    if (o.runs[i] == "fp32") fp32_index = i;
  }
  for (size_t i = 0; i < o.runs.size(); ++i) {
    ZT_ASSIGN_OR_RETURN(RunSpec run, ParseRun(o.runs[i]));
    std::vector<double> steps, ratios;
    for (const auto& round : rounds) {
      steps.push_back(round[i].step_ms);
      if (fp32_index < o.runs.size()) ratios.push_back(round[i].step_ms / round[fp32_index].step_ms);
    }
    RankResult r = rounds.back()[i];
    r.step_ms = Median(steps);
    results.emplace_back(run, r);
    step_ratio.push_back(ratios.empty() ? 0.0 : Median(ratios));
  }
  const RankResult* fp32 = fp32_index < results.size() ? &results[fp32_index].second : nullptr;
  auto ratio = [](double v, const RankResult* base, double RankResult::*field) {
    return base != nullptr && base->*field > 0 ? absl::StrFormat("%.2f", v / (base->*field)) : std::string("n/a");
  };
  auto step_vs = [&](size_t i) {
    return fp32 != nullptr ? absl::StrFormat("%.2f", step_ratio[i]) : std::string("n/a");
  };
  std::cout << absl::StrFormat("\n%-10s %10s %8s %10s %8s %12s %10s %8s %10s\n", "run", "step ms", "x fp32", "peak MiB",
                               "x fp32", "states MiB", "sent MiB", "x fp32", "loss");
  for (size_t i = 0; i < results.size(); ++i) {
    const auto& [run, r] = results[i];
    std::cout << absl::StrFormat("%-10s %10.1f %8s %10.1f %8s %12.2f %10.2f %8s %10.4f\n", run.name, r.step_ms,
                                 step_vs(i), r.peak_bytes / kMiB, ratio(r.peak_bytes, fp32, &RankResult::peak_bytes),
                                 r.model_state_bytes / kMiB, r.sent_per_step / kMiB,
                                 ratio(r.sent_per_step, fp32, &RankResult::sent_per_step), r.final_loss);
  }
  std::vector<std::string> parts;
  for (size_t i = 0; i < results.size(); ++i) {
    const auto& [run, r] = results[i];
    std::cout << absl::StrFormat(
        "RESULT run=%s model=%s world=%d stage=%d onednn=%s threads=%d rounds=%d step_ms=%.3f step_vs_fp32=%s "
        "peak_mib=%.3f states_mib=%.3f sent_mib=%.3f final_loss=%.6g\n",
        run.name, o.model, world, o.stage, o.onednn ? "on" : "off", at::get_num_threads(), o.rounds, r.step_ms,
        step_vs(i), r.peak_bytes / kMiB, r.model_state_bytes / kMiB, r.sent_per_step / kMiB, r.final_loss);
    if (run.bf16) parts.push_back(absl::StrFormat("%s %sx", run.name, step_vs(i)));
  }
  std::cout << "SUMMARY: step time vs fp32 (oneDNN " << (o.onednn ? "on" : "off")
            << "): " << (parts.empty() ? std::string("(no bf16 run)") : absl::StrJoin(parts, ", ")) << "\n";
  std::cout.flush();
  return absl::OkStatus();
}

}  // namespace
}  // namespace zt

int main(int argc, char** argv) {
  try {
    absl::Status st = zt::Run(argc, argv);
    if (!st.ok()) {
      const bool named = absl::StartsWith(st.message(), "zt_bench_bf16_compute");
      std::cerr << (named ? "" : "zt_bench_bf16_compute: ") << st.message() << "\n";
      return st.code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
    }
  } catch (const zt::Error& e) {
    std::cerr << "zt_bench_bf16_compute: " << e.status().message() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "zt_bench_bf16_compute: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
