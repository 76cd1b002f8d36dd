// The fused step (StepExtras) of every optimizer: gradients in fp32, bf16 or
// fp16 multiplied by grad_scale, and the updated parameters rounded into
// `out` in the same pass. Fast vs the double reference over 50-100 steps at
// sizes with tile and thread-chunk tails; `out` bit-equal to params.to(dtype)
// after every step; fused bit-equal to the unfused LibTorch sequence; every
// ISA variant this CPU runs bit-identical to the generic one; tile-aligned
// chunks really spread over the intra-op threads, with the same bits;
// argument checks; state that views foreign memory.
#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "ops/kernels.h"
#include "ops/optimizer_common.h"
#include "ops/shard_optimizer.h"
#include "tests/ops/optimizer_cases.h"
#include "util/error.h"

namespace zt::ops {
namespace {

using testutil::AllCases;
using testutil::AvailableKernels;
using testutil::Case;
using testutil::ExpectBitEqual;
using testutil::ExpectClose;
using testutil::ExpectError;
using testutil::LrOnly;
using testutil::Tolerance;

// The engine's 1 / loss_scale times a clipping coefficient.
constexpr double kGradScale = 0.7 / 1024.0;
constexpr int64_t kTile = kernels::kTile;
constexpr int64_t kGrain = internal::kGrainSize;
// Eight chunks and a tail: uneven splits over 1-3 threads, every tile path.
constexpr int64_t kManyChunks = 8 * kGrain + kTile + 3;

const at::ScalarType kGradTypes[] = {at::kFloat, at::kBFloat16, at::kHalf};
// at::kDouble stands for "no out".
const at::ScalarType kOutTypes[] = {at::kDouble, at::kFloat, at::kBFloat16, at::kHalf};

std::string TypeName(at::ScalarType t) { return t == at::kDouble ? "none" : c10::toString(t); }

// Sets the intra-op pool to `threads` for a scope.
class ThreadScope {
 public:
  explicit ThreadScope(int threads) : saved_(at::get_num_threads()) { at::set_num_threads(threads); }
  ~ThreadScope() { at::set_num_threads(saved_); }

 private:
  int saved_;
};

// One optimizer's trajectory: its parameters, state and rounded copy.
struct Trajectory {
  std::unique_ptr<ShardOptimizer> opt;
  at::Tensor params;
  ShardState state;
  at::Tensor out;  // undefined: no out

  Trajectory(std::unique_ptr<ShardOptimizer> o, const at::Tensor& initial, at::ScalarType out_type)
      : opt(std::move(o)), params(initial.clone()), state(opt->InitState(params)) {
    if (out_type != at::kDouble) out = torch::full({initial.numel()}, -1.0, out_type);
  }

