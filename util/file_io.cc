// AtomicFile, ReadFile and the small-file helpers: POSIX calls with EINTR and
// short transfers handled, and errors that name the path, the offset, the
// errno text and what to do about it.
#include "util/file_io.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <utility>

#include "absl/strings/str_cat.h"
#include "util/status.h"

namespace zt {
namespace {

// What a user can do about an errno, appended to messages.
std::string Advice(int err) {
  switch (err) {
    case ENOSPC:
    case EDQUOT: return "; free space on that filesystem or choose another directory";
    case EFBIG: return "; the file exceeds a size limit (ulimit -f or the filesystem's maximum file size)";
    case EACCES:
    case EPERM:
    case EROFS: return "; check permissions, or choose a writable directory";
    case ENOENT: return "; check that the path exists";
    case EIO: return "; the device reported an I/O error (check dmesg)";
    default: return "";
  }
}

absl::Status ErrnoError(int err, const std::string& what) {
  return absl::Status(absl::ErrnoToStatusCode(err), absl::StrCat(what, ": ", std::strerror(err), Advice(err)));
}

std::string DirName(const std::string& path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

}  // namespace

// ---------------------------------------------------------------- AtomicFile

namespace {

// "<name>.tmp.<pid>" -> true, with the pid; anything else -> false.
bool ParseTemporaryName(const std::string& name, std::string* target, long* pid) {
  const size_t at = name.rfind(".tmp.");
  if (at == std::string::npos || at == 0) return false;
  const std::string digits = name.substr(at + 5);
  if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos) return false;
  *target = name.substr(0, at);
  *pid = std::strtol(digits.c_str(), nullptr, 10);
  return true;
}

}  // namespace

int RemoveStaleTemporaries(const std::string& dir, const std::string& only_for) {
  int removed = 0;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    std::string target;
    long pid = 0;
    if (!ParseTemporaryName(entry.path().filename().string(), &target, &pid)) continue;
    if (!only_for.empty() && target != only_for) continue;
    // A live process of this host may still be writing it (kill(pid, 0)
    // succeeds, or fails with EPERM for another user's process).
    if (pid == ::getpid() || (::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM)) {
      if (only_for.empty()) continue;
    }
    if (std::filesystem::remove(entry.path(), ec)) ++removed;
  }
  return removed;
}

absl::StatusOr<AtomicFile> AtomicFile::Create(const std::string& path) {
  if (path.empty() || path.back() == '/') {
    return absl::InvalidArgumentError(absl::StrCat("cannot write '", path, "': not a file name"));
  }
  // Temporaries of earlier writers of this same file that were killed
  // mid-write: this writer replaces whatever they were making.
  {
    const size_t slash = path.rfind('/');
    RemoveStaleTemporaries(slash == std::string::npos ? "." : path.substr(0, std::max<size_t>(slash, 1)),
                           path.substr(slash == std::string::npos ? 0 : slash + 1));
  }
  AtomicFile file;
  file.path_ = path;
  file.tmp_ = absl::StrCat(path, ".tmp.", ::getpid());
  int fd = ::open(file.tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    int err = errno;
    file.tmp_.clear();  // nothing to remove
    return ErrnoError(err, absl::StrCat("cannot create '", path, ".tmp.", ::getpid(), "' (to write '", path, "')"));
  }
  file.fd_.Reset(fd);
  return file;
}

AtomicFile::AtomicFile(AtomicFile&& other) noexcept
    : path_(std::move(other.path_)),
      tmp_(std::exchange(other.tmp_, std::string())),
      fd_(std::move(other.fd_)),
      size_(other.size_),
      written_back_(other.written_back_),
      committed_(other.committed_) {}

AtomicFile& AtomicFile::operator=(AtomicFile&& other) noexcept {
  if (this != &other) {
    fd_.Reset();  // drop our own uncommitted temporary first
    if (!committed_ && !tmp_.empty()) ::unlink(tmp_.c_str());
    path_ = std::move(other.path_);
    tmp_ = std::exchange(other.tmp_, std::string());
    fd_ = std::move(other.fd_);
    size_ = other.size_;
    written_back_ = other.written_back_;
    committed_ = other.committed_;
  }
  return *this;
}

AtomicFile::~AtomicFile() {
  fd_.Reset();
  if (!committed_ && !tmp_.empty()) ::unlink(tmp_.c_str());
  tmp_.clear();
}

absl::Status AtomicFile::Append(const void* data, size_t n) {
  ZT_RETURN_IF_ERROR(PWrite(data, n, size_));
  return absl::OkStatus();
}

absl::Status AtomicFile::PWrite(const void* data, size_t n, uint64_t offset) {
  if (!fd_.valid()) {
    return absl::FailedPreconditionError(absl::StrCat("writing '", path_, "' after Commit or a failed write"));
  }
  const char* p = static_cast<const char*>(data);
  uint64_t at = offset;
  size_t left = n;
  while (left > 0) {
    ssize_t w = ::pwrite(fd_.get(), p, left, static_cast<off_t>(at));
    if (w < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      return ErrnoError(err, absl::StrCat("writing ", left, " bytes at offset ", at, " of '", tmp_,
                                          "' (the temporary for '", path_, "')"));
    }
    if (w == 0) {
      return absl::DataLossError(absl::StrCat("writing '", tmp_, "' at offset ", at, ": write returned 0"));
    }
    p += w;
    at += static_cast<uint64_t>(w);
    left -= static_cast<size_t>(w);
  }
  if (offset + n > size_) size_ = offset + n;
  StartWriteback();
  return absl::OkStatus();
}

