// Implementation of zero/quantized_weights.h.
#include "zero/quantized_weights.h"

#include <ATen/ATen.h>

#include <cstring>

#include "ops/kernels.h"
#include "util/error.h"

namespace zt::zero {
namespace {

// The fp32 values of `t` (itself when already fp32).
at::Tensor AsFloat(const at::Tensor& t) { return t.scalar_type() == at::kFloat ? t : t.to(at::kFloat); }

void CheckFloating(const at::Tensor& t, const char* what) {
  ZT_CHECK_MSG(t.is_contiguous() &&
                   (t.scalar_type() == at::kFloat || t.scalar_type() == at::kBFloat16 || t.scalar_type() == at::kHalf),
               what);
}

}  // namespace

int64_t QuantRecordBytes(int64_t shard_numel, const ops::QuantFormat& f) {
  const int64_t bytes = ops::QuantWireBytes(shard_numel, f);
  return (bytes + 3) / 4 * 4;
}

void QuantizeRecordInto(const float* x, int64_t n, const ops::QuantFormat& f, uint8_t* record, int64_t record_bytes) {
  auto* scales = reinterpret_cast<float*>(record);
  uint8_t* payload = record + ops::QuantScales(n, f) * static_cast<int64_t>(sizeof(float));
  if (n > 0) ops::kernels::ActiveKernels().quantize(x, n, f, scales, payload);
  // The padding travels too: zero it, so the wire never carries stale memory.
  const int64_t used = ops::QuantWireBytes(n, f);
  if (record_bytes > used) std::memset(record + used, 0, static_cast<size_t>(record_bytes - used));
}

void DequantizeRecordFrom(const uint8_t* record, int64_t n, const ops::QuantFormat& f, float* y, bool accumulate) {
  if (n == 0) return;
  const int64_t scale_bytes = ops::QuantScales(n, f) * static_cast<int64_t>(sizeof(float));
  ops::kernels::ActiveKernels().dequantize(record + scale_bytes, reinterpret_cast<const float*>(record), n, f, y,
                                           accumulate);
}

void QuantizeRecord(const at::Tensor& shard, const ops::QuantFormat& f, const at::Tensor& record) {
  CheckFloating(shard, "qwZ: a shard to quantize must be contiguous fp32, bf16 or fp16");
  const int64_t n = shard.numel();
  ZT_CHECK_MSG(record.is_contiguous() && record.scalar_type() == at::kByte && record.numel() == QuantRecordBytes(n, f),
               "qwZ: the record buffer does not match the shard");
  const at::Tensor x = AsFloat(shard);
  QuantizeRecordInto(x.data_ptr<float>(), n, f, record.data_ptr<uint8_t>(), record.numel());
}

void DequantizeRecords(const at::Tensor& wire, int ranks, int64_t shard_numel, const ops::QuantFormat& f,
                       const at::Tensor& flat) {
  CheckFloating(flat, "qwZ: the gathered parameters must be contiguous fp32, bf16 or fp16");
  const int64_t record = QuantRecordBytes(shard_numel, f);
  ZT_CHECK_MSG(wire.is_contiguous() && wire.scalar_type() == at::kByte && wire.numel() == ranks * record &&
                   flat.numel() == ranks * shard_numel,
               "qwZ: the gathered records do not match the parameters");
  if (shard_numel == 0) return;
  at::Tensor y = flat.scalar_type() == at::kFloat ? flat : at::empty({flat.numel()}, flat.options().dtype(at::kFloat));
  const auto* bytes = wire.data_ptr<uint8_t>();
  for (int r = 0; r < ranks; ++r) {
    DequantizeRecordFrom(bytes + r * record, shard_numel, f, y.data_ptr<float>() + r * shard_numel,
                         /*accumulate=*/false);
  }
  if (!y.is_same(flat)) flat.copy_(y);
}

}  // namespace zt::zero
