// Optimizer step throughput on flat fp32 shards: our Adam/AdamW kernels on
// every ISA variant this CPU runs (fp32 gradients, and the fused step with
// bf16 gradients, a grad scale and a bf16 copy of the parameters), our
// double-precision reference, LibTorch's torch::optim::Adam / AdamW, and
// streaming kernels with the same memory traffic (the roofline for a fused
// step), at an L2-resident, an LLC-sized and a far-beyond-LLC shard, on 1
// thread and on all cores.
//
// Throughput counts 28 bytes per element, the minimum any such step moves:
//   fp32:  p, g, m, v read (16); p, m, v written (12);
//   fused: p, m, v read (12) + g bf16 (2); p, m, v written (12) + out bf16 (2).
// torch::optim moves more (it materialises sqrt(v), the denominator and
// temporaries), so its GB/s is an "effective" figure on the same basis.
// Ratios at the end come from this run.
//
//   build/bin/zt_bench_optimizer [--benchmark_repetitions=5 --benchmark_report_aggregates_only=true]
#include <ATen/Parallel.h>
#include <benchmark/benchmark.h>
#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "benchmarks/median.h"
#include "ops/kernels.h"
#include "ops/shard_optimizer.h"
#include "util/system_info.h"

namespace zt {
namespace {

constexpr int64_t kBytesPerElement = 28;
// The fused runs' gradients carry a loss scale of 1024, undone in the step.
constexpr double kGradScale = 1.0 / 1024.0;

std::string SizeName(int64_t n) {
  return n >= (int64_t{1} << 20) ? absl::StrCat(n >> 20, "M") : absl::StrCat(n >> 10, "K");
}

OptimizerConfig AdamWConfig() {
  OptimizerConfig c;
  c.type = OptimizerType::kAdamW;
  c.betas = {0.9, 0.999};
  c.eps = 1e-8;
  c.weight_decay = 0.01;
  return c;
}

using bench::Median;

void SetCounters(benchmark::State& state, int64_t n) {
  state.SetItemsProcessed(state.iterations() * n);
  state.SetBytesProcessed(state.iterations() * n * kBytesPerElement);
}

// Runs `body` with the intra-op pool set to `threads`, restoring it after.
class ThreadScope {
 public:
  explicit ThreadScope(int threads) : saved_(at::get_num_threads()) { at::set_num_threads(threads); }
  ~ThreadScope() { at::set_num_threads(saved_); }

 private:
  int saved_;
};

// The arrays of one size, shared by our kernels and the streaming roofline:
// both sides of a "% of stream" ratio must run over the same memory. On a
// virtual machine the bandwidth of a fresh allocation depends on how the
// host backs its pages (nested-paging TLB misses): on our VM two 64 MiB
// arrays allocated one after the other streamed at 17.6 and 46.6 GB/s, so a
// roofline measured on other allocations than the kernel's said more about
// the allocator than about the kernel. Allocated once per size, kept for
// the whole run; each benchmark refills the values before timing.
struct Arrays {
  at::Tensor p, g32, g16, m, v, out;
};

Arrays& SharedArrays(int64_t n) {
  static std::map<int64_t, Arrays> arrays;
  auto it = arrays.find(n);
  if (it == arrays.end()) {
    Arrays a;
    a.p = torch::empty({n});
    a.g32 = torch::empty({n});
    a.g16 = torch::empty({n}, at::kBFloat16);
    a.m = torch::empty({n});
    a.v = torch::empty({n});
    a.out = torch::empty({n}, at::kBFloat16);
    it = arrays.emplace(n, std::move(a)).first;
  }
  return it->second;
}

// Fresh values in the shared arrays: parameters and gradients ~ N(0, 1)
// (the fused form's bf16 gradients carry the loss scale), zero moments.
Arrays& ResetArrays(int64_t n, bool fused) {
  torch::NoGradGuard no_grad;
  Arrays& a = SharedArrays(n);
  a.p.normal_();
  a.g32.normal_();
  if (fused) a.g16.copy_(a.g32 / kGradScale);
  a.m.zero_();
  a.v.zero_();
  a.out.zero_();
  return a;
}

// One AdamW shard over the shared arrays of size n, with its moments in
// them too (the same memory the stream uses). With `fused`, the gradient is
// bf16 carrying a loss scale and each step also writes a bf16 copy of the
// parameters. Construction resets the arrays' values.
class ShardRun {
 public:
  ShardRun(std::unique_ptr<ops::ShardOptimizer> opt, int64_t n, bool fused)
      : opt_(std::move(opt)), a_(ResetArrays(n, fused)), g_(fused ? a_.g16 : a_.g32) {
    state_ = opt_->InitState(a_.p);
    state_.tensors["exp_avg"] = a_.m;
    state_.tensors["exp_avg_sq"] = a_.v;
    hyper_.lr = 1e-4;
    if (fused) {
      extras_.grad_scale = kGradScale;
      extras_.out = a_.out;
    }
  }
  void Step() { opt_->Step(a_.p, g_, state_, hyper_, extras_); }
  Arrays& arrays() { return a_; }

