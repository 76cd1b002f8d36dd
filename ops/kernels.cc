// The fast optimizer kernels declared in ops/kernels.h: fused, branch-free
// loops over restrict pointers that GCC vectorises at -O3 for the baseline ISA
// of the build (compile flags in ops/CMakeLists.txt). No LibTorch here.
#include "ops/kernels.h"

#include <cmath>

namespace zt::ops::kernels {
namespace {

// Coefficients rounded to float once per call. Per-element work then stays in
// float, which is what torch.optim does on fp32 tensors.
struct AdamFloat {
  float beta1, one_minus_beta1, beta2, one_minus_beta2;
  float step_size;     // lr / bias_correction1
  float inv_sqrt_bc2;  // 1 / sqrt(bias_correction2)
  float eps;
  float l2;     // weight decay folded into the gradient (Adam)
  float decay;  // 1 - lr * weight_decay (AdamW)
};

template <bool kDecoupled>
void AdamLoop(float* __restrict p, const float* __restrict g, float* __restrict m,
              float* __restrict v, int64_t n, const AdamFloat k) {
  for (int64_t i = 0; i < n; ++i) {
    float pi = p[i];
    float gi = g[i];
    if constexpr (kDecoupled) {
      pi = pi * k.decay;
    } else {
      gi = gi + k.l2 * pi;
    }
    const float mi = k.beta1 * m[i] + k.one_minus_beta1 * gi;
    const float vi = k.beta2 * v[i] + k.one_minus_beta2 * (gi * gi);
    const float denom = std::sqrt(vi) * k.inv_sqrt_bc2 + k.eps;
    m[i] = mi;
    v[i] = vi;
    p[i] = pi - k.step_size * (mi / denom);
  }
}

struct SgdFloat {
  float lr, weight_decay, momentum, one_minus_dampening;
};

// kMomentum=false ignores buf. kFirst initialises buf with d (torch clones
// the first gradient into the buffer instead of decaying a zero buffer).
template <bool kMomentum, bool kNesterov, bool kFirst>
void SgdLoop(float* __restrict p, const float* __restrict g, float* __restrict buf, int64_t n,
             const SgdFloat k) {
  for (int64_t i = 0; i < n; ++i) {
    const float pi = p[i];
    const float d = g[i] + k.weight_decay * pi;
    if constexpr (!kMomentum) {
      p[i] = pi - k.lr * d;
    } else {
      float b;
      if constexpr (kFirst) {
        b = d;
      } else {
        b = k.momentum * buf[i] + k.one_minus_dampening * d;
      }
      buf[i] = b;
      if constexpr (kNesterov) {
        p[i] = pi - k.lr * (d + k.momentum * b);
      } else {
        p[i] = pi - k.lr * b;
      }
    }
  }
}

template <bool kMomentum, bool kNesterov>
void SgdDispatchFirst(float* p, const float* g, float* buf, int64_t n, const SgdFloat& k,
                      bool first) {
  if (first) {
    SgdLoop<kMomentum, kNesterov, true>(p, g, buf, n, k);
  } else {
    SgdLoop<kMomentum, kNesterov, false>(p, g, buf, n, k);
  }
}

}  // namespace

void AdamStep(float* p, const float* g, float* m, float* v, int64_t n, const AdamCoeffs& c) {
  const AdamFloat k{
      static_cast<float>(c.beta1),
      static_cast<float>(1.0 - c.beta1),
      static_cast<float>(c.beta2),
      static_cast<float>(1.0 - c.beta2),
      static_cast<float>(c.lr / c.bias_correction1),
      static_cast<float>(1.0 / std::sqrt(c.bias_correction2)),
      static_cast<float>(c.eps),
      static_cast<float>(c.weight_decay),
      static_cast<float>(1.0 - c.lr * c.weight_decay),
  };
  if (c.decoupled) {
    AdamLoop<true>(p, g, m, v, n, k);
  } else {
    AdamLoop<false>(p, g, m, v, n, k);
  }
}

void SgdStep(float* p, const float* g, float* buf, int64_t n, const SgdCoeffs& c) {
  const SgdFloat k{static_cast<float>(c.lr), static_cast<float>(c.weight_decay),
                   static_cast<float>(c.momentum), static_cast<float>(1.0 - c.dampening)};
  if (c.momentum == 0.0) {
    SgdLoop<false, false, false>(p, g, buf, n, k);
  } else if (c.nesterov) {
    SgdDispatchFirst<true, true>(p, g, buf, n, k, c.first_step);
  } else {
    SgdDispatchFirst<true, false>(p, g, buf, n, k, c.first_step);
  }
}

void AdagradStep(float* __restrict p, const float* __restrict g, float* __restrict sum, int64_t n,
                 const AdagradCoeffs& c) {
  const float lr = static_cast<float>(c.lr);
  const float eps = static_cast<float>(c.eps);
  const float wd = static_cast<float>(c.weight_decay);
  for (int64_t i = 0; i < n; ++i) {
    const float pi = p[i];
    const float gi = g[i] + wd * pi;
    const float s = sum[i] + gi * gi;
    sum[i] = s;
    p[i] = pi - lr * (gi / (std::sqrt(s) + eps));
  }
}

void LionStep(float* __restrict p, const float* __restrict g, float* __restrict m, int64_t n,
              const LionCoeffs& c) {
  const double beta1 = c.beta1;
  const double one_minus_beta1 = 1.0 - c.beta1;
  const float beta2 = static_cast<float>(c.beta2);
  const float one_minus_beta2 = static_cast<float>(1.0 - c.beta2);
  const float lr = static_cast<float>(c.lr);
  const float decay = static_cast<float>(1.0 - c.lr * c.weight_decay);
  for (int64_t i = 0; i < n; ++i) {
    const float mi = m[i];
    const float gi = g[i];
    const double u = beta1 * static_cast<double>(mi) + one_minus_beta1 * static_cast<double>(gi);
    // Written as two selects: GCC does not vectorise the bool-to-int form.
    const float sign = (u > 0.0 ? 1.0f : 0.0f) - (u < 0.0 ? 1.0f : 0.0f);
    p[i] = p[i] * decay - lr * sign;
    m[i] = beta2 * mi + one_minus_beta2 * gi;
  }
}

}  // namespace zt::ops::kernels
