// Helpers for the comm tests: deterministic per-rank inputs (every rank can
// build every other rank's input), reference reductions computed with ATen
// in rank order, and tensor comparisons that return a Status with details.
#pragma once

#include <ATen/ATen.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "comm/process_group.h"

namespace zt::comm::testing {

// Rank `rank`'s input for the collective numbered `seed`.
inline at::Tensor RankInput(int rank, int64_t numel, at::ScalarType dtype, uint64_t seed) {
  auto gen = at::detail::createCPUGenerator(seed * 1000003ULL + static_cast<uint64_t>(rank) + 1);
  if (c10::isFloatingType(dtype)) {
    return at::randn({numel}, gen, at::TensorOptions().dtype(at::kFloat)).to(dtype);
  }
  return at::randint(-1000, 1000, {numel}, gen, at::TensorOptions().dtype(at::kLong)).to(dtype);
}

inline std::vector<at::Tensor> AllInputs(int world, int64_t numel, at::ScalarType dtype, uint64_t seed) {
  std::vector<at::Tensor> inputs;
  for (int r = 0; r < world; ++r) inputs.push_back(RankInput(r, numel, dtype, seed));
  return inputs;
}

// The reduction the backend promises: accumulate in rank order in fp32 (fp64
// for fp64, the type itself for integers), divide for avg, round once.
inline at::Tensor ReferenceReduce(const std::vector<at::Tensor>& inputs, ReduceOp op) {
  const at::ScalarType dtype = inputs[0].scalar_type();
  const at::ScalarType acc_type = dtype == at::kDouble ? at::kDouble : c10::isFloatingType(dtype) ? at::kFloat : dtype;
  at::Tensor acc = inputs[0].to(acc_type);
  for (size_t r = 1; r < inputs.size(); ++r) {
    at::Tensor x = inputs[r].to(acc_type);
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAvg: acc = acc + x; break;
      case ReduceOp::kMax: acc = at::maximum(acc, x); break;
      case ReduceOp::kMin: acc = at::minimum(acc, x); break;
    }
  }
  if (op == ReduceOp::kAvg) acc = acc / static_cast<double>(inputs.size());
  return acc.to(dtype);
}

// Exact comparison, or within `atol` (absolute, scaled by the reference's
// magnitude + 1) when `atol` > 0.
inline absl::Status Compare(const at::Tensor& got, const at::Tensor& want, const std::string& what, double atol = 0.0) {
  if (got.sizes() != want.sizes() || got.scalar_type() != want.scalar_type()) {
    return absl::InternalError(absl::StrCat(what, ": got shape/dtype ", got.toString(), " ", got.numel(), ", want ",
                                            want.toString(), " ", want.numel()));
  }
  if (got.numel() == 0) return absl::OkStatus();
  at::Tensor g = got.to(at::kDouble);
  at::Tensor w = want.to(at::kDouble);
  at::Tensor diff = (g - w).abs();
  at::Tensor bad = atol > 0 ? diff > (w.abs() + 1.0) * atol : diff != 0;
  const int64_t nbad = bad.sum().item<int64_t>();
  if (nbad == 0) return absl::OkStatus();
  const int64_t first = bad.to(at::kLong).argmax().item<int64_t>();
  return absl::InternalError(
      absl::StrFormat("%s: %d of %d elements differ; first at %d: got %.9g, want %.9g (max |diff| %.3g)", what, nbad,
                      got.numel(), first, g[first].item<double>(), w[first].item<double>(), diff.max().item<double>()));
}

}  // namespace zt::comm::testing
