// Implementation of comm/shm_transport.h.
#include "comm/shm_transport.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <exception>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "comm/reduce_kernels.h"
#include "comm/shm_segment.h"
#include "util/log.h"

namespace zt::comm {
namespace {

using Clock = std::chrono::steady_clock;

// The smallest slot rank 0 falls back to on a /dev/shm without room.
constexpr int64_t kMinSlotBytes = int64_t{256} << 10;

class ShmTransport final : public Transport {
 public:
  ShmTransport(std::unique_ptr<ShmSegment> segment, int rank, std::vector<int> world_ranks,
               std::chrono::milliseconds timeout)
      : segment_(std::move(segment)),
        rank_(rank),
        n_(segment_->ranks()),
        world_ranks_(std::move(world_ranks)),
        timeout_(timeout),
        description_(absl::StrFormat("shared memory (%d ranks, %d KiB slots, %s)", n_, segment_->slot_bytes() >> 10,
                                     segment_->name())) {}

  const char* name() const override { return "shm"; }
  const std::string& description() const override { return description_; }
  int max_concurrent() const override { return 1; }

  void AllGather(uint32_t tag, const void* shard, void* flat, int64_t numel, size_t es, WireBytes& wire) override {
    if (numel == 0) return;
    Begin(tag, 0, numel * static_cast<int64_t>(es));
    const std::vector<int64_t> bytes = ShardBytes(numel, n_, es);
    auto* out = static_cast<uint8_t*>(flat);
    const int64_t my_offset = ShardBegin(numel, n_, rank_) * static_cast<int64_t>(es);
    if (shard != nullptr) std::memcpy(out + my_offset, shard, static_cast<size_t>(bytes[rank_]));
    GatherRounds(out, numel, es, Clock::now() + timeout_);
    const WireBytes w = AllGatherWireBytes(bytes, rank_);
    wire.sent += w.sent;
    wire.received += w.received;
  }

  void ReduceScatter(uint32_t tag, const void* flat, void* shard, int64_t numel, c10::ScalarType dtype, ReduceOp op,
                     WireBytes& wire) override {
    if (numel == 0) return;
    Begin(tag, 1, numel * static_cast<int64_t>(c10::elementSize(dtype)));
    ReduceScatterRounds(flat, shard, numel, dtype, op, Clock::now() + timeout_);
    const WireBytes w = ReduceScatterWireBytes(numel, n_, rank_, c10::elementSize(dtype));
    wire.sent += w.sent;
    wire.received += w.received;
  }

  void AllReduce(uint32_t tag, void* data, int64_t numel, c10::ScalarType dtype, ReduceOp op,
                 WireBytes& wire) override {
    if (numel == 0) return;
    Begin(tag, 2, numel * static_cast<int64_t>(c10::elementSize(dtype)));
    const size_t es = c10::elementSize(dtype);
    const auto deadline = Clock::now() + timeout_;
    auto* bytes = static_cast<uint8_t*>(data);
    if (static_cast<int64_t>(numel * es) <= segment_->slot_bytes()) {
      // Small (losses, norms, flags): one round in which every rank reduces
      // the whole tensor in rank order, as the reduce-scatter would for each
      // slice, so the values are the same on every rank and transport.
      const int p = Parity();
      std::memcpy(segment_->slot(p, rank_), data, numel * es);
      Sync(deadline);
      std::vector<const void*> sources(n_);
      for (int j = 0; j < n_; ++j) sources[j] = j == rank_ ? data : segment_->slot(p, j);
      ReduceInto(data, sources, numel, dtype, op, n_);
    } else {
      void* own = bytes + ShardBegin(numel, n_, rank_) * static_cast<int64_t>(es);
      ReduceScatterRounds(data, own, numel, dtype, op, deadline);
      GatherRounds(bytes, numel, es, deadline);
    }
    const WireBytes rs = ReduceScatterWireBytes(numel, n_, rank_, es);
    const WireBytes ag = AllGatherWireBytes(ShardBytes(numel, n_, es), rank_);
    wire.sent += rs.sent + ag.sent;
    wire.received += rs.received + ag.received;
  }

  void Broadcast(uint32_t tag, void* data, int64_t bytes, int root, WireBytes& wire) override {
    if (bytes == 0) return;
    Begin(tag, 3 + 8 * root, bytes);
    const auto deadline = Clock::now() + timeout_;
    auto* out = static_cast<uint8_t*>(data);
    const int64_t slot = segment_->slot_bytes();
    for (int64_t off = 0; off < bytes; off += slot) {
      const int64_t len = std::min(slot, bytes - off);
      const int p = Parity();
      if (rank_ == root) std::memcpy(segment_->slot(p, root), out + off, static_cast<size_t>(len));
      Sync(deadline);
      if (rank_ != root) std::memcpy(out + off, segment_->slot(p, root), static_cast<size_t>(len));
    }
    const WireBytes w = BroadcastWireBytes(n_, rank_, root, bytes);
    wire.sent += w.sent;
    wire.received += w.received;
  }

  void Barrier(uint32_t tag) override {
    Begin(tag, 4, 0);
    Sync(Clock::now() + timeout_);
  }

