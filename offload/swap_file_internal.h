// The parts of SwapFile::Create that turn errno values into Status, exposed
// for unit tests: some failures (a filesystem without O_DIRECT, fallocate
// unsupported or out of space) cannot be produced on demand on a test machine.
// Not for use outside offload/ and its tests.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "absl/status/status.h"

namespace zt::offload::internal {

// The Status for open(2) of swap file `path` in `dir` failing with `err`:
// EACCES/EPERM/EROFS PermissionDenied, EINVAL (no O_DIRECT)
// FailedPrecondition, EEXIST AlreadyExists, ENOSPC/EDQUOT ResourceExhausted.
absl::Status OpenError(int err, const std::string& dir, const std::string& path);

// ResourceExhausted "... needs X, Y free ..." for a swap file of `needed`
// bytes where `free_bytes` are available (-1: unknown); `detail` (may be
// empty) says what reported it.
absl::Status NoRoomError(const std::string& path, uint64_t needed, int64_t free_bytes, const std::string& detail);

// Reserves `bytes` of the open file `fd` with `fallocate_fn` (fallocate(2) in
// production): ENOSPC, EDQUOT and EFBIG become NoRoomError; EOPNOTSUPP or
// ENOSYS (a filesystem that cannot preallocate) falls back to ftruncate,
// silently, because the file still works, only without the early failure.
using FallocateFn = int (*)(int fd, int mode, off_t offset, off_t len);
absl::Status Reserve(int fd, uint64_t bytes, const std::string& dir, const std::string& path, FallocateFn fallocate_fn);

}  // namespace zt::offload::internal
