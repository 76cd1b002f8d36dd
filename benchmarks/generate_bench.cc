// Generation speed (zt generate's loop, generate/generator.h): tokens per
// second with the KV cache against the full forward per token (the
// reference path), measured in the same run, interleaved, greedy, on the
// pretrained stories260K (tests/fixtures) and random-weight built-in models
// of larger sizes. One process, the threads given (default 1: one user's
// generation on one core; the ratio is what matters).
//
//   build/bin/zt_bench_generate [--models stories260K,gpt2-mini,llama-mini,gpt2] [--prompt 16] [--new-tokens 128]
//
// Reported per model: decode tokens/s (after the prompt) with and without
// the cache and their ratio. The cached decode does O(T) work per token,
// the full forward O(T^2) attention and O(T) everything else per token, so
// the ratio grows with the sequence. One sequence's decode reads every
// weight once per token, so its roofline is the memory read bandwidth
// (measured in the same run: a sum over 256 MiB, the threads given) over
// the weights' bytes; `of_roofline` is the cached rate against it (it
// matters for the large model; the small ones live in cache, where the
// per-token overhead of ~40 small ops dominates instead).
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "benchmarks/median.h"
#include "cli/flags.h"
#include "engine/weights.h"
#include "generate/generator.h"
#include "models/registry.h"
#include "util/system_info.h"

namespace zt {
namespace {

const std::string kFixture = std::string(ZT_SOURCE_DIR) + "/tests/fixtures/llama2c-stories260K";

int Main(int argc, char** argv) {
  cli::Flags flags("zt_bench_generate");
  flags.String("models", "stories260K,gpt2-mini,llama-mini,gpt2", "models (stories260K: the pretrained fixture)");
  flags.Int("prompt", 16, "prompt tokens");
  flags.Int("new-tokens", 128, "tokens generated per run");
  flags.Int("rounds", 3, "runs per path (median)");
  flags.Int("threads", 1, "intra-op threads");
  if (std::optional<int> done = flags.ParseCommandLine(std::vector<std::string>(argv + 1, argv + argc),
                                                       "[--models A,B] [--new-tokens N]", "")) {
    return *done;
  }
  torch::set_num_threads(static_cast<int>(flags.GetInt("threads")));
  (void)torch::mm(torch::ones({8, 8}), torch::ones({8, 8}));  // loads BLAS before SystemInfoLine reads it
  std::cout << SystemInfoLine() << "; intra-op threads " << flags.GetInt("threads") << "\n";
  // Read bandwidth: sums over a buffer far larger than the caches.
  const torch::Tensor big = torch::ones({64 << 20}, torch::kFloat);
  std::vector<double> bw;
  for (int i = 0; i < 5; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    const double sum = big.sum().item<double>();
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (sum > 0) bw.push_back(static_cast<double>(big.nbytes()) / secs);
  }
  const double read_bw = bench::Median(bw);
  std::cout << absl::StrFormat("memory read bandwidth (sum over 256 MiB): %.2f GB/s\n", read_bw / 1e9);
  std::cout << absl::StrFormat("%-12s %12s %7s %8s | %11s %11s %8s | %13s %8s %s\n", "model", "parameters", "prompt",
                               "new tok", "cached t/s", "full t/s", "speedup", "roofline t/s", "of roof",
                               "same tokens");
  std::vector<double> ratios;
  std::vector<std::string> table;
  const std::vector<std::string> names = absl::StrSplit(flags.GetString("models"), ',', absl::SkipEmpty());
  for (const std::string& name : names) {
    const bool fixture = name == "stories260K";
    auto model = models::CreateModel(models::ModelSpec{fixture ? kFixture + "/hf" : name, {}, 1});
    if (!model.ok()) {
      std::cerr << model.status() << "\n";
      return 1;
    }
    if (fixture && !LoadSafetensors(*(*model)->module(), kFixture + "/hf").ok()) return 1;
    const models::ModelInfo& info = (*model)->info();
    std::vector<int32_t> prompt(static_cast<size_t>(flags.GetInt("prompt")));
    for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<int32_t>((i * 97 + 13) % info.vocab_size);
    generate::GenerateOptions o;
    o.max_new_tokens = std::min<int64_t>(flags.GetInt("new-tokens"), info.max_seq_len - flags.GetInt("prompt"));
    std::vector<double> cached, full;
    bool same = true;
    std::vector<int32_t> first;
    for (int64_t r = 0; r < flags.GetInt("rounds"); ++r) {
      for (bool use_cache : {true, false}) {
        o.use_cache = use_cache;
        auto g = generate::Generate(**model, prompt, o);
        if (!g.ok()) {
          std::cerr << g.status() << "\n";
          return 1;
        }
        (use_cache ? cached : full).push_back(static_cast<double>(g->decode_steps) / g->decode_seconds);
        if (first.empty()) first = g->ids;
        same = same && g->ids == first;
      }
    }
    const double c = bench::Median(cached), f = bench::Median(full);
    ratios.push_back(c / f);
    const double roofline = read_bw / (4.0 * static_cast<double>(info.num_params));
    std::cout << absl::StrFormat(
        "RESULT model=%s params=%d prompt=%d new_tokens=%d cached_tok_s=%.1f full_tok_s=%.1f speedup=%.2f "
        "roofline_tok_s=%.1f of_roofline=%.2f same_tokens=%s\n",
        name, info.num_params, prompt.size(), o.max_new_tokens, c, f, c / f, roofline, c / roofline,
        same ? "yes" : "NO");
    table.push_back(absl::StrFormat("%-12s %12d %7d %8d | %11.1f %11.1f %7.2fx | %13.1f %7.2fx %s", name,
                                    info.num_params, prompt.size(), o.max_new_tokens, c, f, c / f, roofline,
                                    c / roofline, same ? "yes" : "NO"));
  }
  for (const std::string& row : table) std::cout << row << "\n";
  std::cout << "roofline = read bandwidth / fp32 weight bytes (one sequence's decode reads every weight once per "
               "token)\n";
  std::sort(ratios.begin(), ratios.end());
  std::cout << absl::StrFormat("SUMMARY: the KV cache decodes %.1fx-%.1fx faster than a full forward per token\n",
                               ratios.front(), ratios.back());
  return 0;
}

}  // namespace
}  // namespace zt

int main(int argc, char** argv) { return zt::Main(argc, argv); }
