// ZeRO++ qwZ's wire format for stage 3's parameter all-gathers
// (zero_optimization.zero_quantized_weights): each rank quantizes its shard
// into one record, the group all-gathers the records as bytes, and every
// rank dequantizes all of them, its own included, so every rank computes
// with the same values. The master weights, the optimizer and the
// checkpoints never see a quantized value: only the gathered (compute) copy
// of the parameters is rounded.
//
// A record is the shard's block scales (floats) followed by its payload
// (ops/quantize.h), padded to a multiple of 4 bytes so that every record of
// a gathered buffer starts aligned for its floats:
//
//   [ scales: QuantScales(n) floats | payload: QuantPayloadBytes(n) | pad ]
//
// Blocks start at each shard's first element, so a record depends only on
// its own shard; hpZ keeps the records of its slice of ranks and gathers
// them again without quantizing twice (zero/param_coordinator.h).
//
// Error: every gathered element is within QuantErrorBound(scale) of the
// shard's value, scale being amax / 127 of its block (8 bits), i.e. at most
// 1/254 of the largest magnitude in its block of 2048 elements; a bf16 or
// fp16 model adds the rounding of the dequantized value to its dtype (half
// a unit in its last place). Those go through fp32 copies (the shard's, and
// the gathered chunk's while it is dequantized): transient memory that
// Engine::memory() does not count.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

#include "ops/quantize.h"

namespace zt::zero {

// The format of qwZ's gathers: int8, one scale per 2048 elements
// (ops/quantize.h says why a fixed block).
inline constexpr ops::QuantFormat kWeightQuantFormat{8, 2048};

// Bytes of one rank's record for a shard of `shard_numel` elements.
int64_t QuantRecordBytes(int64_t shard_numel, const ops::QuantFormat& f);

// The record layout on raw memory, shared with qgZ (zero/quantized_gradients.h):
// writes the scales and payload of x[0, n) at `record` and zeroes its padding
// up to `record_bytes` (>= QuantRecordBytes(n)); reads them back into y
// (added to y when `accumulate`).
void QuantizeRecordInto(const float* x, int64_t n, const ops::QuantFormat& f, uint8_t* record, int64_t record_bytes);
void DequantizeRecordFrom(const uint8_t* record, int64_t n, const ops::QuantFormat& f, float* y, bool accumulate);

// Quantizes `shard` (contiguous fp32, bf16 or fp16; the 16-bit types
// through an fp32 copy)
// into `record` (contiguous uint8 of QuantRecordBytes(shard.numel())).
void QuantizeRecord(const at::Tensor& shard, const ops::QuantFormat& f, const at::Tensor& record);

// Dequantizes the `ranks` records of `wire` (uint8, ranks records in rank
// order) into `flat` (contiguous fp32, bf16 or fp16 of ranks * shard_numel
// elements, rank r's at r * shard_numel).
void DequantizeRecords(const at::Tensor& wire, int ranks, int64_t shard_numel, const ops::QuantFormat& f,
                       const at::Tensor& flat);

}  // namespace zt::zero
