// mkdir -p, atomic small-file writes.
#include "monitor/file_util.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

#include "absl/strings/str_cat.h"

namespace zt::monitor {
namespace {

absl::Status Errno(int err, const std::string& what, bool append_errno = true) {
  return absl::Status(err == ENOENT ? absl::StatusCode::kNotFound
                      : err == EACCES || err == EPERM || err == EROFS ? absl::StatusCode::kPermissionDenied
                      : err == ENOSPC ? absl::StatusCode::kResourceExhausted
                                      : absl::StatusCode::kInternal,
                      append_errno ? absl::StrCat(what, ": ", std::strerror(err)) : what);
}

}  // namespace

std::string JoinPath(const std::string& dir, const std::string& name) {
  if (dir.empty()) return name;
  if (dir.back() == '/') return dir + name;
  return absl::StrCat(dir, "/", name);
}

absl::Status MakeDirs(const std::string& path, const std::string& config_key) {
  if (path.empty()) return absl::OkStatus();
  std::string partial;
  size_t pos = 0;
  while (pos <= path.size()) {
    size_t slash = path.find('/', pos);
    if (slash == std::string::npos) slash = path.size();
    partial = path.substr(0, slash);
    pos = slash + 1;
    if (partial.empty()) continue;  // leading '/'
    struct stat st;
    if (::stat(partial.c_str(), &st) == 0) {
      if (!S_ISDIR(st.st_mode)) {
        return absl::FailedPreconditionError(absl::StrCat("cannot create ", path, ": ", partial,
                                                          " exists and is not a directory; set ", config_key,
                                                          " to a writable directory"));
      }
      continue;
    }
    if (::mkdir(partial.c_str(), 0755) != 0 && errno != EEXIST) {
      int err = errno;
      std::string where = partial == path ? "" : absl::StrCat(" (creating ", partial, ")");
      return Errno(err, absl::StrCat("cannot create ", path, ": ", std::strerror(err), where, "; set ", config_key,
                                     " to a writable directory"),
                   /*append_errno=*/false);
    }
  }
  return absl::OkStatus();
}

absl::Status WriteFileAtomically(const std::string& path, const std::string& contents) {
  const std::string tmp = absl::StrCat(path, ".tmp.", ::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Errno(errno, absl::StrCat("cannot create ", tmp));
  size_t done = 0;
  while (done < contents.size()) {
    ssize_t n = ::write(fd, contents.data() + done, contents.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      return Errno(err, absl::StrCat("cannot write ", tmp, " (", contents.size(), " bytes)"));
    }
    done += static_cast<size_t>(n);
  }
  int sync_rc = ::fsync(fd);
  int sync_err = errno;
  int close_rc = ::close(fd);
  if (sync_rc != 0 || close_rc != 0) {
    int err = sync_rc != 0 ? sync_err : errno;
    ::unlink(tmp.c_str());
    return Errno(err, absl::StrCat("cannot flush ", tmp));
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    return Errno(err, absl::StrCat("cannot rename ", tmp, " to ", path));
  }
  return absl::OkStatus();
}

}  // namespace zt::monitor