 private:
  std::unique_ptr<ops::ShardOptimizer> opt_;
  Arrays& a_;
  const at::Tensor g_;
  ops::ShardState state_;
  ops::StepHyper hyper_;
  ops::StepExtras extras_;
};

// Our optimizer on `kernels` (null: the double-precision reference).
void BenchShard(benchmark::State& state, const ops::kernels::KernelTable* kernels, bool fused, int64_t n, int threads) {
  ThreadScope scope(threads);
  ShardRun run(kernels != nullptr ? ops::MakeShardOptimizer(AdamWConfig(), *kernels)
                                  : ops::MakeShardOptimizer(AdamWConfig(), ops::Impl::kReference),
               n, fused);
  for (auto _ : state) {
    run.Step();
    benchmark::DoNotOptimize(run.arrays().p.data_ptr<float>());
  }
  SetCounters(state, n);
}

template <typename Optimizer, typename Options>
void BenchTorch(benchmark::State& state, int64_t n, int threads) {
  ThreadScope scope(threads);
  torch::NoGradGuard no_grad;
  at::Tensor p = torch::randn({n});
  p.mutable_grad() = torch::randn({n});
  Optimizer opt(std::vector<at::Tensor>{p},
                Options(1e-4).betas(std::make_tuple(0.9, 0.999)).eps(1e-8).weight_decay(0.01).amsgrad(false));
  for (auto _ : state) {
    opt.step();
    benchmark::DoNotOptimize(p.data_ptr<float>());
  }
  SetCounters(state, n);
}

// What the fused step replaces when written with LibTorch: widen the bf16
// gradient into the fp32 .grad, unscale it, torch::optim::Adam's step,
// round the parameters to bf16.
void BenchTorchFused(benchmark::State& state, int64_t n, int threads) {
  ThreadScope scope(threads);
  torch::NoGradGuard no_grad;
  at::Tensor p = torch::randn({n});
  p.mutable_grad() = torch::zeros({n});
  const at::Tensor g = (torch::randn({n}) / kGradScale).to(at::kBFloat16);
  at::Tensor out = torch::empty({n}, at::kBFloat16);
  torch::optim::Adam opt(
      std::vector<at::Tensor>{p},
      torch::optim::AdamOptions(1e-4).betas(std::make_tuple(0.9, 0.999)).eps(1e-8).weight_decay(0.01).amsgrad(false));
  for (auto _ : state) {
    p.mutable_grad().copy_(g);
    p.mutable_grad().mul_(kGradScale);
    opt.step();
    out.copy_(p);
    benchmark::DoNotOptimize(out.data_ptr());
  }
  SetCounters(state, n);
}

// Streaming loops with exactly the traffic of one step and trivial
// arithmetic: what a fused kernel could reach if it were purely
// bandwidth-bound. Cloned per ISA and chosen at load time, so the roofline
// is as wide as the widest kernel variant.
__attribute__((target_clones("avx512f", "avx2", "default"))) void StreamF32(float* __restrict p,
                                                                            const float* __restrict g,
                                                                            float* __restrict m, float* __restrict v,
                                                                            int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float gi = g[i];
    m[i] = m[i] * 0.5f + gi;
    v[i] = v[i] * 0.5f + gi;
    p[i] = p[i] - 1e-9f * gi;
  }
}

__attribute__((target_clones("avx512f", "avx2", "default"))) void StreamFused(float* __restrict p,
                                                                              const uint16_t* __restrict g,
                                                                              float* __restrict m, float* __restrict v,
                                                                              uint16_t* __restrict out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    float gi;
    const uint32_t wide = static_cast<uint32_t>(g[i]) << 16;
    std::memcpy(&gi, &wide, sizeof(gi));
    m[i] = m[i] * 0.5f + gi;
    v[i] = v[i] * 0.5f + gi;
    const float pi = p[i] - 1e-9f * gi;
    p[i] = pi;
    uint32_t bits;
    std::memcpy(&bits, &pi, sizeof(bits));
    out[i] = static_cast<uint16_t>(bits >> 16);
  }
}

