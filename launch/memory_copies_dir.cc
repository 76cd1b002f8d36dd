// Implementation of launch/memory_copies_dir.h.
#include "launch/memory_copies_dir.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace zt::comm {
namespace {

constexpr char kPrefix[] = "zt-copies-";
constexpr char kOwner[] = "owner";

// Whether a launcher holds `folder`'s owner lock.
bool Owned(const std::string& folder) {
  const std::string owner = folder + "/" + kOwner;
  const int fd = ::open(owner.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    // No lock file: a folder being made, or one left half-made. Wait a minute before judging it.
    struct stat st {};
    if (::stat(folder.c_str(), &st) != 0) return false;
    return ::time(nullptr) - st.st_mtime < 60;
  }
  const bool free = ::flock(fd, LOCK_EX | LOCK_NB) == 0;
  ::close(fd);  // releases the lock if this took it
  return !free;
}

}  // namespace

int SweepStaleMemoryCopies(const std::string& root) {
  DIR* d = ::opendir(root.c_str());
  if (d == nullptr) return 0;
  std::vector<std::string> candidates;
  while (dirent* e = ::readdir(d)) {
    if (absl::StartsWith(e->d_name, kPrefix)) candidates.push_back(root + "/" + e->d_name);
  }
  ::closedir(d);
  int removed = 0;
  for (const std::string& folder : candidates) {
    if (Owned(folder)) continue;
    std::error_code ec;
    if (std::filesystem::remove_all(folder, ec) > 0 && !ec) ++removed;
  }
  return removed;
}

absl::StatusOr<std::unique_ptr<MemoryCopiesDir>> MemoryCopiesDir::Create(int node_rank, const std::string& root) {
  SweepStaleMemoryCopies(root);
  std::random_device random;
  for (int attempt = 0;; ++attempt) {
    const std::string path = absl::StrFormat("%s/%s%d-%08x-node%d", root, kPrefix, ::getpid(), random(), node_rank);
    if (::mkdir(path.c_str(), 0700) != 0) {
      const int err = errno;
      if (err == EEXIST && attempt < 8) continue;
      return absl::FailedPreconditionError(
          absl::StrCat("--memory-copies: cannot create '", path, "': ", std::strerror(err), "; ", root,
                       " must be a writable tmpfs (memory), or run without --memory-copies"));
    }
    // Locked under another name, then renamed: a sweeper sees no owner file
    // (a minute's grace) or a locked one, never an unlocked new one.
    const std::string owner = path + "/" + kOwner, locking = owner + ".new";
    const int fd = ::open(locking.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0 || ::flock(fd, LOCK_EX | LOCK_NB) != 0 || ::rename(locking.c_str(), owner.c_str()) != 0) {
      const int err = errno;
      if (fd >= 0) ::close(fd);
      std::error_code ec;
      std::filesystem::remove_all(path, ec);
      return absl::FailedPreconditionError(
          absl::StrCat("--memory-copies: cannot lock '", owner, "': ", std::strerror(err)));
    }
    return std::unique_ptr<MemoryCopiesDir>(new MemoryCopiesDir(path, fd));
  }
}

MemoryCopiesDir::~MemoryCopiesDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
  if (lock_fd_ >= 0) ::close(lock_fd_);
}

}  // namespace zt::comm