void AtomicFile::StartWriteback() {
  // Appends only: the file grows front to back, and each full window behind
  // the end is handed to the disk without waiting. Best effort: an error
  // here shows again at Commit's fsync, which checks everything.
  while (size_ - written_back_ >= kWritebackWindow) {
    ::sync_file_range(fd_.get(), static_cast<off_t>(written_back_), static_cast<off_t>(kWritebackWindow),
                      SYNC_FILE_RANGE_WRITE);
    written_back_ += kWritebackWindow;
  }
}

absl::Status AtomicFile::Commit() {
  if (committed_ || !fd_.valid()) {
    return absl::FailedPreconditionError(absl::StrCat("'", path_, "' was already committed"));
  }
  if (::fsync(fd_.get()) != 0) {
    return ErrnoError(errno, absl::StrCat("fsync of '", tmp_, "' (the temporary for '", path_, "')"));
  }
  if (::close(fd_.Release()) != 0) {
    return ErrnoError(errno, absl::StrCat("closing '", tmp_, "' (the temporary for '", path_, "')"));
  }
  if (::rename(tmp_.c_str(), path_.c_str()) != 0) {
    return ErrnoError(errno, absl::StrCat("renaming '", tmp_, "' to '", path_, "'"));
  }
  committed_ = true;
  // The rename is durable only once the directory entry is on disk.
  std::string dir = DirName(path_);
  UniqueFd dir_fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!dir_fd.valid()) return ErrnoError(errno, absl::StrCat("opening directory '", dir, "' to fsync it"));
  if (::fsync(dir_fd.get()) != 0 && errno != EINVAL) {  // EINVAL: the filesystem cannot sync directories
    return ErrnoError(errno, absl::StrCat("fsync of directory '", dir, "' after renaming '", path_, "'"));
  }
  return absl::OkStatus();
}

absl::Status WriteFileAtomically(const std::string& path, const std::string& contents) {
  ZT_ASSIGN_OR_RETURN(AtomicFile file, AtomicFile::Create(path));
  ZT_RETURN_IF_ERROR(file.Append(contents.data(), contents.size()));
  return file.Commit();
}

absl::StatusOr<std::string> ReadSmallFile(const std::string& path, size_t max_bytes) {
  ZT_ASSIGN_OR_RETURN(ReadFile file, ReadFile::Open(path));
  if (file.size() > max_bytes) {
    return absl::FailedPreconditionError(absl::StrCat("'", path, "' has ", file.size(), " bytes, more than the ",
                                                      max_bytes, " expected of this file; is it the right file?"));
  }
  std::string contents(file.size(), '\0');
  ZT_RETURN_IF_ERROR(file.PRead(contents.data(), contents.size(), 0));
  return contents;
}

std::string JoinPath(const std::string& dir, const std::string& name) {
  if (dir.empty()) return name;
  if (dir.back() == '/') return dir + name;
  return absl::StrCat(dir, "/", name);
}

absl::Status MakeDirs(const std::string& path) {
  if (path.empty()) return absl::OkStatus();
  size_t pos = 0;
  while (pos <= path.size()) {
    size_t slash = path.find('/', pos);
    if (slash == std::string::npos) slash = path.size();
    const std::string partial = path.substr(0, slash);
    pos = slash + 1;
    if (partial.empty()) continue;  // leading '/'
    struct stat st;
    if (::stat(partial.c_str(), &st) == 0) {
      if (!S_ISDIR(st.st_mode)) {
        return absl::FailedPreconditionError(
            absl::StrCat("cannot create ", path, ": ", partial, " exists and is not a directory"));
      }
      continue;
    }
    if (::mkdir(partial.c_str(), 0755) != 0 && errno != EEXIST) {
      const int err = errno;
      const std::string where = partial == path ? "" : absl::StrCat(" (creating ", partial, ")");
      return absl::Status(absl::ErrnoToStatusCode(err),
                          absl::StrCat("cannot create ", path, ": ", std::strerror(err), where, Advice(err)));
    }
  }
  return absl::OkStatus();
}

// ------------------------------------------------------------------ ReadFile

absl::StatusOr<ReadFile> ReadFile::Open(const std::string& path) {
  ReadFile file;
  file.path_ = path;
  file.fd_.Reset(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!file.fd_.valid()) return ErrnoError(errno, absl::StrCat("cannot open '", path, "' for reading"));
  struct stat st;
  if (::fstat(file.fd_.get(), &st) != 0) return ErrnoError(errno, absl::StrCat("cannot stat '", path, "'"));
  if (S_ISDIR(st.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat("'", path, "' is a directory, not a file"));
  }
  file.size_ = static_cast<uint64_t>(st.st_size);
  return file;
}

absl::Status ReadFile::PRead(void* dst, size_t n, uint64_t offset) const {
  if (offset > size_ || n > size_ - offset) {
    return absl::OutOfRangeError(absl::StrCat("file '", path_, "' is truncated: expected ", n, " bytes at offset ",
                                              offset, ", file has ", size_));
  }
  char* p = static_cast<char*>(dst);
  uint64_t at = offset;
  size_t left = n;
  while (left > 0) {
    ssize_t r = ::pread(fd_.get(), p, left, static_cast<off_t>(at));
    if (r < 0) {
      if (errno == EINTR) continue;
      return ErrnoError(errno, absl::StrCat("reading ", left, " bytes at offset ", at, " of '", path_, "'"));
    }
    if (r == 0) {  // shrank since Open
      return absl::OutOfRangeError(absl::StrCat("file '", path_, "' is truncated: expected ", n, " bytes at offset ",
                                                offset, ", file ends at ", at));
    }
    p += r;
    at += static_cast<uint64_t>(r);
    left -= static_cast<size_t>(r);
  }
  return absl::OkStatus();
}

}  // namespace zt