// Built with OpenMP (benchmarks/CMakeLists.txt): at::parallel_for's region is
// compiled here, and without it the stream would run on one thread.
#if AT_PARALLEL_OPENMP && !defined(_OPENMP)
#error "optimizer_bench.cc must be compiled with -fopenmp"
#endif
// One step of the streaming roofline over `a` (the first n elements).
void StreamStep(Arrays& a, bool fused, int64_t n) {
  float* pp = a.p.data_ptr<float>();
  float* mp = a.m.data_ptr<float>();
  float* vp = a.v.data_ptr<float>();
  const float* g32 = a.g32.data_ptr<float>();
  const auto* g16 = static_cast<const uint16_t*>(a.g16.data_ptr());
  auto* out = static_cast<uint16_t*>(a.out.data_ptr());
  at::parallel_for(0, n, 32768, [&](int64_t begin, int64_t end) {
    if (fused) {
      StreamFused(pp + begin, g16 + begin, mp + begin, vp + begin, out + begin, end - begin);
    } else {
      StreamF32(pp + begin, g32 + begin, mp + begin, vp + begin, end - begin);
    }
  });
}

void BenchStream(benchmark::State& state, bool fused, int64_t n, int threads) {
  ThreadScope scope(threads);
  Arrays& a = ResetArrays(n, fused);
  for (auto _ : state) {
    StreamStep(a, fused, n);
    benchmark::DoNotOptimize(a.p.data_ptr<float>());
  }
  SetCounters(state, n);
}

// The share of the roofline, paired: rounds of `steps` stream steps and
// `steps` kernel steps back to back over the same arrays (the order
// alternating between rounds), stream time / kernel time per round, the
// median over rounds. Google Benchmark times the stream and the kernels a
// minute apart, and this VM's memory bandwidth drifts by 30% or more over a
// minute; a pair a fraction of a second apart sees the same machine.
struct PairedFraction {
  double median = 0, min = 0, max = 0;
};

