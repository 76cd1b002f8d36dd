// Broadcast of existing tensors: after the call every rank's tensors hold
// `root`'s values. The engine's "send rank 0's initial state", "send rank 0's
// module buffers" and "share the parameters a GatheredParameters scope
// changed" are all this one step.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "comm/process_group.h"

namespace zt::comm {

// Collective: every rank passes tensors of the same sizes and dtypes in the
// same order. Undefined and empty tensors are skipped (on every rank alike);
// a non-contiguous tensor travels through a contiguous copy that is written
// back. The broadcasts run labelled `what` (comm/collective_label.h) and all
// are in flight at once. A failure returns its code with "broadcasting
// <what> failed: " in front. A group of one returns OK without copying.
absl::Status BroadcastInPlace(ProcessGroup& pg, const std::vector<at::Tensor>& tensors, int root,
                              const std::string& what);

}  // namespace zt::comm
