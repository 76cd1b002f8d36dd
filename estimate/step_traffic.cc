// Implementation of estimate/step_traffic.h.
#include "estimate/step_traffic.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace zt::estimate {
namespace {

int HostOf(int rank, int ranks_per_host) { return rank / ranks_per_host; }

// What members[i] sends in one collective (CollectiveLinkBytes' entry i),
// in O(n): EstimateStepTraffic asks it for each rank of a world.
LinkBytes MemberSends(Collective kind, const std::vector<int>& members, size_t i, int64_t bytes, int ranks_per_host) {
  LinkBytes b;
  const size_t n = members.size();
  if (n <= 1) return b;
  const int64_t slice = bytes / static_cast<int64_t>(n);
  const int host = HostOf(members[i], ranks_per_host);
  if (kind == Collective::kAllGather || kind == Collective::kAllReduce) {
    // Ring: (n-1) slices to the next member.
    const int next = members[(i + 1) % n];
    (HostOf(next, ranks_per_host) == host ? b.inside : b.across) += slice * static_cast<int64_t>(n - 1);
  }
  if (kind == Collective::kReduceScatter || kind == Collective::kAllReduce) {
    // All-to-all: one slice to every other member.
    for (size_t j = 0; j < n; ++j) {
      if (j == i) continue;
      (HostOf(members[j], ranks_per_host) == host ? b.inside : b.across) += slice;
    }
  }
  return b;
}

}  // namespace

int64_t QuantizedRecordBytes(int64_t n, int bits) {
  const int64_t payload = bits == 8 ? n : (n + 1) / 2;
  return (payload + (n + 2047) / 2048 * 4 + 3) / 4 * 4;
}

std::vector<LinkBytes> CollectiveLinkBytes(Collective kind, const std::vector<int>& members, int64_t bytes,
                                           int ranks_per_host) {
  std::vector<LinkBytes> out;
  out.reserve(members.size());
  for (size_t i = 0; i < members.size(); ++i) out.push_back(MemberSends(kind, members, i, bytes, ranks_per_host));
  return out;
}