  // Rounds of slot_bytes / n per pair: rank r writes the next piece of each
  // peer's block into its own slot (at that peer's position) and copies its
  // own pieces out of every peer's slot.
  void AllToAll(uint32_t tag, const void* input, void* output, int64_t block_bytes, WireBytes& wire) override {
    if (block_bytes == 0) return;
    Begin(tag, 6, block_bytes * n_);
    const auto deadline = Clock::now() + timeout_;
    const auto* in = static_cast<const uint8_t*>(input);
    auto* out = static_cast<uint8_t*>(output);
    std::memcpy(out + rank_ * block_bytes, in + rank_ * block_bytes, static_cast<size_t>(block_bytes));
    const int64_t sub = std::max<int64_t>(1, segment_->slot_bytes() / n_);
    for (int64_t off = 0; off < block_bytes && n_ > 1; off += sub) {
      const int64_t len = std::min(sub, block_bytes - off);
      const int p = Parity();
      uint8_t* mine = segment_->slot(p, rank_);
      for (int d = 0; d < n_; ++d) {
        if (d != rank_) std::memcpy(mine + d * sub, in + d * block_bytes + off, static_cast<size_t>(len));
      }
      Sync(deadline);
      for (int j = 0; j < n_; ++j) {
        if (j != rank_)
          std::memcpy(out + j * block_bytes + off, segment_->slot(p, j) + rank_ * sub, static_cast<size_t>(len));
      }
    }
    const WireBytes w = AllToAllWireBytes(n_, block_bytes);
    wire.sent += w.sent;
    wire.received += w.received;
  }

  void ExchangeHeaders(uint32_t tag, const int64_t* mine, int64_t* all, int words) override {
    const size_t bytes = static_cast<size_t>(words) * sizeof(int64_t);
    Begin(tag, 5, words);
    const int p = Parity();
    std::memcpy(segment_->header(p, rank_), mine, bytes);
    Sync(Clock::now() + timeout_);
    for (int j = 0; j < n_; ++j) std::memcpy(all + static_cast<size_t>(j) * words, segment_->header(p, j), bytes);
  }

  void Abort(const std::string& reason) override { segment_->Abort(rank_, reason); }

 private:
  int Parity() const { return static_cast<int>(round_ & 1); }
  // Ends the current round: every rank has written its slot of this parity.
  void Sync(Clock::time_point deadline) {
    segment_->Barrier(rank_, Parity(), signature_, deadline, world_ranks_, timeout_);
    ++round_;
  }
  // Names the collective every round of it carries: its tag (the group's
  // sequence number), kind and size, so ranks in different collectives fail
  // at their first round even with the agreement check off.
  void Begin(uint32_t tag, int kind, int64_t bytes) {
    signature_ = (uint64_t{tag} << 32) | ((static_cast<uint64_t>(bytes) * 0x9E3779B1u + kind) & 0xffffffffu);
  }

  // `flat` holds this rank's shard; afterwards every shard, in rounds of one
  // slot of each rank's shard.
  void GatherRounds(uint8_t* flat, int64_t numel, size_t es, Clock::time_point deadline) {
    const std::vector<int64_t> bytes = ShardBytes(numel, n_, es);
    const int64_t slot = segment_->slot_bytes();
    const int64_t largest = bytes[0];  // shard 0 is never shorter than another
    auto begin = [&](int r) { return ShardBegin(numel, n_, r) * static_cast<int64_t>(es); };
    for (int64_t off = 0; off < largest; off += slot) {
      const int p = Parity();
      const int64_t mine = std::clamp<int64_t>(bytes[rank_] - off, 0, slot);
      if (mine > 0) std::memcpy(segment_->slot(p, rank_), flat + begin(rank_) + off, static_cast<size_t>(mine));
      Sync(deadline);
      for (int j = 0; j < n_; ++j) {
        const int64_t len = std::clamp<int64_t>(bytes[j] - off, 0, slot);
        if (j != rank_ && len > 0) std::memcpy(flat + begin(j) + off, segment_->slot(p, j), static_cast<size_t>(len));
      }
    }
  }

  // Each round moves `sub` elements of every rank's slice: rank r writes the
  // next piece of each peer's slice into its own slot (at that peer's
  // position), and sums the pieces of its own slice from every slot in rank
  // order (its own from `flat`). `shard` may be flat's own slice.
  void ReduceScatterRounds(const void* flat, void* shard, int64_t numel, c10::ScalarType dtype, ReduceOp op,
                           Clock::time_point deadline) {
    const size_t es = c10::elementSize(dtype);
    const auto* in = static_cast<const uint8_t*>(flat);
    auto* out = static_cast<uint8_t*>(shard);
    const int64_t sub = std::max<int64_t>(1, segment_->slot_bytes() / static_cast<int64_t>(es) / n_);
    const int64_t shard_size = ShardSize(numel, n_);
    auto piece = [&](int r, int64_t k) {
      const int64_t b = ShardBegin(numel, n_, r) + k * sub;
      return std::pair<int64_t, int64_t>{b, std::max<int64_t>(0, std::min(ShardEnd(numel, n_, r), b + sub) - b)};
    };
    std::vector<const void*> sources(n_);
    for (int64_t k = 0; k * sub < shard_size; ++k) {
      const int p = Parity();
      uint8_t* mine = segment_->slot(p, rank_);
      for (int d = 0; d < n_; ++d) {
        const auto [b, len] = piece(d, k);
        if (d != rank_ && len > 0) std::memcpy(mine + d * sub * es, in + b * es, static_cast<size_t>(len) * es);
      }
      Sync(deadline);
      const auto [b, len] = piece(rank_, k);
      if (len == 0) continue;
      for (int j = 0; j < n_; ++j) {
        sources[j] = j == rank_ ? static_cast<const void*>(in + b * es)
                                : static_cast<const void*>(segment_->slot(p, j) + rank_ * sub * es);
      }
      ReduceInto(out + k * sub * es, sources, len, dtype, op, n_);
    }
  }

