// ZeRO++ qgZ's gradient reduction (zero_optimization.zero_quantized_gradients):
// a reduce-scatter of a gradient bucket in which every rank quantizes each
// peer's slice once, one all-to-all (comm::ProcessGroup::AllToAll) delivers
// the pieces, and each rank dequantizes the pieces of its own slice and sums
// them in fp32, in rank order, with its own slice exact.
//
// Wire: block d of the all-to-all is rank d's slice of the bucket as one
// record (zero/quantized_weights.h's layout: scales, payload, padding to 4
// bytes), padded to the record of the longest slice so that every block has
// the same size; this rank's own block never leaves it and is zeroed.
//
// Error bound: no partial sum is quantized again, so each sender's rounding
// reaches the sum once. Element i of rank r's reduced sum differs from the
// exact fp32 sum by at most  sum over senders s != r of scale_s(i) / 2  (plus
// float rounding), scale_s(i) being amax / qmax of the block of sender s that
// holds i (qmax 127 at 8 bits, 7 at 4). Averaged over the ranks (as the
// gradient is), that is at most the mean of the senders' half-scales: it
// does not grow with the number of ranks, unlike a ring that would round
// the forwarded partial sums at every hop. DeepSpeed's qgZ quantizes in two
// hops (inside a node, then across), rounding the node's partial sums again.
//
// Error feedback (LoCo, zeropp_loco_param): each rank keeps, per bucket and
// per peer slice, a moving average e of what rounding lost; before
// quantizing, the slice becomes c = g + e, and afterwards
// e <- err_beta * e + (1 - err_beta) * (c - dequantized(c)). As DeepSpeed,
// the buffer itself is stored as int8 records (1/4 of the fp32 bucket) and is
// cleared every reset_T reductions of the bucket; a loss-scale change
// rescales it, an overflow clears it.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "ops/quantize.h"

namespace zt::zero {

// qgZ's default format: int8 with a scale per 2048 elements (ops/quantize.h
// says why a fixed block; docs/hierarchical.md compares 8 and 4 bits).
inline constexpr ops::QuantFormat kGradientQuantFormat{8, 2048};
// The error-feedback buffer's own format (DeepSpeed keeps it in int8 too).
inline constexpr ops::QuantFormat kFeedbackQuantFormat{8, 2048};

struct ErrorFeedbackOptions {
  double err_beta = 0.8;   // DeepSpeed's default
  int64_t reset_t = 1024;  // reductions of a bucket between clears
};

// LoCo's state for one bucket: the error of every peer slice, as int8
// records, one per rank's slice so that slice d's record sits at d (this
// rank's own slice is exact: its record stays zero, 1/world of the bytes).
// Per rank and unsharded: about a byte per trainable element, which
// Engine::memory() counts (error_feedback) and `zt estimate` does not.
class ErrorFeedback {
 public:
  ErrorFeedback() = default;
  ErrorFeedback(int64_t numel, int world, ErrorFeedbackOptions options);
  bool defined() const { return records_.defined(); }
  // Multiplies the stored errors by `factor` (the loss scale changed).
  void Scale(double factor);
  // Forgets the stored errors (an overflow: they hold non-finite values).
  void Clear() { valid_ = false; }
  int64_t bytes() const { return records_.defined() ? records_.numel() : 0; }

 private:
  friend class QuantizedReduction;
  at::Tensor records_;  // uint8: one record per rank's slice, record_bytes_ apart
  int64_t record_bytes_ = 0;
  std::vector<int64_t> lengths_;  // elements of each rank's slice
  ErrorFeedbackOptions options_;
  int64_t uses_ = 0;    // reductions since the last clear
  bool valid_ = false;  // false: the errors are zero
};

// The sizes of one bucket's quantized reduction and its two halves.
class QuantizedReduction {
 public:
  QuantizedReduction(int64_t numel, int world, int rank, ops::QuantFormat format);

  // Elements of the all-to-all's uint8 buffers: world * record_bytes().
  int64_t wire_numel() const { return world_ * record_bytes_; }
  int64_t record_bytes() const { return record_bytes_; }

  // Quantizes every peer's slice of `bucket` (contiguous fp32 of numel
  // elements) into its block of `send` (contiguous uint8 of wire_numel()),
  // through `feedback` when it is defined (LoCo). `bucket` is not modified.
  void QuantizeForPeers(const at::Tensor& bucket, const at::Tensor& send, ErrorFeedback* feedback) const;

  // `shard` (contiguous fp32, this rank's slice length) = the sum, in rank
  // order, of this rank's slice of `bucket` and of every peer's block of
  // `received` dequantized.
  void DequantizeSum(const at::Tensor& received, const at::Tensor& bucket, const at::Tensor& shard) const;

 private:
  int64_t SliceBegin(int r) const;
  int64_t SliceLength(int r) const;

  const int64_t numel_;
  const int world_;
  const int rank_;
  const ops::QuantFormat format_;
  int64_t record_bytes_ = 0;
};

}  // namespace zt::zero
