#include "util/publish_folder.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "util/file_io.h"
#include "util/log.h"

namespace zt {

absl::Status SyncDirectory(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return ErrnoError(errno, absl::StrCat("opening directory '", dir, "' to fsync it"));
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0 && err != EINVAL) return ErrnoError(err, absl::StrCat("fsync of directory '", dir, "'"));
  return absl::OkStatus();
}

absl::Status PublishFolder(const std::string& staged, const std::string& final_path, const std::string& aside) {
  namespace fs = std::filesystem;
  const std::string parent = fs::path(final_path).parent_path().string();
  if (staged == final_path) return SyncDirectory(parent.empty() ? "." : parent);
  std::error_code ec;
  bool replaced = false;
  if (fs::exists(final_path, ec)) {
    if (::rename(final_path.c_str(), aside.c_str()) != 0) {
      return ErrnoError(errno, absl::StrCat("moving the earlier '", final_path, "' aside to '", aside, "'"));
    }
    replaced = true;
  }
  if (::rename(staged.c_str(), final_path.c_str()) != 0) {
    const int err = errno;
    return ErrnoError(err, absl::StrCat("renaming '", staged, "' to '", final_path, "'",
                                        replaced ? absl::StrCat(" (the earlier one is kept as '", aside, "')") : ""));
  }
  absl::Status synced = SyncDirectory(parent.empty() ? "." : parent);
  if (!synced.ok()) return synced;
  if (replaced) {
    fs::remove_all(aside, ec);
    if (ec) {
      ZT_LOG(WARNING) << "could not remove the replaced '" << aside << "': " << ec.message();
    }
  }
  return absl::OkStatus();
}

}  // namespace zt
