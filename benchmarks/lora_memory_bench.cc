// LoRA memory per rank, measured against zt estimate: a model built under
// zt::ShardedInit at ZeRO stage 3 (LoRA adapters on a frozen base, or full
// fine-tuning with --lora-r 0) trains a few steps, and every rank reports
//  * the engine's accounting of its model states (Engine::memory()),
//  * the bytes of all CPU tensors alive after a step and their peak during
//    the last step (a counting allocator installed before the model is
//    built: an independent measurement of what the engine holds),
//  * its peak RSS (the kernel's high-water mark; LibTorch's own code and
//    heap included),
// next to the estimate zt estimate prints for the same model, world and
// config, with the ratios. A rank program:
//
//   zt launch --nproc-per-node 2 -- build/bin/zt_bench_lora_memory --model llama-1b --lora-r 16
//
// Limits: CPU and Gloo, fp32; activations are estimated within about 15%
// (docs/estimate.md), so the check that matters is steady state (model
// states + what stays allocated) and the step peak with a short sequence.
#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "cli/flags.h"
#include "comm/init.h"
#include "engine/cpu_memory.h"
#include "engine/engine.h"
#include "estimate/builtin_models.h"
#include "estimate/memory_estimate.h"
#include "launch/rank_env.h"
#include "lora/apply_lora.h"
#include "models/registry.h"
#include "util/error.h"
#include "util/strings.h"
#include "util/system_info.h"
#include "zero/sharded_init.h"

namespace zt {
namespace {

double MiB(int64_t b) { return static_cast<double>(b) / (1 << 20); }

int Main(int argc, char** argv) {
  cli::Flags f("zt_bench_lora_memory");
  f.String("model", "llama-1b", "built-in model");
  f.Repeated("model-set", "model dimension override KEY=INT");
  f.Int("lora-r", 16, "LoRA rank (0: full fine-tuning)");
  f.String("lora-targets", "q_proj,k_proj,v_proj,o_proj", "LoRA layer names, comma-separated, or all-linear");
  f.Int("micro-batch", 1, "sequences per rank");
  f.Int("seq-len", 32, "tokens per sequence");
  f.Int("steps", 2, "training steps (the last one is measured)");
  std::vector<std::string> args(argv + 1, argv + argc);
  absl::Status parsed = f.Parse(args);
  if (!parsed.ok() || f.help_requested()) {
    std::fprintf(stderr, "%s\n%s", std::string(parsed.message()).c_str(),
                 f.Usage("zt launch --nproc-per-node N -- zt_bench_lora_memory [flags]").c_str());
    return parsed.ok() ? 0 : 2;
  }
  auto env = comm::ReadRankEnv();
  if (!env.ok()) {
    std::fprintf(stderr, "zt_bench_lora_memory is a rank program: run it under zt launch\n");
    return 2;
  }
  // Counting from before the model exists, so every tensor is seen.
  if (!InstallCountingCpuAllocator()) {
    std::fprintf(stderr, "zt_bench_lora_memory: could not install the counting allocator\n");
    return 1;
  }
  at::set_num_threads(std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / env->world_size));
  auto pg = ValueOrThrow(comm::InitProcessGroup(*env, {}));
  const bool lead = pg->rank() == 0;

  models::ModelSpec spec;
  spec.name = f.GetString("model");
  auto sets = cli::ParseModelSets(f.GetRepeated("model-set"));
  if (!sets.ok()) {
    std::fprintf(stderr, "%s\n", std::string(sets.status().message()).c_str());
    return 2;
  }
  spec.overrides = *std::move(sets);
  spec.lora.r = f.GetInt("lora-r");
  if (spec.lora.enabled()) spec.lora.targets = absl::StrSplit(f.GetString("lora-targets"), ',', absl::SkipEmpty());
  const int64_t micro = f.GetInt("micro-batch"), seq = f.GetInt("seq-len");

  Config config;
  config.batch.train_micro_batch_size_per_gpu = micro;
  config.batch.gradient_accumulation_steps = 1;
  config.steps_per_print = 1000000;
  config.optimizer.present = true;
  config.optimizer.type = OptimizerType::kAdamW;
  config.optimizer.lr = 1e-4;
  config.zero.stage = 3;

  std::unique_ptr<models::Model> model;
  {
    ShardedInit init(pg, config);
    model = ValueOrThrow(models::CreateModel(spec));
  }
  auto engine = ValueOrThrow(Engine::Create(model->module(), config, pg));
  const LoraSummary lora = SummarizeLora(*model->module());