PairedFraction PairedRoofline(const ops::kernels::KernelTable& kernels, bool fused, int64_t n, int threads, int rounds,
                              int steps) {
  ThreadScope scope(threads);
  ShardRun run(ops::MakeShardOptimizer(AdamWConfig(), kernels), n, fused);
  Arrays& a = run.arrays();
  using Clock = std::chrono::steady_clock;
  auto time_stream = [&] {
    const auto t0 = Clock::now();
    for (int i = 0; i < steps; ++i) StreamStep(a, fused, n);
    return std::chrono::duration<double>(Clock::now() - t0).count();
  };
  auto time_kernel = [&] {
    const auto t0 = Clock::now();
    for (int i = 0; i < steps; ++i) run.Step();
    return std::chrono::duration<double>(Clock::now() - t0).count();
  };
  // Warm-up past the slow start seen on fresh arrays (see MinTime below).
  // The stream's arithmetic on m and v stays finite, and the Adam steps
  // that follow start from whatever it left: neither takes a slow path.
  for (int i = 0; i < 3; ++i) {
    time_stream();
    time_kernel();
  }
  std::vector<double> fractions;
  for (int r = 0; r < rounds; ++r) {
    double stream, kernel;
    if (r % 2 == 0) {
      stream = time_stream();
      kernel = time_kernel();
    } else {
      kernel = time_kernel();
      stream = time_stream();
    }
    fractions.push_back(stream / kernel);
  }
  PairedFraction f;
  f.median = Median(fractions);
  f.min = *std::min_element(fractions.begin(), fractions.end());
  f.max = *std::max_element(fractions.begin(), fractions.end());
  return f;
}

// Console output as usual, plus each benchmark's wall seconds per step for
// the ratio table: the "median" aggregate when --benchmark_repetitions is
// given, else the median of the iteration runs seen.
class RecordingReporter : public benchmark::ConsoleReporter {
 public:
  RecordingReporter() : ConsoleReporter(isatty(STDOUT_FILENO) ? OO_Defaults : OO_Tabular) {}

  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& run : runs) {
      if (run.error_occurred) continue;
      // What the console prints, converted from the run's display unit.
      const double seconds = run.GetAdjustedRealTime() / benchmark::GetTimeUnitMultiplier(run.time_unit);
      // The names RunName() builds: without the "/min_time:2.000" part
      // that MinTime() adds.
      std::string name = run.run_name.str();
      if (const size_t at = name.find("/min_time:"); at != std::string::npos) {
        name.erase(at, name.find('/', at + 1) - at);
      }
      if (run.run_type == Run::RT_Iteration) {
        runs_[name].push_back(seconds);
      } else if (run.aggregate_name == "median") {
        medians_[name] = seconds;
      }
    }
    ConsoleReporter::ReportRuns(runs);
  }

  // Median seconds per step of the named benchmark; 0 if it did not run.
  double MedianSeconds(const std::string& name) const {
    if (auto it = medians_.find(name); it != medians_.end()) return it->second;
    auto it = runs_.find(name);
    if (it == runs_.end() || it->second.empty()) return 0.0;
    return Median(it->second);
  }

 private:
  std::map<std::string, std::vector<double>> runs_;
  std::map<std::string, double> medians_;
};

std::string Name(const std::string& what, int64_t n, int threads) {
  return absl::StrCat(what, "/", SizeName(n), "/threads:", threads);
}

// Google Benchmark appends "/real_time" to the names of UseRealTime() runs.
std::string RunName(const std::string& what, int64_t n, int threads) { return Name(what, n, threads) + "/real_time"; }

std::string ShardName(ops::kernels::Isa isa, bool fused) {
  return absl::StrCat(fused ? "zt_adamw_fused_" : "zt_adamw_", ops::kernels::IsaName(isa));
}

namespace kernels = ops::kernels;

// The ISA variants this CPU runs, in kAllIsas order.
std::vector<kernels::Isa> AvailableIsas() {
  std::vector<kernels::Isa> isas;
  for (kernels::Isa isa : kernels::kAllIsas) {
    if (kernels::KernelsFor(isa) != nullptr) isas.push_back(isa);
  }
  return isas;
}

// The two lines before Google Benchmark's table.
void PrintSetup(const std::vector<kernels::Isa>& isas, kernels::Isa active) {
  std::vector<std::string> isa_names;
  for (kernels::Isa isa : isas) isa_names.push_back(kernels::IsaName(isa));
  std::printf("%s | optimizer kernels: %s (this CPU runs: %s)\n", SystemInfoLine().c_str(), kernels::IsaName(active),
              absl::StrJoin(isa_names, ", ").c_str());
  std::printf(
      "default intra-op threads: %d | bytes per element: %lld (fp32: p,g,m,v read; p,m,v "
      "written | fused: bf16 g read, bf16 out written)\n",
      at::get_num_threads(), static_cast<long long>(kBytesPerElement));
}

