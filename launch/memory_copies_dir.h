// The node-local folder a launcher lends its ranks for in-memory checkpoint
// copies (`zt launch --memory-copies`, `zt train --memory-copies`; what the
// ranks keep there is ckpt/memory_copies.h's).
//
// Contract
//  - One folder per launcher process and node: <root>/zt-copies-<pid>-node<k>
//    (mode 0700), so two jobs, or two nodes of one job sharing a tmpfs (the
//    tests' network namespaces), never see each other's copies. It outlives
//    every attempt of the job: a restart's ranks find the copies the failed
//    attempt's ranks made.
//  - The destructor removes it (the job's end, however it ended); a
//    launcher killed outright leaves it behind, and the next launcher on the
//    host removes every such folder whose pid is not a live process (Create
//    sweeps first).
//  - <root> is /dev/shm: memory, not disk. Create fails (naming the folder
//    and what to change) where it cannot be made; it does not fall back to
//    a disk folder, which would defeat its purpose.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace zt::comm {

inline constexpr char kMemoryCopiesRoot[] = "/dev/shm";

class MemoryCopiesDir {
 public:
  static absl::StatusOr<std::unique_ptr<MemoryCopiesDir>> Create(int node_rank,
                                                                 const std::string& root = kMemoryCopiesRoot);
  ~MemoryCopiesDir();
  MemoryCopiesDir(const MemoryCopiesDir&) = delete;
  MemoryCopiesDir& operator=(const MemoryCopiesDir&) = delete;

  const std::string& path() const { return path_; }

 private:
  explicit MemoryCopiesDir(std::string path) : path_(std::move(path)) {}
  std::string path_;
};

// Removes the folders under `root` left by launchers that are gone (their
// pid is not a live process); how many. Best effort.
int SweepStaleMemoryCopies(const std::string& root = kMemoryCopiesRoot);

}  // namespace zt::comm
