// Element-wise optimizer kernels over raw arrays: the fast path of every
// ShardOptimizer, compiled once per ISA (generic, AVX2, AVX-512) and chosen at
// run time from the CPU's features. No LibTorch and no threads here.
//
// Each kernel call is one fused pass over memory, tile by tile (kTile
// elements): it reads the gradient (fp32, bf16 or fp16) and scales it,
// updates p and the fp32 state, and optionally writes p rounded to
// bf16/fp16/fp32 into a second array, so every array crosses DRAM once
// (fp16 is converted through an L1-resident tile buffer, the rest inside the
// update loop). The coefficient structs are in double (the values
// torch.optim would compute); a kernel rounds them to float once per call and
// does the per-element arithmetic in float, like torch.optim on fp32 tensors.
//
// Bit identity: the variants are one template source (ops/kernel_loops.h)
// built with -ffp-contract=off, so no multiply-add is fused, and sqrt and
// division are IEEE-exact in every ISA: every variant returns exactly the bits
// of the generic one, whatever the chunking. The one exception is which NaN a
// NaN parameter or state ends up as (x86 keeps the first operand's payload and
// the compiler may order commutative operands differently per ISA); `out`
// canonicalises NaNs, so it is bit-identical even then.
//
// Contract for all kernels: arrays hold `n` elements, do not overlap (the
// gradient and `out` included), and p and the state are updated in place;
// n may be 0. Callers split a shard at multiples of kTile (ForEachChunk in
// ops/optimizer_common.h) and may call a kernel concurrently on disjoint
// chunks.
//
// Usage:
//   const kernels::KernelTable& k = kernels::ActiveKernels();  // throws on a bad ZT_CPU_ISA
//   k.adam(p, kernels::GradIn{g, kernels::DType::kBFloat16, 1.0 / 1024}, m, v,
//          kernels::ParamOut{out_bf16, kernels::DType::kBFloat16, kernels::kBf16QuietNaN}, n,
//          coeffs);
#pragma once

#include <cstdint>
#include <string_view>

