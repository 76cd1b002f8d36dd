// How a CPU process group's worker moves bytes between its ranks: Gloo over
// TCP between any ranks (comm/gloo_transport.h), or shared memory between
// the ranks of one host (comm/shm_transport.h). comm/cpu_group.h owns the
// rest (queue, deadlines, agreement check, failure handling, counters), so
// both transports keep one contract and one set of error messages.
//
// Every call is one collective of the group, issued by every rank in the
// same order; `tag` is the group's sequence number for it. Calls report
// failure by throwing: gloo's own exceptions, or TransportError. The group
// turns a throw into the collective's Status ("<collective> failed on rank
// r: <diagnosis>; <transport name>: <what()>").
#pragma once

#include <c10/core/ScalarType.h>

#include <cstdint>
#include <stdexcept>
#include <string>

#include "absl/status/status.h"
#include "comm/process_group.h"
#include "comm/wire_bytes.h"

namespace zt::comm {

// A transport's own failure: what happened, and whether it was a deadline
// (kDeadlineExceeded) or a peer that left or aborted (kUnavailable).
class TransportError : public std::runtime_error {
 public:
  TransportError(absl::StatusCode code, const std::string& what) : std::runtime_error(what), code_(code) {}
  absl::StatusCode code() const { return code_; }

 private:
  absl::StatusCode code_;
};

class Transport {
 public:
  virtual ~Transport() = default;

  virtual const char* name() const = 0;                // "gloo", "shm": the group's backend_name()
  virtual const std::string& description() const = 0;  // for logs: "address 127.0.0.1 (loopback)"
  // How many collectives may run at once (on distinct tags); the group
  // starts at most this many workers.
  virtual int max_concurrent() const = 0;

  // The algorithms of comm/gloo_collectives.h, with their semantics: rank r
  // owns [ShardBegin, ShardEnd) of `numel` elements; `shard` == nullptr in
  // AllGather means rank r's slice of `flat` already holds its input; the
  // reductions go in rank order with halves accumulated in fp32, so every
  // transport gives bitwise the same results. `wire` receives the payload
  // bytes of comm/wire_bytes.h.
  virtual void AllGather(uint32_t tag, const void* shard, void* flat, int64_t numel, size_t elem_size,
                         WireBytes& wire) = 0;
  virtual void ReduceScatter(uint32_t tag, const void* flat, void* shard, int64_t numel, c10::ScalarType dtype,
                             ReduceOp op, WireBytes& wire) = 0;
  virtual void AllReduce(uint32_t tag, void* data, int64_t numel, c10::ScalarType dtype, ReduceOp op,
                         WireBytes& wire) = 0;
  virtual void Broadcast(uint32_t tag, void* data, int64_t bytes, int root, WireBytes& wire) = 0;
  virtual void Barrier(uint32_t tag) = 0;
  // ProcessGroup::AllToAll on raw memory: `block_bytes` per rank, this
  // rank's own block copied from `input` to `output` (which do not overlap).
  virtual void AllToAll(uint32_t tag, const void* input, void* output, int64_t block_bytes, WireBytes& wire) = 0;
  // Every rank's `words` int64 values into `all` (rank-major); control
  // traffic, not counted. `words` is at most kMaxHeaderWords.
  virtual void ExchangeHeaders(uint32_t tag, const int64_t* mine, int64_t* all, int words) = 0;
  static constexpr int kMaxHeaderWords = 16;

  // Makes this rank's and every peer's running and later calls fail at once
  // (the group failed here; `reason` is its message). Thread-safe, idempotent.
  virtual void Abort(const std::string& reason) = 0;
};

}  // namespace zt::comm
