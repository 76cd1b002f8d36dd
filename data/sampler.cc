// DistributedSampler, SampleStream and EvalShard.
#include "data/sampler.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "data/prng.h"
#include "util/status.h"

namespace zt::data {
namespace {

// A per-(seed, epoch) generator seed. Both steps are bijections of 64 bits,
// so for one seed different epochs never share a stream seed.
uint64_t EpochSeed(uint64_t seed, int64_t epoch) {
  uint64_t state = seed;
  uint64_t mixed = SplitMix64(&state);
  state = mixed ^ static_cast<uint64_t>(epoch);
  return SplitMix64(&state);
}

absl::Status CheckRank(int world_size, int rank) {
  if (world_size < 1) return absl::InvalidArgumentError(absl::StrCat("world size ", world_size, " must be >= 1"));
  if (rank < 0 || rank >= world_size) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", rank, " is outside [0, ", world_size, ")"));
  }
  return absl::OkStatus();
}

}  // namespace

// ---------------------------------------------------------- DistributedSampler

DistributedSampler::DistributedSampler(const SamplerOptions& options) : options_(options) {
  const int64_t n = options.num_samples, w = options.world_size;
  per_rank_ = options.drop_last ? n / w : (n + w - 1) / w;
}

absl::StatusOr<DistributedSampler> DistributedSampler::Create(const SamplerOptions& options) {
  ZT_RETURN_IF_ERROR(CheckRank(options.world_size, options.rank));
  if (options.num_samples < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("the dataset has ", options.num_samples, " samples; a sampler needs at least one"));
  }
  if (options.drop_last && options.num_samples < options.world_size) {
    return absl::InvalidArgumentError(absl::StrCat("drop_last with ", options.num_samples, " samples over ",
                                                   options.world_size,
                                                   " ranks leaves every rank empty; turn drop_last off, use fewer "
                                                   "ranks or more data"));
  }
  return DistributedSampler(options);
}

std::vector<int64_t> DistributedSampler::EpochOrder(int64_t epoch) const {
  if (options_.shuffle) {
    Xoshiro256 rng(EpochSeed(options_.seed, epoch));
    return RandomPermutation(options_.num_samples, rng);
  }
  std::vector<int64_t> order(static_cast<size_t>(options_.num_samples));
  for (int64_t i = 0; i < options_.num_samples; ++i) order[i] = i;
  return order;
}

std::vector<int64_t> DistributedSampler::EpochIndices(int64_t epoch) const {
  const std::vector<int64_t> order = EpochOrder(epoch);
  const int64_t n = options_.num_samples, w = options_.world_size;
  std::vector<int64_t> mine;
  mine.reserve(static_cast<size_t>(per_rank_));
  for (int64_t k = 0; k < per_rank_; ++k) {
    const int64_t position = options_.rank + k * w;            // in the padded/truncated order
    mine.push_back(order[static_cast<size_t>(position % n)]);  // padding repeats from the start
  }
  return mine;
}

// ---------------------------------------------------------------- SampleStream

SampleStream::SampleStream(DistributedSampler sampler) : sampler_(std::move(sampler)) {}

const std::vector<int64_t>& SampleStream::Epoch(int64_t epoch) {
  if (cached_epoch_ != epoch) {
    cached_ = sampler_.EpochIndices(epoch);
    cached_epoch_ = epoch;
  }
  return cached_;
}

std::vector<int64_t> SampleStream::Next(int64_t batch_size) {
  ZT_CHECK(batch_size >= 1);
  std::vector<int64_t> batch;
  batch.reserve(static_cast<size_t>(batch_size));
  const int64_t per_rank = sampler_.per_rank();
  while (static_cast<int64_t>(batch.size()) < batch_size) {
    const std::vector<int64_t>& epoch = Epoch(position_.epoch);
    const int64_t take = std::min(batch_size - static_cast<int64_t>(batch.size()), per_rank - position_.offset);
    batch.insert(batch.end(), epoch.begin() + position_.offset, epoch.begin() + position_.offset + take);
    position_.offset += take;
    if (position_.offset == per_rank) {
      ++position_.epoch;
      position_.offset = 0;
    }
  }
  return batch;
}

absl::Status SampleStream::SetPosition(StreamPosition position) {
  if (position.epoch < 0 || position.offset < 0 || position.offset >= sampler_.per_rank()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "data position (epoch ", position.epoch, ", offset ", position.offset, ") is invalid for ", sampler_.per_rank(),
        " samples per rank per epoch; was it saved with another dataset, world size or "
        "drop_last?"));
  }
  position_ = position;
  return absl::OkStatus();
}

StreamPosition PositionAtWorldSize(const StreamPosition& saved, int saved_world, const DistributedSampler& sampler,
                                   int64_t* repeated) {
  const int64_t world = sampler.options().world_size;
  const int64_t consumed = saved.offset * saved_world;
  StreamPosition pos{saved.epoch, consumed / world};
  if (repeated != nullptr) *repeated = consumed - pos.offset * world;
  if (pos.offset >= sampler.per_rank()) {
    pos = StreamPosition{saved.epoch + 1, 0};
    if (repeated != nullptr) *repeated = 0;
  }
  return pos;
}

// ------------------------------------------------------------------- EvalShard

int64_t EvalBatch::num_valid() const { return std::count(valid.begin(), valid.end(), uint8_t{1}); }

absl::StatusOr<std::vector<EvalBatch>> EvalShard(int64_t num_samples, int world_size, int rank, int64_t batch_size) {
  ZT_RETURN_IF_ERROR(CheckRank(world_size, rank));
  if (batch_size < 1) {
    return absl::InvalidArgumentError(absl::StrCat("eval batch size ", batch_size, " must be >= 1"));
  }
  if (num_samples < 0) return absl::InvalidArgumentError(absl::StrCat("eval set of ", num_samples, " samples"));
  const int64_t w = world_size;
  const int64_t begin = rank * num_samples / w, end = (rank + 1) * num_samples / w;
  const int64_t longest = (num_samples + w - 1) / w;  // the most any rank owns
  std::vector<EvalBatch> batches;
  for (int64_t start = 0; start < longest; start += batch_size) {
    const int64_t size = std::min(batch_size, longest - start);
    EvalBatch batch;
    batch.indices.resize(static_cast<size_t>(size), 0);
    batch.valid.resize(static_cast<size_t>(size), 0);
    for (int64_t i = 0; i < size; ++i) {
      const int64_t sample = begin + start + i;
      if (sample < end) {
        batch.indices[i] = sample;
        batch.valid[i] = 1;
      }
    }
    batches.push_back(std::move(batch));
  }
  return batches;
}

}  // namespace zt::data