  const std::unique_ptr<ShmSegment> segment_;
  const int rank_;
  const int n_;
  const std::vector<int> world_ranks_;
  const std::chrono::milliseconds timeout_;
  const std::string description_;
  uint64_t round_ = 0;      // rounds so far: the same count on every rank, so the parities agree
  uint64_t signature_ = 0;  // the running collective's (Begin)
};

}  // namespace

absl::StatusOr<std::unique_ptr<Transport>> ConnectShmTransport(const StoreHandle& store, const GroupOptions& options,
                                                               const std::vector<int>& world_ranks) {
  const int rank = store.env.rank;
  const int n = store.env.world_size;
  int64_t slot = options.shm_slot_bytes;
  std::unique_ptr<ShmSegment> segment;
  std::string my_error;
  try {
    auto keys = c10::make_intrusive<c10d::PrefixStore>(options.store_prefix + "/shm", store.store);
    if (rank == 0) {
      // A /dev/shm without room for the slots asked for (docker's default is
      // 64 MiB) gets smaller ones, down to kMinSlotBytes: more rounds per
      // collective, still no TCP.
      absl::StatusOr<std::unique_ptr<ShmSegment>> made = ShmSegment::CreateFitting(n, slot, kMinSlotBytes);
      if (made.ok()) slot = (*made)->slot_bytes();
      if (made.ok() && slot != options.shm_slot_bytes) {
        ZT_LOG(WARNING) << "/dev/shm has no room for " << (options.shm_slot_bytes >> 10) << " KiB slots for " << n
                        << " ranks: using " << (slot >> 10)
                        << " KiB slots (more rounds per collective; enlarge /dev/shm, e.g. docker run --shm-size=1g)";
      }
      if (made.ok()) {
        segment = *std::move(made);
        keys->set("segment", StoreBytes(absl::StrCat(segment->name(), " ", segment->token(), " ", slot)));
      } else {
        my_error = std::string(made.status().message());
        keys->set("segment", StoreBytes("!"));
      }
    } else {
      const std::vector<uint8_t> v = keys->get("segment");
      const std::string announced(v.begin(), v.end());
      // "<name> <token> <slot bytes>"
      const std::vector<std::string> fields = absl::StrSplit(announced, ' ');
      uint64_t token = 0;
      if (announced == "!") {
        my_error = "rank 0 could not create the segment";
      } else if (fields.size() != 3 || !absl::SimpleAtoi(fields[1], &token) || !absl::SimpleAtoi(fields[2], &slot) ||
                 slot <= 0) {
        my_error = absl::StrCat("rank 0 announced a segment this rank cannot read ('", announced, "')");
      } else {
        absl::StatusOr<std::unique_ptr<ShmSegment>> opened = ShmSegment::Open(fields[0], token, n, slot);
        if (opened.ok()) {
          segment = *std::move(opened);
        } else {
          my_error = std::string(opened.status().message());
        }
      }
    }
    if (segment) segment->SetPid(rank, getpid());
    keys->set(absl::StrCat("mapped/", rank), StoreBytes(my_error.empty() ? "ok" : my_error));
    std::vector<std::string> failed;
    for (int r = 0; r < n; ++r) {
      std::string theirs = my_error.empty() ? "ok" : my_error;
      if (r != rank) {
        const std::vector<uint8_t> v = keys->get(absl::StrCat("mapped/", r));
        theirs.assign(v.begin(), v.end());
      }
      if (theirs != "ok") failed.push_back(absl::StrCat("rank ", world_ranks[r], ": ", theirs));
    }
    // Every member has mapped it (or given up): the name can go.
    if (segment) segment->Unlink();
    if (!failed.empty()) {
      return absl::UnavailableError(absl::StrCat("shared memory between ranks [", absl::StrJoin(world_ranks, ", "),
                                                 "] is not available: ", absl::StrJoin(failed, "; ")));
    }
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat("rank ", world_ranks[rank],
                                               " could not set up shared memory through the store at ", store.address,
                                               ": ", e.what()));
  }
  return std::unique_ptr<Transport>(new ShmTransport(std::move(segment), rank, world_ranks, options.timeout));
}

}  // namespace zt::comm
