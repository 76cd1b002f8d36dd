// Agreement on a local outcome: every rank learns whether any rank failed, so
// that no rank goes on to a collective its peers will never join (a save
// that failed on one rank, a directory one rank could not create).
#pragma once

#include <string>

#include "absl/status/status.h"
#include "comm/process_group.h"

namespace zt::comm {

// One all-gather of a flag per rank (labelled `what`). Returns `local` where
// it failed; OK where every rank succeeded; else Aborted naming the ranks that
// failed: "<what> failed on ranks 1, 3 (their logs say why)". A failing
// collective is returned with `what` in front. A group of one returns `local`.
absl::Status AgreeAcrossRanks(ProcessGroup& pg, const absl::Status& local, const std::string& what);

}  // namespace zt::comm
