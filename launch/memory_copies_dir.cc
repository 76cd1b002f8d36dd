// Implementation of launch/memory_copies_dir.h.
#include "launch/memory_copies_dir.h"

#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace zt::comm {
namespace {

constexpr char kPrefix[] = "zt-copies-";

// The launcher pid in a folder name "zt-copies-<pid>-node<k>", or 0.
pid_t OwnerOf(absl::string_view name) {
  if (!absl::ConsumePrefix(&name, kPrefix)) return 0;
  const size_t dash = name.find('-');
  pid_t pid = 0;
  if (dash == absl::string_view::npos || !absl::SimpleAtoi(name.substr(0, dash), &pid) || pid <= 0) return 0;
  return pid;
}

}  // namespace

int SweepStaleMemoryCopies(const std::string& root) {
  DIR* d = ::opendir(root.c_str());
  if (d == nullptr) return 0;
  std::vector<std::string> stale;
  while (dirent* e = ::readdir(d)) {
    const pid_t owner = OwnerOf(e->d_name);
    // EPERM: alive under another user; only ESRCH means gone.
    if (owner > 0 && ::kill(owner, 0) != 0 && errno == ESRCH) stale.push_back(root + "/" + e->d_name);
  }
  ::closedir(d);
  int removed = 0;
  for (const std::string& s : stale) {
    std::error_code ec;
    if (std::filesystem::remove_all(s, ec) > 0 && !ec) ++removed;
  }
  return removed;
}

absl::StatusOr<std::unique_ptr<MemoryCopiesDir>> MemoryCopiesDir::Create(int node_rank, const std::string& root) {
  SweepStaleMemoryCopies(root);
  const std::string path = absl::StrCat(root, "/", kPrefix, ::getpid(), "-node", node_rank);
  std::error_code ec;
  std::filesystem::remove_all(path, ec);  // a reused pid's leftovers
  if (::mkdir(path.c_str(), 0700) != 0) {
    const int err = errno;
    return absl::FailedPreconditionError(
        absl::StrCat("--memory-copies: cannot create '", path, "': ", std::strerror(err), "; ", root,
                     " must be a writable tmpfs (memory), or run without --memory-copies"));
  }
  return std::unique_ptr<MemoryCopiesDir>(new MemoryCopiesDir(path));
}

MemoryCopiesDir::~MemoryCopiesDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

}  // namespace zt::comm
