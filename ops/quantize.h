// Block-wise symmetric quantization for compressed collectives (ZeRO++ qwZ
// and qgZ): the sizes of the wire format, its checks, and the scalar
// reference implementation the per-ISA kernels (ops/kernels.h: QuantFormat,
// KernelTable::quantize / dequantize) are tested against bit for bit. No
// LibTorch.
//
// Block size: DeepSpeed's CUDA quantizer picks a group count per tensor so
// that a group holds just under 8,000 elements (it finds ~4k optimal on its
// GPUs); a CPU kernel has no warps to fill, so zerotorch uses a fixed block
// of elements instead (default 2048: a scale every 8 KiB of fp32 input, 0.2%
// of int8's bytes), the same for every tensor, which also lets a receiver
// split a quantized shard anywhere on a block boundary.
//
//   const QuantFormat f{8, 2048};
//   std::vector<float> scales(QuantScales(n, f));
//   std::vector<uint8_t> q(QuantPayloadBytes(n, f));
//   kernels::ActiveKernels().quantize(x, n, f, scales.data(), q.data());
#pragma once

#include <cstdint>
#include <string>

#include "ops/kernels.h"

namespace zt::ops {

using kernels::QuantFormat;

// "" when usable, else what is wrong ("quantization bits must be 8 or 4, got 5").
std::string CheckQuantFormat(const QuantFormat& f);

inline int64_t QuantScales(int64_t n, const QuantFormat& f) { return (n + f.block - 1) / f.block; }
inline int64_t QuantPayloadBytes(int64_t n, const QuantFormat& f) { return f.bits == 8 ? n : (n + 1) / 2; }
// Scales and payload together: what crosses the wire for n elements.
inline int64_t QuantWireBytes(int64_t n, const QuantFormat& f) {
  return QuantScales(n, f) * static_cast<int64_t>(sizeof(float)) + QuantPayloadBytes(n, f);
}

// The reference: plain loops with the contract's arithmetic (float division
// and multiplication, nearbyint), written for clarity, not speed.
void QuantizeReference(const float* x, int64_t n, const QuantFormat& f, float* scales, uint8_t* payload);
void DequantizeReference(const uint8_t* payload, const float* scales, int64_t n, const QuantFormat& f, float* y,
                         bool accumulate);

// The bound the contract states for one element of a block with `scale`:
// scale / 2 plus float rounding (a relative 1e-4 of scale).
inline float QuantErrorBound(float scale) { return scale * (0.5f + 1e-4f); }

}  // namespace zt::ops
