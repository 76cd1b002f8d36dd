// ZeRO stages 0-3 on one model and one global batch, one after another in
// the same process group: median step time, peak CPU memory, model-state
// bytes against the ZeRO formulas, and bytes sent per step against the
// paper's volumes (2Ψ(N-1)/N for stages 0-2, 3Ψ(N-1)/N for stage 3). Stage 3
// runs in three flavours: "3" (prefetch on, every layer freed after use: the
// paper's 3Ψ), "3-no-prefetch" (each gather waited for where it is needed)
// and "3-reuse" (DeepSpeed's default stage3_max_reuse_distance, which keeps
// a layer gathered from forward into backward when it comes back soon).
// A rank program: run it under a launcher, e.g.
//
//   zt launch --nproc-per-node 2 -- build/bin/zt_bench_zero_stages [--steps 10]
//
// Limits: CPU and Gloo only; memory counts LibTorch CPU allocations (the
// counting allocator), not Gloo's own buffers or the allocator's slack.
#include <ATen/Parallel.h>
#include <sys/resource.h>
#include <torch/torch.h>

#include <algorithm>
#include <iostream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "benchmarks/median.h"
#include "cli/flags.h"
#include "comm/init.h"
#include "comm/process_group.h"
#include "engine/cpu_memory.h"
#include "engine/engine.h"
#include "launch/rank_env.h"
#include "util/error.h"
#include "util/status.h"
#include "util/system_info.h"
#include "zero/unit.h"

namespace zt {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

struct BenchOptions {
  int64_t width = 1024;
  int64_t depth = 6;
  int64_t global_batch = 64;
  int64_t warmup = 3;
  int64_t steps = 20;
  int64_t bucket_numel = 2 << 20;
  int64_t prefetch_numel = 50000000;  // stage3_prefetch_bucket_size (DeepSpeed's default)
  double lr = 1e-3;
  bool bf16 = false;
  bool overlap = true;
  uint64_t seed = 1234;
  std::vector<std::string> runs;  // "torch", "0", "1", "2", "3", "3-no-prefetch", "3-reuse"
};

// One configuration to measure.
struct RunSpec {
  std::string name;
  int stage = 0;
  bool prefetch = true;  // stage 3: stage3_prefetch_bucket_size default, else 0
  bool reuse = false;    // stage 3: DeepSpeed's default max_reuse_distance, else 0
  bool plain = false;    // "torch": plain LibTorch, no engine (one process only)
};

absl::StatusOr<RunSpec> ParseRun(absl::string_view name) {
  RunSpec r;
  r.name = std::string(name);
  if (name == "0" || name == "1" || name == "2" || name == "3") {
    r.stage = name[0] - '0';
  } else if (name == "3-no-prefetch") {
    r.stage = 3;
    r.prefetch = false;
  } else if (name == "3-reuse") {
    r.stage = 3;
    r.reuse = true;
  } else if (name == "torch") {
    r.plain = true;
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "--stages: '", name, "' is not a run this benchmark knows (torch, 0, 1, 2, 3, 3-no-prefetch, 3-reuse)"));
  }
  return r;
}

// depth x (Linear(width, width)), GELU between layers (not after the last):
// the same network ddp_baseline.py builds with torch.nn. Every layer is a
// stage-3 unit (a plain Linear at stages 0-2).
struct MlpImpl : torch::nn::Module {
  MlpImpl(int64_t width, int64_t depth) {
    for (int64_t i = 0; i < depth; ++i) {
      layers.push_back(register_module(absl::StrCat("fc", i), zt::Unit<torch::nn::LinearImpl>(width, width)));
    }
  }
  torch::Tensor forward(torch::Tensor x) {
    for (size_t i = 0; i < layers.size(); ++i) {
      x = layers[i](x);
      if (i + 1 < layers.size()) x = torch::gelu(x);
    }
    return x;
  }
  std::vector<zt::Unit<torch::nn::LinearImpl>> layers;
};
TORCH_MODULE(Mlp);

