// Options for creating a process group (timeouts, backend choice, worker
// threads, algorithm choices), with environment overrides for operators:
// ZT_COMM_TIMEOUT_S, ZT_RENDEZVOUS_TIMEOUT_S, ZT_COMM_BACKEND, ZT_COMM_THREADS,
// ZT_COMM_HEARTBEAT_S, ZT_REDUCE_SCATTER_ALGO, ZT_COMM_CHECK, ZT_COMM_SHM_SLOT_KIB (docs/comm.md
// lists them).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "absl/status/status.h"

namespace zt::comm {

enum class BackendChoice {
  kAuto,    // single rank when world size is 1; shared memory among ranks of one host
            // (Gloo where the segment cannot be mapped, with a warning); Gloo across hosts
  kGloo,    // Gloo everywhere, even for one rank (tests, benchmarks)
  kShm,     // as kAuto, but a segment that cannot be mapped is an error
  kSingle,  // world size must be 1
};

// How Gloo reduce-scatter moves data. Both send (n-1)/n of the buffer per rank.
enum class ReduceScatterAlgorithm {
  kAllToAll,  // every rank sends each peer its slice; sum locally in rank order (fp32 for halves)
  kRing,      // n-1 ring steps, partial sums forwarded in the tensor's dtype
};

struct GroupOptions {
  // Deadline of every collective's transfers and of Work::Wait().
  std::chrono::milliseconds timeout = std::chrono::minutes(5);
  // How long ranks wait for each other (and for the store) at start-up.
  std::chrono::milliseconds rendezvous_timeout = std::chrono::minutes(5);
  BackendChoice backend = BackendChoice::kAuto;
  // Threads that run submitted collectives; two lets one collective's local
  // reduction overlap another's transfers.
  int worker_threads = 2;
  // Period of the liveness counter each rank writes into the store, used to
  // name a dead or stopped peer when a collective fails.
  std::chrono::milliseconds heartbeat_interval = std::chrono::seconds(1);
  ReduceScatterAlgorithm reduce_scatter_algorithm = ReduceScatterAlgorithm::kAllToAll;
  // Bytes one stage of the reduce-scatter pipeline receives from all peers
  // together (split evenly, at least 64 KiB per peer; two stages in flight,
  // so the scratch memory is twice this). Larger stages mean fewer round
  // trips; 4 MiB measured best on loopback (docs/benchmarks.md).
  int64_t segment_bytes = int64_t{4} << 20;
  // Before each collective's data moves, the ranks exchange a 32-byte header
  // (sequence number, kind, size, dtype): ranks that issue different
  // collectives (different step counts, evaluation on one rank only) get a
  // named error on every rank at once, instead of a timeout minutes later or
  // gloo aborting the process on mismatched message sizes. Costs one small
  // ring exchange per collective; ZT_COMM_CHECK=0 turns it off.
  bool check_agreement = true;
  // Bytes of each rank's slot in the shared-memory transport (two slots per
  // rank: consecutive rounds alternate). A collective moves one slot per
  // rank per barrier; the segment is 2 x ranks x this.
  // 8 MiB: fewer barriers than 2 MiB (1.00-1.02x vs 1.02x of the roofline in
  // zt_bench_local_comm, within its noise); a /dev/shm without room for them
  // gets smaller slots (docker's default /dev/shm is 64 MiB).
  int64_t shm_slot_bytes = int64_t{8} << 20;
  // Key prefix inside the rendezvous store, so several groups can share it.
  std::string store_prefix = "zt";
};

// Applies the environment overrides listed above to `options`. Errors
// (InvalidArgument) name the variable and the accepted values.
absl::Status ApplyEnvOverrides(GroupOptions& options);

const char* ToString(ReduceScatterAlgorithm algorithm);  // "alltoall" / "ring"

}  // namespace zt::comm
