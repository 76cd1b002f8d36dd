// The collective algorithms of the Gloo backend, run on raw CPU memory over a
// connected gloo::Context. Each call is one collective on one worker thread;
// concurrent calls need distinct tags. They throw gloo's exceptions
// (gloo::IoException, gloo::EnforceNotMet) on transport errors and timeouts;
// the group turns those into Status.
//
// Every function adds to `wire` the payload bytes this rank sends and
// receives, computed from the chunk sizes it actually transfers (gloo's own
// framing headers are not payload).
#pragma once

#include <c10/core/ScalarType.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "comm/group_options.h"
#include "comm/process_group.h"
#include "comm/wire_bytes.h"

namespace gloo {
class Context;
}

namespace zt::comm {

// Shared arguments: the context, this collective's tag, its deadline budget.
struct GlooCall {
  std::shared_ptr<gloo::Context> context;
  uint32_t tag = 0;
  std::chrono::milliseconds timeout{0};
};

// All-gather of `numel` elements of `elem_size` bytes: rank r contributes
// ShardBegin..ShardEnd. `shard` == nullptr means rank r's slice of `flat`
// already holds its input (in place). Even splits use gloo::allgather, uneven
// ones gloo::allgatherv; both ring algorithms move (n-1)/n of the buffer.
void GlooAllGather(const GlooCall& call, const void* shard, void* flat, int64_t numel, size_t elem_size,
                   WireBytes& wire);

// Reduce-scatter of `numel` elements: rank r receives the reduction of every
// rank's [ShardBegin, ShardEnd) slice of `flat` into `shard` (which may be
// flat's own slice). kSum or kAvg (and kMax/kMin for all-reduce's use).
//   kAllToAll: pipeline stages of about `segment_bytes` (split over peers); each rank sends
//              every peer that peer's slice and sums what it receives in rank
//              order, accumulating halves in fp32 (one rounding).
//   kRing:     n-1 ring steps forwarding partial sums in the tensor's dtype.
void GlooReduceScatter(const GlooCall& call, ReduceScatterAlgorithm algorithm, const void* flat, void* shard,
                       int64_t numel, c10::ScalarType dtype, ReduceOp op, int64_t segment_bytes, WireBytes& wire);

// All-reduce in place: reduce-scatter into this rank's own slice, then an
// in-place all-gather: 2(n-1)/n of the buffer each way, the optimum.
void GlooAllReduce(const GlooCall& call, ReduceScatterAlgorithm algorithm, void* data, int64_t numel,
                   c10::ScalarType dtype, ReduceOp op, int64_t segment_bytes, WireBytes& wire);

// Broadcast in place from `root` with gloo::broadcast (binomial tree).
void GlooBroadcast(const GlooCall& call, void* data, int64_t bytes, int root, WireBytes& wire);

// All-to-all of `block_bytes` per rank (ProcessGroup::AllToAll): one
// message to and from every peer, all posted at once; the own block is
// copied. `input` and `output` do not overlap.
void GlooAllToAll(const GlooCall& call, const void* input, void* output, int64_t block_bytes, WireBytes& wire);

// gloo::barrier (no payload).
void GlooBarrier(const GlooCall& call);

// Every rank's `words` int64 values into `all` (rank-major), under a tag
// space of its own (the collective's tag with the top bit set), so it never
// meets the collective's data messages. Control traffic: not counted in the
// group's byte counters.
void GlooExchangeHeaders(const GlooCall& call, const int64_t* mine, int64_t* all, int words);

}  // namespace zt::comm