  void Step(const at::Tensor& grads, const StepHyper& hyper) {
    StepExtras extras;
    extras.grad_scale = kGradScale;
    extras.out = out;
    opt->Step(params, grads, state, hyper, extras);
  }
};

// Gradients as the engine hands them over: still multiplied by the loss
// scale (kGradScale undoes it), in `dtype`. Sizes vary per step so that the
// second moments see both large and tiny values; they stay well inside fp16.
at::Tensor ScaledGrads(int64_t n, int step, at::ScalarType dtype) {
  return (torch::randn({n}) * (0.1 * (1 + step % 7)) / kGradScale).to(dtype);
}

void ExpectOutIsRoundedParams(const Trajectory& t, const std::string& what) {
  if (!t.out.defined()) return;
  ExpectBitEqual(t.out, t.params.to(t.out.scalar_type()), what + ": out vs params.to(dtype)");
}

// Fast (generic variant) vs reference with the same gradients, each on its
// own trajectory. The fast path rounds p in float twice per step (decay,
// then update) where the reference rounds once, and while p moves slowly
// those roundings lean the same way, so the params drift apart linearly:
// measured at most 6.1e-8 * step relative beyond 1e-6 + 2e-6 * scale (100
// steps, all optimizers and dtypes). Params tolerance: 1e-6 + 2e-7 * step
// relative (3x headroom) plus 2e-6 * scale. The state does not drift (its
// recurrences forget old rounding): within 2e-6 * scale, checked with
// 1e-5 relative. Adam L2 and Lion have rare ill-conditioned elements (see
// testutil::Tolerance) that differ by whole 2 lr steps.
void CompareFusedFastToReference(const Case& c, int64_t n, int steps, at::ScalarType grad_type,
                                 at::ScalarType out_type) {
  SCOPED_TRACE(c.name + " n=" + std::to_string(n) + " grads " + TypeName(grad_type) + " out " + TypeName(out_type));
  torch::manual_seed(4321 + n);
  const at::Tensor initial = torch::randn({n});
  Trajectory fast(MakeShardOptimizer(c.config, *kernels::KernelsFor(kernels::Isa::kGeneric)), initial, out_type);
  Trajectory ref(MakeShardOptimizer(c.config, Impl::kReference), initial, out_type);
  for (int step = 1; step <= steps; ++step) {
    const at::Tensor grads = ScaledGrads(n, step, grad_type);
    const at::Tensor grads_before = grads.clone();
    fast.Step(grads, LrOnly(c.lr));
    ref.Step(grads, LrOnly(c.lr));
    const std::string when = "after step " + std::to_string(step);
    ExpectOutIsRoundedParams(fast, "fast " + when);
    if (step != 1 && step % 10 != 0 && step != steps) continue;  // the comparisons cost most
    ExpectBitEqual(grads, grads_before, "grads are read only, " + when);
    ExpectOutIsRoundedParams(ref, "reference " + when);
    const double grad_max = n == 0 ? 0.0 : (grads.to(at::kFloat) * kGradScale).abs().max().item<double>();
    ExpectClose(fast.params, ref.params, grad_max,
                Tolerance{1e-6 + 2e-7 * step, 2e-6, 2.0 * c.lr * step, testutil::OutlierFraction(c)}, "params " + when);
    for (const auto& [name, t] : ref.state.tensors) {
      ExpectClose(fast.state.tensors.at(name), t, grad_max,
                  Tolerance{1e-5, 2e-6, 1e-3 * grad_max, testutil::OutlierFraction(c)}, name + " " + when);
    }
  }
  EXPECT_EQ(fast.state.step, steps);
  if (n > 0) {
    EXPECT_FALSE(torch::equal(fast.params, initial)) << "the update moved nothing";
  }
}

// Every (optimizer, grad dtype) pair; `out` cycles through none, fp32, bf16
// and fp16 so each grad dtype meets each out dtype across the optimizers.
template <typename Fn>
void ForEachCombination(const Fn& fn) {
  const std::vector<Case> cases = AllCases();
  for (size_t ci = 0; ci < cases.size(); ++ci) {
    for (size_t gi = 0; gi < 3; ++gi) {
      fn(cases[ci], kGradTypes[gi], kOutTypes[(ci + gi) % 4]);
    }
  }
}

// One intra-op thread: the chunking cannot change a bit (see
// ThreadCountDoesNotChangeTheBits), and on a busy machine OpenMP's barriers
// would cost more than the arithmetic.
TEST(FusedStep, FastMatchesReferenceAtTileAndChunkTails) {
  const ThreadScope threads(1);
  for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{7}, kTile - 1, kTile + 1, kGrain - 1, kGrain + 1, 2 * kGrain - 1,
                    2 * kGrain + 1}) {
    ForEachCombination([&](const Case& c, at::ScalarType g, at::ScalarType o) {
      CompareFusedFastToReference(c, n, /*steps=*/50, g, o);
    });
  }
}

// Each optimizer once over many chunks, its grad and out dtypes rotating.
TEST(FusedStep, FastMatchesReferenceOverManyChunks) {
  const ThreadScope threads(1);
  const std::vector<Case> cases = AllCases();
  for (size_t i = 0; i < cases.size(); ++i) {
    CompareFusedFastToReference(cases[i], kManyChunks, /*steps=*/50, kGradTypes[i % 3], kOutTypes[(i + 1) % 4]);
  }
}

