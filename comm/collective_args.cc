// Implementation of comm/collective_args.h.
#include "comm/collective_args.h"

#include <cstdint>

#include "absl/strings/str_cat.h"
#include "comm/reduce_kernels.h"
#include "comm/work.h"

namespace zt::comm {
namespace {

absl::Status CheckTensor(const char* what, const char* name, const at::Tensor& t, RequiredDevice device) {
  if (!t.defined()) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": `", name, "` is an undefined tensor"));
  }
  if (!t.is_contiguous()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": `", name, "` is not contiguous: pass a flat buffer or call .contiguous()"));
  }
  if (device.has_value() && t.device().type() != *device) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": `", name, "` is on ", t.device().str(),
                                                   " but this backend needs ", c10::DeviceTypeName(*device, true),
                                                   " tensors"));
  }
  return absl::OkStatus();
}

absl::Status SameKind(const char* what, const at::Tensor& a, const char* an, const at::Tensor& b, const char* bn) {
  if (a.scalar_type() != b.scalar_type()) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": `", an, "` is ", DTypeName(a.scalar_type()), " but `", bn,
                                                   "` is ", DTypeName(b.scalar_type())));
  }
  if (a.device() != b.device()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": `", an, "` is on ", a.device().str(), " but `", bn, "` is on ", b.device().str()));
  }
  return absl::OkStatus();
}

absl::Status CheckReduceOp(const char* what, c10::ScalarType dtype, ReduceOp op) {
  if (!IsReducibleDType(dtype)) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": cannot reduce ", DTypeName(dtype),
                                                   " tensors (supported: fp32, fp64, bf16, fp16, "
                                                   "int32, int64)"));
  }
  if (op == ReduceOp::kAvg && !c10::isFloatingType(dtype)) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": avg is defined for floating-point tensors only, not ",
                                                   DTypeName(dtype), ": use sum and divide"));
  }
  return absl::OkStatus();
}

// Byte range [begin, end) of a tensor's data.
struct Range {
  uintptr_t begin;
  uintptr_t end;
};
Range BytesOf(const at::Tensor& t) {
  auto b = reinterpret_cast<uintptr_t>(t.data_ptr());
  return {b, b + static_cast<uintptr_t>(t.numel()) * t.element_size()};
}
bool Overlap(Range a, Range b) { return a.begin < b.end && b.begin < a.end; }

// Checks shard/flat sizes and aliasing; sets *own_slice when `shard` is
// exactly flat's slice for `rank`.
absl::Status CheckShardOfFlat(const char* what, const at::Tensor& shard, const at::Tensor& flat, int rank, int world,
                              bool* own_slice) {
  const int64_t numel = flat.numel();
  const int64_t begin = ShardBegin(numel, world, rank);
  const int64_t expected = ShardEnd(numel, world, rank) - begin;
  if (shard.numel() != expected) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": `shard` has ", shard.numel(), " elements but rank ", rank, "'s shard of a ", numel,
                     "-element flat buffer over ", world, " ranks has ", expected, " (elements [", begin, ", ",
                     begin + expected, "); shards are ceil(numel / world) long, the last ones shorter)"));
  }
  *own_slice = false;
  if (expected == 0 || numel == 0) return absl::OkStatus();
  Range s = BytesOf(shard);
  Range f = BytesOf(flat);
  if (!Overlap(s, f)) return absl::OkStatus();
  if (s.begin == f.begin + static_cast<uintptr_t>(begin) * flat.element_size()) {
    *own_slice = true;
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrCat(what, ": `shard` overlaps `flat` but is not rank ", rank, "'s slice of it (elements [", begin, ", ",
                   begin + expected, ")): pass flat.narrow(0, ", begin, ", ", expected, ") or a separate buffer"));
}

}  // namespace

absl::Status CheckAllGatherArgs(const at::Tensor& shard, const at::Tensor& flat, int rank, int world,
                                RequiredDevice device, bool* in_place) {
  const char* what = "all_gather";
  if (auto s = CheckTensor(what, "shard", shard, device); !s.ok()) return s;
  if (auto s = CheckTensor(what, "flat", flat, device); !s.ok()) return s;
  if (auto s = SameKind(what, shard, "shard", flat, "flat"); !s.ok()) return s;
  return CheckShardOfFlat(what, shard, flat, rank, world, in_place);
}

absl::Status CheckReduceScatterArgs(const at::Tensor& flat, const at::Tensor& shard, ReduceOp op, int rank, int world,
                                    RequiredDevice device) {
  const char* what = "reduce_scatter";
  if (auto s = CheckTensor(what, "flat", flat, device); !s.ok()) return s;
  if (auto s = CheckTensor(what, "shard", shard, device); !s.ok()) return s;
  if (auto s = SameKind(what, flat, "flat", shard, "shard"); !s.ok()) return s;
  if (op != ReduceOp::kSum && op != ReduceOp::kAvg) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": op ", ToString(op), " is not supported (sum and avg only); use all_reduce"));
  }
  if (auto s = CheckReduceOp(what, flat.scalar_type(), op); !s.ok()) return s;
  bool own_slice = false;
  return CheckShardOfFlat(what, shard, flat, rank, world, &own_slice);
}

absl::Status CheckAllReduceArgs(const at::Tensor& tensor, ReduceOp op, RequiredDevice device) {
  const char* what = "all_reduce";
  if (auto s = CheckTensor(what, "tensor", tensor, device); !s.ok()) return s;
  return CheckReduceOp(what, tensor.scalar_type(), op);
}

absl::Status CheckBroadcastArgs(const at::Tensor& tensor, int root, int world, RequiredDevice device) {
  const char* what = "broadcast";
  if (auto s = CheckTensor(what, "tensor", tensor, device); !s.ok()) return s;
  if (root < 0 || root >= world) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": root ", root, " is not a rank of this group (0..", world - 1, ")"));
  }
  return absl::OkStatus();
}

absl::Status CheckAllToAllArgs(const at::Tensor& input, const at::Tensor& output, int world, RequiredDevice device) {
  const char* what = "all_to_all";
  if (auto s = CheckTensor(what, "input", input, device); !s.ok()) return s;
  if (auto s = CheckTensor(what, "output", output, device); !s.ok()) return s;
  if (auto s = SameKind(what, input, "input", output, "output"); !s.ok()) return s;
  if (input.numel() != output.numel() || input.numel() % world != 0) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": `input` has ", input.numel(), " elements and `output` ",
                                                   output.numel(), "; both need the same count, a multiple of the ",
                                                   world, " ranks (one equal block per rank: pad shorter ones)"));
  }
  if (input.numel() > 0 && Overlap(BytesOf(input), BytesOf(output))) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": `input` and `output` overlap: pass separate buffers"));
  }
  return absl::OkStatus();
}

}  // namespace zt::comm
