// Out-of-line pieces of the ProcessGroup contract: collective names and
// counter totals. Backends live in their own files (cpu_group over comm/transport.h, single_group).
#include "comm/process_group.h"

namespace zt::comm {

const char* ToString(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::kAllGather: return "all_gather";
    case CollectiveKind::kReduceScatter: return "reduce_scatter";
    case CollectiveKind::kAllReduce: return "all_reduce";
    case CollectiveKind::kBroadcast: return "broadcast";
    case CollectiveKind::kBarrier: return "barrier";
    case CollectiveKind::kAllToAll: return "all_to_all";
  }
  return "unknown_collective";
}

const char* ToString(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return "sum";
    case ReduceOp::kAvg: return "avg";
    case ReduceOp::kMax: return "max";
    case ReduceOp::kMin: return "min";
  }
  return "unknown_op";
}

int64_t CommStats::total_bytes_sent() const {
  int64_t total = 0;
  for (const auto& c : by_kind) total += c.bytes_sent;
  return total;
}

int64_t CommStats::total_bytes_received() const {
  int64_t total = 0;
  for (const auto& c : by_kind) total += c.bytes_received;
  return total;
}

}  // namespace zt::comm
