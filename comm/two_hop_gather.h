// MiCS's hierarchical parameter gather (zero_optimization.
// mics_hierarchical_params_gather): an all-gather over a group whose ranks
// span hosts, in two hops. Group rank r = h * L + l (host h of n, place l of
// the L ranks on each host):
//   1. across hosts: the n ranks with place l all-gather their shards, so each
//      holds the shards of its column (the only hop that leaves a host: each
//      host sends (n - 1) / n of the buffer, where the one-hop all-gather has
//      every rank send its shard to every rank of the other hosts);
//   2. inside the host: the L ranks all-gather those column blocks;
// then the blocks are put into rank order: `flat` ends bitwise equal to the
// one-hop group->AllGather(shard, flat).
//
// Contract
//  - Create is collective over `group` (every rank, same L): it makes the L
//    column groups and the n host groups, each on every rank in the same
//    order (ProcessGroup::NewSubGroup). L must divide the group size and the
//    group's ranks must be whole hosts in order (InvalidArgument otherwise).
//  - AllGather takes equal shards (flat.numel() a multiple of the group
//    size; the one-hop AllGather otherwise) and returns a Work whose first
//    hop is in flight. The second hop is issued when that Work (or a later
//    one's) is waited on, after every earlier gather's second hop, so the
//    host groups see the same order of collectives on every rank whatever
//    order the caller waits in. One thread issues and waits.
//  - Byte counters: the two hops are the column and host groups' (stats()
//    sums them); the caller adds them to the group's own.
#pragma once

#include <ATen/core/Tensor.h>

#include <deque>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "comm/process_group.h"

namespace zt::comm {

class TwoHopGather {
 public:
  static absl::StatusOr<std::shared_ptr<TwoHopGather>> Create(const std::shared_ptr<ProcessGroup>& group,
                                                              int ranks_per_host);

  std::unique_ptr<Work> AllGather(const at::Tensor& shard, const at::Tensor& flat);

  // The two hops' bytes and wait time (the column and the host group summed).
  CommStats stats() const;
  int hosts() const { return hosts_; }
  int ranks_per_host() const { return ranks_per_host_; }

 private:
  class TwoHopWork;
  struct Op {
    std::unique_ptr<Work> first;   // across hosts, into `column`
    std::unique_ptr<Work> second;  // inside the host, into `blocks`; null until issued
    at::Tensor column, blocks, flat;
    absl::Status status;
    bool done = false;
  };
  TwoHopGather() = default;
  // Issues the second hop of every op up to and including `op`, in order.
  void Advance(Op* op);
  // Waits for `op` (advancing first) and puts its blocks into rank order.
  absl::Status Finish(Op* op, std::chrono::milliseconds timeout);

  std::shared_ptr<ProcessGroup> group_, column_, host_;
  int hosts_ = 1, ranks_per_host_ = 1;
  std::deque<std::shared_ptr<Op>> pending_;  // started, second hop not yet issued
};

}  // namespace zt::comm
