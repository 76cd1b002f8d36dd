// Restarts and elastic membership across nodes: `zt launch --nnodes MIN:MAX`
// and `zt launch --nnodes N --max-restarts K` on several nodes. Each node's
// launcher runs this; node 0's hosts the store they agree through (c10d's
// TCPStore at --master-addr:--master-port, comm/launcher_store.h), which
// its ranks' rendezvous then joins as torchrun's agent store.
//
// Contract
//  - The job runs in rounds r = 0, 1, ... Node 0 opens round r and waits for
//    the other launchers to join it: until all max_nodes have joined, or,
//    once min_nodes have, `last_call` longer; fewer than min_nodes after
//    `join_timeout` ends the job (DeadlineExceeded naming the missing nodes).
//    It then publishes the round's plan: the joined nodes, in node-rank
//    order, become group ranks 0..n-1 of a world of n * nproc_per_node ranks.
//  - Every member runs its ranks (Launch) with TORCHELASTIC_USE_AGENT_STORE
//    =True, TORCHELASTIC_RESTART_COUNT=r, TORCHELASTIC_MAX_RESTARTS and node
//    0's ZT_JOB_ID; comm::InitProcessGroup keys round r's rendezvous under
//    "zt/attempt_<r>", so no rank of round r meets a key of round r - 1.
//  - The first node whose ranks fail publishes the failure; every other
//    member stops its ranks within 200 ms of seeing it (stop_check) instead
//    of waiting for its collectives to time out. Node 0 decides the round's
//    outcome: done when every member's ranks exited 0, failed otherwise
//    (also when a member's launcher goes silent before reporting: its host
//    is gone).
//  - A failed round is followed by round r + 1 while r < max_restarts and no
//    member's failure is one a restart would repeat (WorthRestarting: exit
//    code 2, an interrupted launcher, --timeout): the members that come back
//    within the join rules form it, at the world size they give. One line
//    per restart on err_fd says why and, when the membership changed, how.
//  - A launcher that comes when a round already runs waits and is taken in
//    at the next restart; when the job ends first, it ends with the job's
//    exit code, saying so. Node 0 keeps the store up until every launcher
//    waiting on it has read the end (bounded).
//  - Node 0 takes a member as gone when its launcher, which beats while its
//    ranks run and until the round's outcome, is silent for 5 s before
//    reporting its ranks' end; a member whose ranks merely run longer than
//    node 0's is waited for.
//  - Node 0 is the job's rendezvous host, as torchrun's --rdzv-endpoint host:
//    if it is lost, every other launcher stops its ranks and exits non-zero
//    naming it. Every node must give the same --nproc-per-node, --nnodes,
//    --max-restarts and command (or the same ZT_JOB_ID); a mismatch is an
//    error naming both values.
#pragma once

#include <unistd.h>

#include <chrono>
#include <string>

#include "absl/status/statusor.h"
#include "launch/kv_store.h"
#include "launch/launcher.h"
#include "launch/restarts.h"

namespace zt::comm {

struct NodeRoundOptions {
  int min_nodes = 1;
  int max_nodes = 1;
  int max_restarts = 0;
  // --memory-copies: compared like the rest, since the ranks of every node
  // must agree on exchanging copies (engine/neighbour_copies.h).
  bool memory_copies = false;
  std::chrono::milliseconds join_timeout{600000};  // for min_nodes to join a round (torchrun's join_timeout)
  std::chrono::milliseconds last_call{30000};      // then for the rest, up to max_nodes (its last_call_timeout)
  std::string who = "zt launch";
  int err_fd = STDERR_FILENO;
};

// Runs this node's part of the job. `options.node_rank` is this node's id in
// [0, max_nodes) and `options.master_port` the store's port (both required);
// options.nnodes is ignored (each round's plan sets it). Returns this node's
// last round: its ranks' result, or for a node stopped by another's failure,
// that failure's exit code and text.
absl::StatusOr<RestartedLaunch> LaunchNodeRounds(const LaunchOptions& options, const NodeRoundOptions& rounds,
                                                 const KeyValueStoreOpener& open);

// "1:2" or "2" (MIN:MAX or N) as --nnodes takes it; InvalidArgument names the flag.
absl::Status ParseNodeRange(const std::string& text, int* min_nodes, int* max_nodes);

}  // namespace zt::comm
