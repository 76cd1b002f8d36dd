// File plumbing for every file the project writes (checkpoints, token files,
// `latest`, monitors' and benchmarks' JSON, the report): every write goes to
// a temporary name, is fsynced and renamed into place (and the directory
// fsynced), so a crash leaves either the old file or the new one, never half
// of one; every read checks sizes. Errors name the path (and the offset), say what failed
// (errno text) and what to do (e.g. ENOSPC: "free N bytes or choose another
// directory").
#pragma once

#include <cstdint>
#include <deque>
#include <future>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "util/direct_io.h"
#include "util/unique_fd.h"

namespace zt {

struct AtomicFileOptions {
  // Large streaming files (checkpoints, exports): once the file passes this
  // many bytes, appends reach the disk with O_DIRECT (util/direct_io.h)
  // through an aligned staging block of `direct_block` bytes instead of the
  // page cache. 0: never. Where the filesystem refuses O_DIRECT, the file
  // stays buffered (same bytes).
  uint64_t direct_after = 0;
  size_t direct_block = 8u << 20;  // rounded up to 4 KiB
};

// The threshold the checkpoint and export writers use.
inline constexpr uint64_t kStreamingDirectAfter = 16u << 20;

// Writes a new file at `path` through `<path>.tmp.<pid>`; Commit() makes it
// appear atomically. Destroying an uncommitted AtomicFile removes the
// temporary. Sequential appends; PWrite can patch bytes already written.
class AtomicFile {
 public:
  static absl::StatusOr<AtomicFile> Create(const std::string& path, const AtomicFileOptions& options = {});
  AtomicFile(AtomicFile&&) noexcept;
  AtomicFile& operator=(AtomicFile&&) noexcept;
  ~AtomicFile();

  absl::Status Append(const void* data, size_t n);  // handles short writes and EINTR
  absl::Status PWrite(const void* data, size_t n, uint64_t offset);
  uint64_t size() const { return size_; }
  // fsync the file, rename it to `path`, fsync the directory.
  absl::Status Commit();
  const std::string& path() const { return path_; }
  // Whether appends go to the disk with O_DIRECT now (tests).
  bool direct() const { return direct_fd_.valid(); }

 private:
  AtomicFile() = default;
  absl::Status WriteBuffered(const void* data, size_t n, uint64_t offset);
  // Direct mode: [direct_base_, size_) is in stage_; full blocks go out.
  absl::Status EnterDirect();
  absl::Status AppendDirect(const char* p, size_t n);
  absl::Status FlushStage(bool final);
  // Waits for the oldest block written in the background; its error. A
  // block the filesystem refused (EINVAL) is written through the page cache
  // instead and marks the file for leaving direct mode.
  absl::Status WaitOldest();
  // Waits for every block in flight (then leaves direct mode if one was refused).
  absl::Status WaitAll();
  // O_DIRECT refused after all (EINVAL: a device with larger blocks): the
  // stage and the rest of the file go through the page cache.
  absl::Status LeaveDirect();
  absl::Status DirectError(int err, uint64_t offset, size_t n) const;
  // Starts the disk writing every full kWritebackWindow behind the file's
  // end while the writer goes on, so Commit's fsync waits only for the
  // last window instead of the whole file (a 1 GB export spent a quarter of
  // its time in that fsync), and dirty pages never pile up to the kernel's
  // throttling limit.
  void StartWriteback();
  static constexpr uint64_t kWritebackWindow = 32ull << 20;

