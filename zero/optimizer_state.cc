// Implementation of zero/optimizer_state.h: resident tensors, and the
// group <-> sub-group mapping over an OptimizerSwapper.
#include "zero/optimizer_state.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "util/error.h"
#include "util/status.h"

namespace zt::zero {

int OptimizerState::KindIndex(const std::string& name) const {
  for (size_t k = 0; k < kinds_.size(); ++k) {
    if (kinds_[k] == name) return static_cast<int>(k);
  }
  return -1;
}

namespace {

// Runs one piece, turning exceptions into a Status: a swap walk must wait
// for its transfers before unwinding, and callers release what they hold.
absl::Status CallPiece(const OptimizerState::PieceFn& piece, int g, int64_t b, int64_t e, float* const* data) {
  try {
    return piece(g, b, e, data);
  } catch (const Error& err) {
    return err.status();
  } catch (const std::exception& err) {
    return absl::InternalError(absl::StrCat("optimizer step: ", err.what()));
  }
}

absl::Status CheckRange(const OptimizerState& s, int kind, int g, int64_t b, int64_t e) {
  if (kind < 0 || kind >= static_cast<int>(s.kinds().size()) || g < 0 || g >= s.num_groups() || b < 0 ||
      e > s.owned_numel(g) || b > e) {
    return absl::OutOfRangeError(
        absl::StrCat("optimizer state: kind ", kind, " group ", g, " range ", b, "..", e, " is outside the state"));
  }
  return absl::OkStatus();
}

class ResidentState final : public OptimizerState {
 public:
  ResidentState(std::vector<std::string> kinds, std::vector<int64_t> owned_numel)
      : OptimizerState(std::move(kinds), std::move(owned_numel)) {
    tensors_.resize(kinds_.size());
    for (auto& per_group : tensors_) {
      for (int64_t n : owned_numel_) per_group.push_back(at::zeros({n}, at::kFloat));
    }
  }

  absl::Status ForEachPiece(Access, const PieceFn& piece) override {
    std::vector<float*> data(kinds_.size());
    for (int g = 0; g < num_groups(); ++g) {
      for (size_t k = 0; k < kinds_.size(); ++k) data[k] = tensors_[k][static_cast<size_t>(g)].data_ptr<float>();
      ZT_RETURN_IF_ERROR(CallPiece(piece, g, 0, owned_numel(g), data.data()));
    }
    return absl::OkStatus();
  }

  absl::Status BeginWalk(bool descending) override {
    if (walk_open_) return absl::FailedPreconditionError("optimizer state: a walk is already open");
    walk_open_ = num_groups() > 0;
    descending_ = descending;
    walk_pos_ = 0;
    return absl::OkStatus();
  }

  absl::Status AdvanceWalk(int bound, Wait wait, const PieceFn& piece) override {
    if (!walk_open_) return absl::FailedPreconditionError("optimizer state: AdvanceWalk without an open walk");
    std::vector<float*> data(kinds_.size());
    while (walk_pos_ < num_groups()) {
      const int g = descending_ ? num_groups() - 1 - walk_pos_ : walk_pos_;
      if (descending_ ? g < bound : g >= bound) {
        if (wait != Wait::kToEnd) return absl::OkStatus();
        walk_open_ = false;
        return absl::InternalError(
            absl::StrCat("optimizer state: group ", g, " was not ready when the walk had to finish"));
      }
      for (size_t k = 0; k < kinds_.size(); ++k) data[k] = tensors_[k][static_cast<size_t>(g)].data_ptr<float>();
      ++walk_pos_;
      absl::Status st = CallPiece(piece, g, 0, owned_numel(g), data.data());
      if (!st.ok()) {
        walk_open_ = false;
        return st;
      }
    }
    walk_open_ = false;
    return absl::OkStatus();
  }

  bool walk_open() const override { return walk_open_; }