// Model-state bytes per parameter the engine holds at `stage` over `world`
// ranks (see engine.h ModelStateBytes and zero/sharded_optimizer.h):
//   fp32: params 4 + grads 4 + Adam state 8; the master aliases the params.
//     stage 0: 16, stage 1: 4 + 4 + 8/N, stage 2: 4 + (4 + 8)/N
//   bf16: params 2 + grads 2 + fp32 master 4 + Adam state 8.
//     stage 0: 16, stage 1: 2 + 2 + 12/N, stage 2: 2 + (2 + 12)/N
//   stage 3, either precision: 16/N.
double FormulaBytesPerParam(int stage, int world, bool bf16) {
  const double n = world;
  if (stage == 3) return 16.0 / n;
  if (!bf16) {
    switch (stage) {
      case 0: return 16.0;
      case 1: return 8.0 + 8.0 / n;
      default: return 4.0 + 12.0 / n;
    }
  }
  switch (stage) {
    case 0: return 16.0;
    case 1: return 4.0 + 12.0 / n;
    default: return 2.0 + 14.0 / n;
  }
}

Config MakeConfig(const BenchOptions& o, const RunSpec& run) {
  const int stage = run.stage;
  Config c;
  c.batch.train_batch_size = o.global_batch;
  c.batch.gradient_accumulation_steps = 1;
  c.steps_per_print = 0;  // no per-step log lines in the timed loop
  c.optimizer.present = true;
  c.optimizer.type = OptimizerType::kAdamW;
  c.optimizer.lr = o.lr;
  c.optimizer.weight_decay = 0.01;
  c.optimizer.adam_w_mode = true;
  c.bf16.enabled = o.bf16;
  c.zero.stage = stage;
  c.zero.reduce_bucket_size = o.bucket_numel;
  c.zero.overlap_comm = o.overlap;
  c.zero.prefetch_bucket_size = run.prefetch ? o.prefetch_numel : 0;
  if (!run.reuse) c.zero.max_reuse_distance = 0;
  return c;
}

// What one rank measured for one stage.
struct RankResult {
  double step_ms = 0;              // median over the timed steps
  double phase_ms[3] = {0, 0, 0};  // medians of forward+loss, Engine::Backward, Engine::Step
  double peak_bytes = 0;           // peak allocated during the timed steps minus the baseline
  double sent_per_step = 0;        // bytes this rank sent per timed step, all collectives
  double model_state_bytes = 0;
  double rs_ag_ar[3] = {0, 0, 0};  // sent per step: reduce-scatter, all-gather, all-reduce
  double final_loss = 0;
  double minor_faults = 0;   // per timed step (the whole process): fresh pages touched
  double gathered_peak = 0;  // stage 3: most gathered (non-persistent) parameter bytes at once
};
constexpr int64_t kResultFields = 13;

using bench::Median;

int64_t MinorFaults() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}

struct RankData {
  std::vector<torch::Tensor> x, y;  // a few distinct micro-batches, cycled
};

RankData MakeData(const BenchOptions& o, int rank, int64_t micro) {
  RankData d;
  // A fixed random teacher (same on every rank) makes the targets a
  // learnable function of x; the inputs differ per rank.
  torch::manual_seed(o.seed);
  const torch::Tensor teacher = torch::randn({o.width, o.width}) / std::sqrt(static_cast<double>(o.width));
  torch::manual_seed(o.seed + 1000 + static_cast<uint64_t>(rank));
  for (int i = 0; i < 4; ++i) {
    torch::Tensor x = torch::randn({micro, o.width});
    torch::Tensor y = torch::tanh(torch::mm(x, teacher));
    d.x.push_back(o.bf16 ? x.to(torch::kBFloat16) : x);
    d.y.push_back(y);
  }
  return d;
}