// ForEachChunk really splits across the intra-op pool (at::parallel_for's
// OpenMP region is compiled into the caller, so a build without OpenMP would
// silently run one chunk), at multiples of the tile, covering [0, n) once.
TEST(FusedStep, ChunksAreTileAlignedAndRunOnTheIntraOpPool) {
  const ThreadScope threads(2);
  ASSERT_EQ(at::get_num_threads(), 2);
  const int64_t n = 4 * kGrain + 5;
  std::mutex mu;
  std::vector<std::pair<int64_t, int64_t>> chunks;
  std::set<int> thread_ids;
  internal::ForEachChunk(n, [&](int64_t begin, int64_t end) {
    std::lock_guard<std::mutex> lock(mu);
    chunks.emplace_back(begin, end);
    thread_ids.insert(at::get_thread_num());
  });
  std::sort(chunks.begin(), chunks.end());
  ASSERT_EQ(chunks.size(), 2u) << "two threads, two chunks";
  EXPECT_EQ(thread_ids.size(), 2u) << "both chunks ran on intra-op thread 0";
  int64_t expected_begin = 0;
  for (const auto& [begin, end] : chunks) {
    EXPECT_EQ(begin, expected_begin);
    EXPECT_EQ(begin % kTile, 0) << begin;
    EXPECT_GT(end, begin);
    expected_begin = end;
  }
  EXPECT_EQ(expected_begin, n);
  // Below one grain, the calling thread does it all.
  chunks.clear();
  internal::ForEachChunk(kGrain, [&](int64_t begin, int64_t end) { chunks.emplace_back(begin, end); });
  EXPECT_EQ(chunks, (std::vector<std::pair<int64_t, int64_t>>{{0, kGrain}}));
}

// The same steps with 1, 2 and 3 intra-op threads give the same bits: chunk
// boundaries (multiples of kTile) move, element results do not.
TEST(FusedStep, ThreadCountDoesNotChangeTheBits) {
  for (int64_t n : {2 * kGrain - 1, 2 * kGrain + 1, 3 * kGrain + kTile + 5, kManyChunks}) {
    ForEachCombination([&](const Case& c, at::ScalarType grad_type, at::ScalarType out_type) {
      SCOPED_TRACE(c.name + " n=" + std::to_string(n) + " grads " + TypeName(grad_type) + " out " + TypeName(out_type));
      torch::manual_seed(5 + n);
      const at::Tensor initial = torch::randn({n});
      std::vector<at::Tensor> grads;
      for (int step = 1; step <= 3; ++step) grads.push_back(ScaledGrads(n, step, grad_type));
      std::vector<Trajectory> runs;
      for (int threads = 1; threads <= 3; ++threads) {
        const ThreadScope scope(threads);
        Trajectory t(MakeShardOptimizer(c.config), initial, out_type);
        for (const at::Tensor& g : grads) t.Step(g, LrOnly(c.lr));
        runs.push_back(std::move(t));
      }
      for (size_t i = 1; i < runs.size(); ++i) {
        ExpectBitEqual(runs[i].params, runs[0].params, "params");
        for (const auto& [name, t] : runs[0].state.tensors) {
          ExpectBitEqual(runs[i].state.tensors.at(name), t, name);
        }
        if (runs[0].out.defined()) ExpectBitEqual(runs[i].out, runs[0].out, "out");
      }
    });
  }
}