  absl::Status Read(int kind, int g, int64_t b, int64_t e, float* dst) override {
    ZT_RETURN_IF_ERROR(CheckRange(*this, kind, g, b, e));
    // An empty range may come with a null pointer (an empty vector's data()).
    if (e > b) std::memcpy(dst, Resident(kind, g) + b, static_cast<size_t>(e - b) * sizeof(float));
    return absl::OkStatus();
  }

  absl::Status Write(int kind, int g, int64_t b, int64_t e, const float* src) override {
    ZT_RETURN_IF_ERROR(CheckRange(*this, kind, g, b, e));
    if (e > b) std::memcpy(tensor(kind, g).data_ptr<float>() + b, src, static_cast<size_t>(e - b) * sizeof(float));
    return absl::OkStatus();
  }

  const float* Resident(int kind, int g) const override {
    return tensors_[static_cast<size_t>(kind)][static_cast<size_t>(g)].data_ptr<float>();
  }

  int64_t resident_bytes(int kind) const override {
    int64_t n = 0;
    for (const at::Tensor& t : tensors_[static_cast<size_t>(kind)]) n += static_cast<int64_t>(t.nbytes());
    return n;
  }

  at::Tensor tensor(int kind, int g) const { return tensors_[static_cast<size_t>(kind)][static_cast<size_t>(g)]; }

 private:
  std::vector<std::vector<at::Tensor>> tensors_;  // [kind][group]
  bool walk_open_ = false;
  bool descending_ = false;
  int walk_pos_ = 0;  // groups visited by the open walk
};

// Groups laid end to end in the swapper's arrays: group g's owned range
// starts at base_[g].
class SwappedState final : public OptimizerState {
 public:
  SwappedState(std::vector<std::string> kinds, std::vector<int64_t> owned_numel,
               std::unique_ptr<offload::OptimizerSwapper> swapper)
      : OptimizerState(std::move(kinds), std::move(owned_numel)), swapper_(std::move(swapper)) {
    int64_t at = 0;
    for (int64_t n : owned_numel_) {
      base_.push_back(at);
      at += n;
    }
    base_.push_back(at);
  }

  absl::Status ForEachPiece(Access access, const PieceFn& piece) override {
    return swapper_->Run(access, [&](const offload::OptimizerSwapper::SubGroup& sg, float* const* buf) {
      return VisitSubGroup(sg, buf, piece);
    });
  }

  bool NextWalkDescending() const override { return swapper_->next_walk_descending(); }
  bool CanWalkAhead() const override { return true; }
  bool walk_open() const override { return swapper_->walk_open(); }

  absl::Status BeginWalk(bool descending) override { return swapper_->BeginWalk(descending); }

  absl::Status AdvanceWalk(int bound, Wait wait, const PieceFn& piece) override {
    const int64_t at = base_[static_cast<size_t>(std::clamp(bound, 0, num_groups()))];
    // Descending: the ready elements are those from `at` up, so a sub-group
    // is visited down to there and each group is updated as soon as it is
    // ready, not once every group its sub-group reaches into is. Ascending:
    // those below `at`, counted from the sub-group's start.
    return swapper_->Advance(
        [at](const offload::OptimizerSwapper::SubGroup& sg) -> int64_t {
          if (sg.reverse) return sg.end - std::clamp(at, sg.begin, sg.end);
          return std::clamp(at, sg.begin, sg.end) - sg.begin;
        },
        wait,
        [&](const offload::OptimizerSwapper::SubGroup& sg, float* const* buf) {
          return VisitSubGroup(sg, buf, piece);
        });
  }

  absl::Status Read(int kind, int g, int64_t b, int64_t e, float* dst) override {
    ZT_RETURN_IF_ERROR(CheckRange(*this, kind, g, b, e));
    const int64_t base = base_[static_cast<size_t>(g)];
    return swapper_->ReadRange(kind, base + b, base + e, dst);
  }