absl::StatusOr<RankResult> RunStage(const BenchOptions& o, const RunSpec& run,
                                    const std::shared_ptr<comm::ProcessGroup>& pg, const RankData& data) {
  RankResult r;
  const int64_t baseline = CpuMemory().current_bytes;
  {
    torch::manual_seed(o.seed);  // same initial weights for every stage (rank 0's are broadcast)
    Mlp model(o.width, o.depth);
    ZT_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine, Engine::Create(model, MakeConfig(o, run), pg));

    using Clock = std::chrono::steady_clock;
    auto ms = [](Clock::time_point a, Clock::time_point b) {
      return std::chrono::duration<double, std::milli>(b - a).count();
    };
    int64_t batch_index = 0;
    double phase[3] = {0, 0, 0};
    auto step = [&]() {
      const size_t i = static_cast<size_t>(batch_index++ % static_cast<int64_t>(data.x.size()));
      const auto t0 = Clock::now();
      torch::Tensor out = model->forward(data.x[i]);
      torch::Tensor loss = torch::mse_loss(out.to(torch::kFloat), data.y[i]);
      const auto t1 = Clock::now();
      engine->Backward(loss);  // includes waiting for the gradient reduction
      const auto t2 = Clock::now();
      engine->Step();  // optimizer on the owned shard, then the parameter all-gather
      const auto t3 = Clock::now();
      phase[0] = ms(t0, t1);
      phase[1] = ms(t1, t2);
      phase[2] = ms(t2, t3);
      return loss.item<double>();
    };
    for (int64_t s = 0; s < o.warmup; ++s) step();

    ZT_RETURN_IF_ERROR(pg->Barrier()->Wait());
    pg->ResetStats();
    ResetCpuMemoryPeak();
    engine->ResetGatheredPeak();
    const int64_t faults_before = MinorFaults();
    std::vector<double> times;
    std::vector<double> phases[3];
    for (int64_t s = 0; s < o.steps; ++s) {
      const auto t0 = Clock::now();
      r.final_loss = step();
      times.push_back(ms(t0, Clock::now()));
      for (int k = 0; k < 3; ++k) phases[k].push_back(phase[k]);
    }
    const CpuMemoryCounters mem = CpuMemory();
    const comm::CommStats stats = pg->stats();
    const double steps = static_cast<double>(o.steps);
    r.minor_faults = static_cast<double>(MinorFaults() - faults_before) / static_cast<double>(o.steps);
    r.step_ms = Median(times);
    for (int k = 0; k < 3; ++k) r.phase_ms[k] = Median(phases[k]);
    r.peak_bytes = static_cast<double>(mem.peak_bytes - baseline);
    r.sent_per_step = static_cast<double>(stats.total_bytes_sent()) / steps;
    r.rs_ag_ar[0] = static_cast<double>(stats[comm::CollectiveKind::kReduceScatter].bytes_sent) / steps;
    r.rs_ag_ar[1] = static_cast<double>(stats[comm::CollectiveKind::kAllGather].bytes_sent) / steps;
    r.rs_ag_ar[2] = static_cast<double>(stats[comm::CollectiveKind::kAllReduce].bytes_sent) / steps;
    r.model_state_bytes = static_cast<double>(engine->memory().model_states());
    r.gathered_peak = static_cast<double>(engine->memory().peak_gathered);
    if (engine->global_steps() != o.warmup + o.steps || engine->skipped_steps() != 0) {
      return absl::InternalError(absl::StrCat("run ", run.name, ": expected ", o.warmup + o.steps,
                                              " optimizer steps, the engine counted ", engine->global_steps(), " (",
                                              engine->skipped_steps(), " skipped)"));
    }
  }
  // Collective closures hold their tensors until a comm worker drops the
  // finished task; a barrier gives the workers time to do so.
  ZT_RETURN_IF_ERROR(pg->Barrier()->Wait());
  const int64_t left = CpuMemory().current_bytes - baseline;
  if (left > (1 << 20)) {
    std::cerr << absl::StrFormat("warning: run %s left %.1f MiB allocated after the engine and model were freed\n",
                                 run.name, static_cast<double>(left) / kMiB);
  }
  return r;
}

