// Node-local copies of the last checkpoint's files in memory (tmpfs), so a
// restart reads its shards from memory instead of the save directory
// (`zt launch --memory-copies`, docs/checkpoints.md). LibTorch-free; the
// exchange between nodes is engine/neighbour_copies.h's.
//
// Why tmpfs and not the ranks' heap: a restart replaces every rank process,
// so the copies must outlive them. The launcher owns the folder (one per
// job and node, launch/memory_copies_dir.h) and removes it at the job's end;
// the ranks find it in ZT_MEMORY_COPIES_DIR.
//
// Layout (each rank writes only its own folder, so ranks never race):
//
//   <root>/rank<r>/current/           the copy rank r holds: one tag's files
//   <root>/rank<r>/current/manifest   what they are (written last)
//   <root>/rank<r>/incoming/          the next copy, while it is written
//
// Contract
//  - A copy is whole or absent: files go to incoming/, the manifest last,
//    then incoming/ becomes current/. The previous copy is removed before
//    the new one is written (it is of a tag `latest` no longer names, so it
//    could serve no restart), which keeps one copy's memory, not two; a
//    crash in between leaves no copy, and the next load reads the disk.
//  - A copy holds the files of exactly one committed save: it is made after
//    the save's commit (Checkpointer::Commit), and a save that is about to
//    replace the tag a copy holds drops that copy first (Forget), so a copy
//    can never stand in for a newer save of the same tag. ZeroCheckpoint
//    still checks every file's CRCs and that all files share one save id.
//  - A copy names the save directory it copies (canonical path): a load
//    uses only copies of its own directory and tag. With the folder being
//    one launcher's, a copy of another job is never seen.
//  - The manifest is parsed as untrusted input: file names must be plain
//    entry names; a manifest that does not parse counts as no copy.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ckpt/zero_checkpoint.h"

namespace zt::ckpt {

// Whether `name` may be a file of a copy: a plain entry of its folder (not
// empty, no '/', NUL or newline, not ".", ".." or the manifest's name).
// Manifests and names a peer sends are checked with it.
bool IsCopyFileName(const std::string& name);

// The variable the launcher sets for its ranks.
inline constexpr char kMemoryCopiesEnv[] = "ZT_MEMORY_COPIES_DIR";

// What one rank's copy holds.
struct HeldCopy {
  std::string dir;  // the save directory, canonical (CanonicalSaveDir)
  std::string tag;
  int rank = -1;  // the rank that holds it
  int world_size = 0, local_world_size = 0;
  std::vector<std::string> own;  // the files rank `rank` wrote for `tag`
  int neighbour = -1;            // whose files `neighbour_files` are; -1: none
  std::vector<std::string> neighbour_files;
  std::string folder;  // where the files lie (filled when read)

  std::string ToText() const;
  // nullopt when `text` is not a manifest of this format.
  static std::optional<HeldCopy> FromText(const std::string& text);
};

class MemoryCopies {
 public:
  MemoryCopies(std::string root, int rank) : root_(std::move(root)), rank_(rank) {}
  // From ZT_MEMORY_COPIES_DIR; nullopt when it is unset or empty.
  static std::optional<MemoryCopies> FromEnv(int rank);

  const std::string& root() const { return root_; }
  int rank() const { return rank_; }

  // This rank's copy; nullopt when there is none (or it does not parse).
  std::optional<HeldCopy> Held() const { return HeldBy(rank_); }
  std::optional<HeldCopy> HeldBy(int rank) const;
  // Drops this rank's copy when it holds `tag`.
  void Forget(const std::string& tag) const;
  // Drops the copies of `tag` in the folders of every rank not in `keep`
  // (folders no rank of this node writes now: left by another numbering
  // of the ranks before an elastic restart); best effort.
  void ForgetOthers(const std::string& tag, const std::vector<int>& keep) const;
  // An empty incoming/ folder for the next copy; this rank's held copy is
  // removed (callers begin only once it can serve no restart: after a
  // commit moved `latest` past it, or a load that fetches the one it lacks).
  absl::Status Begin() const;
  std::string Incoming(const std::string& name) const;
  // Writes `held`'s manifest into incoming/ and makes it this rank's copy.
  absl::Status Promote(HeldCopy held) const;
  // Removes the folders of every rank not in `keep`; best effort.
  void RemoveRanksExcept(const std::vector<int>& keep) const;

  // Every file of `dir`'s `tag` that a copy on this node holds: file name
  // -> path, this rank's own files first, then the other ranks' folders in
  // rank order. `dir` as CanonicalSaveDir gives it.
  std::map<std::string, std::string> Locate(const std::string& dir, const std::string& tag) const;

 private:
  std::string RankFolder(int rank) const;
  // The ranks that have a folder here.
  std::vector<int> RanksWithFolders() const;
  std::string root_;
  int rank_;
};

// The save directory as copies record it: its canonical absolute path
// (`dir` itself where it cannot be resolved).
std::string CanonicalSaveDir(const std::string& dir);

// Read options that take every file of `dir`'s `tag` a copy on this node
// holds (MemoryCopies::Locate) from there; without such files, the defaults.
CheckpointReadOptions ReadFromCopies(const MemoryCopies& copies, const std::string& dir, const std::string& tag);

// Copies the file at `from` to `to` (created, or replaced).
absl::Status CopyWholeFile(const std::string& from, const std::string& to);

}  // namespace zt::ckpt
