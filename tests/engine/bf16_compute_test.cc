// engine/bf16_compute.h: bf16 tensors computing in fp32. Each kernel against
// its plain reference (upcast, LibTorch's fp32 op, one rounding to bf16),
// bit for bit, with LibTorch's oneDNN off so that its own bf16 kernels are
// the reference loops a CPU without AVX-512 runs; the rounding against a
// float64 truth; LibTorch's kernels back once the last scope ends; and the
// engine's choice wired to the scope.
#include "engine/bf16_compute.h"

#include <ATen/Context.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "comm/single_group.h"
#include "engine/engine.h"
#include "tests/engine/parity_model.h"
#include "tests/testing/test_config.h"

namespace zt {
namespace {

// LibTorch's oneDNN off for one test, restored after.
class OneDnnOff {
 public:
  OneDnnOff() : was_(at::globalContext().userEnabledMkldnn()) { at::globalContext().setUserEnabledMkldnn(false); }
  ~OneDnnOff() { at::globalContext().setUserEnabledMkldnn(was_); }

 private:
  bool was_;
};

torch::Tensor Bf16(std::vector<int64_t> shape) { return torch::randn(shape).to(torch::kBFloat16); }
torch::Tensor F32(const torch::Tensor& t) { return t.to(torch::kFloat); }

void ExpectBitwise(const torch::Tensor& got, const torch::Tensor& want, const std::string& what) {
  ASSERT_EQ(got.scalar_type(), want.scalar_type()) << what;
  ASSERT_EQ(got.sizes(), want.sizes()) << what;
  EXPECT_TRUE(torch::equal(got, want)) << what << ": max difference "
                                       << (F32(got) - F32(want)).abs().max().item<float>();
}

// One GEMM: its bf16 form under the scope, its plain reference (the fp32 op
// on upcast inputs, rounded once) and the float64 truth.
struct Gemm {
  std::string name;
  std::function<torch::Tensor(const std::vector<torch::Tensor>&)> op;
  std::vector<torch::Tensor> inputs;  // bf16
  // LibTorch's bf16 loop for this layout accumulates in bf16, so its bits
  // differ from the scope's (for a transposed second operand it accumulates
  // in fp32 and gives the same bits, only slower).
  bool libtorch_differs = true;
};

std::vector<Gemm> Gemms() {
  // Sizes that leave tails for any blocking (odd, prime).
  return {
      {"mm", [](const auto& t) { return torch::mm(t[0], t[1]); }, {Bf16({37, 53}), Bf16({53, 29})}},
      {"mm transposed", [](const auto& t) { return torch::mm(t[0].t(), t[1]); }, {Bf16({53, 37}), Bf16({53, 29})}},
      {"addmm",
       [](const auto& t) { return torch::addmm(t[0], t[1], t[2], 0.5, 2.0); },
       {Bf16({29}), Bf16({37, 53}), Bf16({53, 29})}},
      {"bmm", [](const auto& t) { return torch::bmm(t[0], t[1]); }, {Bf16({3, 17, 31}), Bf16({3, 31, 11})}},
      {"baddbmm",
       [](const auto& t) { return torch::baddbmm(t[0], t[1], t[2], 1.0, 0.25); },
       {Bf16({3, 17, 11}), Bf16({3, 17, 31}), Bf16({3, 31, 11})}},
      // Without a bias: LibTorch's 3-D linear adds it after the GEMM, in bf16.
      {"linear 3-D",
       [](const auto& t) { return torch::nn::functional::linear(t[0], t[1]); },
       {Bf16({2, 19, 301}), Bf16({29, 301})},
       /*libtorch_differs=*/false},
      {"matmul 4-D",
       [](const auto& t) { return torch::matmul(t[0], t[1]); },
       {Bf16({2, 3, 17, 31}), Bf16({2, 3, 31, 13})}},
  };
}

TEST(Fp32ComputeForBf16, GemmsEqualTheirFp32ReferenceRoundedOnce) {
  OneDnnOff off;
  torch::manual_seed(7);
  for (const Gemm& g : Gemms()) {
    std::vector<torch::Tensor> up, wide;
    for (const torch::Tensor& t : g.inputs) {
      up.push_back(F32(t));
      wide.push_back(t.to(torch::kDouble));
    }
    const torch::Tensor reference = g.op(up).to(torch::kBFloat16);  // fp32 inputs: LibTorch's kernels
    const torch::Tensor libtorch_bf16 = g.op(g.inputs);
    torch::Tensor scoped;
    {
      Fp32ComputeForBf16 scope;
      scoped = g.op(g.inputs);
      // fp32 tensors are not touched.
      ExpectBitwise(g.op(up), g.op(up).clone(), g.name + " fp32 under the scope");
    }
    ExpectBitwise(scoped, reference, g.name);
    // The rounding: within half a bf16 ulp of the float64 truth, plus what
    // fp32 accumulation may add (far below it at these sizes).
    const torch::Tensor truth = g.op(wide);
    const torch::Tensor err = (scoped.to(torch::kDouble) - truth).abs();
    const torch::Tensor bound = truth.abs() * std::ldexp(1.0, -8) + 1e-6;
    EXPECT_TRUE(err.le(bound).all().item<bool>()) << g.name << ": worst error " << err.max().item<double>();
    // LibTorch's own bf16 loops accumulate in bf16: not these bits (so the
    // kernels above were the scope's, not LibTorch's).
    if (g.libtorch_differs) {
      EXPECT_FALSE(torch::equal(libtorch_bf16, scoped)) << g.name << ": LibTorch's bf16 kernel gave the same bits";
    }
    ExpectBitwise(g.op(g.inputs), libtorch_bf16, g.name + " after the scope");
  }
}

TEST(Fp32ComputeForBf16, LayerNormForwardAndBackwardEqualFp32RoundedOnce) {
  torch::manual_seed(11);
  const torch::Tensor x = Bf16({5, 7, 33}) * 3 + 1;
  const torch::Tensor w = Bf16({33});
  const torch::Tensor b = Bf16({33});
  const torch::Tensor g = Bf16({5, 7, 33});
  // Reference: fp32 leaves, fp32 layer norm, gradients rounded once.
  torch::Tensor x32 = F32(x).requires_grad_(), w32 = F32(w).requires_grad_(), b32 = F32(b).requires_grad_();
  const torch::Tensor y32 = torch::layer_norm(x32, {33}, w32, b32, 1e-5);
  y32.backward(F32(g));

  torch::Tensor xb = x.clone().requires_grad_(), wb = w.clone().requires_grad_(), bb = b.clone().requires_grad_();
  torch::Tensor yb;
  {
    Fp32ComputeForBf16 scope;
    yb = torch::layer_norm(xb, {33}, wb, bb, 1e-5);
    yb.backward(g);
  }
  ExpectBitwise(yb.detach(), y32.detach().to(torch::kBFloat16), "layer_norm output");
  ExpectBitwise(xb.grad(), x32.grad().to(torch::kBFloat16), "grad of the input");
  ExpectBitwise(wb.grad(), w32.grad().to(torch::kBFloat16), "grad of the weight");
  ExpectBitwise(bb.grad(), b32.grad().to(torch::kBFloat16), "grad of the bias");
}

// GELU (exact and tanh) and SiLU: fp32 inside, one rounding out, forward
// and backward. (LibTorch's own bf16 kernels compute these in float too,
// only slower, so the bits alone cannot tell whose kernel ran.)
TEST(Fp32ComputeForBf16, ActivationsForwardAndBackwardEqualFp32RoundedOnce) {
  torch::manual_seed(17);
  const torch::Tensor x = Bf16({9, 67}) * 2;
  const torch::Tensor g = Bf16({9, 67});
  const std::vector<std::pair<std::string, std::function<torch::Tensor(const torch::Tensor&)>>> ops = {
      {"gelu", [](const torch::Tensor& t) { return torch::gelu(t); }},
      {"gelu tanh", [](const torch::Tensor& t) { return torch::gelu(t, "tanh"); }},
      {"silu", [](const torch::Tensor& t) { return torch::silu(t); }},
  };
  for (const auto& [name, op] : ops) {
    torch::Tensor x32 = F32(x).requires_grad_();
    const torch::Tensor y32 = op(x32);
    y32.backward(F32(g));
    torch::Tensor xb = x.clone().requires_grad_();
    torch::Tensor yb;
    {
      Fp32ComputeForBf16 scope;
      yb = op(xb);
      yb.backward(g);
    }
    ExpectBitwise(yb.detach(), y32.detach().to(torch::kBFloat16), name);
    ExpectBitwise(xb.grad(), x32.grad().to(torch::kBFloat16), name + " gradient");
  }
}

TEST(Fp32ComputeForBf16, BackwardOfAGemmComputesInFp32Too) {
  OneDnnOff off;
  torch::manual_seed(13);
  const torch::Tensor a = Bf16({23, 41}), bmat = Bf16({41, 19}), g = Bf16({23, 19});
  torch::Tensor a32 = F32(a).requires_grad_(), b32 = F32(bmat).requires_grad_();
  torch::mm(a32, b32).backward(F32(g));
  torch::Tensor ab = a.clone().requires_grad_(), bb = bmat.clone().requires_grad_();
  {
    Fp32ComputeForBf16 scope;
    torch::mm(ab, bb).backward(g);
  }
  // mm's backward is two mms of bf16 tensors: each the fp32 product rounded once.
  ExpectBitwise(ab.grad(), a32.grad().to(torch::kBFloat16), "grad of mat1");
  ExpectBitwise(bb.grad(), b32.grad().to(torch::kBFloat16), "grad of mat2");
}

// Layer norm's saved mean and rstd are fp32: a graph built under the scope
// whose backward runs after the last scope is gone reaches LibTorch's bf16
// kernel with them, which refuses by dtype -- loud, not a silently wrong
// gradient.
TEST(Fp32ComputeForBf16, ABackwardAfterTheScopeEndedIsRefusedNotWrong) {
  torch::Tensor x = Bf16({4, 33}).requires_grad_();
  torch::Tensor y;
  {
    Fp32ComputeForBf16 scope;
    y = torch::layer_norm(x, {33}, Bf16({33}), {}, 1e-5);
  }
  EXPECT_THROW(y.sum().backward(), c10::Error);
}

TEST(Fp32ComputeForBf16, ScopesNestAndTheLastRestoresLibTorchsKernels) {
  EXPECT_FALSE(Fp32ComputeForBf16::Active());
  {
    std::optional<Fp32ComputeForBf16> outer(std::in_place);
    {
      Fp32ComputeForBf16 inner;
      EXPECT_TRUE(Fp32ComputeForBf16::Active());
    }
    EXPECT_TRUE(Fp32ComputeForBf16::Active());
    outer.reset();
    EXPECT_FALSE(Fp32ComputeForBf16::Active());
  }
  // A second registration after the first is gone works the same.
  OneDnnOff off;
  const torch::Tensor a = Bf16({9, 300}), b = Bf16({300, 7});
  const torch::Tensor reference = torch::mm(F32(a), F32(b)).to(torch::kBFloat16);
  Fp32ComputeForBf16 again;
  ExpectBitwise(torch::mm(a, b), reference, "mm in a second scope");
}

// The engine: bf16 with kAuto where LibTorch's bf16 GEMM would be its
// reference loops (oneDNN off) computes in fp32 while the engine lives;
// kBf16 and fp32 models leave LibTorch's kernels alone.
TEST(EngineBf16Compute, TheEnginesChoiceHoldsTheScopeWhileItLives) {
  OneDnnOff off;
  struct Case {
    bool bf16;
    Bf16Compute compute;
    bool expect_fp32_kernels;
  };
  for (const Case& c : {Case{true, Bf16Compute::kAuto, true}, Case{true, Bf16Compute::kFp32, true},
                        Case{true, Bf16Compute::kBf16, false}, Case{false, Bf16Compute::kFp32, false}}) {
    testing::ParityNet model;
    Config config = testing::TestConfig(3, /*micro_batch=*/4, /*accumulation=*/1);
    config.bf16.enabled = c.bf16;
    EngineOptions options;
    options.bf16_compute = c.compute;
    {
      auto engine = Engine::Create(model, config, std::make_shared<comm::SingleGroup>(), options);
      ASSERT_TRUE(engine.ok()) << engine.status();
      EXPECT_EQ(Fp32ComputeForBf16::Active(), c.expect_fp32_kernels)
          << "bf16 " << c.bf16 << " compute " << Bf16ComputeName(c.compute);
      // It trains: forward and backward through the model's GEMMs.
      torch::Tensor x = torch::randn({4, 13});
      if (c.bf16) x = x.to(torch::kBFloat16);
      (*engine)->Backward(model->forward(x).to(torch::kFloat).pow(2).mean());
      (*engine)->Step();
      EXPECT_EQ((*engine)->global_steps(), 1);
    }
    EXPECT_FALSE(Fp32ComputeForBf16::Active());
  }
}

}  // namespace
}  // namespace zt
