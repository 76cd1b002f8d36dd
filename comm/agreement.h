// Agreement on a local outcome: every rank learns whether any rank failed, so
// that no rank goes on to a collective its peers will never join (a save
// that failed on one rank, a directory one rank could not create).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "comm/process_group.h"

namespace zt::comm {

// One all-gather of a flag per rank (labelled `what`). Returns `local` where
// it failed; OK where every rank succeeded; else Aborted naming the ranks that
// failed: "<what> failed on ranks 1, 3 (their logs say why)". A failing
// collective is returned with `what` in front. A group of one returns `local`.
absl::Status AgreeAcrossRanks(ProcessGroup& pg, const absl::Status& local, const std::string& what);

// Named items ("key", "value") that must be the same, in the same order, on
// every rank: the model's parameters, the training settings.
using Description = std::vector<std::pair<std::string, std::string>>;

// Collective: every rank learns whether all ranks passed the same
// description. Costs one all-gather of 16 bytes per rank (a 64-bit FNV-1a
// digest and the item count); only when they differ does rank 0's
// description travel (a broadcast of its size, then of its bytes), so that
// every differing rank can name what differs. Returns OK where all agree;
// else FailedPrecondition on every rank: a differing rank names up to five
// of its differences ("rank 1 differs from rank 0 in its <what>:
// optimizer.params.lr is 0.001 on rank 0 and 0.002 here; ..."), the others
// name the differing ranks. A group of one returns OK.
absl::Status AgreeOnDescription(ProcessGroup& pg, const Description& mine, const std::string& what);

// The digest AgreeOnDescription compares (FNV-1a 64 over each key and value,
// with their lengths, in order): the same on every process and build.
uint64_t DescriptionDigest(const Description& items);

}  // namespace zt::comm
