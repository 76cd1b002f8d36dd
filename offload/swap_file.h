// SwapFile: one preallocated O_DIRECT file under a swap directory (the
// config's nvme_path), owned by one rank. The file is unlinked as soon as it
// is open, so it disappears with the process however the process ends (a
// crashed run leaves no multi-GiB files behind); its descriptor is all
// there is.
//
// Create checks, each failure a clear Status naming the path:
//  * the directory exists and is a directory      (NotFound / FailedPrecondition);
//  * this process can create files in it           (PermissionDenied);
//  * its filesystem accepts O_DIRECT                (FailedPrecondition: "use a
//    directory on a local disk; tmpfs before Linux 6.6 and some network and
//    FUSE filesystems do not support O_DIRECT");
//  * there is room: the whole size is reserved up front with fallocate, so a
//    full disk fails at start-up, never in the middle of training
//    (ResourceExhausted: "needs X, Y free"); where the filesystem cannot
//    preallocate (EOPNOTSUPP) the file is sized with ftruncate instead;
//  * no file of that name exists (AlreadyExists: it is not ours, so it is
//    neither truncated nor shared).
// Reserved ranges read as zeros until written.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "util/unique_fd.h"

namespace zt::offload {

class SwapFile {
 public:
  // Creates `<dir>/<name>` (name: a file name without '/'), opens it with
  // O_DIRECT, unlinks it and reserves `bytes` (rounded up to kIoAlignment).
  static absl::StatusOr<SwapFile> Create(const std::string& dir, const std::string& name, uint64_t bytes);

  SwapFile(SwapFile&&) = default;
  SwapFile& operator=(SwapFile&&) = default;

  int fd() const { return fd_.get(); }
  // Where it was created (it no longer has a name there): for messages.
  const std::string& path() const { return path_; }
  uint64_t size() const { return size_; }

 private:
  SwapFile() = default;
  UniqueFd fd_;
  std::string path_;
  uint64_t size_ = 0;
};

// Bytes free for an unprivileged writer in `dir` (statvfs f_bavail * f_frsize).
absl::StatusOr<uint64_t> FreeBytes(const std::string& dir);

}  // namespace zt::offload
