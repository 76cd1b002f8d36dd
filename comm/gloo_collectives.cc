// Implementation of comm/gloo_collectives.h. All-gather, broadcast and
// barrier call gloo's algorithms on our memory; reduce-scatter is ours, on
// gloo unbound buffers, because gloo has no bandwidth-optimal one for
// uneven shards and half types.
#include "comm/gloo_collectives.h"

#include <gloo/allgather.h>
#include <gloo/allgatherv.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/context.h>
#include <gloo/transport/unbound_buffer.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "comm/reduce_kernels.h"
#include "util/status.h"

namespace zt::comm {
namespace {

using Clock = std::chrono::steady_clock;

// Slot prefixes for our own algorithms; gloo's use 0x01..0x08.
constexpr uint64_t kAllToAllReduceScatterPrefix = 0x5A;
constexpr uint64_t kRingReduceScatterPrefix = 0x5B;
constexpr uint64_t kAllToAllPrefix = 0x5C;

// gloo slots are prefix:8 | tag:32 | delta:24; the delta numbers segments.
uint64_t MakeSlot(uint64_t prefix, uint32_t tag, uint64_t delta) {
  ZT_CHECK(delta < (uint64_t{1} << 24));
  return (prefix << 56) | (uint64_t{tag} << 24) | delta;
}

// Remaining budget of a collective; gloo needs a positive timeout.
class Deadline {
 public:
  explicit Deadline(std::chrono::milliseconds timeout) : timeout_(timeout), end_(Clock::now() + timeout) {}
  std::chrono::milliseconds Remaining() const {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end_ - Clock::now());
    if (left.count() <= 0) {
      throw ::gloo::IoException("Timed out after " + std::to_string(timeout_.count()) + "ms (collective deadline)");
    }
    return left;
  }

 private:
  std::chrono::milliseconds timeout_;
  Clock::time_point end_;
};

std::vector<int64_t> ChunkElements(int64_t numel, int world) {
  std::vector<int64_t> counts(world);
  for (int r = 0; r < world; ++r) counts[r] = ShardEnd(numel, world, r) - ShardBegin(numel, world, r);
  return counts;
}

void WaitRecvs(::gloo::transport::UnboundBuffer& buf, int count, const Deadline& deadline) {
  for (int i = 0; i < count; ++i) buf.waitRecv(deadline.Remaining());
}
void WaitSends(::gloo::transport::UnboundBuffer& buf, int count, const Deadline& deadline) {
  for (int i = 0; i < count; ++i) buf.waitSend(deadline.Remaining());
}

// ---------------------------------------------------------------------------
// Reduce-scatter, all-to-all flavour.
//
// The shard (ShardSize elements, the same bound on every rank) is cut into
// segments of `seg` elements. For segment k every rank sends each peer p the
// k-th segment of p's slice and receives the k-th segment of its own slice
// from every peer into one of two scratch halves, so segment k+1 is on the
// wire while segment k is summed. Empty pieces (short last shards) are
// skipped on both sides, which agree because both know every shard's size.
// One all-to-all reduce-scatter call: its segment plan, buffers and
// in-flight counts. Run() posts segments 0 and 1, then for each segment k
// waits for its receives, sums it and queues segment k+2.
class AllToAllReduceScatter {
 public:
  AllToAllReduceScatter(const GlooCall& call, const void* flat, int64_t numel, c10::ScalarType dtype, int64_t seg,
                        WireBytes& wire)
      : call_(call),
        ctx_(*call.context),
        n_(ctx_.size),
        r_(ctx_.rank),
        flat_(flat),
        numel_(numel),
        dtype_(dtype),
        es_(c10::elementSize(dtype)),
        seg_(seg),
        num_segments_((ShardSize(numel, n_) + seg - 1) / seg),
        deadline_(call.timeout),
        half_bytes_(static_cast<size_t>(n_ - 1) * seg * es_),
        scratch_(new uint8_t[2 * half_bytes_]),
        in_(ctx_.createUnboundBuffer(const_cast<void*>(flat), static_cast<size_t>(numel) * es_)),
        half_{ctx_.createUnboundBuffer(scratch_.get(), half_bytes_),
              ctx_.createUnboundBuffer(scratch_.get() + half_bytes_, half_bytes_)},
        sends_through_(num_segments_, 0),
        wire_(wire) {}

