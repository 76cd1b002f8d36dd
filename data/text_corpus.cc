// Text corpus loading: directory listing with binary and duplicate-file
// filtering, whole-file reads with errno messages, byte tokenization.
#include "data/text_corpus.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <set>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"
#include "util/file_io.h"
#include "util/status.h"
#include "util/unique_fd.h"

namespace zt::data {
namespace {

namespace fs = std::filesystem;

constexpr size_t kBinaryProbeBytes = 4096;

std::string Hint(const std::string& path) {
  if (path == kDefaultTextCorpus) {
    return "install the Debian package fortunes (scripts/setup.sh does) or pass --data FILE";
  }
  return "check the path, or pass --data FILE or --data DIR with text files";
}

// Reads up to `limit` bytes of `path` (all of it when limit is 0).
absl::StatusOr<std::string> ReadFileBytes(const std::string& path, size_t limit) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) {
    int err = errno;
    return ErrnoError(err, absl::StrCat("text corpus: cannot open '", path, "'"));
  }
  std::string out;
  char buf[1 << 16];
  while (limit == 0 || out.size() < limit) {
    size_t want = sizeof(buf);
    if (limit != 0) want = std::min(want, limit - out.size());
    ssize_t n = ::read(fd.get(), buf, want);
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      return ErrnoError(err, absl::StrCat("text corpus: cannot read '", path, "'"));
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

}  // namespace

absl::StatusOr<std::vector<std::string>> ListTextCorpusFiles(const std::string& path) {
  std::error_code ec;
  fs::file_status st = fs::status(path, ec);
  if (ec || !fs::exists(st)) {
    return absl::NotFoundError(absl::StrCat("text corpus '", path, "' does not exist; ", Hint(path)));
  }
  if (!fs::is_directory(st)) return std::vector<std::string>{path};

  std::vector<std::string> names;
  fs::directory_iterator it(path, ec);
  if (ec) {
    return absl::PermissionDeniedError(absl::StrCat("text corpus: cannot list directory '", path, "': ", ec.message()));
  }
  for (const fs::directory_entry& entry : it) {
    std::error_code entry_ec;
    if (entry.is_regular_file(entry_ec)) names.push_back(entry.path().string());  // follows symlinks
  }
  std::sort(names.begin(), names.end());

  std::vector<std::string> files;
  std::set<std::pair<dev_t, ino_t>> seen;
  for (const std::string& name : names) {
    struct stat sb;
    if (::stat(name.c_str(), &sb) != 0) continue;               // vanished
    if (!seen.insert({sb.st_dev, sb.st_ino}).second) continue;  // another name of a listed file
    ZT_ASSIGN_OR_RETURN(std::string head, ReadFileBytes(name, kBinaryProbeBytes));
    if (head.find('\0') != std::string::npos) continue;  // binary
    files.push_back(name);
  }
  if (files.empty()) {
    return absl::NotFoundError(absl::StrCat("text corpus directory '", path,
                                            "' holds no text files (binary files are skipped); ", Hint(path)));
  }
  return files;
}

namespace {

absl::Status EmptyCorpus(const std::string& path, size_t files) {
  return absl::InvalidArgumentError(
      absl::StrCat("text corpus '", path, "' is empty (", files, " file(s), no text); ", Hint(path)));
}

}  // namespace

absl::StatusOr<std::vector<int32_t>> LoadTextCorpus(const std::string& path) {
  ZT_ASSIGN_OR_RETURN(std::vector<std::string> files, ListTextCorpusFiles(path));
  std::vector<int32_t> ids;
  size_t text_bytes = 0;
  for (size_t f = 0; f < files.size(); ++f) {
    ZT_ASSIGN_OR_RETURN(std::string text, ReadFileBytes(files[f], 0));
    if (f > 0) ids.push_back('\n');
    text_bytes += text.size();
    ids.reserve(ids.size() + text.size());
    for (char c : text) ids.push_back(static_cast<unsigned char>(c));
  }
  if (text_bytes == 0) {
    return EmptyCorpus(path, files.size());
  }
  return ids;
}

absl::StatusOr<int64_t> CountTextCorpusTokens(const std::string& path) {
  ZT_ASSIGN_OR_RETURN(std::vector<std::string> files, ListTextCorpusFiles(path));
  int64_t text_bytes = 0;
  for (const std::string& f : files) {
    std::error_code ec;
    const uintmax_t n = std::filesystem::file_size(f, ec);
    if (ec)
      return absl::NotFoundError(absl::StrCat("cannot read '", f, "' of text corpus '", path, "': ", ec.message()));
    text_bytes += static_cast<int64_t>(n);
  }
  if (text_bytes == 0) {
    return EmptyCorpus(path, files.size());
  }
  return text_bytes + static_cast<int64_t>(files.size()) - 1;  // a '\n' between consecutive files
}

}  // namespace zt::data