// The fused step is exactly the unfused LibTorch sequence: widen the
// gradient, multiply by the scale in fp32, step, round the parameters.
TEST(FusedStep, FusedEqualsUnfusedSequenceBitForBit) {
  ForEachCombination([&](const Case& c, at::ScalarType grad_type, at::ScalarType out_type) {
    SCOPED_TRACE(c.name + " grads " + TypeName(grad_type) + " out " + TypeName(out_type));
    const int64_t n = 2 * kGrain + 77;
    torch::manual_seed(11);
    const at::Tensor initial = torch::randn({n});
    Trajectory fused(MakeShardOptimizer(c.config), initial, out_type);
    const auto opt = MakeShardOptimizer(c.config);
    at::Tensor params = initial.clone();
    ShardState state = opt->InitState(params);
    for (int step = 1; step <= 5; ++step) {
      const at::Tensor grads = ScaledGrads(n, step, grad_type);
      fused.Step(grads, LrOnly(c.lr));
      // Tensor * double scales in fp32 for an fp32 tensor (LibTorch rounds
      // the scalar to the tensor's type), as the kernels do.
      opt->Step(params, grads.to(at::kFloat) * kGradScale, state, LrOnly(c.lr));
    }
    ExpectBitEqual(fused.params, params, "params");
    for (const auto& [name, t] : state.tensors) ExpectBitEqual(fused.state.tensors.at(name), t, name);
    if (fused.out.defined()) ExpectBitEqual(fused.out, params.to(out_type), "out");
  });
}

// `isa` against generic, bit for bit, for every optimizer x grad dtype x out
// dtype at tile and chunk tails and over many chunks, 8 steps each.
void ExpectBitIdenticalToGeneric(kernels::Isa isa) {
  const kernels::KernelTable& generic = *kernels::KernelsFor(kernels::Isa::kGeneric);
  const kernels::KernelTable& k = *kernels::KernelsFor(isa);
  const ThreadScope threads(1);
  for (int64_t n :
       {int64_t{0}, int64_t{1}, int64_t{7}, kTile - 1, kTile + 1, 2 * kGrain - 1, 2 * kGrain + 1, kManyChunks}) {
    for (const Case& c : AllCases()) {
      for (at::ScalarType grad_type : kGradTypes) {
        for (at::ScalarType out_type : kOutTypes) {
          SCOPED_TRACE(std::string(kernels::IsaName(isa)) + " " + c.name + " n=" + std::to_string(n) + " grads " +
                       TypeName(grad_type) + " out " + TypeName(out_type));
          torch::manual_seed(99);
          const at::Tensor initial = torch::randn({n});
          Trajectory a(MakeShardOptimizer(c.config, generic), initial, out_type);
          Trajectory b(MakeShardOptimizer(c.config, k), initial, out_type);
          for (int step = 1; step <= 8; ++step) {
            const at::Tensor grads = ScaledGrads(n, step, grad_type);
            a.Step(grads, LrOnly(c.lr));
            b.Step(grads, LrOnly(c.lr));
          }
          ExpectBitEqual(b.params, a.params, "params");
          for (const auto& [name, t] : a.state.tensors) {
            ExpectBitEqual(b.state.tensors.at(name), t, name);
          }
          if (a.out.defined()) ExpectBitEqual(b.out, a.out, "out");
          if (::testing::Test::HasFailure()) return;  // one report, not thousands
        }
      }
    }
  }
}

TEST(FusedStep, Avx2IsBitIdenticalToGeneric) {
  if (kernels::KernelsFor(kernels::Isa::kAvx2) == nullptr) {
    GTEST_SKIP() << "this CPU lacks AVX2/FMA/F16C (or this is not an x86-64 build): the avx2 "
                    "kernels cannot run here";
  }
  ExpectBitIdenticalToGeneric(kernels::Isa::kAvx2);
}

TEST(FusedStep, Avx512IsBitIdenticalToGeneric) {
  if (kernels::KernelsFor(kernels::Isa::kAvx512) == nullptr) {
    GTEST_SKIP() << "this CPU lacks AVX-512 F/BW/VL/DQ (or this is not an x86-64 build): the "
                    "avx512 kernels are built but cannot run here";
  }
  ExpectBitIdenticalToGeneric(kernels::Isa::kAvx512);
}