  void Run(void* shard, ReduceOp op);

 private:
  struct Piece {
    int64_t offset;  // elements into flat
    int64_t length;  // elements, possibly 0
  };
  Piece PieceOf(int rank, int64_t k) const {
    const int64_t b = ShardBegin(numel_, n_, rank) + k * seg_;
    const int64_t e = std::min(ShardEnd(numel_, n_, rank), b + seg_);
    return Piece{b, std::max<int64_t>(0, e - b)};
  }
  // Scratch position of peer p's contribution: peers r+1, r+2, ... in order.
  int ScratchIndex(int p) const { return (p - r_ - 1 + n_) % n_; }
  void Post(int64_t k);

  const GlooCall& call_;
  ::gloo::Context& ctx_;
  const int n_;
  const int r_;
  const void* flat_;
  const int64_t numel_;
  const c10::ScalarType dtype_;
  const size_t es_;
  const int64_t seg_;
  const int64_t num_segments_;
  const Deadline deadline_;
  const size_t half_bytes_;
  std::unique_ptr<uint8_t[]> scratch_;
  std::unique_ptr<::gloo::transport::UnboundBuffer> in_;
  std::unique_ptr<::gloo::transport::UnboundBuffer> half_[2];
  int recvs_posted_[2] = {0, 0};
  std::vector<int> sends_through_;  // cumulative sends after posting segment k
  int sends_posted_ = 0;
  int sends_waited_ = 0;
  WireBytes& wire_;
};

void AllToAllReduceScatter::Post(int64_t k) {
  const int h = static_cast<int>(k % 2);
  const uint64_t slot = MakeSlot(kAllToAllReduceScatterPrefix, call_.tag, static_cast<uint64_t>(k));
  const Piece mine = PieceOf(r_, k);
  for (int i = 1; i < n_; ++i) {
    const int src = (r_ - i + n_) % n_;
    if (mine.length == 0) break;
    half_[h]->recv(src, slot, static_cast<size_t>(ScratchIndex(src)) * seg_ * es_,
                   static_cast<size_t>(mine.length) * es_);
    ++recvs_posted_[h];
    wire_.received += mine.length * static_cast<int64_t>(es_);
  }
  for (int i = 1; i < n_; ++i) {
    const int dst = (r_ + i) % n_;
    const Piece theirs = PieceOf(dst, k);
    if (theirs.length == 0) continue;
    in_->send(dst, slot, static_cast<size_t>(theirs.offset) * es_, static_cast<size_t>(theirs.length) * es_);
    ++sends_posted_;
    wire_.sent += theirs.length * static_cast<int64_t>(es_);
  }
  sends_through_[k] = sends_posted_;
}

void AllToAllReduceScatter::Run(void* shard, ReduceOp op) {
  Post(0);
  if (num_segments_ > 1) Post(1);
  std::vector<const void*> sources(n_);
  auto* out = static_cast<uint8_t*>(shard);
  for (int64_t k = 0; k < num_segments_; ++k) {
    const int h = static_cast<int>(k % 2);
    WaitRecvs(*half_[h], recvs_posted_[h], deadline_);
    recvs_posted_[h] = 0;
    const Piece mine = PieceOf(r_, k);
    if (mine.length > 0) {
      const uint8_t* base = scratch_.get() + h * half_bytes_;
      for (int j = 0; j < n_; ++j) {
        sources[j] = (j == r_) ? static_cast<const uint8_t*>(flat_) + mine.offset * es_
                               : base + static_cast<size_t>(ScratchIndex(j)) * seg_ * es_;
      }
      ReduceInto(out + k * seg_ * es_, sources, mine.length, dtype_, op, n_);
    }
    if (k + 2 < num_segments_) {
      // Flow control: the sends of segment k must be out before k+2 is queued.
      WaitSends(*in_, sends_through_[k] - sends_waited_, deadline_);
      sends_waited_ = sends_through_[k];
      Post(k + 2);
    }
  }
  WaitSends(*in_, sends_posted_ - sends_waited_, deadline_);
}

void ReduceScatterAllToAll(const GlooCall& call, const void* flat, void* shard, int64_t numel, c10::ScalarType dtype,
                           ReduceOp op, int64_t segment_bytes, WireBytes& wire) {
  const int n = call.context->size;
  const size_t es = c10::elementSize(dtype);
  const int64_t shard_size = ShardSize(numel, n);
  if (shard_size == 0) return;
  // One pipeline stage receives about `segment_bytes` in all (at least
  // 64 KiB from each peer, so large worlds still send large messages).
  const int64_t per_peer_bytes = std::max<int64_t>(int64_t{64} << 10, segment_bytes / (n - 1));
  const int64_t seg = std::min<int64_t>(
      shard_size, std::max<int64_t>(1, std::min(segment_bytes, per_peer_bytes) / static_cast<int64_t>(es)));
  AllToAllReduceScatter(call, flat, numel, dtype, seg, wire).Run(shard, op);
}

// ---------------------------------------------------------------------------
// Reduce-scatter, ring flavour (the textbook algorithm, kept as a reference
// and for comparison). Step t sends the partial sum of chunk (r-t-1) to the
// right neighbour and receives chunk (r-t-2)'s partial from the left, adds
// the local slice and keeps it for the next step; after n-1 steps chunk r is
// complete. Partials travel in the tensor's dtype (rounded at every hop).
void ReduceScatterRing(const GlooCall& call, const void* flat, void* shard, int64_t numel, c10::ScalarType dtype,
                       ReduceOp op, WireBytes& wire) {
  auto& ctx = *call.context;
  const int n = ctx.size;
  const int r = ctx.rank;
  const size_t es = c10::elementSize(dtype);
  const int64_t shard_size = ShardSize(numel, n);
  if (shard_size == 0) return;
  const Deadline deadline(call.timeout);
  const int right = (r + 1) % n;
  const int left = (r - 1 + n) % n;
  const std::vector<int64_t> len = ChunkElements(numel, n);
  auto begin = [&](int c) { return ShardBegin(numel, n, c); };
  auto chunk = [&](int64_t c) { return static_cast<int>(((c % n) + n) % n); };
  const auto* in_bytes = static_cast<const uint8_t*>(flat);

  const size_t chunk_bytes = static_cast<size_t>(shard_size) * es;
  std::unique_ptr<uint8_t[]> scratch(new uint8_t[3 * chunk_bytes]);
  auto in = ctx.createUnboundBuffer(const_cast<void*>(flat), static_cast<size_t>(numel) * es);
  auto recv_buf = ctx.createUnboundBuffer(scratch.get(), chunk_bytes);
  std::unique_ptr<::gloo::transport::UnboundBuffer> partial[2] = {
      ctx.createUnboundBuffer(scratch.get() + chunk_bytes, chunk_bytes),
      ctx.createUnboundBuffer(scratch.get() + 2 * chunk_bytes, chunk_bytes)};
  ::gloo::transport::UnboundBuffer* pending_send = nullptr;  // the previous step's send

  for (int t = 0; t < n - 1; ++t) {
    const uint64_t slot = MakeSlot(kRingReduceScatterPrefix, call.tag, static_cast<uint64_t>(t));
    const int send_chunk = chunk(r - t - 1);
    const int recv_chunk = chunk(r - t - 2);
    if (len[recv_chunk] > 0) {
      recv_buf->recv(left, slot, 0, static_cast<size_t>(len[recv_chunk]) * es);
      wire.received += len[recv_chunk] * static_cast<int64_t>(es);
    }
    ::gloo::transport::UnboundBuffer* send_buf = nullptr;
    if (len[send_chunk] > 0) {
      if (t == 0) {
        send_buf = in.get();
        in->send(right, slot, static_cast<size_t>(begin(send_chunk)) * es, static_cast<size_t>(len[send_chunk]) * es);
      } else {
        send_buf = partial[t % 2].get();
        send_buf->send(right, slot, 0, static_cast<size_t>(len[send_chunk]) * es);
      }
      wire.sent += len[send_chunk] * static_cast<int64_t>(es);
    }
    if (len[recv_chunk] > 0) recv_buf->waitRecv(deadline.Remaining());
    // The partial written below was the send buffer one step ago.
    if (pending_send != nullptr) pending_send->waitSend(deadline.Remaining());
    pending_send = send_buf;
    if (len[recv_chunk] > 0) {
      const void* sources[2] = {recv_buf->ptr, in_bytes + begin(recv_chunk) * es};
      const bool last = (t == n - 2);
      void* dst = last ? shard : partial[(t + 1) % 2]->ptr;
      const ReduceOp step_op = (op == ReduceOp::kAvg && !last) ? ReduceOp::kSum : op;
      ReduceInto(dst, {sources[0], sources[1]}, len[recv_chunk], dtype, step_op, n);
    }
  }
  if (pending_send != nullptr) pending_send->waitSend(deadline.Remaining());
}

}  // namespace