// What the runs cover: shard sizes (elements) and thread counts.
struct Grid {
  std::vector<int64_t> sizes;
  std::vector<int> thread_counts;
};

Grid MakeGrid() {
  Grid g;
  // The OpenMP default can be below the core count (it was 1 on our 2-core
  // machine), so the multi-threaded runs ask for every core explicitly.
  const int max_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  g.thread_counts = {1};
  if (max_threads > 1) g.thread_counts.push_back(max_threads);
  // 16K: p, g, m, v and out fit in a 512 KiB L2; 1M: 28 MB, about an LLC;
  // 16M: 448 MB, far beyond any LLC.
  g.sizes = {int64_t{1} << 14, int64_t{1} << 20, int64_t{1} << 24};
  return g;
}

void RegisterBenchmarks(const Grid& grid, const std::vector<kernels::Isa>& isas) {
  for (int64_t n : grid.sizes) {
    // Microseconds for the L2-resident size, milliseconds for the others.
    const benchmark::TimeUnit unit = n < (int64_t{1} << 20) ? benchmark::kMicrosecond : benchmark::kMillisecond;
    // Beyond the LLC, at least 2 s per measurement: on our VM the first
    // second of steps over the same arrays ran up to 2x slower than the
    // steady state (for our kernel, not for the stream), so the default
    // 0.5 s measured the start-up, not what a training run sees.
    const double min_time = n >= (int64_t{1} << 24) ? 2.0 : 0.5;
    auto reg = [unit, min_time](const std::string& name, auto&&... args) {
      benchmark::RegisterBenchmark(name.c_str(), args...)->UseRealTime()->Unit(unit)->MinTime(min_time);
    };
    for (int t : grid.thread_counts) {
      reg(Name("stream_baseline", n, t), BenchStream, false, n, t);
      reg(Name("stream_fused", n, t), BenchStream, true, n, t);
      for (kernels::Isa isa : isas) {
        for (bool fused : {false, true}) {
          reg(Name(ShardName(isa, fused), n, t), BenchShard, kernels::KernelsFor(isa), fused, n, t);
        }
      }
      reg(Name("zt_adamw_reference", n, t), BenchShard, nullptr, false, n, t);
      reg(Name("torch_adamw", n, t), BenchTorch<torch::optim::AdamW, torch::optim::AdamWOptions>, n, t);
      reg(Name("torch_adam", n, t), BenchTorch<torch::optim::Adam, torch::optim::AdamOptions>, n, t);
      reg(Name("torch_adam_fused", n, t), BenchTorchFused, n, t);
    }
  }
}

// Ratio of step times: > 1 means ours is that many times faster.
double Ratio(double other, double ours) { return ours > 0.0 && other > 0.0 ? other / ours : 0.0; }

// The tables after the benchmarks ran, from their recorded medians, and the
// SUMMARY line; ratios come from this run.
class OptimizerReport {
 public:
  OptimizerReport(const RecordingReporter& reporter, const Grid& grid, const std::vector<kernels::Isa>& isas,
                  kernels::Isa active)
      : reporter_(reporter), grid_(grid), isas_(isas), active_(active) {}

  void PrintRatios() const;
  void PrintPerVariant();
  void PrintPairedRoofline();
  void PrintSummary();

 private:
  struct Extremes {
    double min_torch = 0.0, max_torch = 0.0;
    std::vector<std::string> roofline;  // "% of stream" at the largest size
  };
  double Get(const std::string& key) const { return reporter_.MedianSeconds(key); }

