// Implementation of ckpt/memory_copies.h.
#include "ckpt/memory_copies.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <memory>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "util/file_io.h"
#include "util/status.h"
#include "util/unique_fd.h"

namespace zt::ckpt {
namespace {

constexpr char kManifestName[] = "manifest";
constexpr char kManifestHeader[] = "zt-memory-copy 1";

}  // namespace

bool IsCopyFileName(const std::string& name) {
  return !name.empty() && name != "." && name != ".." && name != kManifestName && name.find('/') == std::string::npos &&
         name.find('\0') == std::string::npos && name.find('\n') == std::string::npos;
}

std::string HeldCopy::ToText() const {
  std::string s = absl::StrCat(kManifestHeader, "\ndir ", dir, "\ntag ", tag, "\nrank ", rank, "\nworld ", world_size,
                               "\nlocal_world ", local_world_size, "\nneighbour ", neighbour, "\n");
  for (const std::string& f : own) absl::StrAppend(&s, "own ", f, "\n");
  for (const std::string& f : neighbour_files) absl::StrAppend(&s, "neighbour_file ", f, "\n");
  absl::StrAppend(&s, "end\n");
  return s;
}

std::optional<HeldCopy> HeldCopy::FromText(const std::string& text) {
  std::vector<std::string> lines = absl::StrSplit(text, '\n');
  if (lines.empty() || lines[0] != kManifestHeader) return std::nullopt;
  HeldCopy h;
  bool ended = false, have_tag = false, have_dir = false;
  for (size_t i = 1; i < lines.size(); ++i) {
    const std::string& line = lines[i];
    if (ended) {
      if (!line.empty()) return std::nullopt;
      continue;
    }
    if (line == "end") {
      ended = true;
      continue;
    }
    const size_t space = line.find(' ');
    if (space == std::string::npos) return std::nullopt;
    const std::string key = line.substr(0, space), value = line.substr(space + 1);
    int n = 0;
    if (key == "dir") {
      if (value.empty() || value[0] != '/') return std::nullopt;
      h.dir = value;
      have_dir = true;
    } else if (key == "tag") {
      if (!IsCopyFileName(value)) return std::nullopt;
      h.tag = value;
      have_tag = true;
    } else if (key == "own" || key == "neighbour_file") {
      if (!IsCopyFileName(value)) return std::nullopt;
      (key == "own" ? h.own : h.neighbour_files).push_back(value);
    } else if (absl::SimpleAtoi(value, &n)) {
      if (key == "rank") {
        h.rank = n;
      } else if (key == "world") {
        h.world_size = n;
      } else if (key == "local_world") {
        h.local_world_size = n;
      } else if (key == "neighbour") {
        h.neighbour = n;
      } else {
        return std::nullopt;
      }
    } else {
      return std::nullopt;
    }
  }
  // The manifest is written last and whole: a torn one lacks "end".
  if (!ended || !have_tag || !have_dir || h.rank < 0 || h.world_size < 1 || h.local_world_size < 1) return std::nullopt;
  return h;
}

std::optional<MemoryCopies> MemoryCopies::FromEnv(int rank) {
  const char* root = std::getenv(kMemoryCopiesEnv);
  if (root == nullptr || *root == '\0') return std::nullopt;
  return MemoryCopies(root, rank);
}

std::string MemoryCopies::RankFolder(int rank) const { return JoinPath(root_, absl::StrCat("rank", rank)); }

std::optional<HeldCopy> MemoryCopies::HeldBy(int rank) const {
  const std::string folder = JoinPath(RankFolder(rank), "current");
  absl::StatusOr<std::string> text = ReadSmallFile(JoinPath(folder, kManifestName), 1 << 20);
  if (!text.ok()) return std::nullopt;
  std::optional<HeldCopy> h = HeldCopy::FromText(*text);
  if (!h || h->rank != rank) return std::nullopt;
  h->folder = folder;
  return h;
}

void MemoryCopies::Forget(const std::string& tag) const {
  std::optional<HeldCopy> h = Held();
  if (!h || h->tag != tag) return;
  std::error_code ec;
  std::filesystem::remove_all(h->folder, ec);
}

absl::Status MemoryCopies::Begin() const {
  // The held copy goes first: Begin follows a commit that moved `latest`
  // past it (or a load that found it useless), so it can serve no restart
  // any more, and freeing it first keeps one copy's memory, not two.
  for (const char* what : {"current", "incoming"}) {
    const std::string folder = JoinPath(RankFolder(rank_), what);
    std::error_code ec;
    std::filesystem::remove_all(folder, ec);
    if (ec) return absl::InternalError(absl::StrCat("memory copies: cannot remove '", folder, "': ", ec.message()));
  }
  return MakeDirs(JoinPath(RankFolder(rank_), "incoming"));
}

std::string MemoryCopies::Incoming(const std::string& name) const {
  return JoinPath(JoinPath(RankFolder(rank_), "incoming"), name);
}

absl::Status MemoryCopies::Promote(HeldCopy held) const {
  held.rank = rank_;
  if (held.dir.empty() || held.dir[0] != '/' || held.dir.find('\n') != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat("memory copies: '", held.dir, "' is not an absolute path"));
  }
  const std::string folder = RankFolder(rank_);
  const std::string incoming = JoinPath(folder, "incoming"), current = JoinPath(folder, "current");
  for (const auto* names : {&held.own, &held.neighbour_files}) {
    for (const std::string& name : *names) {
      if (!IsCopyFileName(name)) {
        return absl::InvalidArgumentError(absl::StrCat("memory copies: '", name, "' is not a plain file name"));
      }
    }
  }
  ZT_RETURN_IF_ERROR(WriteFileAtomically(JoinPath(incoming, kManifestName), held.ToText()));
  std::error_code ec;
  std::filesystem::remove_all(current, ec);
  if (ec) return absl::InternalError(absl::StrCat("memory copies: cannot remove '", current, "': ", ec.message()));
  if (::rename(incoming.c_str(), current.c_str()) != 0) {
    return ErrnoError(errno, absl::StrCat("memory copies: rename '", incoming, "' to '", current, "'"));
  }
  return absl::OkStatus();
}