// The reference a user without zerotorch would write: the same model, data
// and AdamW, torch::optim in one process, no engine. One rank only (there is
// no C++ DDP to compare with; ddp_baseline.py is the multi-rank baseline).
absl::StatusOr<RankResult> RunPlainTorch(const BenchOptions& o, const RankData& data) {
  RankResult r;
  const int64_t baseline = CpuMemory().current_bytes;
  {
    torch::manual_seed(o.seed);  // the engine runs start from these same weights
    Mlp model(o.width, o.depth);
    torch::optim::AdamW opt(model->parameters(), torch::optim::AdamWOptions(o.lr).weight_decay(0.01));
    using Clock = std::chrono::steady_clock;
    auto ms = [](Clock::time_point a, Clock::time_point b) {
      return std::chrono::duration<double, std::milli>(b - a).count();
    };
    int64_t batch_index = 0;
    double phase[3] = {0, 0, 0};
    auto step = [&]() {
      const size_t i = static_cast<size_t>(batch_index++ % static_cast<int64_t>(data.x.size()));
      const auto t0 = Clock::now();
      opt.zero_grad();
      torch::Tensor loss = torch::mse_loss(model->forward(data.x[i]), data.y[i]);
      const auto t1 = Clock::now();
      loss.backward();
      const auto t2 = Clock::now();
      opt.step();
      const auto t3 = Clock::now();
      phase[0] = ms(t0, t1);
      phase[1] = ms(t1, t2);
      phase[2] = ms(t2, t3);
      return loss.item<double>();
    };
    for (int64_t s = 0; s < o.warmup; ++s) step();
    ResetCpuMemoryPeak();
    std::vector<double> times;
    std::vector<double> phases[3];
    const int64_t faults_before = MinorFaults();
    for (int64_t s = 0; s < o.steps; ++s) {
      const auto t0 = Clock::now();
      r.final_loss = step();
      times.push_back(ms(t0, Clock::now()));
      for (int k = 0; k < 3; ++k) phases[k].push_back(phase[k]);
    }
    r.minor_faults = static_cast<double>(MinorFaults() - faults_before) / static_cast<double>(o.steps);
    r.step_ms = Median(times);
    for (int k = 0; k < 3; ++k) r.phase_ms[k] = Median(phases[k]);
    r.peak_bytes = static_cast<double>(CpuMemory().peak_bytes - baseline);
    // Parameters, gradients and AdamW's two moments, all fp32.
    int64_t numel = 0;
    for (const torch::Tensor& p : model->parameters()) numel += p.numel();
    r.model_state_bytes = 16.0 * static_cast<double>(numel);
  }
  return r;
}

// Every rank's results, in rank order (a collective).
absl::StatusOr<std::vector<RankResult>> GatherResults(const RankResult& mine, comm::ProcessGroup& pg) {
  const int n = pg.size();
  torch::Tensor flat = torch::zeros({kResultFields * n}, torch::kDouble);
  torch::Tensor shard = flat.narrow(0, kResultFields * pg.rank(), kResultFields);
  const double values[kResultFields] = {mine.step_ms,      mine.peak_bytes,  mine.sent_per_step, mine.model_state_bytes,
                                        mine.rs_ag_ar[0],  mine.rs_ag_ar[1], mine.rs_ag_ar[2],   mine.final_loss,
                                        mine.phase_ms[0],  mine.phase_ms[1], mine.phase_ms[2],   mine.minor_faults,
                                        mine.gathered_peak};
  for (int64_t i = 0; i < kResultFields; ++i) shard[i] = values[i];
  ZT_RETURN_IF_ERROR(pg.AllGather(shard, flat)->Wait());
  std::vector<RankResult> all(static_cast<size_t>(n));
  auto a = flat.accessor<double, 1>();
  for (int r = 0; r < n; ++r) {
    const int64_t b = kResultFields * r;
    RankResult& x = all[static_cast<size_t>(r)];
    x.step_ms = a[b];
    x.peak_bytes = a[b + 1];
    x.sent_per_step = a[b + 2];
    x.model_state_bytes = a[b + 3];
    x.rs_ag_ar[0] = a[b + 4];
    x.rs_ag_ar[1] = a[b + 5];
    x.rs_ag_ar[2] = a[b + 6];
    x.final_loss = a[b + 7];
    for (int k = 0; k < 3; ++k) x.phase_ms[k] = a[b + 8 + k];
    x.minor_faults = a[b + 11];
    x.gathered_peak = a[b + 12];
  }
  return all;
}

