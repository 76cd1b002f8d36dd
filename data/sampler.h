// Which samples each rank reads, like PyTorch's DistributedSampler: per
// epoch one permutation of [0, N) from (seed, epoch), padded or truncated to
// a multiple of the world size, dealt round-robin to the ranks. Deterministic
// across machines and standard libraries (prng.h), and resumable mid-epoch
// (SampleStream positions). Evaluation uses EvalShard instead: every sample
// exactly once, with padding masks so all ranks run the same number of
// forward passes.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"

namespace zt::data {

struct SamplerOptions {
  int64_t num_samples = 0;
  int world_size = 1;
  int rank = 0;
  uint64_t seed = 0;
  bool shuffle = true;     // false: epoch order is 0, 1, ..., N-1
  bool drop_last = false;  // true: truncate to a multiple of world_size; false: pad
};

class DistributedSampler {
 public:
  // Errors: num_samples < 1, world_size < 1, rank outside [0, world_size),
  // drop_last with num_samples < world_size (no rank would get a sample).
  static absl::StatusOr<DistributedSampler> Create(const SamplerOptions& options);

  const SamplerOptions& options() const { return options_; }
  // Samples per rank per epoch: ceil(N / W), or floor(N / W) with drop_last.
  int64_t per_rank() const { return per_rank_; }
  // per_rank() * world_size: the padded (or truncated) epoch length.
  int64_t total_size() const { return per_rank_ * options_.world_size; }

  // The order of all N samples in `epoch` (before padding and dealing): a
  // permutation from (seed, epoch), or 0..N-1 without shuffle.
  std::vector<int64_t> EpochOrder(int64_t epoch) const;
  // This rank's per_rank() samples of `epoch`: positions rank, rank + W,
  // rank + 2W, ... of EpochOrder(epoch) padded by repeating it from its start
  // (PyTorch's padding; a sample can then appear twice in the epoch) or
  // truncated with drop_last.
  std::vector<int64_t> EpochIndices(int64_t epoch) const;

 private:
  explicit DistributedSampler(const SamplerOptions& options);
  SamplerOptions options_;
  int64_t per_rank_ = 0;
};

// Where a SampleStream is: the epoch and how many of this rank's samples of
// it were consumed (0 <= offset < per_rank). Identical on every rank, since
// all ranks draw the same batch sizes; save it in checkpoints.
struct StreamPosition {
  int64_t epoch = 0;
  int64_t offset = 0;
  bool operator==(const StreamPosition& o) const { return epoch == o.epoch && offset == o.offset; }
};

// Where a stream over `sampler` continues from `saved`, the position of a
// stream over the same samples at `saved_world` ranks: the same point of the
// epoch's global order. Offset k at W ranks consumed positions [0, kW) of the
// epoch's order (rank r takes r, r + W, ...), so at W' ranks the stream goes
// on at kW / W' per rank: exact (no sample repeated or skipped, and every
// later step draws the same global batch as the uninterrupted run) when W'
// divides kW, which it does whenever the global batch is unchanged; else
// rounded down, and `*repeated` (when not null) says how many positions are
// dealt again. Past the new world's last position of the epoch (its tail was
// padding or dropped): the next epoch's start. The epoch's padding (or
// truncation) to a multiple of the world size is the new world's from there.
StreamPosition PositionAtWorldSize(const StreamPosition& saved, int saved_world, const DistributedSampler& sampler,
                                   int64_t* repeated = nullptr);

// Micro-batches of sample indices for one rank, epoch after epoch. Every rank
// must call Next with the same batch sizes in the same order (lockstep).
// Not thread-safe.
class SampleStream {
 public:
  explicit SampleStream(DistributedSampler sampler);

  // The next `batch_size` (>= 1) indices of this rank. When the epoch runs
  // out mid-batch, the rest comes from the next epoch's order (a batch can
  // span epochs, and a batch larger than per_rank spans several).
  std::vector<int64_t> Next(int64_t batch_size);

  StreamPosition position() const { return position_; }
  // Resumes at `position` (from position() of a stream with the same
  // options). Errors: negative epoch, offset outside [0, per_rank).
  absl::Status SetPosition(StreamPosition position);

  const DistributedSampler& sampler() const { return sampler_; }

 private:
  const std::vector<int64_t>& Epoch(int64_t epoch);

  DistributedSampler sampler_;
  StreamPosition position_;
  int64_t cached_epoch_ = -1;
  std::vector<int64_t> cached_;
};

// One evaluation micro-batch of a rank: `indices` to run and `valid[i]` = 1
// for a real sample, 0 for padding (whose index is a valid sample, so the
// forward pass works, but whose loss/accuracy must be masked out).
struct EvalBatch {
  std::vector<int64_t> indices;
  std::vector<uint8_t> valid;
  int64_t num_valid() const;
};

// Rank `rank`'s evaluation batches: it owns samples [rank*N/W, (rank+1)*N/W)
// (contiguous, each of [0, N) on exactly one rank, exactly once). Every rank
// gets the same number of batches, ceil(ceil(N/W) / batch_size), and batch k
// has the same size on every rank: batch_size, except the last, which is
// ceil(N/W) - k*batch_size. Ranks with fewer samples (or none, when N < W)
// fill with padding (index 0, valid 0). This keeps collective forward passes
// (ZeRO stage 3 gathers parameters in forward) in lockstep.
// N == 0 gives no batches. Errors: batch_size < 1, world_size < 1, rank
// outside [0, world_size), N < 0.
absl::StatusOr<std::vector<EvalBatch>> EvalShard(int64_t num_samples, int world_size, int rank, int64_t batch_size);

}  // namespace zt::data
