// Optimizer step throughput on flat fp32 shards: our fast Adam/AdamW kernel,
// our double-precision reference, LibTorch's torch::optim::Adam / AdamW, and a
// streaming baseline with the same memory traffic (the roofline for a fused
// step), at 1M and 16M elements, 1 thread and all intra-op threads.
//
// Throughput counts 28 bytes per element: p, g, m, v read (16) and p, m, v
// written (12), the minimum any Adam step moves. torch::optim moves more (it
// materialises sqrt(v), the denominator and temporaries), so its GB/s is an
// "effective" figure on the same basis. Ratios at the end come from this run.
//
//   build/bin/zt_bench_optimizer [--benchmark_min_time=0.5]
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <ATen/Parallel.h>
#include <benchmark/benchmark.h>
#include <torch/torch.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "ops/shard_optimizer.h"
#include "util/system_info.h"

namespace zt {
namespace {

constexpr int64_t kBytesPerElement = 28;

std::string SizeName(int64_t n) { return absl::StrCat(n >> 20, "M"); }

OptimizerConfig AdamWConfig() {
  OptimizerConfig c;
  c.type = OptimizerType::kAdamW;
  c.betas = {0.9, 0.999};
  c.eps = 1e-8;
  c.weight_decay = 0.01;
  return c;
}

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

void BenchShard(benchmark::State& state, ops::Impl impl, int64_t n, int threads) {
  ThreadScope scope(threads);
  const auto opt = ops::MakeShardOptimizer(AdamWConfig(), impl);
  at::Tensor p = torch::randn({n});
  const at::Tensor g = torch::randn({n});
  ops::ShardState s = opt->InitState(p);
  ops::StepHyper hyper;
  hyper.lr = 1e-4;
  for (auto _ : state) {
    opt->Step(p, g, s, hyper);
    benchmark::DoNotOptimize(p.data_ptr<float>());
  }
  SetCounters(state, n);
}

template <typename Optimizer, typename Options>
void BenchTorch(benchmark::State& state, int64_t n, int threads) {
  ThreadScope scope(threads);
  torch::NoGradGuard no_grad;
  at::Tensor p = torch::randn({n});
  p.mutable_grad() = torch::randn({n});
  Optimizer opt(std::vector<at::Tensor>{p}, Options(1e-4)
                                                .betas(std::make_tuple(0.9, 0.999))
                                                .eps(1e-8)
                                                .weight_decay(0.01)
                                                .amsgrad(false));
  for (auto _ : state) {
    opt.step();
    benchmark::DoNotOptimize(p.data_ptr<float>());
  }
  SetCounters(state, n);
}

// The same traffic as one Adam step with trivial arithmetic: what a fused
// kernel could reach if it were purely bandwidth-bound.
void BenchStream(benchmark::State& state, int64_t n, int threads) {
  ThreadScope scope(threads);
  at::Tensor p = torch::randn({n}), g = torch::randn({n}), m = torch::zeros({n}),
             v = torch::zeros({n});
  float* pp = p.data_ptr<float>();
  const float* gp = g.data_ptr<float>();
  float* mp = m.data_ptr<float>();
  float* vp = v.data_ptr<float>();
  for (auto _ : state) {
    at::parallel_for(0, n, 32768, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const float gi = gp[i];
        mp[i] = mp[i] * 0.5f + gi;
        vp[i] = vp[i] * 0.5f + gi;
        pp[i] = pp[i] - 1e-9f * gi;
      }
    });
    benchmark::DoNotOptimize(pp);
  }
  SetCounters(state, n);
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
      const double seconds =
          run.GetAdjustedRealTime() / benchmark::GetTimeUnitMultiplier(run.time_unit);
      const std::string name = run.run_name.str();
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
    std::vector<double> v = it->second;
    std::sort(v.begin(), v.end());
    const size_t mid = v.size() / 2;
    return v.size() % 2 == 1 ? v[mid] : 0.5 * (v[mid - 1] + v[mid]);
  }

 private:
  std::map<std::string, std::vector<double>> runs_;
  std::map<std::string, double> medians_;
};