// The worst rank of each measure: the slowest step, the largest peak, the
// most bytes (shards can differ by padding).
RankResult WorstOf(const std::vector<RankResult>& all) {
  RankResult w = all.front();
  for (const RankResult& r : all) {
    w.step_ms = std::max(w.step_ms, r.step_ms);
    for (int k = 0; k < 3; ++k) w.phase_ms[k] = std::max(w.phase_ms[k], r.phase_ms[k]);
    w.peak_bytes = std::max(w.peak_bytes, r.peak_bytes);
    w.sent_per_step = std::max(w.sent_per_step, r.sent_per_step);
    w.model_state_bytes = std::max(w.model_state_bytes, r.model_state_bytes);
    w.minor_faults = std::max(w.minor_faults, r.minor_faults);
    w.gathered_peak = std::max(w.gathered_peak, r.gathered_peak);
    for (int k = 0; k < 3; ++k) w.rs_ag_ar[k] = std::max(w.rs_ag_ar[k], r.rs_ag_ar[k]);
  }
  return w;
}

absl::StatusOr<BenchOptions> ParseOptions(int argc, char** argv) {
  cli::Flags flags("zt_bench_zero_stages");
  flags.Int("width", 1024, "features of every Linear layer (in = out = width)");
  flags.Int("depth", 6, "number of Linear(width, width) layers, GELU between them");
  flags.Int("global-batch", 64, "samples per optimizer step over all ranks (divisible by the world size)");
  flags.Int("warmup", 3, "untimed steps per run");
  flags.Int("steps", 20, "timed steps per run");
  flags.Int("bucket-numel", 2 << 20, "zero_optimization.reduce_bucket_size (elements)");
  flags.Int("prefetch-numel", 50000000, "stage3_prefetch_bucket_size of the stage-3 runs with prefetch (elements)");
  flags.Double("lr", 1e-3, "AdamW learning rate (weight decay 0.01)");
  flags.Int("seed", 1234, "seed of the weights and the data");
  flags.String("stages", "0,1,2,3,3-no-prefetch,3-reuse",
               "comma-separated runs, in order: ZeRO stages 0-3, 3-no-prefetch, 3-reuse");
  flags.Bool("bf16", "bf16 model and communication, fp32 master weights");
  flags.Bool("no-overlap", "zero_optimization.overlap_comm = false");
  std::vector<std::string> args(argv + 1, argv + argc);
  ZT_RETURN_IF_ERROR(flags.Parse(args));
  if (flags.help_requested()) {
    std::cout << flags.Usage("[flags]   (one rank each: zt launch --nproc-per-node N -- zt_bench_zero_stages ...)");
    std::exit(0);
  }
  BenchOptions o;
  o.width = flags.GetInt("width");
  o.depth = flags.GetInt("depth");
  o.global_batch = flags.GetInt("global-batch");
  o.warmup = flags.GetInt("warmup");
  o.steps = flags.GetInt("steps");
  o.bucket_numel = flags.GetInt("bucket-numel");
  o.prefetch_numel = flags.GetInt("prefetch-numel");
  o.lr = flags.GetDouble("lr");
  o.seed = static_cast<uint64_t>(flags.GetInt("seed"));
  o.bf16 = flags.GetBool("bf16");
  o.overlap = !flags.GetBool("no-overlap");
  if (o.width < 1 || o.depth < 1 || o.global_batch < 1 || o.warmup < 0 || o.steps < 1 || o.bucket_numel < 1 ||
      o.prefetch_numel < 0) {
    return absl::InvalidArgumentError(
        "--width, --depth, --global-batch, --steps and --bucket-numel must be >= 1, --warmup and "
        "--prefetch-numel >= 0");
  }
  for (absl::string_view s : absl::StrSplit(flags.GetString("stages"), ',', absl::SkipEmpty())) {
    ZT_RETURN_IF_ERROR(ParseRun(s).status());
    o.runs.push_back(std::string(s));
  }
  if (o.runs.empty()) return absl::InvalidArgumentError("--stages is empty; give e.g. --stages 0,1,2,3");
  return o;
}

