// What a checkpoint costs the training loop, synchronous against
// `checkpoint.async_save` (engine/background_save.h), on a model whose
// checkpoint is >= 1 GiB: the stall of each save (the time SaveCheckpoint
// holds the training thread), and the step time while a background write is
// in flight against a step with none. The async save's first stall includes
// allocating and faulting its staging memory; later saves reuse it, so the
// steady-state stall is the median of the saves after the first.
//
//   build/bin/zt_bench_async_save [--dir /tmp/zt_async_save_bench] [--params 75497472] [--saves 3] [--threads 2]
//
// One process, one rank (stage 1 on the single-rank group), AdamW: 16 bytes
// of checkpoint per parameter (fp32 weights, master, two moments).
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "benchmarks/median.h"
#include "benchmarks/results.h"
#include "benchmarks/save_bench_model.h"
#include "ckpt/zero_checkpoint.h"
#include "cli/flags.h"
#include "comm/single_group.h"
#include "engine/engine.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/file_io.h"
#include "util/log.h"
#include "util/status.h"
#include "util/strings.h"
#include "util/system_info.h"

namespace zt {
namespace {

using Mlp = bench::SaveBenchMlp;

Config BenchConfig(bool async) {
  Config c = bench::SaveBenchConfig();
  c.checkpoint.async_save = async;
  return c;
}

uint64_t FolderBytes(const std::string& dir) {
  uint64_t bytes = 0;
  std::error_code ec;
  for (std::filesystem::recursive_directory_iterator f(dir, ec), end; !ec && f != end; f.increment(ec)) {
    std::error_code e;
    if (f->is_regular_file(e)) bytes += f->file_size(e);
  }
  return bytes;
}

struct Measured {
  std::vector<double> normal_step, stall, pending_step;
  std::vector<double> first_step;  // the step right after each async save: it waits for the staging copy
  uint64_t checkpoint_bytes = 0;
};

absl::Status Run(bool async, int64_t width, int64_t depth, int saves, const std::string& dir, Measured* m) {
  torch::manual_seed(1);
  Mlp model(width, depth);
  ZT_ASSIGN_OR_RETURN(auto engine, Engine::Create(model, BenchConfig(async), std::make_shared<comm::SingleGroup>()));
  const torch::Tensor x = torch::randn({32, width});
  auto step = [&] {
    const auto t0 = SteadyClock::now();
    engine->Backward(model->forward(x).pow(2).mean());
    engine->Step();
    return Seconds(t0, SteadyClock::now());
  };
  for (int i = 0; i < 2; ++i) step();  // warm-up: the optimizer state exists
  for (int i = 0; i < 5; ++i) m->normal_step.push_back(step());
  for (int s = 0; s < saves; ++s) {
    const std::string tag = absl::StrCat("save", s);
    const auto t0 = SteadyClock::now();
    ZT_RETURN_IF_ERROR(engine->SaveCheckpoint(dir, tag));
    m->stall.push_back(Seconds(t0, SteadyClock::now()));
    if (async) {
      // Steps while the write is in flight: until a step commits it.
      for (int i = 0; i < 1000; ++i) {
        m->pending_step.push_back(step());
        if (i == 0) m->first_step.push_back(m->pending_step.back());
        absl::StatusOr<std::string> latest = ckpt::ReadLatestTag(dir);
        if (latest.ok() && *latest == tag) break;
      }
      ZT_RETURN_IF_ERROR(engine->WaitForPendingSave());
    }
    m->checkpoint_bytes = FolderBytes(dir + "/" + tag);
    std::error_code ec;
    std::filesystem::remove_all(dir + "/" + tag, ec);  // one checkpoint on disk at a time
    for (int i = 0; i < 2; ++i) m->normal_step.push_back(step());
  }
  return absl::OkStatus();
}

absl::Status Main(int argc, char** argv) {
  cli::Flags flags("zt_bench_async_save");
  flags.String("dir", "/tmp/zt_async_save_bench", "scratch directory for the checkpoints (removed afterwards)");
  flags.Int("params", 72 << 20, "model parameters (16 bytes of checkpoint each; the default: a 1.06 GiB checkpoint)");
  flags.Int("saves", 3, "saves per mode");
  flags.Int("threads", 2, "intra-op threads");
  std::vector<std::string> args(argv + 1, argv + argc);
  if (std::optional<int> done = flags.ParseCommandLine(args, "[flags]", "")) {
    return *done == 0 ? absl::OkStatus() : absl::InvalidArgumentError("bad flags");
  }
  const int64_t width = 2048;
  const int64_t depth = std::max<int64_t>(1, flags.GetInt("params") / (width * width + width));
  const int saves = static_cast<int>(std::max<long long>(2, flags.GetInt("saves")));
  const std::string dir = flags.GetString("dir");
  at::set_num_threads(static_cast<int>(flags.GetInt("threads")));
  SetMinLogLevel(LogLevel::kWarning);
  ZT_RETURN_IF_ERROR(MakeDirs(dir));
  bench::ResultLog results("async_save", "", std::cout);
  results.Machine(SystemInfoLine());
  std::cout << SystemInfoLine() << "\n";
  std::cout << absl::StrFormat("model: %d x Linear(%d, %d), %.1f M parameters; AdamW, stage 1, 1 rank, %d threads\n",
                               depth, width, width, static_cast<double>(depth * (width * width + width)) / 1e6,
                               at::get_num_threads());
  Measured sync, async;
  ZT_RETURN_IF_ERROR(Run(false, width, depth, saves, dir, &sync));
  ZT_RETURN_IF_ERROR(Run(true, width, depth, saves, dir, &async));
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);

