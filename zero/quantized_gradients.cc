// Implementation of zero/quantized_gradients.h.
#include "zero/quantized_gradients.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "comm/process_group.h"
#include "ops/kernels.h"
#include "util/error.h"
#include "zero/quantized_weights.h"

namespace zt::zero {
namespace {

float* RecordScales(uint8_t* record) { return reinterpret_cast<float*>(record); }
}  // namespace

ErrorFeedback::ErrorFeedback(int64_t numel, int world, ErrorFeedbackOptions options)
    : record_bytes_(QuantRecordBytes(comm::ShardSize(numel, world), kFeedbackQuantFormat)), options_(options) {
  ZT_CHECK(options.err_beta >= 0 && options.err_beta <= 1 && options.reset_t >= 1);
  records_ = at::zeros({world * record_bytes_}, at::TensorOptions().dtype(at::kByte));
  for (int r = 0; r < world; ++r)
    lengths_.push_back(comm::ShardEnd(numel, world, r) - comm::ShardBegin(numel, world, r));
}

void ErrorFeedback::Scale(double factor) {
  if (!valid_) return;
  auto* base = records_.data_ptr<uint8_t>();
  for (size_t d = 0; d < lengths_.size(); ++d) {
    float* scales = RecordScales(base + static_cast<int64_t>(d) * record_bytes_);
    const int64_t count = ops::QuantScales(lengths_[d], kFeedbackQuantFormat);
    for (int64_t i = 0; i < count; ++i) scales[i] = static_cast<float>(scales[i] * factor);
  }
}

QuantizedReduction::QuantizedReduction(int64_t numel, int world, int rank, ops::QuantFormat format)
    : numel_(numel), world_(world), rank_(rank), format_(format) {
  const std::string bad = ops::CheckQuantFormat(format);
  ZT_CHECK_MSG(bad.empty(), "qgZ: %s", bad.c_str());
  record_bytes_ = QuantRecordBytes(comm::ShardSize(numel, world), format);
}

int64_t QuantizedReduction::SliceBegin(int r) const { return comm::ShardBegin(numel_, world_, r); }
int64_t QuantizedReduction::SliceLength(int r) const {
  return comm::ShardEnd(numel_, world_, r) - comm::ShardBegin(numel_, world_, r);
}

void QuantizedReduction::QuantizeForPeers(const at::Tensor& bucket, const at::Tensor& send,
                                          ErrorFeedback* feedback) const {
  ZT_CHECK_MSG(bucket.is_contiguous() && bucket.scalar_type() == at::kFloat && bucket.numel() == numel_,
               "qgZ: the bucket to quantize must be contiguous fp32 of the planned size");
  ZT_CHECK_MSG(send.is_contiguous() && send.scalar_type() == at::kByte && send.numel() == wire_numel(),
               "qgZ: the send buffer does not match the bucket");
  const bool loco = feedback != nullptr && feedback->defined();
  if (loco) {
    bool same = static_cast<int>(feedback->lengths_.size()) == world_ &&
                feedback->record_bytes_ == QuantRecordBytes(comm::ShardSize(numel_, world_), kFeedbackQuantFormat);
    for (int d = 0; same && d < world_; ++d) same = feedback->lengths_[d] == SliceLength(d);
    ZT_CHECK_MSG(same, "qgZ: the error feedback is another bucket's");
    if (feedback->uses_ >= feedback->options_.reset_t) feedback->valid_ = false;
    if (!feedback->valid_) feedback->uses_ = 0;
  }
  const float* x = bucket.data_ptr<float>();
  auto* out = send.data_ptr<uint8_t>();
  // This rank's own block sits in the buffer unsent: zero it, so the buffer
  // never holds stale memory (each record zeroes its own padding).
  std::memset(out + rank_ * record_bytes_, 0, static_cast<size_t>(record_bytes_));
  at::Tensor c;
  at::Tensor e;
  at::Tensor lost;
  const auto f32 = at::TensorOptions().dtype(at::kFloat);
  for (int d = 0; d < world_; ++d) {
    if (d == rank_) continue;
    const int64_t n = SliceLength(d);
    uint8_t* record = out + d * record_bytes_;
    const float* slice = x + SliceBegin(d);
    if (!loco) {
      QuantizeRecordInto(slice, n, format_, record, record_bytes_);
      continue;
    }
    // c = g + e; send c rounded; e <- beta e + (1 - beta) (c - rounded c).
    if (!c.defined()) {
      c = at::empty({comm::ShardSize(numel_, world_)}, f32);
      e = at::empty_like(c);
      lost = at::empty_like(c);
    }
    float* cp = c.data_ptr<float>();
    float* ep = e.data_ptr<float>();
    float* lp = lost.data_ptr<float>();
    uint8_t* fb = feedback->records_.data_ptr<uint8_t>() + d * feedback->record_bytes_;
    if (feedback->valid_) {
      DequantizeRecordFrom(fb, n, kFeedbackQuantFormat, ep, /*accumulate=*/false);
    } else {
      std::fill(ep, ep + n, 0.0f);
    }
    for (int64_t i = 0; i < n; ++i) cp[i] = slice[i] + ep[i];
    QuantizeRecordInto(cp, n, format_, record, record_bytes_);
    DequantizeRecordFrom(record, n, format_, lp, /*accumulate=*/false);
    const auto beta = static_cast<float>(feedback->options_.err_beta);
    for (int64_t i = 0; i < n; ++i) ep[i] = beta * ep[i] + (1.0f - beta) * (cp[i] - lp[i]);
    QuantizeRecordInto(ep, n, kFeedbackQuantFormat, fb, feedback->record_bytes_);
  }
  if (loco) {
    feedback->valid_ = true;
    ++feedback->uses_;
  }
}

void QuantizedReduction::DequantizeSum(const at::Tensor& received, const at::Tensor& bucket,
                                       const at::Tensor& shard) const {
  const int64_t n = SliceLength(rank_);
  ZT_CHECK_MSG(received.is_contiguous() && received.scalar_type() == at::kByte && received.numel() == wire_numel(),
               "qgZ: the received buffer does not match the bucket");
  ZT_CHECK_MSG(bucket.is_contiguous() && bucket.scalar_type() == at::kFloat && bucket.numel() == numel_,
               "qgZ: the bucket must be contiguous fp32 of the planned size");
  ZT_CHECK_MSG(shard.is_contiguous() && shard.scalar_type() == at::kFloat && shard.numel() == n,
               "qgZ: the reduced shard must be contiguous fp32 of this rank's slice");
  if (n == 0) return;
  float* y = shard.data_ptr<float>();
  const float* own = bucket.data_ptr<float>() + SliceBegin(rank_);
  const auto* in = received.data_ptr<uint8_t>();
  for (int j = 0; j < world_; ++j) {
    if (j == rank_) {
      if (j == 0) {
        std::memcpy(y, own, static_cast<size_t>(n) * sizeof(float));
      } else {
        for (int64_t i = 0; i < n; ++i) y[i] += own[i];
      }
    } else {
      DequantizeRecordFrom(in + j * record_bytes_, n, format_, y, /*accumulate=*/j != 0);
    }
  }
}

}  // namespace zt::zero