std::string Ratio(double value, double base) {
  return base > 0 ? absl::StrFormat("%.2f", value / base) : std::string("n/a");
}

// Each run measured, with its result: the slowest/largest rank's values.
using RunResults = std::vector<std::pair<RunSpec, RankResult>>;

// Rank 0's lines before the runs: the machine, the model and the settings.
void PrintSetup(const BenchOptions& o, int world, int64_t micro, int64_t psi) {
  std::cout << SystemInfoLine() << "\n";
  std::cout << absl::StrFormat(
      "model: %d x Linear(%d, %d) with GELU, Ψ = %d parameters (%.2f M); %s; AdamW lr %g wd 0.01\n"
      "world %d, %d intra-op threads per rank, global batch %d (%d per rank), %d warm-up + %d timed steps, "
      "reduce_bucket_size %d elements, overlap_comm %s, stage3_prefetch_bucket_size %d\n",
      o.depth, o.width, o.width, psi, static_cast<double>(psi) / 1e6, o.bf16 ? "bf16 (fp32 master)" : "fp32", o.lr,
      world, at::get_num_threads(), o.global_batch, micro, o.warmup, o.steps, o.bucket_numel, o.overlap ? "on" : "off",
      o.prefetch_numel);
  std::cout.flush();
}

// Every --stages run in order; "torch" only in one fp32 process (else
// skipped with a note from rank 0).
absl::StatusOr<RunResults> RunAll(const BenchOptions& o, const std::shared_ptr<comm::ProcessGroup>& pg,
                                  const RankData& data) {
  const int world = pg->size();
  RunResults results;
  for (const std::string& name : o.runs) {
    ZT_ASSIGN_OR_RETURN(RunSpec run, ParseRun(name));
    if (run.plain) {
      // Skipped, not failed: a suite runs the same --stages at every world size.
      if (world > 1 || o.bf16) {
        if (pg->rank() == 0) std::cout << "(run torch skipped: plain LibTorch runs fp32 in one process only)\n";
        continue;
      }
      ZT_ASSIGN_OR_RETURN(RankResult mine, RunPlainTorch(o, data));
      results.emplace_back(run, mine);
      continue;
    }
    ZT_ASSIGN_OR_RETURN(RankResult mine, RunStage(o, run, pg, data));
    ZT_ASSIGN_OR_RETURN(std::vector<RankResult> all, GatherResults(mine, *pg));
    results.emplace_back(run, WorstOf(all));
  }
  return results;
}

// Rank 0's tables, RESULT lines and SUMMARY line; ratios are to the stage-0
// run when there is one.
class StagesReport {
 public:
  StagesReport(const BenchOptions& o, int world, int64_t psi, const RunResults& results)
      : o_(o),
        world_(world),
        psi_(psi),
        dtype_bytes_(o.bf16 ? 2.0 : 4.0),
        // Ring-equivalent volume each rank sends per step (nccl-tests' busBw
        // convention): an all-reduce of Ψ elements, or equally a reduce-scatter
        // plus an all-gather, moves 2Ψ(N-1)/N elements out of every rank.
        ideal_bytes_(2.0 * static_cast<double>(psi) * (world - 1) / world * dtype_bytes_),
        results_(results) {
    for (const auto& [run, r] : results) {
      if (run.name == "0") base_ = &r;
    }
  }

  void PrintTimeTable() const;
  void PrintMemoryTable() const;
  void PrintResultLines() const;
  void PrintSummary() const;

 private:
  const char* dtype() const { return o_.bf16 ? "bf16" : "fp32"; }
  std::string VsBase(double v, double RankResult::*field) const {
    return base_ != nullptr ? Ratio(v, base_->*field) : std::string("n/a");
  }
  // The paper's volume for a run: 2Ψ(N-1)/N (stages 0-2), 3Ψ(N-1)/N (stage 3).
  double IdealFor(const RunSpec& run) const { return ideal_bytes_ * (run.stage == 3 ? 1.5 : 1.0); }
  double Formula(const RunSpec& run) const {
    return FormulaBytesPerParam(run.stage, world_, o_.bf16) * static_cast<double>(psi_);
  }