  const RecordingReporter& reporter_;
  const Grid& grid_;
  const std::vector<kernels::Isa>& isas_;
  const kernels::Isa active_;
  std::map<kernels::Isa, Extremes> per_isa_;
};

void OptimizerReport::PrintRatios() const {
  const std::string fast = ShardName(active_, false);
  std::printf("\nstep-time ratios, active ISA %s (this run, medians; > 1: fast is faster):\n",
              kernels::IsaName(active_));
  std::printf("%-6s %-8s %14s %14s %14s %16s\n", "size", "threads", "ref/fast", "torchAdamW/fast", "torchAdam/fast",
              "fast GB/s (% of stream)");
  for (int64_t n : grid_.sizes) {
    for (int t : grid_.thread_counts) {
      const double ours = Get(RunName(fast, n, t));
      if (ours <= 0.0) continue;  // filtered out with --benchmark_filter
      const double gbps = static_cast<double>(n * kBytesPerElement) / ours * 1e-9;
      std::printf("%-6s %-8d %14.2f %14.2f %14.2f %9.1f (%3.0f%%)\n", SizeName(n).c_str(), t,
                  Ratio(Get(RunName("zt_adamw_reference", n, t)), ours), Ratio(Get(RunName("torch_adamw", n, t)), ours),
                  Ratio(Get(RunName("torch_adam", n, t)), ours), gbps,
                  100.0 * Ratio(Get(RunName("stream_baseline", n, t)), ours));
    }
  }
}

// Per variant. fp32 rows compare with torch::optim::Adam and the fp32
// stream; fused rows with the LibTorch sequence doing the same job
// (torch_adam_fused) and the fused stream.
void OptimizerReport::PrintPerVariant() {
  std::printf(
      "\nper ISA variant (torch: torch::optim::Adam doing the same job; stream: a kernel "
      "moving the same bytes):\n");
  std::printf("%-6s %-8s %-16s %10s %9s %12s %12s\n", "size", "threads", "variant", "us/step", "GB/s", "torch/ours",
              "% of stream");
  for (int64_t n : grid_.sizes) {
    for (int t : grid_.thread_counts) {
      for (kernels::Isa isa : isas_) {
        for (bool fused : {false, true}) {
          const double ours = Get(RunName(ShardName(isa, fused), n, t));
          if (ours <= 0.0) continue;
          const double vs_torch = Ratio(Get(RunName(fused ? "torch_adam_fused" : "torch_adam", n, t)), ours);
          const double of_stream = 100.0 * Ratio(Get(RunName(fused ? "stream_fused" : "stream_baseline", n, t)), ours);
          const std::string mode = fused ? "fused" : "fp32";
          std::printf("%-6s %-8d %-16s %10.1f %9.1f %11.2fx %11.0f%%\n", SizeName(n).c_str(), t,
                      absl::StrCat(kernels::IsaName(isa), " ", mode).c_str(), ours * 1e6,
                      static_cast<double>(n * kBytesPerElement) / ours * 1e-9, vs_torch, of_stream);
          std::printf(
              "RESULT numel=%lld threads=%d isa=%s mode=%s active=%d step_us=%.3f gbs=%.4f torch_ratio=%.4f "
              "stream_fraction=%.4f\n",
              static_cast<long long>(n), t, kernels::IsaName(isa), mode.c_str(), isa == active_ ? 1 : 0, ours * 1e6,
              static_cast<double>(n * kBytesPerElement) / ours * 1e-9, vs_torch, of_stream / 100.0);
          Extremes& e = per_isa_[isa];
          if (vs_torch > 0.0) {
            e.min_torch = e.min_torch == 0.0 ? vs_torch : std::min(e.min_torch, vs_torch);
            e.max_torch = std::max(e.max_torch, vs_torch);
          }
          if (n == grid_.sizes.back() && of_stream > 0.0) {
            e.roofline.push_back(absl::StrFormat("%s %dt %.0f%%", mode, t, of_stream));
          }
        }
      }
    }
  }
}