  std::string path_, tmp_;
  UniqueFd fd_;
  uint64_t size_ = 0;
  uint64_t written_back_ = 0;  // writeback started for [0, written_back_)
  bool committed_ = false;
  AtomicFileOptions options_;
  bool direct_refused_ = false;  // the filesystem said no to O_DIRECT
  UniqueFd direct_fd_;           // the temporary opened with O_DIRECT, in direct mode
  AlignedBlock stage_;
  uint64_t direct_base_ = 0;  // file offset of stage_[0] (aligned); below it the file is on its way to disk
  // Full blocks before stage_, being written on other threads while stage_
  // fills, oldest first. Two, so that the disk has the next write queued
  // while the writer's thread hashes and copies (with one, every block's
  // CPU work left the disk idle when a read ran beside it).
  struct PendingWrite {
    AlignedBlock block;
    uint64_t offset = 0;
    std::future<int> done;
  };
  static constexpr size_t kWriteDepth = 2;
  std::deque<PendingWrite> pending_;
  AlignedBlock spare_;    // a written block kept for the next stage
  bool refused_ = false;  // a background write got EINVAL: leave direct mode
  // PWrite patches below direct_base_ (bytes already handed to a direct
  // write), applied through the page cache once every direct write is done:
  // at Commit, or when direct mode ends.
  std::vector<std::pair<uint64_t, std::string>> patches_;
  absl::Status ApplyPatches();
};

// Removes the temporaries ("<name>.tmp.<pid>") that writers killed mid-write
// left in `dir`. With `only_for` ("<name>"), removes every temporary of that
// one file, which the caller is about to write itself (each checkpoint file
// has one writer); without it, only those whose pid is not a live process of
// this host. Returns how many were removed; errors are ignored (best effort).
int RemoveStaleTemporaries(const std::string& dir, const std::string& only_for = "");

// Writes `contents` to `path` atomically (small files: `latest`, JSON).
absl::Status WriteFileAtomically(const std::string& path, const std::string& contents);
absl::StatusOr<std::string> ReadSmallFile(const std::string& path, size_t max_bytes = 1 << 20);

// A Status for a failed system call: the code absl maps `err` to, "what:
// <errno text>", and what a user can do about it where there is something
// (ENOSPC: free space; EACCES: permissions; ENOENT: check the path; ...).
absl::Status ErrnoError(int err, const std::string& what);

// "a/b" + "c" -> "a/b/c" ("a/b/" too); an empty `dir` gives `name`.
std::string JoinPath(const std::string& dir, const std::string& name);

// The path of `name` inside `folder`, where `name` came from inside one of
// the folder's own files (a shard listed in an index, the tag in `latest`):
// such a file is untrusted input, and what it names must stay in the folder.
// `name` must be a plain entry name (not empty, no '/', not "." or "..", no
// NUL); InvalidArgument naming `what`, the name and the folder otherwise.
// Symlinks are followed only where they stay inside: the entry's real path
// must lie under the folder's real path or, for a Hugging Face cache
// snapshot (a folder whose parent is named "snapshots"), under the
// repository's cache folder, the snapshots' parent, whose blobs/ the
// snapshot's symlinks point into (PermissionDenied otherwise, naming the
// target). An entry that does not exist is returned as it is, for the
// caller's open to report.
absl::StatusOr<std::string> ConfinedPath(const std::string& folder, const std::string& name, const std::string& what);

// mkdir -p with mode 0755. Errors name `path` (and the component that could
// not be made), the errno text and what to do.
absl::Status MakeDirs(const std::string& path);

struct ReadFileOptions {
  // Reads of at least this many bytes bypass the page cache (O_DIRECT,
  // util/direct_io.h): for files read once, front to back, in big pieces
  // (checkpoints, exports). 0: never (files read again and again, like
  // token data, belong in the cache). Falls back to buffered reads where the
  // filesystem refuses O_DIRECT.
  uint64_t direct_min = 0;
};

// The threshold the checkpoint and export readers use.
inline constexpr uint64_t kStreamingDirectMin = 1u << 20;

// A file opened for positioned reads. PRead may run on several threads at once.
class ReadFile {
 public:
  static absl::StatusOr<ReadFile> Open(const std::string& path, const ReadFileOptions& options = {});
  // Reads exactly n bytes at `offset`; a short file is an error naming the
  // path, the offset and how many bytes were missing.
  absl::Status PRead(void* dst, size_t n, uint64_t offset) const;
  bool direct() const { return direct_fd_.valid(); }  // large reads bypass the page cache
  uint64_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  UniqueFd fd_;
  UniqueFd direct_fd_;  // the same file with O_DIRECT, when options asked and the filesystem allows
  ReadFileOptions options_;
  uint64_t size_ = 0;
};

}  // namespace zt
