// Implementation of comm/broadcast_in_place.h.
#include "comm/broadcast_in_place.h"

#include <ATen/ATen.h>

#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "comm/collective_label.h"

namespace zt::comm {

absl::Status BroadcastInPlace(ProcessGroup& pg, const std::vector<at::Tensor>& tensors, int root,
                              const std::string& what) {
  if (pg.size() == 1) return absl::OkStatus();
  at::NoGradGuard no_grad;
  CollectiveLabel label(what);
  std::vector<std::unique_ptr<Work>> works;
  std::vector<std::pair<at::Tensor, at::Tensor>> copies;  // (original, contiguous copy)
  for (const at::Tensor& t : tensors) {
    if (!t.defined() || t.numel() == 0) continue;
    at::Tensor c = t.is_contiguous() ? t : t.contiguous();
    works.push_back(pg.Broadcast(c, root));
    if (!c.is_same(t)) copies.emplace_back(t, c);
  }
  // The first failure ends the wait: with a dead peer every other broadcast
  // would time out in turn.
  for (auto& w : works) {
    absl::Status st = w->Wait();
    if (!st.ok()) return absl::Status(st.code(), absl::StrCat("broadcasting ", what, " failed: ", st.message()));
  }
  for (auto& [original, copy] : copies) {
    at::Tensor o = original;
    o.copy_(copy);
  }
  return absl::OkStatus();
}

}  // namespace zt::comm
