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

std::string DirName(const std::string& path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

}  // namespace

absl::Status ErrnoError(int err, const std::string& what) {
  return absl::Status(absl::ErrnoToStatusCode(err), absl::StrCat(what, ": ", std::strerror(err), Advice(err)));
}

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

absl::StatusOr<AtomicFile> AtomicFile::Create(const std::string& path, const AtomicFileOptions& options) {
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
  file.options_ = options;
  file.options_.direct_block = static_cast<size_t>(AlignUp(std::max(file.options_.direct_block, kDirectAlignment)));
  // Read-write: entering direct mode reads back the partial block at the end.
  int fd = ::open(file.tmp_.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
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
      committed_(other.committed_),
      options_(other.options_),
      direct_refused_(other.direct_refused_),
      direct_fd_(std::move(other.direct_fd_)),
      stage_(std::move(other.stage_)),
      direct_base_(other.direct_base_),
      pending_(std::move(other.pending_)),
      spare_(std::move(other.spare_)),
      refused_(other.refused_),
      patches_(std::move(other.patches_)) {}

AtomicFile& AtomicFile::operator=(AtomicFile&& other) noexcept {
  if (this != &other) {
    for (PendingWrite& w : pending_) w.done.wait();
    fd_.Reset();  // drop our own uncommitted temporary first
    if (!committed_ && !tmp_.empty()) ::unlink(tmp_.c_str());
    path_ = std::move(other.path_);
    tmp_ = std::exchange(other.tmp_, std::string());
    fd_ = std::move(other.fd_);
    size_ = other.size_;
    written_back_ = other.written_back_;
    committed_ = other.committed_;
    options_ = other.options_;
    direct_refused_ = other.direct_refused_;
    direct_fd_ = std::move(other.direct_fd_);
    stage_ = std::move(other.stage_);
    direct_base_ = other.direct_base_;
    pending_ = std::move(other.pending_);
    spare_ = std::move(other.spare_);
    refused_ = other.refused_;
    patches_ = std::move(other.patches_);
  }
  return *this;
}

AtomicFile::~AtomicFile() {
  for (PendingWrite& w : pending_) w.done.wait();  // they write through direct_fd_
  direct_fd_.Reset();
  fd_.Reset();
  if (!committed_ && !tmp_.empty()) ::unlink(tmp_.c_str());
  tmp_.clear();
}

absl::Status AtomicFile::Append(const void* data, size_t n) {
  if (!fd_.valid()) {
    return absl::FailedPreconditionError(absl::StrCat("writing '", path_, "' after Commit or a failed write"));
  }
  if (direct_fd_.valid()) return AppendDirect(static_cast<const char*>(data), n);
  ZT_RETURN_IF_ERROR(WriteBuffered(data, n, size_));
  if (options_.direct_after > 0 && !direct_refused_ && size_ > options_.direct_after) return EnterDirect();
  return absl::OkStatus();
}

absl::Status AtomicFile::PWrite(const void* data, size_t n, uint64_t offset) {
  if (!fd_.valid()) {
    return absl::FailedPreconditionError(absl::StrCat("writing '", path_, "' after Commit or a failed write"));
  }
  if (!direct_fd_.valid()) return WriteBuffered(data, n, offset);
  // Direct mode patches what was appended (a zip record's CRC): bytes below
  // the stage are on their way to disk; they are kept and written through
  // the page cache once the direct writes are done (which never touch those
  // blocks again), so a patch does not drain the writes in flight. The rest
  // is in the stage.
  if (offset + n > size_) {
    return absl::InternalError(absl::StrCat("writing '", tmp_, "': PWrite of ", n, " bytes at offset ", offset,
                                            " past the end (", size_, ") of a file in direct mode; use Append"));
  }
  const char* p = static_cast<const char*>(data);
  const size_t below = offset < direct_base_ ? static_cast<size_t>(std::min<uint64_t>(n, direct_base_ - offset)) : 0;
  if (below > 0) patches_.emplace_back(offset, std::string(p, below));
  if (below < n) std::memcpy(stage_.data() + (offset + below - direct_base_), p + below, n - below);
  return absl::OkStatus();
}

absl::Status AtomicFile::WriteBuffered(const void* data, size_t n, uint64_t offset) {
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
  if (!direct_fd_.valid()) StartWriteback();
  return absl::OkStatus();
}

absl::Status AtomicFile::DirectError(int err, uint64_t offset, size_t n) const {
  return ErrnoError(err, absl::StrCat("writing ", n, " bytes at offset ", offset, " of '", tmp_,
                                      "' (the temporary for '", path_, "', O_DIRECT)"));
}

absl::Status AtomicFile::EnterDirect() {
  const int fd = ::open(tmp_.c_str(), O_WRONLY | O_DIRECT | O_CLOEXEC);
  if (fd < 0) {
    if (errno == EINVAL) {  // the filesystem has no O_DIRECT: stay buffered
      direct_refused_ = true;
      return absl::OkStatus();
    }
    return ErrnoError(errno, absl::StrCat("opening '", tmp_, "' (the temporary for '", path_, "') with O_DIRECT"));
  }
  UniqueFd direct(fd);
  if (stage_.size() < options_.direct_block) stage_ = AlignedBlock(options_.direct_block);
  // The stage starts at the last block boundary; the bytes written since
  // (in the page cache) are read back into it.
  const uint64_t base = AlignDown(size_);
  const size_t tail = static_cast<size_t>(size_ - base);
  for (size_t got = 0; got < tail;) {
    const ssize_t r = ::pread(fd_.get(), stage_.data() + got, tail - got, static_cast<off_t>(base + got));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      return ErrnoError(r < 0 ? errno : EIO,
                        absl::StrCat("reading back ", tail, " bytes at offset ", base, " of '", tmp_, "'"));
    }
    got += static_cast<size_t>(r);
  }
  direct_base_ = base;
  direct_fd_ = std::move(direct);
  return absl::OkStatus();
}

absl::Status AtomicFile::AppendDirect(const char* p, size_t n) {
  const size_t block = options_.direct_block;
  while (n > 0) {
    const size_t used = static_cast<size_t>(size_ - direct_base_);
    const size_t take = std::min(n, block - used);
    std::memcpy(stage_.data() + used, p, take);
    size_ += take;
    p += take;
    n -= take;
    if (size_ - direct_base_ == block) ZT_RETURN_IF_ERROR(FlushStage(/*final=*/false));
  }
  return absl::OkStatus();
}

absl::Status AtomicFile::WaitOldest() {
  PendingWrite w = std::move(pending_.front());
  pending_.pop_front();
  const int err = w.done.get();
  const size_t n = options_.direct_block;
  if (err != 0 && err != EINVAL) return DirectError(err, w.offset, n);
  if (err == EINVAL) {  // refused after all: this block through the page cache
    ZT_RETURN_IF_ERROR(WriteBuffered(w.block.data(), n, w.offset));
    refused_ = true;
  }
  spare_ = std::move(w.block);
  return absl::OkStatus();
}

absl::Status AtomicFile::WaitAll() {
  while (!pending_.empty()) ZT_RETURN_IF_ERROR(WaitOldest());
  return refused_ ? LeaveDirect() : absl::OkStatus();
}

absl::Status AtomicFile::LeaveDirect() {
  direct_fd_.Reset();
  direct_refused_ = true;
  ZT_RETURN_IF_ERROR(WriteBuffered(stage_.data(), static_cast<size_t>(size_ - direct_base_), direct_base_));
  return ApplyPatches();
}

absl::Status AtomicFile::ApplyPatches() {
  for (const auto& [offset, bytes] : patches_) ZT_RETURN_IF_ERROR(WriteBuffered(bytes.data(), bytes.size(), offset));
  patches_.clear();
  return absl::OkStatus();
}

absl::Status AtomicFile::FlushStage(bool final) {
  if (!final) {
    // A full stage (whole blocks): written in the background while the
    // appends go on into another block, up to kWriteDepth blocks at once.
    if (pending_.size() >= kWriteDepth) ZT_RETURN_IF_ERROR(WaitOldest());
    if (refused_) return WaitAll();  // the stage goes through the page cache
    const size_t used = static_cast<size_t>(size_ - direct_base_);
    ZT_CHECK(used == options_.direct_block);
    // Swapped, not moved, out of spare_: a moved-from AlignedBlock keeps
    // its size without its memory, and spare_ must read as empty after.
    AlignedBlock next;
    if (spare_.size() >= options_.direct_block) {
      std::swap(next, spare_);
    } else {
      next = AlignedBlock(options_.direct_block);
    }
    std::swap(stage_, next);  // `next` now holds the full block
    const char* data = next.data();
    pending_.push_back(
        PendingWrite{std::move(next), direct_base_,
                     std::async(std::launch::async, [fd = direct_fd_.get(), data, used, at = direct_base_] {
                       return DirectPWrite(fd, data, used, at);
                     })});
    direct_base_ += used;
    return absl::OkStatus();
  }
  ZT_RETURN_IF_ERROR(WaitAll());
  if (!direct_fd_.valid()) return absl::OkStatus();  // WaitAll fell back to buffered
  const size_t used = static_cast<size_t>(size_ - direct_base_);
  const size_t aligned = static_cast<size_t>(AlignDown(used));
  if (aligned > 0) {
    const int err = DirectPWrite(direct_fd_.get(), stage_.data(), aligned, direct_base_);
    if (err == EINVAL) return LeaveDirect();
    if (err != 0) return DirectError(err, direct_base_, aligned);
  }
  // The short last block goes through the page cache (O_DIRECT writes whole blocks).
  if (used > aligned)
    ZT_RETURN_IF_ERROR(WriteBuffered(stage_.data() + aligned, used - aligned, direct_base_ + aligned));
  direct_fd_.Reset();
  return ApplyPatches();
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
  if (direct_fd_.valid()) ZT_RETURN_IF_ERROR(FlushStage(/*final=*/true));
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

// -------------------------------------------------------------- ConfinedPath

absl::StatusOr<std::string> ConfinedPath(const std::string& folder, const std::string& name, const std::string& what) {
  if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos ||
      name.find('\0') != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(what, " names '", name, "', which is not a plain file name in '",
                                                   folder,
                                                   "': names inside a folder's files may not hold '/' or be "
                                                   "'.' or '..' (the folder is untrusted input)"));
  }
  const std::string path = JoinPath(folder, name);
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) return path;
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path real = fs::weakly_canonical(path, ec);
  if (ec) return ErrnoError(ec.value(), absl::StrCat("resolving the symlink '", path, "' (", what, ")"));
  fs::path root = fs::weakly_canonical(folder, ec);
  if (ec) return ErrnoError(ec.value(), absl::StrCat("resolving '", folder, "'"));
  // A Hugging Face cache snapshot: models--org--name/snapshots/<rev>/file ->
  // ../../blobs/<hash>, inside models--org--name.
  if (root.has_parent_path() && root.parent_path().filename() == "snapshots") root = root.parent_path().parent_path();
  const std::string r = root.string(), t = real.string();
  const bool inside = t.size() > r.size() && t.compare(0, r.size(), r) == 0 && (r.back() == '/' || t[r.size()] == '/');
  if (!inside) {
    return absl::PermissionDeniedError(absl::StrCat(what, " '", path, "' is a symlink to '", t, "', outside '", r,
                                                    "': symlinks in a model folder or checkpoint may only point "
                                                    "inside it (or, in a Hugging Face cache, into its blobs/)"));
  }
  return path;
}