// Parameters that are NaN (assorted payloads and signs), infinite, zero,
// denormal, the largest finite values and exact bf16 / fp16 ties, passed
// through an AdamW step with lr 0 and zero gradients (p keeps its value; a
// signalling NaN comes out quiet): `out` must be Tensor::to of the updated
// params, NaN bits included, in every variant.
TEST(FusedStep, OutRoundsSpecialValuesLikeTensorTo) {
  const uint32_t bits[] = {0x7FC00000u, 0xFFC00000u, 0x7F800001u, 0x7FC12345u, 0xFFA00001u, 0x7F800000u, 0xFF800000u,
                           0x00000000u, 0x80000000u, 0x00000001u, 0x807FFFFFu, 0x7F7FFFFFu, 0x3F808000u, 0x3F818000u,
                           0x477FF000u, 0x477FEFFFu, 0x33000000u, 0x33000001u, 0x387FE000u, 0x3F801000u};
  constexpr int64_t kRepeats = 2000;  // vector bodies and tails, several tiles
  const int64_t count = static_cast<int64_t>(sizeof(bits) / sizeof(bits[0]));
  at::Tensor initial = torch::empty({count * kRepeats});
  for (int64_t i = 0; i < initial.numel(); ++i) {
    std::memcpy(initial.data_ptr<float>() + i, &bits[(i * 7) % count], sizeof(uint32_t));
  }
  OptimizerConfig config;
  config.type = OptimizerType::kAdamW;
  config.weight_decay = 0.1;
  for (const kernels::KernelTable* k : AvailableKernels()) {
    for (at::ScalarType out_type : {at::kBFloat16, at::kHalf, at::kFloat}) {
      SCOPED_TRACE(std::string(kernels::IsaName(k->isa)) + " out " + TypeName(out_type));
      Trajectory t(MakeShardOptimizer(config, *k), initial, out_type);
      t.Step(torch::zeros({initial.numel()}, at::kBFloat16), LrOnly(0.0));
      ExpectBitEqual(t.out, t.params.to(out_type), "out");
      EXPECT_TRUE(torch::equal(t.params.nan_to_num(0.0, 1e38, -1e38), initial.nan_to_num(0.0, 1e38, -1e38)))
          << "lr 0 must leave the parameters as they were";
    }
  }
}

// grads = 3 (bf16), scale 0.5, SGD lr 1: p moves by exactly 1.5; the
// gradient tensor is not modified; out (fp16) holds the new p.
TEST(FusedStep, GradScaleByHand) {
  OptimizerConfig config = testutil::SgdConfig(0.0, 0.0, false, 0.0);
  for (Impl impl : {Impl::kFast, Impl::kReference}) {
    const auto opt = MakeShardOptimizer(config, impl);
    at::Tensor p = torch::full({9}, 2.0f);
    ShardState s = opt->InitState(p);
    const at::Tensor g = torch::full({9}, 3.0, at::kBFloat16);
    StepExtras extras;
    extras.grad_scale = 0.5;
    extras.out = torch::zeros({9}, at::kHalf);
    opt->Step(p, g, s, LrOnly(1.0), extras);
    EXPECT_TRUE(torch::equal(p, torch::full({9}, 0.5f)));
    EXPECT_TRUE(torch::equal(extras.out, torch::full({9}, 0.5, at::kHalf)));
    EXPECT_TRUE(torch::equal(g, torch::full({9}, 3.0, at::kBFloat16)));
  }
}

// out may be params itself: nothing extra is written, the result is the
// plain step's.
TEST(FusedStep, OutMayBeParamsItself) {
  for (Impl impl : {Impl::kFast, Impl::kReference}) {
    const auto opt = MakeShardOptimizer(testutil::AdamConfig(true, 0.01), impl);
    torch::manual_seed(3);
    at::Tensor a = torch::randn({5000});
    at::Tensor b = a.clone();
    ShardState sa = opt->InitState(a);
    ShardState sb = opt->InitState(b);
    const at::Tensor g = torch::randn({5000});
    StepExtras extras;
    extras.out = a;
    opt->Step(a, g, sa, LrOnly(1e-3), extras);
    opt->Step(b, g, sb, LrOnly(1e-3));
    ExpectBitEqual(a, b, "params");
  }
}

