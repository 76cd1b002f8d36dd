// File plumbing for every file the project writes (checkpoints, token files,
// `latest`, monitors' and benchmarks' JSON, the report): every write goes to
// a temporary name, is fsynced and renamed into place (and the directory
// fsynced), so a crash leaves either the old file or the new one, never half
// of one; every read checks sizes. Errors name the path (and the offset), say what failed
// (errno text) and what to do (e.g. ENOSPC: "free N bytes or choose another
// directory").
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "util/unique_fd.h"

namespace zt {

// Writes a new file at `path` through `<path>.tmp.<pid>`; Commit() makes it
// appear atomically. Destroying an uncommitted AtomicFile removes the
// temporary. Sequential appends; PWrite can patch bytes already written.
class AtomicFile {
 public:
  static absl::StatusOr<AtomicFile> Create(const std::string& path);
  AtomicFile(AtomicFile&&) noexcept;
  AtomicFile& operator=(AtomicFile&&) noexcept;
  ~AtomicFile();

  absl::Status Append(const void* data, size_t n);  // handles short writes and EINTR
  absl::Status PWrite(const void* data, size_t n, uint64_t offset);
  uint64_t size() const { return size_; }
  // fsync the file, rename it to `path`, fsync the directory.
  absl::Status Commit();
  const std::string& path() const { return path_; }

 private:
  AtomicFile() = default;
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

// "a/b" + "c" -> "a/b/c" ("a/b/" too); an empty `dir` gives `name`.
std::string JoinPath(const std::string& dir, const std::string& name);

// mkdir -p with mode 0755. Errors name `path` (and the component that could
// not be made), the errno text and what to do.
absl::Status MakeDirs(const std::string& path);

// A file opened for positioned reads.
class ReadFile {
 public:
  static absl::StatusOr<ReadFile> Open(const std::string& path);
  // Reads exactly n bytes at `offset`; a short file is an error naming the
  // path, the offset and how many bytes were missing.
  absl::Status PRead(void* dst, size_t n, uint64_t offset) const;
  uint64_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  UniqueFd fd_;
  uint64_t size_ = 0;
};

}  // namespace zt