void GlooAllGather(const GlooCall& call, const void* shard, void* flat, int64_t numel, size_t elem_size,
                   WireBytes& wire) {
  auto& ctx = call.context;
  const int n = ctx->size;
  const int r = ctx->rank;
  if (numel == 0) return;
  const std::vector<int64_t> counts = ChunkElements(numel, n);
  auto* out = static_cast<uint8_t*>(flat);
  const size_t my_offset = static_cast<size_t>(ShardBegin(numel, n, r)) * elem_size;
  const size_t my_bytes = static_cast<size_t>(counts[r]) * elem_size;
  if (n == 1) {
    if (shard != nullptr) std::memcpy(out + my_offset, shard, my_bytes);
    return;
  }
  std::vector<int64_t> chunk_bytes(n);
  for (int i = 0; i < n; ++i) chunk_bytes[i] = counts[i] * static_cast<int64_t>(elem_size);
  const bool even = (numel % n == 0);
  if (even) {
    ::gloo::AllgatherOptions opts(ctx);
    if (shard != nullptr) opts.setInput(const_cast<uint8_t*>(static_cast<const uint8_t*>(shard)), my_bytes);
    opts.setOutput(out, static_cast<size_t>(numel) * elem_size);
    opts.setTag(call.tag);
    opts.setTimeout(call.timeout);
    ::gloo::allgather(opts);
  } else {
    ::gloo::AllgathervOptions opts(ctx);
    if (shard != nullptr) opts.setInput(const_cast<uint8_t*>(static_cast<const uint8_t*>(shard)), my_bytes);
    std::vector<size_t> sizes(chunk_bytes.begin(), chunk_bytes.end());
    opts.setOutput(out, std::move(sizes));
    opts.setTag(call.tag);
    opts.setTimeout(call.timeout);
    ::gloo::allgatherv(opts);
  }
  WireBytes w = AllGatherWireBytes(chunk_bytes, r);
  wire.sent += w.sent;
  wire.received += w.received;
}