  torch::manual_seed(5 + static_cast<uint64_t>(pg->rank()));
  const int64_t vocab = model->info().vocab_size;
  torch::Tensor tok = torch::randint(vocab, {micro, seq + 1}, torch::kLong);
  torch::Tensor x = tok.narrow(1, 0, seq), y = tok.narrow(1, 1, seq);
  const int steps = static_cast<int>(std::max<int64_t>(1, f.GetInt("steps")));
  for (int s = 0; s < steps; ++s) {
    if (s == steps - 1) ResetCpuMemoryPeak();
    torch::Tensor out = model->Forward(x);
    engine->Backward(torch::cross_entropy_loss(out.reshape({-1, vocab}), y.reshape({-1})));
    engine->Step();
  }
  const CpuMemoryCounters counted = CpuMemory();
  const ModelStateBytes m = engine->memory();

  estimate::EstimateOptions eo = estimate::OptionsFromConfig(config, pg->size());
  eo.micro_batch = micro;
  eo.seq_len = seq;
  const estimate::ModelShape shape = ValueOrThrow(estimate::BuiltinModelShape(spec));
  const estimate::MemoryEstimate e = ValueOrThrow(estimate::EstimateMemory(shape, eo));
  // What stays allocated between steps: model states, the reducer's
  // buckets and the gather cache (idle gather buffers kept for reuse, as
  // large as the gathered working set).
  const int64_t est_steady = e.model_states() + e.buckets + std::max<int64_t>(0, e.gathered);
  const int64_t est_peak = e.total();

  const std::string mode = spec.lora.enabled() ? absl::StrFormat("lora_r%d", spec.lora.r) : std::string("full");
  std::vector<double> mine = {static_cast<double>(m.model_states()), static_cast<double>(counted.current_bytes),
                              static_cast<double>(counted.peak_bytes), static_cast<double>(PeakResidentBytes())};
  at::Tensor t = torch::tensor(mine, torch::kDouble);
  at::Tensor flat = torch::empty({pg->size() * t.numel()}, torch::kDouble);
  ThrowIfError(pg->AllGather(t, flat)->Wait());
  std::vector<at::Tensor> gathered;
  for (int r = 0; r < pg->size(); ++r) gathered.push_back(flat.narrow(0, r * t.numel(), t.numel()));
  if (!lead) return 0;
  std::printf("%s\n", SystemInfoLine().c_str());
  std::printf("model %s (%s parameters), %s, stage 3, %d ranks, micro-batch %lld x %lld tokens\n", spec.name.c_str(),
              HumanCount(static_cast<double>(model->info().num_params)).c_str(),
              spec.lora.enabled()
                  ? absl::StrFormat("LoRA r=%d on %s: %s trainable", spec.lora.r, f.GetString("lora-targets"),
                                    HumanCount(static_cast<double>(lora.trainable_numel)))
                        .c_str()
                  : "full fine-tuning",
              pg->size(), static_cast<long long>(micro), static_cast<long long>(seq));
  std::printf(
      "estimate per rank: model states %.1f MiB, + buckets %.1f MiB, gathered %.1f MiB, activations %.1f MiB, "
      "total %.1f MiB\n",
      MiB(e.model_states()), MiB(e.buckets), MiB(e.gathered), MiB(e.activations), MiB(e.total()));
  for (int r = 0; r < pg->size(); ++r) {
    const double* v = gathered[static_cast<size_t>(r)].data_ptr<double>();
    std::printf(
        "RESULT mode=%s rank=%d engine_model_states_mib=%.1f est_model_states_mib=%.1f ratio_states=%.4f "
        "alive_after_step_mib=%.1f est_steady_mib=%.1f ratio_steady=%.4f step_peak_mib=%.1f est_total_mib=%.1f "
        "ratio_peak=%.4f peak_rss_mib=%.1f\n",
        mode.c_str(), r, v[0] / (1 << 20), MiB(e.model_states()), v[0] / static_cast<double>(e.model_states()),
        v[1] / (1 << 20), MiB(est_steady), v[1] / static_cast<double>(est_steady), v[2] / (1 << 20), MiB(est_peak),
        v[2] / static_cast<double>(est_peak), v[3] / (1 << 20));
  }
  std::printf(
      "SUMMARY: %s %s at stage 3 on %d ranks: measured/estimate = %.3f (model states), %.3f (allocated "
      "between steps), %.3f (step peak)\n",
      spec.name.c_str(), mode.c_str(), pg->size(), gathered[0].data_ptr<double>()[0] / e.model_states(),
      gathered[0].data_ptr<double>()[1] / est_steady, gathered[0].data_ptr<double>()[2] / est_peak);
  return 0;
}

}  // namespace
}  // namespace zt

int main(int argc, char** argv) { return zt::Main(argc, argv); }