// The roofline share at the largest (DRAM-bound) size, paired (see
// PairedRoofline): what the summary reports. Runs only when the largest
// size's kernel benchmarks did (not filtered out).
void OptimizerReport::PrintPairedRoofline() {
  const int64_t largest = grid_.sizes.back();
  bool largest_ran = false;
  for (kernels::Isa isa : isas_) {
    largest_ran = largest_ran || Get(RunName(ShardName(isa, false), largest, 1)) > 0.0 ||
                  Get(RunName(ShardName(isa, true), largest, 1)) > 0.0;
  }
  if (!largest_ran) return;
  std::printf(
      "\nshare of the streaming roofline at %s, paired (median of 9 rounds of 10 stream + 10 kernel "
      "steps over the same arrays, order alternating; min-max over rounds):\n",
      SizeName(largest).c_str());
  std::printf("%-8s %-16s %12s %14s\n", "threads", "variant", "% of stream", "rounds");
  for (auto& [isa, e] : per_isa_) e.roofline.clear();
  for (int t : grid_.thread_counts) {
    for (kernels::Isa isa : isas_) {
      for (bool fused : {false, true}) {
        const PairedFraction f =
            PairedRoofline(*kernels::KernelsFor(isa), fused, largest, t, /*rounds=*/9, /*steps=*/10);
        const std::string mode = fused ? "fused" : "fp32";
        std::printf("%-8d %-16s %11.0f%% %6.0f-%.0f%%\n", t, absl::StrCat(kernels::IsaName(isa), " ", mode).c_str(),
                    100.0 * f.median, 100.0 * f.min, 100.0 * f.max);
        std::printf(
            "RESULT numel=%lld threads=%d isa=%s mode=%s active=%d paired_stream_fraction=%.4f "
            "paired_min=%.4f paired_max=%.4f\n",
            static_cast<long long>(largest), t, kernels::IsaName(isa), mode.c_str(), isa == active_ ? 1 : 0, f.median,
            f.min, f.max);
        per_isa_[isa].roofline.push_back(absl::StrFormat("%s %dt %.0f%%", mode, t, 100.0 * f.median));
      }
    }
  }
}

// One line: per variant (active first), the speed-up range vs
// torch::optim::Adam over every size, thread count and mode, and the
// paired share of the streaming roofline at the largest (DRAM-bound) size.
void OptimizerReport::PrintSummary() {
  std::vector<std::string> parts;
  std::vector<kernels::Isa> order = {active_};
  for (kernels::Isa isa : isas_) {
    if (isa != active_) order.push_back(isa);
  }
  for (kernels::Isa isa : order) {
    const Extremes& e = per_isa_[isa];
    parts.push_back(absl::StrFormat("%s%s: %.2fx-%.1fx torch::optim::Adam, at %s %s of stream (paired)",
                                    kernels::IsaName(isa), isa == active_ ? " (active)" : "", e.min_torch, e.max_torch,
                                    SizeName(grid_.sizes.back()), absl::StrJoin(e.roofline, ", ")));
  }
  std::printf("\nSUMMARY: (targets: >= 2x torch, >= 85%% of stream) %s\n", absl::StrJoin(parts, " | ").c_str());
}

}  // namespace
}  // namespace zt

int main(int argc, char** argv) {
  const std::vector<zt::kernels::Isa> isas = zt::AvailableIsas();
  const zt::kernels::Isa active = zt::kernels::ActiveIsa();  // throws on a bad ZT_CPU_ISA
  zt::PrintSetup(isas, active);
  benchmark::Initialize(&argc, argv);
  const zt::Grid grid = zt::MakeGrid();
  zt::RegisterBenchmarks(grid, isas);
  zt::RecordingReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();

  zt::OptimizerReport report(reporter, grid, isas, active);
  report.PrintRatios();
  report.PrintPerVariant();
  report.PrintPairedRoofline();
  report.PrintSummary();
  return 0;
}