absl::StatusOr<StepTraffic> EstimateStepTraffic(int64_t trainable_numel, int64_t frozen_numel,
                                                const TrafficOptions& o) {
  if (o.world_size < 1) return absl::InvalidArgumentError(absl::StrCat("world size must be >= 1, got ", o.world_size));
  if (o.ranks_per_host < 1 || o.world_size % o.ranks_per_host != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("ranks per host ", o.ranks_per_host, " does not divide the world size ", o.world_size));
  }
  if (o.stage < 0 || o.stage > 3) return absl::InvalidArgumentError(absl::StrCat("stage must be 0..3, got ", o.stage));
  const int n = o.world_size;
  const bool hierarchical = o.mics_shard_size > 0 && o.mics_shard_size < n;
  if (hierarchical && n % o.mics_shard_size != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("mics_shard_size ", o.mics_shard_size, " does not divide the world size ", n));
  }
  if (hierarchical && o.stage == 0) return absl::InvalidArgumentError("mics_shard_size needs stage 1, 2 or 3");
  if (o.hpz_partition_size < 1 || n % o.hpz_partition_size != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("zero_hpz_partition_size ", o.hpz_partition_size, " does not divide the world size ", n));
  }
  if (o.quantized_gradient_bits != 0 && o.quantized_gradient_bits != 4 && o.quantized_gradient_bits != 8) {
    return absl::InvalidArgumentError(
        absl::StrCat("quantized gradient bits must be 0 (off), 4 or 8, got ", o.quantized_gradient_bits));
  }
  const int k = hierarchical ? o.mics_shard_size : n;
  const int64_t a = std::max<int64_t>(1, o.accumulation_steps);
  const int64_t grads = trainable_numel * o.element_bytes;
  const int64_t params = (trainable_numel + (o.stage == 3 ? frozen_numel : 0)) * o.element_bytes;
  // What stage 3's gathers carry: the parameters, or with qwZ their int8
  // records (a byte each and a float per block of 2048).
  // (zero/quantized_weights.h's kWeightQuantFormat; estimate/ links no ops/).
  const int64_t quantized_numel = trainable_numel + frozen_numel;
  const int64_t gathered =
      o.stage == 3 && o.quantized_weights ? quantized_numel + (quantized_numel + 2047) / 2048 * 4 : params;
  // What stage 3's reduce-scatter carries: the gradients, or with qgZ one
  // record per destination slice (payload, block scales, padding to 4 bytes).
  int64_t reduced = grads;
  if (o.stage == 3 && o.quantized_gradient_bits > 0) {
    reduced = k * QuantizedRecordBytes((trainable_numel + k - 1) / k, o.quantized_gradient_bits);
  }

  std::vector<LinkBytes> per_rank(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    // This rank's shard group and replica group, and its place in each.
    std::vector<int> shard, replica;
    const int g = r / k;
    for (int m = g * k; m < g * k + k; ++m) shard.push_back(m);
    for (int m = r % k; m < n; m += k) replica.push_back(m);
    const size_t in_shard = static_cast<size_t>(r - g * k), in_replica = static_cast<size_t>(r / k);
    LinkBytes mine;
    auto on = [&](Collective kind, const std::vector<int>& group, size_t place, int64_t bytes, int64_t times) {
      const LinkBytes sent = MemberSends(kind, group, place, bytes, o.ranks_per_host);
      mine.inside += sent.inside * times;
      mine.across += sent.across * times;
    };
    switch (o.stage) {
      case 0: on(Collective::kAllReduce, shard, in_shard, grads, 1); break;
      case 1:
        on(Collective::kReduceScatter, shard, in_shard, grads, 1);
        on(Collective::kAllGather, shard, in_shard, params, 1);
        if (hierarchical) on(Collective::kAllReduce, replica, in_replica, grads / k, 1);
        break;
      case 2:
        on(Collective::kReduceScatter, shard, in_shard, grads, a);
        on(Collective::kAllGather, shard, in_shard, params, 1);
        if (hierarchical) on(Collective::kAllReduce, replica, in_replica, grads / k, 1);
        break;
      default:
        if (o.hpz_partition_size > 1 && o.hpz_partition_size < n && !hierarchical) {
          // Forward from the primary shards (every rank), backward from the
          // secondary ones (the H ranks of this rank's group).
          const int h = o.hpz_partition_size;
          std::vector<int> node;
          for (int m = r / h * h; m < r / h * h + h; ++m) node.push_back(m);
          on(Collective::kAllGather, shard, in_shard, gathered, a);
          on(Collective::kAllGather, node, static_cast<size_t>(r % h), gathered, a);
          on(Collective::kReduceScatter, shard, in_shard, reduced, a);
          break;
        }
        if (o.two_hop_gather && k > o.ranks_per_host && k % o.ranks_per_host == 0) {
          // Across: the hosts' ranks of this place, each host's shards once
          // (a buffer of params / L); then the host's L ranks, the whole buffer.
          const int l = o.ranks_per_host;
          std::vector<int> column, host;
          for (int m = g * k + r % l; m < g * k + k; m += l) column.push_back(m);
          for (int m = r / l * l; m < r / l * l + l; ++m) host.push_back(m);
          on(Collective::kAllGather, column, static_cast<size_t>((r - g * k) / l), gathered / l, 2 * a);
          on(Collective::kAllGather, host, static_cast<size_t>(r % l), gathered, 2 * a);
        } else {
          on(Collective::kAllGather, shard, in_shard, gathered, 2 * a);
        }
        on(Collective::kReduceScatter, shard, in_shard, reduced, a);
        if (hierarchical) on(Collective::kAllReduce, replica, in_replica, grads / k, 1);
        break;
    }
    per_rank[static_cast<size_t>(r)] = mine;
  }
  StepTraffic t;
  std::vector<int64_t> host_across(static_cast<size_t>(n / o.ranks_per_host), 0);
  for (int r = 0; r < n; ++r) {
    t.rank_inside += per_rank[static_cast<size_t>(r)].inside;
    t.rank_across += per_rank[static_cast<size_t>(r)].across;
    host_across[static_cast<size_t>(HostOf(r, o.ranks_per_host))] += per_rank[static_cast<size_t>(r)].across;
  }
  t.rank_inside /= n;
  t.rank_across /= n;
  t.host_across = *std::max_element(host_across.begin(), host_across.end());
  return t;
}

}  // namespace zt::estimate