std::vector<int> MemoryCopies::RanksWithFolders() const {
  std::vector<int> ranks;
  DIR* d = ::opendir(root_.c_str());
  if (d == nullptr) return ranks;
  while (dirent* e = ::readdir(d)) {
    absl::string_view name = e->d_name;
    int r = 0;
    if (absl::ConsumePrefix(&name, "rank") && absl::SimpleAtoi(name, &r) && r >= 0 &&
        absl::StrCat("rank", r) == e->d_name) {
      ranks.push_back(r);
    }
  }
  ::closedir(d);
  std::sort(ranks.begin(), ranks.end());
  return ranks;
}

void MemoryCopies::ForgetOthers(const std::string& tag, const std::vector<int>& keep) const {
  for (int r : RanksWithFolders()) {
    if (std::find(keep.begin(), keep.end(), r) != keep.end()) continue;
    std::optional<HeldCopy> h = HeldBy(r);
    if (!h || h->tag != tag) continue;
    std::error_code ec;
    std::filesystem::remove_all(h->folder, ec);
  }
}

void MemoryCopies::RemoveRanksExcept(const std::vector<int>& keep) const {
  for (int r : RanksWithFolders()) {
    if (std::find(keep.begin(), keep.end(), r) != keep.end()) continue;
    std::error_code ec;
    std::filesystem::remove_all(RankFolder(r), ec);
  }
}

std::map<std::string, std::string> MemoryCopies::Locate(const std::string& dir, const std::string& tag) const {
  std::vector<int> ranks{rank_};
  for (int r : RanksWithFolders()) {
    if (r != rank_) ranks.push_back(r);
  }
  std::map<std::string, std::string> found;
  for (int r : ranks) {
    std::optional<HeldCopy> h = HeldBy(r);
    if (!h || h->tag != tag || h->dir != dir) continue;
    for (const auto* names : {&h->own, &h->neighbour_files}) {
      for (const std::string& name : *names) found.emplace(name, JoinPath(h->folder, name));
    }
  }
  return found;
}

std::string CanonicalSaveDir(const std::string& dir) {
  std::error_code ec;
  const std::filesystem::path p = std::filesystem::weakly_canonical(std::filesystem::absolute(dir, ec), ec);
  return ec || p.empty() ? dir : p.string();
}

CheckpointReadOptions ReadFromCopies(const MemoryCopies& copies, const std::string& dir, const std::string& tag) {
  CheckpointReadOptions options;
  auto located = std::make_shared<const std::map<std::string, std::string>>(copies.Locate(dir, tag));
  if (located->empty()) return options;
  options.locate = [located](const std::string& name) {
    const auto it = located->find(name);
    return it == located->end() ? std::string() : it->second;
  };
  return options;
}

absl::Status CopyWholeFile(const std::string& from, const std::string& to) {
  UniqueFd in(::open(from.c_str(), O_RDONLY | O_CLOEXEC));
  if (!in.valid()) return ErrnoError(errno, absl::StrCat("open '", from, "'"));
  struct stat st {};
  if (::fstat(in.get(), &st) != 0) return ErrnoError(errno, absl::StrCat("stat '", from, "'"));
  UniqueFd out(::open(to.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
  if (!out.valid()) return ErrnoError(errno, absl::StrCat("create '", to, "'"));
  off_t offset = 0;
  while (offset < st.st_size) {
    const ssize_t n = ::sendfile(out.get(), in.get(), &offset, static_cast<size_t>(st.st_size - offset));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoError(errno, absl::StrCat("copy '", from, "' to '", to, "'"));
    if (n == 0) return absl::DataLossError(absl::StrCat("'", from, "' shrank while it was copied"));
  }
  if (::close(out.Release()) != 0) return ErrnoError(errno, absl::StrCat("close '", to, "'"));
  return absl::OkStatus();
}

}  // namespace zt::ckpt
