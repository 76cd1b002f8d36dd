// Activation checkpointing on a GPT-style model: peak memory and step time
// with every block checkpointed and without, at several sequence lengths,
// measured in the same run, interleaved (plain, checkpointed, plain, ...).
//
//   build/bin/zt_bench_activation_checkpoint [--seq-lens 64,128,256,512] [--layers 6] [--dim 256]
//
// Reported per sequence length: median forward / backward / whole-step times,
// peak bytes allocated during a step above the bytes held before it (the
// counting allocator: activations, gradients in flight, saved inputs), and
// two ratios: the step time with checkpointing over without (recomputing one
// forward in a forward + backward that costs about three: ~1.33), and the
// extra backward time over the plain forward time (the recomputation: ~1.0).
// One process, one rank (ZeRO stage 0 over the single-rank group), all cores.
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "benchmarks/median.h"
#include "cli/flags.h"
#include "comm/single_group.h"
#include "engine/cpu_memory.h"
#include "engine/engine.h"
#include "util/error.h"
#include "util/log.h"
#include "util/status.h"
#include "util/system_info.h"
#include "zero/unit.h"

namespace zt {
namespace {

struct Options {
  std::vector<int64_t> seq_lens;
  int64_t layers = 6, dim = 256, heads = 4, vocab = 2048, batch = 8, steps = 5, rounds = 3, threads = 0;
};

// Pre-LN transformer block (GPT-2 shape): causal multi-head attention, 4x MLP.
struct BlockImpl : torch::nn::Module {
  BlockImpl(int64_t dim, int64_t heads) : heads(heads) {
    ln_1 = register_module("ln_1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({dim})));
    c_attn = register_module("c_attn", torch::nn::Linear(dim, 3 * dim));
    attn_proj = register_module("attn_proj", torch::nn::Linear(dim, dim));
    ln_2 = register_module("ln_2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({dim})));
    c_fc = register_module("c_fc", torch::nn::Linear(dim, 4 * dim));
    mlp_proj = register_module("mlp_proj", torch::nn::Linear(4 * dim, dim));
  }
  torch::Tensor forward(const torch::Tensor& x) {
    const int64_t b = x.size(0), t = x.size(1), d = x.size(2), hd = d / heads;
    std::vector<torch::Tensor> qkv = c_attn(ln_1(x)).split(d, -1);
    auto split_heads = [&](const torch::Tensor& y) { return y.view({b, t, heads, hd}).transpose(1, 2); };
    torch::Tensor att =
        torch::matmul(split_heads(qkv[0]), split_heads(qkv[1]).transpose(-2, -1)) / std::sqrt(static_cast<double>(hd));
    att = torch::softmax(att.masked_fill(torch::ones({t, t}, torch::kBool).triu(1), -1e4), -1);
    torch::Tensor y = torch::matmul(att, split_heads(qkv[2])).transpose(1, 2).contiguous().view({b, t, d});
    torch::Tensor h = x + attn_proj(y);
    return h + mlp_proj(torch::gelu(c_fc(ln_2(h))));
  }
  int64_t heads;
  torch::nn::LayerNorm ln_1{nullptr}, ln_2{nullptr};
  torch::nn::Linear c_attn{nullptr}, attn_proj{nullptr}, c_fc{nullptr}, mlp_proj{nullptr};
};

struct GptImpl : torch::nn::Module {
  GptImpl(const Options& o, int64_t max_seq) {
    wte = register_module("wte", torch::nn::Embedding(o.vocab, o.dim));
    wpe = register_module("wpe", torch::nn::Embedding(max_seq, o.dim));
    for (int64_t i = 0; i < o.layers; ++i)
      h.push_back(register_module(absl::StrCat("h", i), zt::Unit<BlockImpl>(o.dim, o.heads)));
    ln_f = register_module("ln_f", torch::nn::LayerNorm(torch::nn::LayerNormOptions({o.dim})));
  }
  torch::Tensor forward(const torch::Tensor& idx) {
    torch::Tensor x = wte(idx) + wpe(torch::arange(idx.size(1), torch::kLong));
    for (auto& block : h) x = block(x);
    return torch::linear(ln_f(x), wte->weight);  // tied LM head
  }
  torch::nn::Embedding wte{nullptr}, wpe{nullptr};
  std::vector<zt::Unit<BlockImpl>> h;
  torch::nn::LayerNorm ln_f{nullptr};
};
TORCH_MODULE(Gpt);

struct Measured {
  double fwd_ms = 0, bwd_ms = 0, step_ms = 0, peak_bytes = 0;
};

using bench::Median;

absl::StatusOr<Measured> Run(const Options& o, int64_t seq, bool checkpointed) {
  using Clock = std::chrono::steady_clock;
  auto ms = [](Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double, std::milli>(b - a).count();
  };
  Config c;
  c.batch.train_micro_batch_size_per_gpu = o.batch;
  c.batch.gradient_accumulation_steps = 1;
  c.steps_per_print = 0;
  c.optimizer.present = true;
  c.optimizer.type = OptimizerType::kAdamW;
  c.optimizer.lr = 1e-4;
  torch::manual_seed(1);
  Gpt model(o, seq);
  if (checkpointed && CheckpointUnits(*model) != o.layers) return absl::InternalError("expected every block marked");
  ZT_ASSIGN_OR_RETURN(auto engine, Engine::Create(model, c, std::make_shared<comm::SingleGroup>()));
  torch::manual_seed(2);
  torch::Tensor tokens = torch::randint(o.vocab, {o.batch, seq + 1}, torch::kLong);
  torch::Tensor x = tokens.narrow(1, 0, seq), y = tokens.narrow(1, 1, seq);
  std::vector<double> fwd, bwd, step, peak;
  for (int64_t s = 0; s < o.steps + 1; ++s) {  // the first step allocates gradients and optimizer state
    const int64_t base = CpuMemory().current_bytes;
    ResetCpuMemoryPeak();
    const auto t0 = Clock::now();
    torch::Tensor logits = model->forward(x);
    torch::Tensor loss = torch::cross_entropy_loss(logits.reshape({-1, o.vocab}), y.reshape({-1}));
    const auto t1 = Clock::now();
    engine->Backward(loss);
    const auto t2 = Clock::now();
    engine->Step();
    const auto t3 = Clock::now();
    if (s == 0) continue;
    fwd.push_back(ms(t0, t1));
    bwd.push_back(ms(t1, t2));
    step.push_back(ms(t0, t3));
    peak.push_back(static_cast<double>(CpuMemory().peak_bytes - base));
  }
  Measured m;
  m.fwd_ms = Median(fwd);
  m.bwd_ms = Median(bwd);
  m.step_ms = Median(step);
  m.peak_bytes = Median(peak);
  return m;
}

absl::StatusOr<Options> Parse(int argc, char** argv) {
  cli::Flags flags("zt_bench_activation_checkpoint");
  flags.String("seq-lens", "64,128,256,512", "comma-separated sequence lengths");
  flags.Int("layers", 6, "transformer blocks (each a unit, each checkpointed in the checkpointed runs)");
  flags.Int("dim", 256, "model width");
  flags.Int("heads", 4, "attention heads");
  flags.Int("vocab", 2048, "vocabulary size");
  flags.Int("batch", 8, "sequences per step");
  flags.Int("steps", 5, "timed steps per run (after one untimed)");
  flags.Int("rounds", 3, "plain/checkpointed pairs per sequence length (medians over rounds)");
  flags.Int("threads", 0, "intra-op threads (0: one per core)");
  std::vector<std::string> args(argv + 1, argv + argc);
  ZT_RETURN_IF_ERROR(flags.Parse(args));
  if (flags.help_requested()) {
    std::cout << flags.Usage("[flags]");
    std::exit(0);
  }
  Options o;
  for (absl::string_view s : absl::StrSplit(flags.GetString("seq-lens"), ',', absl::SkipEmpty())) {
    int64_t v = 0;
    if (!absl::SimpleAtoi(s, &v) || v < 1)
      return absl::InvalidArgumentError(absl::StrCat("--seq-lens: bad length '", s, "'"));
    o.seq_lens.push_back(v);
  }
  o.layers = flags.GetInt("layers");
  o.dim = flags.GetInt("dim");
  o.heads = flags.GetInt("heads");
  o.vocab = flags.GetInt("vocab");
  o.batch = flags.GetInt("batch");
  o.steps = flags.GetInt("steps");
  o.rounds = flags.GetInt("rounds");
  o.threads = flags.GetInt("threads");
  if (o.threads < 0) return absl::InvalidArgumentError("--threads must be >= 0");
  if (o.seq_lens.empty() || o.layers < 1 || o.heads < 1 || o.dim % o.heads != 0 || o.vocab < 2 || o.batch < 1 ||
      o.steps < 1 || o.rounds < 1) {
    return absl::InvalidArgumentError(
        "--seq-lens must list lengths; --layers, --batch, --steps, --rounds >= 1; --dim divisible by --heads");
  }
  return o;
}

absl::Status Main(int argc, char** argv) {
  if (!InstallCountingCpuAllocator()) return absl::FailedPreconditionError("could not install the counting allocator");
  ZT_ASSIGN_OR_RETURN(Options o, Parse(argc, argv));
  SetMinLogLevel(LogLevel::kWarning);  // no engine banner per run
  at::set_num_threads(o.threads > 0 ? static_cast<int>(o.threads)
                                    : static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  (void)torch::mm(torch::ones({8, 8}), torch::ones({8, 8}));  // loads BLAS before SystemInfoLine reads it
  std::cout << SystemInfoLine() << "\n";
  std::cout << absl::StrFormat(
      "model: GPT-style, %d blocks x (dim %d, %d heads, 4x MLP), vocab %d, tied head; batch %d; %d intra-op threads; "
      "%d timed steps x %d rounds per case (medians)\n",
      o.layers, o.dim, o.heads, o.vocab, o.batch, at::get_num_threads(), o.steps, o.rounds);
  std::cout << absl::StrFormat("%6s %-6s %9s %9s %9s %11s | %10s %11s %10s\n", "seq", "ckpt", "fwd ms", "bwd ms",
                               "step ms", "peak MiB", "step ratio", "recompute/F", "peak ratio");
  std::string summary;
  for (int64_t seq : o.seq_lens) {
    std::vector<Measured> plain, ckpt;
    for (int64_t r = 0; r < o.rounds; ++r) {
      ZT_ASSIGN_OR_RETURN(Measured p, Run(o, seq, false));
      ZT_ASSIGN_OR_RETURN(Measured c, Run(o, seq, true));
      plain.push_back(p);
      ckpt.push_back(c);
    }
    auto med = [](const std::vector<Measured>& v, double Measured::*f) {
      std::vector<double> x;
      for (const Measured& m : v) x.push_back(m.*f);
      return Median(x);
    };
    // Ratios within each round first, then the median (load drifts).
    std::vector<double> step_ratio, recompute, peak_ratio;
    for (int64_t r = 0; r < o.rounds; ++r) {
      const Measured& p = plain[static_cast<size_t>(r)];
      const Measured& c = ckpt[static_cast<size_t>(r)];
      step_ratio.push_back((c.fwd_ms + c.bwd_ms) / (p.fwd_ms + p.bwd_ms));
      recompute.push_back((c.bwd_ms - p.bwd_ms) / p.fwd_ms);
      peak_ratio.push_back(c.peak_bytes / p.peak_bytes);
    }
    for (int k = 0; k < 2; ++k) {
      const std::vector<Measured>& v = k == 0 ? plain : ckpt;
      std::cout << absl::StrFormat("%6d %-6s %9.1f %9.1f %9.1f %11.1f", seq, k == 0 ? "off" : "on",
                                   med(v, &Measured::fwd_ms), med(v, &Measured::bwd_ms), med(v, &Measured::step_ms),
                                   med(v, &Measured::peak_bytes) / (1 << 20));
      if (k == 1) {
        std::cout << absl::StrFormat(" | %10.2f %11.2f %10.2f", Median(step_ratio), Median(recompute),
                                     Median(peak_ratio));
      }
      std::cout << "\n";
    }
    std::cout << absl::StrFormat(
        "RESULT seq=%d fwd_ms=%.2f bwd_ms=%.2f ckpt_fwd_ms=%.2f ckpt_bwd_ms=%.2f peak_mib=%.2f ckpt_peak_mib=%.2f "
        "step_ratio=%.3f recompute_over_fwd=%.3f peak_ratio=%.3f\n",
        seq, med(plain, &Measured::fwd_ms), med(plain, &Measured::bwd_ms), med(ckpt, &Measured::fwd_ms),
        med(ckpt, &Measured::bwd_ms), med(plain, &Measured::peak_bytes) / (1 << 20),
        med(ckpt, &Measured::peak_bytes) / (1 << 20), Median(step_ratio), Median(recompute), Median(peak_ratio));
    std::cout.flush();
    // The longest sequence is where checkpointing matters most.
    summary = absl::StrFormat(
        "at sequence %d, activation checkpointing keeps %.2fx the peak memory of the plain step for %.2fx its time "
        "(recompute = %.2f forward passes)",
        seq, Median(peak_ratio), Median(step_ratio), Median(recompute));
  }
  std::cout
      << "step ratio = (fwd + bwd) checkpointed / plain; recompute/F = (bwd checkpointed - bwd plain) / fwd "
         "plain; peak = bytes allocated above the step's start (activations, saved inputs, gradients in flight)\n";
  std::cout << "SUMMARY: " << summary << "\n";
  return absl::OkStatus();
}

}  // namespace
}  // namespace zt

int main(int argc, char** argv) {
  try {
    absl::Status st = zt::Main(argc, argv);
    if (!st.ok()) {
      const bool named = absl::StartsWith(st.message(), "zt_bench_activation_checkpoint");
      std::cerr << (named ? "" : "zt_bench_activation_checkpoint: ") << st.message() << "\n";
      return st.code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
    }
  } catch (const std::exception& e) {
    std::cerr << "zt_bench_activation_checkpoint: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
