// Implementation of train/job/run_lock.h.
#include "train/job/run_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "util/file_io.h"

namespace zt::train {
namespace {

// The holder's own words ("pid 4242 since 2026-11-25 07:30:01 UTC"), or "".
std::string ReadHolder(int fd) {
  char buf[256] = {0};
  const ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
  std::string s = n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

}  // namespace

absl::StatusOr<RunLock> RunLock::Acquire(const std::string& output_dir) {
  if (absl::Status made = MakeDirs(output_dir); !made.ok()) {
    return absl::Status(made.code(),
                        absl::StrCat("the output directory: ", made.message(), "; choose another --output-dir"));
  }
  const std::string path = output_dir + "/.zt_run.lock";
  UniqueFd fd(open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
  if (!fd.valid()) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot open ", path, ": ", std::strerror(errno), "; choose another --output-dir"));
  }
  if (flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK) {
      return absl::PermissionDeniedError(absl::StrCat("cannot lock ", path, ": ", std::strerror(errno)));
    }
    const std::string holder = ReadHolder(fd.get());
    return absl::FailedPreconditionError(
        absl::StrCat("another zt train run", holder.empty() ? "" : absl::StrCat(" (", holder, ")"), " is writing to ",
                     output_dir, ": wait for it to finish, or give this run its own --output-dir"));
  }
  const std::time_t now = std::time(nullptr);
  char when[64] = "";
  std::tm tm{};
  if (gmtime_r(&now, &tm) != nullptr) std::strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S UTC", &tm);
  const std::string record = absl::StrFormat("pid %d since %s\n", getpid(), when);
  if (ftruncate(fd.get(), 0) != 0 || pwrite(fd.get(), record.data(), record.size(), 0) < 0) {
    // The lock holds without the record; only the second run's message loses the pid.
  }
  return RunLock(std::move(fd), path);
}

}  // namespace zt::train