  const BenchOptions& o_;
  const int world_;
  const int64_t psi_;
  const double dtype_bytes_;
  const double ideal_bytes_;
  const RunResults& results_;
  const RankResult* base_ = nullptr;
};

void StagesReport::PrintTimeTable() const {
  std::cout << "\nTime per step (median over the timed steps, slowest rank; x st0 = ratio to stage 0).\n"
               "bwd = Engine::Backward incl. waiting for the gradient reduction; opt = Engine::Step (optimizer +\n"
               "parameter all-gather); faults/step = minor page faults of the rank process per step (getrusage).\n";
  std::cout << absl::StrFormat("%-13s %9s %6s %9s %9s %9s %10s %13s %11s\n", "run", "step ms", "x st0", "fwd ms",
                               "bwd ms", "opt ms", "samples/s", "faults/step", "final loss");
  for (const auto& [run, r] : results_) {
    std::cout << absl::StrFormat("%-13s %9.1f %6s %9.1f %9.1f %9.1f %10.1f %13.0f %11.6g\n", run.name, r.step_ms,
                                 VsBase(r.step_ms, &RankResult::step_ms), r.phase_ms[0], r.phase_ms[1], r.phase_ms[2],
                                 static_cast<double>(o_.global_batch) / (r.step_ms / 1e3), r.minor_faults,
                                 r.final_loss);
  }
}

void StagesReport::PrintMemoryTable() const {
  std::cout << absl::StrFormat(
      "\nMemory and traffic per rank (largest rank). peak = LibTorch CPU bytes allocated at the peak of the\n"
      "timed steps minus those before the model was built; states = engine memory().model_states();\n"
      "formula = bytes/param x Ψ; gathered = stage 3's most full-layer bytes at once; sent = bytes this rank\n"
      "sent per step, all collectives; x paper = sent / (2Ψ(N-1)/N for stages 0-2, 3Ψ(N-1)/N for stage 3)\n"
      "x %g B (%s); 2Ψ(N-1)/N = %.2f MiB.\n",
      dtype_bytes_, dtype(), ideal_bytes_ / kMiB);
  std::cout << absl::StrFormat("%-13s %9s %6s %11s %19s %12s %9s %7s  %s\n", "run", "peak MiB", "x st0", "states MiB",
                               "formula MiB (B/p)", "gathered MiB", "sent MiB", "x paper",
                               "reduce-scatter / all-gather / all-reduce MiB");
  for (const auto& [run, r] : results_) {
    const double formula_bpp = FormulaBytesPerParam(run.stage, world_, o_.bf16);
    const double formula = formula_bpp * static_cast<double>(psi_);
    std::cout << absl::StrFormat(
        "%-13s %9.1f %6s %11.1f %12.1f (%4.1f) %12s %9.2f %7s  %.2f / %.2f / %.2f\n", run.name, r.peak_bytes / kMiB,
        VsBase(r.peak_bytes, &RankResult::peak_bytes), r.model_state_bytes / kMiB, formula / kMiB, formula_bpp,
        run.stage == 3 ? absl::StrFormat("%.1f", r.gathered_peak / kMiB) : std::string("-"), r.sent_per_step / kMiB,
        Ratio(r.sent_per_step, IdealFor(run)), r.rs_ag_ar[0] / kMiB, r.rs_ag_ar[1] / kMiB, r.rs_ag_ar[2] / kMiB);
  }
}