TEST(FusedStep, RejectsBadExtrasAndLeavesEverythingUnchanged) {
  for (Impl impl : {Impl::kFast, Impl::kReference}) {
    const auto opt = MakeShardOptimizer(testutil::AdamConfig(true, 0.0), impl);
    at::Tensor storage = torch::zeros({16});
    at::Tensor p = storage.slice(0, 0, 8);
    ShardState s = opt->InitState(p);
    const at::Tensor g = torch::ones({8}, at::kHalf);
    auto step_with = [&](const at::Tensor& grads, double scale, const at::Tensor& out) {
      StepExtras extras;
      extras.grad_scale = scale;
      extras.out = out;
      opt->Step(p, grads, s, LrOnly(0.1), extras);
    };
    const auto invalid = absl::StatusCode::kInvalidArgument;
    ExpectError(invalid, "grads must be a contiguous float32, bfloat16 or float16",
                [&] { step_with(torch::ones({8}, at::kDouble), 1.0, {}); });
    ExpectError(invalid, "extras.out must be a contiguous float32, bfloat16 or float16",
                [&] { step_with(g, 1.0, torch::zeros({8}, at::kDouble)); });
    ExpectError(invalid, "extras.out has 7 elements", [&] { step_with(g, 1.0, torch::zeros({7}, at::kBFloat16)); });
    ExpectError(invalid, "non-contiguous",
                [&] { step_with(g, 1.0, torch::zeros({16}, at::kHalf).slice(0, 0, 16, 2)); });
    ExpectError(invalid, "extras.out overlaps params", [&] { step_with(g, 1.0, storage.slice(0, 4, 12)); });
    const at::Tensor g32 = torch::ones({8});
    ExpectError(invalid, "extras.out overlaps grads", [&] { step_with(g32, 1.0, g32); });
    ExpectError(invalid, "grad_scale", [&] { step_with(g, std::nan(""), {}); });
    ExpectError(invalid, "grad_scale", [&] { step_with(g, 1e300, {}); });
    ExpectError(absl::StatusCode::kFailedPrecondition, "shares storage with extras.out",
                [&] { step_with(g, 1.0, s.tensors.at("exp_avg")); });
    EXPECT_EQ(s.step, 0);
    EXPECT_TRUE(torch::equal(storage, torch::zeros({16})));
    for (const auto& [name, t] : s.tensors) EXPECT_TRUE(torch::equal(t, torch::zeros({8}))) << name;
  }
}

// State may view memory the optimizer does not own (a swap buffer): Step
// writes through the pointers and never replaces the tensors.
TEST(FusedStep, StateViewingForeignMemoryIsUpdatedInPlace) {
  const int64_t n = 3 * kTile + 5;
  for (Impl impl : {Impl::kFast, Impl::kReference}) {
    const auto opt = MakeShardOptimizer(testutil::AdamConfig(true, 0.01), impl);
    std::vector<float> swap(2 * n, 0.0f);
    torch::manual_seed(8);
    at::Tensor p = torch::randn({n});
    at::Tensor p_owned = p.clone();
    ShardState foreign;
    foreign.tensors["exp_avg"] = at::from_blob(swap.data(), {n});
    foreign.tensors["exp_avg_sq"] = at::from_blob(swap.data() + n, {n});
    ShardState owned = opt->InitState(p_owned);
    for (int step = 0; step < 4; ++step) {
      const at::Tensor g = torch::randn({n}).to(at::kBFloat16);
      StepExtras extras;
      extras.grad_scale = 0.25;
      opt->Step(p, g, foreign, LrOnly(1e-2), extras);
      opt->Step(p_owned, g, owned, LrOnly(1e-2), extras);
    }
    EXPECT_EQ(foreign.tensors.at("exp_avg").data_ptr<float>(), swap.data());
    EXPECT_EQ(foreign.tensors.at("exp_avg_sq").data_ptr<float>(), swap.data() + n);
    ExpectBitEqual(p, p_owned, "params");
    ExpectBitEqual(at::from_blob(swap.data(), {n}), owned.tensors.at("exp_avg"), "exp_avg");
    ExpectBitEqual(at::from_blob(swap.data() + n, {n}), owned.tensors.at("exp_avg_sq"), "exp_avg_sq");
  }
}

}  // namespace
}  // namespace zt::ops
