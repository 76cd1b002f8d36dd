// Partitioning math for ZeRO stages 0-2: which parameters share a flat buffer
// (a "group"), where each parameter sits in it, and which slice each rank owns.
// Pure functions, no tensors and no communication, in the LibTorch-free
// planning library that the engine (zero/), the checkpoint tools (ckpt/) and
// the memory estimate (estimate/) all link: a layout rule changes here once.
//
// Groups double as communication buckets: a group's gradients are reduced as
// soon as all of them are ready, so groups hold about `bucket_numel` elements.
// Parameters are assigned walking the model backwards (the order backward
// produces gradients), and group 0 is the first to become ready.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace zt::plan {

// The padding rule of every flat buffer: `numel` rounded up to a multiple of
// 2 x partitions (DeepSpeed's stage 1/2 alignment), and at least that, so
// each of `partitions` ranks owns an equal, non-empty, contiguous shard.
int64_t PaddedNumel(int64_t numel, int partitions);

// DeepSpeed's stage-3 rule, for reading (and one day writing) its
// checkpoints: every parameter is partitioned on its own, each of
// `partitions` ranks holding ceil(numel / partitions) elements of it (the
// last rank's piece padded).
int64_t PerParamShardNumel(int64_t numel, int partitions);

struct ParamInfo {
  std::string name;
  std::vector<int64_t> shape;
  int64_t numel = 0;
};

// One parameter inside a group's flat buffer.
struct ParamSlot {
  int param_index = 0;  // index into the ParamInfo list given to PlanLayout
  int64_t offset = 0;   // first element in the group's flat buffer
  int64_t numel = 0;
};

struct GroupLayout {
  std::vector<ParamSlot> slots;  // in flat-buffer order (ascending offset)
  int64_t numel = 0;             // sum of the parameters' numel
  int64_t padded_numel = 0;      // numel rounded up to a multiple of `alignment`
  int64_t shard_numel = 0;       // padded_numel / partitions

  int64_t ShardBegin(int partition) const { return shard_numel * partition; }
  int64_t ShardEnd(int partition) const { return shard_numel * (partition + 1); }
};

struct Layout {
  std::vector<GroupLayout> groups;
  int partitions = 1;  // ranks sharing each group's optimizer state (1 at stage 0)
  int64_t total_numel() const;
};

// Plans the groups. `bucket_numel` > 0 bounds a group's size except that a
// parameter larger than it gets a group of its own. Each group is padded to a
// multiple of 2 * partitions (DeepSpeed's stage 1/2 padding) so every
// partition owns an equal, contiguous shard.
Layout PlanLayout(const std::vector<ParamInfo>& params, int64_t bucket_numel, int partitions);

// The part of `slot` that falls inside [begin, end) of its group's buffer, as
// offsets relative to the parameter's own first element; empty when
// begin_in_param == end_in_param.
struct SlotRange {
  int64_t begin_in_param = 0;
  int64_t end_in_param = 0;
  bool empty() const { return begin_in_param >= end_in_param; }
};
SlotRange Intersect(const ParamSlot& slot, int64_t begin, int64_t end);

}  // namespace zt::plan