void GlooReduceScatter(const GlooCall& call, ReduceScatterAlgorithm algorithm, const void* flat, void* shard,
                       int64_t numel, c10::ScalarType dtype, ReduceOp op, int64_t segment_bytes, WireBytes& wire) {
  const int n = call.context->size;
  if (n == 1 || numel == 0) {
    // One rank: the reduction of one input (avg divides by 1).
    if (numel > 0) ReduceInto(shard, {flat}, numel, dtype, op, 1);
    return;
  }
  if (algorithm == ReduceScatterAlgorithm::kRing) {
    ReduceScatterRing(call, flat, shard, numel, dtype, op, wire);
  } else {
    ReduceScatterAllToAll(call, flat, shard, numel, dtype, op, segment_bytes, wire);
  }
}

void GlooAllReduce(const GlooCall& call, ReduceScatterAlgorithm algorithm, void* data, int64_t numel,
                   c10::ScalarType dtype, ReduceOp op, int64_t segment_bytes, WireBytes& wire) {
  const int n = call.context->size;
  const int r = call.context->rank;
  if (numel == 0) return;
  const size_t es = c10::elementSize(dtype);
  void* own = static_cast<uint8_t*>(data) + ShardBegin(numel, n, r) * es;
  GlooReduceScatter(call, algorithm, data, own, numel, dtype, op, segment_bytes, wire);
  // Same tag: the all-gather runs under gloo's allgather slot prefix, which
  // no reduce-scatter message uses.
  GlooAllGather(call, nullptr, data, numel, es, wire);
}