std::string Name(const std::string& what, int64_t n, int threads) {
  return absl::StrCat(what, "/", SizeName(n), "/threads:", threads);
}

// Google Benchmark appends "/real_time" to the names of UseRealTime() runs.
std::string RunName(const std::string& what, int64_t n, int threads) {
  return Name(what, n, threads) + "/real_time";
}

}  // namespace
}  // namespace zt

int main(int argc, char** argv) {
  using zt::Name;
  using zt::RunName;
  std::printf("%s\n", zt::SystemInfoLine().c_str());
  std::printf("default intra-op threads: %d | bytes per element: %lld (p,g,m,v read; p,m,v written)\n",
              at::get_num_threads(), static_cast<long long>(zt::kBytesPerElement));
  benchmark::Initialize(&argc, argv);

  // The OpenMP default can be below the core count (it was 1 on our 2-core
  // machine), so the multi-threaded runs ask for every core explicitly.
  const int max_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::vector<int> thread_counts = {1};
  if (max_threads > 1) thread_counts.push_back(max_threads);
  const std::vector<int64_t> sizes = {int64_t{1} << 20, int64_t{1} << 24};
  for (int64_t n : sizes) {
    for (int t : thread_counts) {
      benchmark::RegisterBenchmark(Name("stream_baseline", n, t).c_str(), zt::BenchStream, n, t)
          ->UseRealTime()->Unit(benchmark::kMillisecond);
      benchmark::RegisterBenchmark(Name("zt_adamw_fast", n, t).c_str(), zt::BenchShard,
                                   zt::ops::Impl::kFast, n, t)
          ->UseRealTime()->Unit(benchmark::kMillisecond);
      benchmark::RegisterBenchmark(Name("zt_adamw_reference", n, t).c_str(), zt::BenchShard,
                                   zt::ops::Impl::kReference, n, t)
          ->UseRealTime()->Unit(benchmark::kMillisecond);
      benchmark::RegisterBenchmark(
          Name("torch_adamw", n, t).c_str(),
          zt::BenchTorch<torch::optim::AdamW, torch::optim::AdamWOptions>, n, t)
          ->UseRealTime()->Unit(benchmark::kMillisecond);
      benchmark::RegisterBenchmark(
          Name("torch_adam", n, t).c_str(),
          zt::BenchTorch<torch::optim::Adam, torch::optim::AdamOptions>, n, t)
          ->UseRealTime()->Unit(benchmark::kMillisecond);
    }
  }
  zt::RecordingReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();

  // Ratios of step time, same run: > 1 means the fast kernel is that many times faster.
  auto get = [&](const std::string& key) { return reporter.MedianSeconds(key); };
  std::printf("\nstep-time ratios (this run, medians over repetitions; > 1: fast is faster):\n");
  std::printf("%-6s %-8s %14s %14s %14s %16s\n", "size", "threads", "ref/fast", "torchAdamW/fast",
              "torchAdam/fast", "fast GB/s (% of stream)");
  for (int64_t n : sizes) {
    for (int t : thread_counts) {
      const double fast = get(RunName("zt_adamw_fast", n, t));
      if (fast <= 0.0) continue;  // filtered out with --benchmark_filter
      const double stream = get(RunName("stream_baseline", n, t));
      const double gbps = static_cast<double>(n * zt::kBytesPerElement) / fast * 1e-9;
      const double peak = stream > 0.0 ? 100.0 * stream / fast : 0.0;
      std::printf("%-6s %-8d %14.2f %14.2f %14.2f %9.1f (%3.0f%%)\n", zt::SizeName(n).c_str(), t,
                  get(RunName("zt_adamw_reference", n, t)) / fast, get(RunName("torch_adamw", n, t)) / fast,
                  get(RunName("torch_adam", n, t)) / fast, gbps, peak);
    }
  }
  return 0;
}
