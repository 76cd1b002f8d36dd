// Element-wise optimizer kernels over raw fp32 arrays: the fast path of every
// ShardOptimizer. No LibTorch and no threads here; callers split the shard
// into chunks (at::parallel_for) and call one kernel per chunk.
//
// Each kernel is one fused pass over memory: it reads p, g and the state once
// and writes p and the state once. The coefficient structs are in double (the
// values torch.optim would compute); a kernel rounds them to float once per
// call and does the per-element arithmetic in float, like torch.optim on fp32
// tensors. Kernels are plain loops that GCC auto-vectorises (kernels.cc is
// compiled with -O3 -fno-math-errno); a later SIMD variant chosen at run time
// can replace any of them as long as it keeps the signature and the formula.
//
// Contract for all kernels: arrays hold `n` elements, do not overlap, and are
// updated in place; n may be 0.
#pragma once

#include <cstdint>

namespace zt::ops::kernels {

// Adam / AdamW for one step. With `decoupled` (AdamW, DeepSpeed adam_w_mode):
//   p <- p * (1 - lr * weight_decay), and g is used as given;
// otherwise (Adam with L2 regularisation):
//   g <- g + weight_decay * p.
// Then
//   m <- beta1 * m + (1 - beta1) * g
//   v <- beta2 * v + (1 - beta2) * g * g
//   p <- p - (lr / bias_correction1) * m / (sqrt(v) / sqrt(bias_correction2) + eps)
// bias_correction{1,2} are 1 - beta^step, or 1 when bias correction is off.
struct AdamCoeffs {
  double lr = 0.0;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
  bool decoupled = true;
  double bias_correction1 = 1.0;
  double bias_correction2 = 1.0;
};
void AdamStep(float* p, const float* g, float* m, float* v, int64_t n, const AdamCoeffs& c);

// SGD with torch.optim.SGD semantics:
//   d <- g + weight_decay * p
//   if momentum != 0:
//     buf <- d on the buffer's first step, else momentum * buf + (1 - dampening) * d
//     d   <- nesterov ? d + momentum * buf : buf
//   p <- p - lr * d
// `buf` is ignored (may be null) when momentum == 0.
struct SgdCoeffs {
  double lr = 0.0;
  double weight_decay = 0.0;
  double momentum = 0.0;
  double dampening = 0.0;
  bool nesterov = false;
  bool first_step = false;  // initialise buf with d (torch clones the gradient)
};
void SgdStep(float* p, const float* g, float* buf, int64_t n, const SgdCoeffs& c);

// Adagrad with torch.optim.Adagrad semantics (lr_decay 0):
//   g   <- g + weight_decay * p
//   sum <- sum + g * g
//   p   <- p - lr * g / (sqrt(sum) + eps)
struct AdagradCoeffs {
  double lr = 0.0;
  double eps = 1e-10;
  double weight_decay = 0.0;
};
void AdagradStep(float* p, const float* g, float* sum, int64_t n, const AdagradCoeffs& c);

// Lion (Chen et al. 2023; DeepSpeed's FusedLion / CPU Lion), decoupled decay:
//   c <- beta1 * m + (1 - beta1) * g
//   p <- p * (1 - lr * weight_decay) - lr * sign(c)   (sign(0) = 0)
//   m <- beta2 * m + (1 - beta2) * g
// c is formed in double so that its sign, which moves p by a whole lr, does
// not depend on float rounding (the fast and reference paths agree exactly).
struct LionCoeffs {
  double lr = 0.0;
  double beta1 = 0.9;
  double beta2 = 0.99;
  double weight_decay = 0.0;
};
void LionStep(float* p, const float* g, float* m, int64_t n, const LionCoeffs& c);

}  // namespace zt::ops::kernels