void GlooBroadcast(const GlooCall& call, void* data, int64_t bytes, int root, WireBytes& wire) {
  const int n = call.context->size;
  if (n == 1 || bytes == 0) return;
  ::gloo::BroadcastOptions opts(call.context);
  opts.setOutput(static_cast<uint8_t*>(data), static_cast<size_t>(bytes));
  opts.setRoot(root);
  opts.setTag(call.tag);
  opts.setTimeout(call.timeout);
  ::gloo::broadcast(opts);
  WireBytes w = BroadcastWireBytes(n, call.context->rank, root, bytes);
  wire.sent += w.sent;
  wire.received += w.received;
}

void GlooAllToAll(const GlooCall& call, const void* input, void* output, int64_t block_bytes, WireBytes& wire) {
  ::gloo::Context& ctx = *call.context;
  const int n = ctx.size;
  const int r = ctx.rank;
  const auto block = static_cast<size_t>(block_bytes);
  auto* out = static_cast<uint8_t*>(output);
  if (block == 0) return;
  std::memcpy(out + r * block, static_cast<const uint8_t*>(input) + r * block, block);
  if (n == 1) return;
  const Deadline deadline(call.timeout);
  auto in_buf = ctx.createUnboundBuffer(const_cast<void*>(input), block * n);
  auto out_buf = ctx.createUnboundBuffer(output, block * n);
  const uint64_t slot = MakeSlot(kAllToAllPrefix, call.tag, 0);
  for (int i = 1; i < n; ++i) {
    const int src = (r - i + n) % n;
    out_buf->recv(src, slot, src * block, block);
  }
  for (int i = 1; i < n; ++i) {
    const int dst = (r + i) % n;
    in_buf->send(dst, slot, dst * block, block);
  }
  WaitRecvs(*out_buf, n - 1, deadline);
  WaitSends(*in_buf, n - 1, deadline);
  const WireBytes w = AllToAllWireBytes(n, block_bytes);
  wire.sent += w.sent;
  wire.received += w.received;
}

void GlooBarrier(const GlooCall& call) {
  if (call.context->size == 1) return;
  ::gloo::BarrierOptions opts(call.context);
  opts.setTag(call.tag);
  opts.setTimeout(call.timeout);
  ::gloo::barrier(opts);
}

void GlooExchangeHeaders(const GlooCall& call, const int64_t* mine, int64_t* all, int words) {
  const int n = call.context->size;
  const size_t bytes = static_cast<size_t>(words) * sizeof(int64_t);
  std::memcpy(all + static_cast<size_t>(call.context->rank) * words, mine, bytes);
  if (n == 1) return;
  ::gloo::AllgatherOptions opts(call.context);
  opts.setOutput(reinterpret_cast<uint8_t*>(all), bytes * static_cast<size_t>(n));
  opts.setTag(call.tag | 0x80000000u);
  opts.setTimeout(call.timeout);
  ::gloo::allgather(opts);
}

}  // namespace zt::comm