// ------------------------------------------------------------------ ReadFile

absl::StatusOr<ReadFile> ReadFile::Open(const std::string& path, const ReadFileOptions& options) {
  ReadFile file;
  file.path_ = path;
  file.options_ = options;
  // O_NONBLOCK: a FIFO (or device) given as a file opens at once and is
  // refused below, instead of blocking in open() until a writer comes.
  file.fd_.Reset(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (!file.fd_.valid()) return ErrnoError(errno, absl::StrCat("cannot open '", path, "' for reading"));
  // Best effort: a filesystem without O_DIRECT reads everything buffered.
  if (options.direct_min > 0) file.direct_fd_.Reset(::open(path.c_str(), O_RDONLY | O_DIRECT | O_CLOEXEC));
  struct stat st;
  if (::fstat(file.fd_.get(), &st) != 0) return ErrnoError(errno, absl::StrCat("cannot stat '", path, "'"));
  if (S_ISDIR(st.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat("'", path, "' is a directory, not a file"));
  }
  if (!S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", path, "' is not a regular file (a FIFO, socket or device): give a file"));
  }
  // Reads are positional and whole: blocking mode for them (a regular file
  // never blocks, but keep the flags what callers expect).
  (void)::fcntl(file.fd_.get(), F_SETFL, ::fcntl(file.fd_.get(), F_GETFL) & ~O_NONBLOCK);
  file.size_ = static_cast<uint64_t>(st.st_size);
  return file;
}

absl::Status ReadFile::PRead(void* dst, size_t n, uint64_t offset) const {
  if (offset > size_ || n > size_ - offset) {
    return absl::OutOfRangeError(absl::StrCat("file '", path_, "' is truncated: expected ", n, " bytes at offset ",
                                              offset, ", file has ", size_));
  }
  if (direct_fd_.valid() && n >= options_.direct_min) {
    const int err = DirectPRead(direct_fd_.get(), dst, n, offset);
    if (err == 0) return absl::OkStatus();
    if (err == -1) {
      return absl::OutOfRangeError(absl::StrCat("file '", path_, "' is truncated: expected ", n, " bytes at offset ",
                                                offset, ", the file ends before that"));
    }
    if (err != EINVAL) {
      return ErrnoError(err, absl::StrCat("reading ", n, " bytes at offset ", offset, " of '", path_, "'"));
    }
    // EINVAL: O_DIRECT refused for this file after all; read it buffered.
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