  const double normal_async = bench::Median(async.normal_step);
  const double sync_stall = bench::Median(sync.stall);
  const std::vector<double> steady(async.stall.begin() + 1, async.stall.end());
  const double async_stall = bench::Median(steady), first = async.stall.front();
  const double pending = bench::Median(async.pending_step);
  std::cout << absl::StrFormat("checkpoint: %s per save\n", HumanBytes(static_cast<double>(sync.checkpoint_bytes)));
  std::cout << absl::StrFormat("sync save stall:   %.3f s (median of %d)\n", sync_stall, saves);
  std::cout << absl::StrFormat(
      "async save stall:  %.3f s (median of saves 2-%d; the first, allocating its staging: "
      "%.3f s)\n",
      async_stall, saves, first);
  double in_flight = 0;
  for (double t : async.pending_step) in_flight += t;
  std::cout << absl::StrFormat(
      "step: %.3f s normal, %.3f s while a background write is in flight (%zu steps; a save took %.1f steps, %.1f s, "
      "from its stall to its commit, on average)\n",
      normal_async, pending, async.pending_step.size(), static_cast<double>(async.pending_step.size()) / saves,
      in_flight / saves);
  std::cout << absl::StrFormat("the first step after a save (it waits for the copy into staging): %.3f s (median)\n",
                               bench::Median(async.first_step));
  for (const auto& [mode, m] : {std::pair<const char*, const Measured*>{"sync", &sync}, {"async", &async}}) {
    bench::ResultRow row;
    row.Set("mode", mode)
        .Set("checkpoint_bytes", static_cast<int64_t>(m->checkpoint_bytes))
        .Set("stall_sec", bench::Median(m->stall))
        .Set("first_stall_sec", m->stall.front())
        .Set("normal_step_sec", bench::Median(m->normal_step));
    if (!m->pending_step.empty()) {
      row.Set("step_during_write_sec", bench::Median(m->pending_step))
          .Set("steps_per_write", static_cast<double>(m->pending_step.size()) / saves)
          .Set("first_step_after_save_sec", bench::Median(m->first_step));
    }
    results.Add(row);
  }
  const std::string summary = absl::StrFormat(
      "async save stall %.4fx the synchronous save's (target <= 0.1x); step during a background write "
      "%.2fx a normal step (target <= 1.15x); %s checkpoint",
      async_stall / sync_stall, pending / normal_async, HumanBytes(static_cast<double>(sync.checkpoint_bytes)));
  return results.Finish(summary);
}

}  // namespace
}  // namespace zt

int main(int argc, char** argv) {
  const absl::Status st = zt::Main(argc, argv);
  if (!st.ok()) {
    std::fprintf(stderr, "zt_bench_async_save: %s\n", std::string(st.message()).c_str());
    return 1;
  }
  return 0;
}
