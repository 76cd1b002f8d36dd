// Shared pieces of the engine parity tests: a small model whose layer sizes
// do not divide by any world size, deterministic data, and a reference loop
// that trains the same model on the whole global batch in one process with
// plain LibTorch (or the reference optimizer for Lion, which LibTorch lacks).
#pragma once

#include <torch/torch.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "config/config.h"
#include "config/param_groups.h"
#include "tests/testing/ranks.h"

namespace zt::testing {

struct ParityNetImpl : torch::nn::Module {
  ParityNetImpl() {
    fc1 = register_module("fc1", torch::nn::Linear(13, 17));
    fc2 = register_module("fc2", torch::nn::Linear(17, 5));
  }
  torch::Tensor forward(const torch::Tensor& x) { return fc2(torch::tanh(fc1(x))); }
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
};
TORCH_MODULE(ParityNet);

// Elementwise-only model for fp16 on CPU (LibTorch 1.13 has no CPU fp16 matmul).
struct ScaleShiftImpl : torch::nn::Module {
  ScaleShiftImpl() {
    w = register_parameter("w", torch::randn({13}) * 0.5 + 1.0);
    b = register_parameter("b", torch::randn({13}) * 0.1);
  }
  torch::Tensor forward(const torch::Tensor& x) { return x * w + b; }
  torch::Tensor w, b;
};
TORCH_MODULE(ScaleShift);

struct ParityData {
  torch::Tensor x, y;  // [steps * global_batch, features]
};

// Parity variants are structs with a `name`: the one a name picks.
template <class Variant>
const Variant* FindVariant(const std::vector<Variant>& all, const std::string& name) {
  for (const Variant& v : all) {
    if (v.name == name) return &v;
  }
  return nullptr;
}

// The variants a parity launch runs: ZT_PARITY_VARIANTS (comma-separated
// names) when set, else `fallback` ("all" or comma-separated names).
std::string ParityVariantsToRun(const std::string& fallback = "all");

// How long one launch of `count` variants may take: starting the ranks plus
// a generous minute per variant (a variant takes about a second).
std::chrono::seconds ParityLaunchTimeout(size_t count);

// Runs the variants named in `names` ("all", or comma-separated names) one
// after another in the same ranks (RunEachInTheseRanks: one failing variant
// never hides the others, one that throws ends the launch).
template <class Variant>
absl::Status RunVariantsInOrder(const std::vector<Variant>& all, const std::string& names,
                                const std::function<absl::Status(const Variant&)>& run) {
  std::vector<std::string> chosen;
  if (names == "all") {
    for (const Variant& v : all) chosen.push_back(v.name);
  } else {
    chosen = absl::StrSplit(names, ',', absl::SkipEmpty());
    for (const std::string& name : chosen) {
      if (FindVariant(all, name) == nullptr) {
        return absl::InvalidArgumentError(absl::StrCat("no parity variant named '", name, "'"));
      }
    }
  }
  return RunEachInTheseRanks(chosen, [&](const std::string& name) { return run(*FindVariant(all, name)); });
}

// The parity tests' common config: micro-batch 2, no accumulation, AdamW
// (lr 1e-2, weight decay 0.01), overlap_comm on, no step log.
Config ParityBaseConfig(int stage);

// Same tensors in every process: generated from a fixed seed.
ParityData MakeData(int64_t rows, int64_t in_features, int64_t out_features, uint64_t seed);

// Rows of micro-batch `micro` of optimizer step `step` for `rank`, such that
// the union over ranks and micro-steps is the step's global batch in order.
int64_t MicroBatchStart(const BatchConfig& b, int64_t step, int64_t micro, int rank);

// The arithmetic of a reference run: the config's (fp32, or a bf16 model
// with fp32 master copies, as the engine does), or float64 throughout: the
// "truth" that every correct fp32 or bf16 run only approximates.
enum class RefArith { kAsConfigured, kFloat64 };

// Trains `model` for `steps` optimizer steps on the global batch with a
// plain single-process loop mirroring `config` (optimizer, scheduler incl.
// OneCycle momentum, clipping), in `arith`. `groups`: LibTorch optimizer
// param groups as EngineOptions::param_groups describes them (the rest of
// the parameters in a last group with the config's settings).
void TrainReference(torch::nn::Module& model, const std::function<torch::Tensor(const torch::Tensor&)>& forward,
                    const ParityData& data, const Config& config, int64_t steps,
                    RefArith arith = RefArith::kAsConfigured, const std::vector<ParamGroupOptions>& groups = {});

// The same loop with any loss: loss(x, y) gets the step's global batch rows
// as they are in `data` (no dtype conversion; a float64 model gets float64
// logits back from integer token inputs). `after_step(s)` runs after
// optimizer step s. Tied parameters are stepped once.
void TrainReferenceWithLoss(torch::nn::Module& model,
                            const std::function<torch::Tensor(const torch::Tensor&, const torch::Tensor&)>& loss,
                            const ParityData& data, const Config& config, int64_t steps,
                            const std::function<void(int64_t)>& after_step = nullptr,
                            RefArith arith = RefArith::kAsConfigured,
                            const std::vector<ParamGroupOptions>& groups = {});

// Largest violation of |a - b| <= atol + rtol * |b| over all parameters,
// as a message ("" when within tolerance).
std::string CompareParams(torch::nn::Module& a, torch::nn::Module& b, double rtol, double atol);

// Parity that holds whichever kernels the BLAS picks (docs/testing.md has
// the derivation). After a few Adam steps, fp32 runs of the same math that
// only add in another order (another GEMM blocking, another micro-batch or
// rank split) end apart by far more than their per-operation rounding:
// Adam divides by sqrt(v), so a gradient element that nearly cancels turns
// its rounding into a step of up to lr. A fixed tolerance therefore holds
// on one CPU and not on the next. Instead, a float64 run of the same steps
// is the truth, and the plain LibTorch run in the engine's precision shows
// how far an honest run of that precision lands from it on this machine:
//
//   for every parameter:  max|engine - truth| <= multiple * max|reference - truth|
//                                               + floor * max|truth|
//
// `floor` keeps a tensor whose reference happens to land on the truth from
// demanding the impossible. A real error (gradients not averaged, a micro-
// batch not accumulated, a stale shard) moves the engine by O(lr) per step,
// orders of magnitude beyond the bound.
struct TruthTolerance {
  double multiple = 0.0;
  double floor = 0.0;
};

struct TruthComparison {
  std::string failure;             // "" when every parameter is within the bound
  double worst_margin = 0;         // max over parameters of max|engine - truth| / bound (<= 1 passes)
  std::string worst_param;         // where that margin was reached
  double engine_error = 0;         // max over all parameters of |engine - truth|
  double reference_error = 0;      // the same for the plain reference
  double engine_vs_reference = 0;  // max |engine - reference|: what a fixed tolerance would compare
};

TruthComparison CompareWithTruth(torch::nn::Module& engine, torch::nn::Module& reference, torch::nn::Module& truth,
                                 const TruthTolerance& tolerance);

// One line of the comparison's figures; appended to the file named by
// ZT_PARITY_STATS when that is set (how docs/testing.md's table was made).
void RecordTruthStats(const std::string& where, const TruthComparison& c);

}  // namespace zt::testing