namespace zt::ops::kernels {

// Element types of a gradient or of the rounded parameter copy.
enum class DType : uint8_t { kFloat32, kBFloat16, kFloat16 };

constexpr int64_t DTypeSize(DType dtype) { return dtype == DType::kFloat32 ? 4 : 2; }

// Elements per tile: p, m, v, a widened fp16 gradient tile (stack) and the
// rounded copy of one tile stay within a 32 KiB L1 data cache. Callers that
// split a shard across threads cut it at multiples of kTile, so every chunk
// but the last is whole tiles and starts 4 KiB-aligned relative to the shard.
inline constexpr int64_t kTile = 1024;

// The bf16 bits c10::BFloat16's scalar conversion writes for NaN. LibTorch's
// vectorised CPU conversion writes 0xFFFF instead (1.13, AVX2 capability);
// ShardOptimizer passes whichever Tensor::to produces in this process.
inline constexpr uint16_t kBf16QuietNaN = 0x7FC0;

// The gradient of one kernel call: `n` elements of `dtype` at `data`. Each is
// converted to fp32 (exactly) and multiplied by `scale` rounded to float, in
// float, before use; the array itself is only read.
struct GradIn {
  const void* data = nullptr;
  DType dtype = DType::kFloat32;
  double scale = 1.0;
  // The same gradient from element `offset` on (for a chunk of the shard).
  GradIn At(int64_t offset) const { return {static_cast<const char*>(data) + offset * DTypeSize(dtype), dtype, scale}; }
};

// Where a kernel writes the updated parameters rounded to `dtype` (round to
// nearest even, as Tensor::to). fp16 NaN becomes sign | 0x7E00 (c10::Half's
// choice), bf16 NaN becomes `bf16_nan`. Nothing is written when data is null.
struct ParamOut {
  void* data = nullptr;
  DType dtype = DType::kFloat32;
  uint16_t bf16_nan = kBf16QuietNaN;
  ParamOut At(int64_t offset) const {
    if (data == nullptr) return *this;
    return {static_cast<char*>(data) + offset * DTypeSize(dtype), dtype, bf16_nan};
  }
};

// Adam / AdamW for one step. With `decoupled` (AdamW, DeepSpeed adam_w_mode):
//   p <- p * (1 - lr * weight_decay), and g is used as given;
// otherwise (Adam with L2 regularisation):
//   g <- g + weight_decay * p.
// Then
//   m <- beta1 * m + (1 - beta1) * g
//   v <- beta2 * v + (1 - beta2) * g * g
//   p <- p - (lr / bias_correction1) * m / (sqrt(v) / sqrt(bias_correction2) + eps)
// bias_correction{1,2} are 1 - beta^step, or 1 when bias correction is off.
// The float kernel multiplies by 1 / sqrt(bias_correction2) (rounded once).
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

// Adagrad with torch.optim.Adagrad semantics (lr_decay 0):
//   g   <- g + weight_decay * p
//   sum <- sum + g * g
//   p   <- p - lr * g / (sqrt(sum) + eps)
struct AdagradCoeffs {
  double lr = 0.0;
  double eps = 1e-10;
  double weight_decay = 0.0;
};

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

// Block-wise symmetric quantization (ZeRO++'s qwZ / qgZ wire formats): the
// input is cut into blocks of `block` elements (the last may be shorter),
// each with one float scale and `bits`-bit signed integers:
//   qmax  = 127 (8 bits) or 7 (4 bits)
//   amax  = max |x| over the block
//   scale = amax / qmax, and the integers q = round(x * (qmax / amax)),
//           rounded half to even, clamped to [-qmax, qmax];
//   x ~ q * scale, with |x - q * scale| <= scale / 2 up to float rounding
//   (the products and the two divisions: a relative 1e-4 of scale at most).
// A block of zeros (or whose amax is below 2^-120, where qmax / amax would
// overflow) has scale 0 and q 0; a block holding an infinity or NaN
// has scale NaN and q 0, so dequantizing it gives NaN everywhere (a
// non-finite value is never hidden). Payload: 8 bits, one int8 per element;
// 4 bits, two per byte (the even element in the low nibble, two's
// complement), `block` must be even, and an odd last block pads its last
// nibble with 0. ops/quantize.h has the sizes and the scalar reference.
struct QuantFormat {
  int bits = 8;          // 8 or 4
  int64_t block = 2048;  // elements per scale; >= 1 (even for 4 bits)
};

// The instruction sets the kernels are built for. kGeneric is the build
// target's baseline (x86-64 with SSE2, or any other architecture); kAvx2 adds
// AVX2, FMA and F16C (Haswell, Zen and newer); kAvx512 adds AVX-512
// F/BW/VL/DQ with 512-bit vectors (Skylake-SP, Ice Lake, Zen 4 and newer).
enum class Isa { kGeneric, kAvx2, kAvx512 };
inline constexpr Isa kAllIsas[] = {Isa::kGeneric, Isa::kAvx2, Isa::kAvx512};

// "generic", "avx2", "avx512": the spelling ZT_CPU_ISA accepts.
const char* IsaName(Isa isa);

// One ISA variant of every kernel. Function pointers, so the choice is made
// once and a call costs one indirect jump per chunk.
struct KernelTable {
  Isa isa;
  void (*adam)(float* p, GradIn g, float* m, float* v, ParamOut out, int64_t n, const AdamCoeffs& c);
  void (*sgd)(float* p, GradIn g, float* buf, ParamOut out, int64_t n, const SgdCoeffs& c);
  void (*adagrad)(float* p, GradIn g, float* sum, ParamOut out, int64_t n, const AdagradCoeffs& c);
  void (*lion)(float* p, GradIn g, float* m, ParamOut out, int64_t n, const LionCoeffs& c);
  // dst <- src converted to fp32 exactly (src: n elements of `dtype`).
  void (*widen)(const void* src, DType dtype, float* dst, int64_t n);
  // out <- src rounded to out.dtype, with ParamOut's rounding and NaN rules.
  void (*narrow)(const float* src, ParamOut out, int64_t n);
  // The split update (AdamW with decoupled decay, Lion): a first pass
  // updates the state from the fp32 gradient at `g_inc` (multiplied by
  // grad_scale rounded to float) and overwrites it with the step's
  // increment; apply_increment then computes
  //   p <- p * (1 - lr * weight_decay) - increment
  // later, without the state. Together they return exactly the bits of
  // adam (c.decoupled) / lion on the same inputs (and `adam_moments`
  // ignores c.decoupled and c.weight_decay).
  void (*adam_moments)(float* g_inc, double grad_scale, float* m, float* v, int64_t n, const AdamCoeffs& c);
  void (*lion_moments)(float* g_inc, double grad_scale, float* m, int64_t n, const LionCoeffs& c);
  void (*apply_increment)(float* p, const float* inc, int64_t n, double lr, double weight_decay);
  // QuantFormat's quantization of x[0, n): ceil(n / block) scales and the
  // payload (QuantPayloadBytes(n, f) bytes, ops/quantize.h). f must be valid
  // (CheckQuantFormat).
  void (*quantize)(const float* x, int64_t n, QuantFormat f, float* scales, uint8_t* payload);
  // y[i] = q_i * scale (accumulate: y[i] += q_i * scale, the product rounded
  // first: no fused multiply-add).
  void (*dequantize)(const uint8_t* payload, const float* scales, int64_t n, QuantFormat f, float* y, bool accumulate);
};

// The variant for `isa`, or null when this build has no such variant (AVX2
// and AVX-512 exist on x86-64 builds only) or this CPU (with its OS) cannot
// run it. Tests compare every non-null table against the generic one.
const KernelTable* KernelsFor(Isa isa);

// The ISA to use: the best this CPU runs when `requested` is empty, else the
// one it names (the value of ZT_CPU_ISA). Throws zt::Error: InvalidArgument
// for an unknown name; FailedPrecondition, naming the missing CPU features,
// when this build or CPU cannot run it. (No absl::StatusOr here: this header
// is compiled into every ISA variant, and absl's status header brings a
// static iostream initialiser that would be built with AVX-512 flags.)
Isa ChooseIsa(std::string_view requested);

// The kernels every kFast ShardOptimizer uses: ChooseIsa(getenv("ZT_CPU_ISA")),
// decided on the first call and fixed for the life of the process
// (thread-safe). Throws ChooseIsa's zt::Error, on this and every later call,
// when ZT_CPU_ISA names an ISA that cannot be used.
const KernelTable& ActiveKernels();

// ActiveKernels().isa, for logs and benchmark headers; throws like it.
Isa ActiveIsa();

}  // namespace zt::ops::kernels