  absl::Status Write(int kind, int g, int64_t b, int64_t e, const float* src) override {
    ZT_RETURN_IF_ERROR(CheckRange(*this, kind, g, b, e));
    const int64_t base = base_[static_cast<size_t>(g)];
    return swapper_->WriteRange(kind, base + b, base + e, src);
  }

  const float* Resident(int, int) const override { return nullptr; }
  int64_t resident_bytes(int) const override { return 0; }
  int64_t disk_bytes() const override { return static_cast<int64_t>(swapper_->file_bytes()); }
  int64_t buffer_bytes() const override { return static_cast<int64_t>(swapper_->buffer_bytes()); }
  std::string Describe() const override { return swapper_->Describe(); }
  int sub_groups_moved_per_step() const override { return std::max(0, swapper_->num_sub_groups() - swapper_->slots()); }
  offload::OptimizerSwapper::Stats swap_stats() const override { return swapper_->stats(); }

 private:
  // The groups reaching into the sub-group, in the walk's direction, so
  // that the pieces of one group stay consecutive across sub-groups.
  absl::Status VisitSubGroup(const offload::OptimizerSwapper::SubGroup& sg, float* const* buf, const PieceFn& piece) {
    std::vector<float*> data(kinds_.size());
    const int lo_g = static_cast<int>(std::upper_bound(base_.begin(), base_.end(), sg.begin) - base_.begin()) - 1;
    int hi_g = lo_g;
    while (hi_g + 1 < num_groups() && base_[static_cast<size_t>(hi_g) + 1] < sg.end) ++hi_g;
    for (int i = 0; i <= hi_g - lo_g; ++i) {
      const int g = sg.reverse ? hi_g - i : lo_g + i;
      const int64_t lo = std::max(sg.begin, base_[static_cast<size_t>(g)]);
      const int64_t hi = std::min(sg.end, base_[static_cast<size_t>(g) + 1]);
      if (lo >= hi) continue;  // an empty group
      for (size_t k = 0; k < kinds_.size(); ++k) data[k] = buf[k] + (lo - sg.begin);
      const int64_t base = base_[static_cast<size_t>(g)];
      ZT_RETURN_IF_ERROR(CallPiece(piece, g, lo - base, hi - base, data.data()));
    }
    return absl::OkStatus();
  }

  std::unique_ptr<offload::OptimizerSwapper> swapper_;
  std::vector<int64_t> base_;  // num_groups + 1 entries
};

}  // namespace

std::unique_ptr<OptimizerState> MakeResidentState(std::vector<std::string> kinds, std::vector<int64_t> owned_numel) {
  return std::make_unique<ResidentState>(std::move(kinds), std::move(owned_numel));
}

absl::StatusOr<std::unique_ptr<OptimizerState>> MakeSwappedState(std::vector<std::string> kinds,
                                                                 std::vector<int64_t> owned_numel,
                                                                 offload::OptimizerSwapOptions options,
                                                                 offload::IoEngine* io) {
  // Nothing to keep (plain SGD on fp32 parameters): nothing to swap.
  if (kinds.empty()) return MakeResidentState(std::move(kinds), std::move(owned_numel));
  options.kinds = kinds;
  options.total_numel = 0;
  for (int64_t n : owned_numel) options.total_numel += n;
  ZT_ASSIGN_OR_RETURN(std::unique_ptr<offload::OptimizerSwapper> swapper,
                      offload::OptimizerSwapper::Create(options, io));
  return std::unique_ptr<OptimizerState>(
      std::make_unique<SwappedState>(std::move(kinds), std::move(owned_numel), std::move(swapper)));
}

at::Tensor ResidentTensor(OptimizerState& state, int kind, int g) {
  auto* resident = dynamic_cast<ResidentState*>(&state);
  ZT_CHECK_MSG(resident != nullptr, "ResidentTensor on a swapped optimizer state");
  return resident->tensor(kind, g);
}

}  // namespace zt::zero
