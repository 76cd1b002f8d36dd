// SwapFile::Create: every check a swap directory can fail, each with a Status
// that names the path and says what to change, then an O_DIRECT file that is
// unlinked at once and reserved in full with fallocate.
#include "offload/swap_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "offload/io_engine.h"
#include "offload/swap_file_internal.h"
#include "util/status.h"
#include "util/strings.h"

namespace zt::offload {
namespace {

constexpr char kDirectAdvice[] =
    "use a directory on a local disk; tmpfs before Linux 6.6 and some network and FUSE filesystems do not "
    "support O_DIRECT";

absl::Status ErrnoError(int err, const std::string& what) {
  return absl::Status(absl::ErrnoToStatusCode(err), absl::StrCat(what, ": ", std::strerror(err)));
}

std::string Human(uint64_t bytes) {
  return absl::StrCat(HumanBytes(static_cast<double>(bytes)), " (", bytes, " bytes)");
}

// A 4 KiB O_DIRECT write of zeros at offset 0: some filesystems accept the
// O_DIRECT flag at open and refuse the I/O itself (EINVAL), which must show up
// here rather than as the first swap failing mid-training. Zeros keep the
// promise that reserved ranges read as zeros.
absl::Status ProbeDirectIo(int fd, const std::string& dir, const std::string& path) {
  void* block = nullptr;
  if (::posix_memalign(&block, kIoAlignment, kIoAlignment) != 0) {
    return absl::ResourceExhaustedError("cannot allocate 4 KiB to probe O_DIRECT");
  }
  std::memset(block, 0, kIoAlignment);
  ssize_t w;
  do {
    w = ::pwrite(fd, block, kIoAlignment, 0);
  } while (w < 0 && errno == EINTR);
  int err = errno;
  std::free(block);
  if (w == static_cast<ssize_t>(kIoAlignment)) return absl::OkStatus();
  if (w >= 0) return absl::DataLossError(absl::StrCat("probing O_DIRECT on '", path, "': wrote ", w, " of 4096 bytes"));
  if (err == EINVAL) {
    return absl::FailedPreconditionError(absl::StrCat("swap directory '", dir,
                                                      "' does not support O_DIRECT (a 4 KiB "
                                                      "write to '",
                                                      path, "' failed: ", std::strerror(err), "); ", kDirectAdvice));
  }
  return ErrnoError(err, absl::StrCat("probing O_DIRECT with a 4 KiB write to swap file '", path, "'"));
}

}  // namespace

namespace internal {

absl::Status OpenError(int err, const std::string& dir, const std::string& path) {
  switch (err) {
    case EACCES:
    case EPERM:
    case EROFS:
      return absl::PermissionDeniedError(absl::StrCat("cannot create files in swap directory '", dir, "' (opening '",
                                                      path, "': ", std::strerror(err),
                                                      "); make it writable for this user or point nvme_path at "
                                                      "another directory"));
    case EINVAL:
      return absl::FailedPreconditionError(absl::StrCat("swap directory '", dir,
                                                        "' does not support O_DIRECT "
                                                        "(opening '",
                                                        path, "' with O_DIRECT failed: ", std::strerror(err), "); ",
                                                        kDirectAdvice));
    case EEXIST:
      return absl::AlreadyExistsError(absl::StrCat("swap file '", path,
                                                   "' already exists; swap files are unlinked "
                                                   "as soon as they are open, so it belongs to something else (another "
                                                   "run using the same name?): remove it or use another nvme_path"));
    case ENOSPC:
    case EDQUOT:
      return absl::ResourceExhaustedError(absl::StrCat("cannot create swap file '", path, "': ", std::strerror(err),
                                                       "; free space (or inodes) there or point nvme_path at "
                                                       "another disk"));
    default: return ErrnoError(err, absl::StrCat("cannot create swap file '", path, "'"));
  }
}

absl::Status NoRoomError(const std::string& path, uint64_t needed, int64_t free_bytes, const std::string& detail) {
  std::string free_text = free_bytes < 0 ? std::string("an unknown amount") : Human(static_cast<uint64_t>(free_bytes));
  return absl::ResourceExhaustedError(absl::StrCat("not enough space for swap file '", path, "': needs ", Human(needed),
                                                   ", ", free_text, " free", detail.empty() ? "" : " (", detail,
                                                   detail.empty() ? "" : ")",
                                                   "; free space there or point nvme_path at a larger disk"));
}

absl::Status Reserve(int fd, uint64_t bytes, const std::string& dir, const std::string& path,
                     FallocateFn fallocate_fn) {
  if (bytes == 0) return absl::OkStatus();
  const off_t len = static_cast<off_t>(bytes);
  int err = 0;
  while (fallocate_fn(fd, 0, 0, len) != 0) {
    err = errno;
    if (err != EINTR) break;
    err = 0;
  }
  if (err == 0) return absl::OkStatus();
  auto no_room = [&](const char* call, int e) {
    auto free_bytes = FreeBytes(dir);
    return NoRoomError(path, bytes, free_bytes.ok() ? static_cast<int64_t>(*free_bytes) : -1,
                       absl::StrCat(call, ": ", std::strerror(e)));
  };
  if (err == ENOSPC || err == EDQUOT || err == EFBIG) return no_room("fallocate", err);
  if (err != EOPNOTSUPP && err != ENOSYS) {
    return ErrnoError(err, absl::StrCat("cannot reserve ", Human(bytes), " for swap file '", path, "' (fallocate)"));
  }
  // The filesystem cannot preallocate: a sparse file of the right size works,
  // it just finds a full disk later rather than now.
  if (::ftruncate(fd, len) != 0) {
    err = errno;
    if (err == ENOSPC || err == EDQUOT || err == EFBIG) return no_room("ftruncate", err);
    return ErrnoError(err, absl::StrCat("cannot size swap file '", path, "' to ", Human(bytes), " (ftruncate)"));
  }
  return absl::OkStatus();
}

}  // namespace internal

absl::StatusOr<uint64_t> FreeBytes(const std::string& dir) {
  struct statvfs vfs;
  if (::statvfs(dir.c_str(), &vfs) != 0) {
    return ErrnoError(errno, absl::StrCat("cannot read the free space of '", dir, "' (statvfs)"));
  }
  return static_cast<uint64_t>(vfs.f_bavail) * static_cast<uint64_t>(vfs.f_frsize);
}

absl::StatusOr<SwapFile> SwapFile::Create(const std::string& dir, const std::string& name, uint64_t bytes) {
  if (dir.empty()) return absl::InvalidArgumentError("the swap directory (nvme_path) is empty");
  if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat("swap file name '", name, "' must be a file name without '/'"));
  }
  if (bytes > static_cast<uint64_t>(INT64_MAX) - kIoAlignment) {
    return absl::InvalidArgumentError(absl::StrCat("swap file '", name, "' of ", bytes, " bytes is too large"));
  }
  std::string clean_dir = dir;
  while (clean_dir.size() > 1 && clean_dir.back() == '/') clean_dir.pop_back();
  const std::string path = clean_dir == "/" ? "/" + name : clean_dir + "/" + name;
  const uint64_t size = AlignUp(bytes);

  struct stat st;
  if (::stat(clean_dir.c_str(), &st) != 0) {
    int err = errno;
    if (err == ENOENT) {
      return absl::NotFoundError(absl::StrCat("swap directory '", clean_dir,
                                              "' does not exist; create it or point "
                                              "nvme_path at an existing directory"));
    }
    if (err == ENOTDIR) {
      return absl::FailedPreconditionError(absl::StrCat("swap directory '", clean_dir,
                                                        "' is not a directory (part "
                                                        "of the path is a file); point nvme_path at a directory"));
    }
    if (err == EACCES) return internal::OpenError(err, clean_dir, path);
    return ErrnoError(err, absl::StrCat("cannot stat swap directory '", clean_dir, "'"));
  }
  if (!S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat("swap directory '", clean_dir, "' is not a directory; point nvme_path at a directory"));
  }

  // Room first: a clear "needs X, Y free" before anything is created.
  ZT_ASSIGN_OR_RETURN(uint64_t free_bytes, FreeBytes(clean_dir));
  if (size > free_bytes) return internal::NoRoomError(path, size, static_cast<int64_t>(free_bytes), "");

  // O_EXCL: never truncate or share a file that is not ours. As root the
  // permission bits are not consulted, so only open's errno tells whether the
  // directory is really writable (a read-only mount says EROFS).
  int fd;
  do {
    fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_DIRECT | O_CLOEXEC, 0600);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) {
    int err = errno;
    // Some kernels create the file before refusing O_DIRECT; O_EXCL means any
    // file there now is the one this call made.
    if (err == EINVAL) ::unlink(path.c_str());
    return internal::OpenError(err, clean_dir, path);
  }
  SwapFile file;
  file.fd_.Reset(fd);
  file.path_ = path;
  file.size_ = size;
  // Unlinked at once: the blocks are freed when the last descriptor closes,
  // however this process ends.
  if (::unlink(path.c_str()) != 0) {
    int err = errno;
    return ErrnoError(err, absl::StrCat("cannot unlink swap file '", path, "' after opening it (remove it by hand)"));
  }
  ZT_RETURN_IF_ERROR(internal::Reserve(fd, size, clean_dir, path, ::fallocate));
  if (size >= kIoAlignment) ZT_RETURN_IF_ERROR(ProbeDirectIo(fd, clean_dir, path));
  return file;
}

}  // namespace zt::offload