// The stage-0 throughput line, then a RESULT line per run.
void StagesReport::PrintResultLines() const {
  if (base_ != nullptr) {
    std::cout << absl::StrFormat("\nstage 0 throughput: %.1f samples/s (global batch %d / median step)\n",
                                 static_cast<double>(o_.global_batch) / (base_->step_ms / 1e3), o_.global_batch);
  }
  for (const auto& [run, r] : results_) {
    std::cout << absl::StrFormat(
        "RESULT impl=%s stage=%s world=%d dtype=%s params=%d global_batch=%d threads=%d step_ms=%.3f "
        "fwd_ms=%.3f bwd_ms=%.3f opt_ms=%.3f samples_per_s=%.2f peak_mib=%.2f model_state_mib=%.2f "
        "formula_mib=%.2f gathered_mib=%.3f sent_mib=%.3f ideal_mib=%.3f final_loss=%.6g\n",
        run.plain ? "torch" : "zt", run.name, world_, dtype(), psi_, o_.global_batch, at::get_num_threads(), r.step_ms,
        r.phase_ms[0], r.phase_ms[1], r.phase_ms[2], static_cast<double>(o_.global_batch) / (r.step_ms / 1e3),
        r.peak_bytes / kMiB, r.model_state_bytes / kMiB, Formula(run) / kMiB, r.gathered_peak / kMiB,
        r.sent_per_step / kMiB, IdealFor(run) / kMiB, r.final_loss);
  }
}

// One line: per run, step time and per-rank model states relative to stage 0.
void StagesReport::PrintSummary() const {
  std::vector<std::string> parts;
  for (const auto& [run, r] : results_) {
    if (base_ == nullptr || &r == base_) continue;
    parts.push_back(absl::StrFormat("%s %sx time %sx states", run.name, VsBase(r.step_ms, &RankResult::step_ms),
                                    VsBase(r.model_state_bytes, &RankResult::model_state_bytes)));
  }
  std::cout << absl::StrFormat(
      "SUMMARY: world %d, vs stage 0: %s\n", world_,
      parts.empty() ? std::string("(no stage-0 run to compare with)") : absl::StrJoin(parts, ", "));
  std::cout.flush();
}

absl::Status Run(int argc, char** argv) {
  // Before any tensor we want counted (the model, the engine's buffers).
  if (!InstallCountingCpuAllocator()) {
    return absl::FailedPreconditionError("could not install the counting CPU allocator");
  }
  ZT_ASSIGN_OR_RETURN(BenchOptions o, ParseOptions(argc, argv));
  ZT_ASSIGN_OR_RETURN(comm::RankEnv env, comm::ReadRankEnv());
  ZT_ASSIGN_OR_RETURN(std::shared_ptr<comm::ProcessGroup> pg, comm::InitProcessGroup(env, {}));
  const int world = pg->size();
  const int rank = pg->rank();
  if (o.global_batch % world != 0) {
    return absl::InvalidArgumentError(absl::StrCat("--global-batch ", o.global_batch,
                                                   " does not divide by the world size ", world,
                                                   "; pick a multiple of ", world));
  }
  const int64_t micro = o.global_batch / world;
  const RankData data = MakeData(o, rank, micro);
  // Makes OpenBLAS load before SystemInfoLine reads the mapped libraries.
  (void)torch::mm(data.x[0].to(torch::kFloat), data.x[0].to(torch::kFloat).t());

  const int64_t psi = o.depth * (o.width * o.width + o.width);
  if (rank == 0) PrintSetup(o, world, micro, psi);
  ZT_ASSIGN_OR_RETURN(const RunResults results, RunAll(o, pg, data));
  if (rank != 0) return absl::OkStatus();

  const StagesReport report(o, world, psi, results);
  report.PrintTimeTable();
  report.PrintMemoryTable();
  report.PrintResultLines();
  report.PrintSummary();
  return absl::OkStatus();
}

}  // namespace
}  // namespace zt

int main(int argc, char** argv) {
  try {
    absl::Status st = zt::Run(argc, argv);
    if (!st.ok()) {
      // Flag errors already name the program.
      const bool named = absl::StartsWith(st.message(), "zt_bench_zero_stages");
      std::cerr << (named ? "" : "zt_bench_zero_stages: ") << st.message() << "\n";
      return st.code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
    }
  } catch (const zt::Error& e) {
    std::cerr << "zt_bench_zero_stages: " << e.status().message() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "zt_bench_zero_stages: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
