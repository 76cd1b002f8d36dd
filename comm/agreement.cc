// Implementation of comm/agreement.h.
#include "comm/agreement.h"

#include <ATen/ATen.h>

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "comm/collective_label.h"

namespace zt::comm {

absl::Status AgreeAcrossRanks(ProcessGroup& pg, const absl::Status& local, const std::string& what) {
  if (pg.size() == 1) return local;
  CollectiveLabel label(what);
  at::Tensor flags = at::zeros({pg.size()}, at::kInt);
  flags[pg.rank()] = local.ok() ? 0 : 1;
  absl::Status st = pg.AllGather(flags.narrow(0, pg.rank(), 1).clone(), flags)->Wait();
  if (!st.ok()) return absl::Status(st.code(), absl::StrCat(what, ": ranks could not agree: ", st.message()));
  if (!local.ok()) return local;
  std::vector<int> failed;
  const int* f = flags.data_ptr<int>();
  for (int r = 0; r < pg.size(); ++r) {
    if (f[r] != 0) failed.push_back(r);
  }
  if (failed.empty()) return absl::OkStatus();
  return absl::AbortedError(absl::StrCat(what, " failed on rank", failed.size() > 1 ? "s " : " ",
                                         absl::StrJoin(failed, ", "), " (their logs say why)"));
}

}  // namespace zt::comm
