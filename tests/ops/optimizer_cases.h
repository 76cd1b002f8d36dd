// Shared by the ops tests: one configuration per optimizer variant (every
// kernel template instance: Adam L2 / decoupled / no bias correction, AdamW,
// four SGD flavours, Adagrad, Lion), and the comparisons they use.
// Header-only; each test binary includes it once.
#pragma once

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "config/config.h"
#include "ops/kernels.h"
#include "ops/shard_optimizer.h"
#include "util/error.h"

namespace zt::ops::testutil {

inline StepHyper LrOnly(double lr) {
  StepHyper h;
  h.lr = lr;
  return h;
}

struct Case {
  std::string name;
  OptimizerConfig config;
  double lr;
  // Some elements' updates hinge on a value within a rounding of zero (see
  // Tolerance), so fast and reference may disagree there by whole lr steps.
  bool ill_conditioned = false;
};

inline OptimizerConfig AdamConfig(bool adam_w_mode, double weight_decay, bool bias_correction = true) {
  OptimizerConfig c;
  c.type = OptimizerType::kAdam;
  c.adam_w_mode = adam_w_mode;
  c.weight_decay = weight_decay;
  c.bias_correction = bias_correction;
  return c;
}

inline OptimizerConfig SgdConfig(double momentum, double dampening, bool nesterov, double weight_decay) {
  OptimizerConfig c;
  c.type = OptimizerType::kSGD;
  c.momentum = momentum;
  c.dampening = dampening;
  c.nesterov = nesterov;
  c.weight_decay = weight_decay;
  return c;
}

inline std::vector<Case> AllCases() {
  std::vector<Case> cases;
  cases.push_back({"AdamL2", AdamConfig(false, 0.05), 1e-2, /*ill_conditioned=*/true});
  cases.push_back({"AdamDecoupled", AdamConfig(true, 0.05), 1e-2});
  OptimizerConfig adamw = AdamConfig(true, 0.1);
  adamw.type = OptimizerType::kAdamW;
  cases.push_back({"AdamW", adamw, 3e-3});
  cases.push_back({"AdamNoBiasCorrection", AdamConfig(true, 0.01, false), 1e-3});
  cases.push_back({"SgdPlain", SgdConfig(0.0, 0.0, false, 0.0), 0.1});
  cases.push_back({"SgdMomentumDecay", SgdConfig(0.9, 0.0, false, 1e-2), 0.05});
  cases.push_back({"SgdDampening", SgdConfig(0.9, 0.3, false, 0.0), 0.05});
  cases.push_back({"SgdNesterov", SgdConfig(0.8, 0.0, true, 1e-3), 0.05});
  OptimizerConfig adagrad;
  adagrad.type = OptimizerType::kAdagrad;
  adagrad.eps = 1e-10;
  adagrad.weight_decay = 0.01;
  adagrad.initial_accumulator_value = 0.1;
  cases.push_back({"Adagrad", adagrad, 0.05});
  OptimizerConfig lion;
  lion.type = OptimizerType::kLion;
  lion.betas = {0.9, 0.99};
  lion.weight_decay = 0.1;
  cases.push_back({"Lion", lion, 1e-4, /*ill_conditioned=*/true});
  return cases;
}

// The ISA variants this CPU runs, generic first.
inline std::vector<const kernels::KernelTable*> AvailableKernels() {
  std::vector<const kernels::KernelTable*> out;
  for (kernels::Isa isa : kernels::kAllIsas) {
    if (const kernels::KernelTable* k = kernels::KernelsFor(isa)) out.push_back(k);
  }
  return out;
}

// How far the fast path may drift from the double-precision reference.
// Each element must satisfy
//   |fast - ref| <= rel * |ref| + abs * scale,
// scale = max(max|ref|, grad_scale), which bounds the terms that formed it
// (a momentum that cancels to near zero was formed from gradient-sized
// terms). Ill-conditioned elements are the exception: where Adam's
// L2-decayed gradient g + wd * p cancels to ~eps, or where Lion's
// interpolated momentum is within a rounding of zero, one float ulp changes
// the update by up to 2 lr, and the difference then carries into later
// steps. Up to ceil(outlier_fraction * n) elements may exceed the bound
// above (none for well-conditioned optimizers), and each such element must
// still lie within `outlier_bound`.
struct Tolerance {
  double rel = 1e-6;
  double abs = 2e-6;
  double outlier_bound = 0.0;
  double outlier_fraction = 0.0;
};

// One element in 10^5 for ill-conditioned cases (measured: 1 of 2^20 for
// Adam with L2 decay after 5 steps; 1 of 10^5 for Lion after 100), else none.
inline double OutlierFraction(const Case& c) { return c.ill_conditioned ? 1e-5 : 0.0; }

inline void ExpectClose(const at::Tensor& fast, const at::Tensor& ref, double grad_scale, const Tolerance& tol,
                        const std::string& what) {
  ASSERT_EQ(fast.numel(), ref.numel()) << what;
  const at::Tensor f = fast.contiguous();
  const at::Tensor r = ref.contiguous();
  const float* a = f.data_ptr<float>();
  const float* b = r.data_ptr<float>();
  double scale = grad_scale;
  for (int64_t i = 0; i < r.numel(); ++i) scale = std::max(scale, std::abs(double{b[i]}));
  int64_t outliers = 0;
  int64_t worst = -1;
  double worst_diff = 0.0;
  for (int64_t i = 0; i < r.numel(); ++i) {
    const double diff = std::abs(double{a[i]} - double{b[i]});
    if (!(diff <= tol.rel * std::abs(double{b[i]}) + tol.abs * scale)) {
      ++outliers;
      if (!(diff <= worst_diff)) {
        worst_diff = diff;
        worst = i;
      }
    }
  }
  const auto allowed = static_cast<int64_t>(std::ceil(tol.outlier_fraction * static_cast<double>(r.numel())));
  EXPECT_LE(outliers, allowed) << what << ": " << outliers << " elements off; worst at " << worst << ": fast "
                               << (worst >= 0 ? a[worst] : 0.f) << " vs reference " << (worst >= 0 ? b[worst] : 0.f);
  EXPECT_LE(worst_diff, tol.outlier_bound) << what << ": element " << worst << " is off by " << worst_diff;
}

// Bitwise equality (NaNs included), reporting the first differing element.
inline void ExpectBitEqual(const at::Tensor& a, const at::Tensor& b, const std::string& what) {
  ASSERT_EQ(a.numel(), b.numel()) << what;
  ASSERT_EQ(a.scalar_type(), b.scalar_type()) << what;
  if (a.numel() == 0) return;
  // Compared as integers of the same width, so NaN == NaN when the bits match.
  const at::ScalarType bits = a.element_size() == 4 ? at::kInt : at::kShort;
  ASSERT_TRUE(a.element_size() == 4 || a.element_size() == 2) << what;
  const at::Tensor x = a.contiguous().view(bits);
  const at::Tensor y = b.contiguous().view(bits);
  if (torch::equal(x, y)) return;
  const int64_t i = (x != y).nonzero()[0][0].item<int64_t>();
  ADD_FAILURE() << what << ": first difference at element " << i << " of " << x.numel() << ": " << a[i].item<double>()
                << " vs " << b[i].item<double>() << " (bits " << x[i].item<int64_t>() << " vs " << y[i].item<int64_t>()
                << ")";
}

// Runs `fn`, expecting a zt::Error with `code` whose message mentions `fragment`.
template <typename Fn>
void ExpectError(absl::StatusCode code, const std::string& fragment, Fn fn) {
  try {
    fn();
    ADD_FAILURE() << "expected an error mentioning '" << fragment << "'";
  } catch (const Error& e) {
    EXPECT_EQ(e.status().code(), code) << e.what();
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

}  // namespace zt::ops::testutil
