// The node-local folder a launcher lends its ranks for in-memory checkpoint
// copies (`zt launch --memory-copies`, `zt train --memory-copies`; what the
// ranks keep there is ckpt/memory_copies.h's).
//
// Contract
//  - One folder per launcher process and node,
//    <root>/zt-copies-<pid>-<random>-node<k> (mode 0700, made with a mkdir
//    that fails if it exists), so two jobs, or two nodes of one job sharing
//    a tmpfs (the tests' network namespaces; containers sharing /dev/shm,
//    whose pids may coincide), never see each other's copies. It outlives
//    every attempt of the job: a restart's ranks find the copies the failed
//    attempt's ranks made.
//  - The launcher holds an flock on <folder>/owner for as long as it (or a
//    rank it forked) lives. The destructor removes the folder (the job's
//    end, however it ended); a launcher killed outright leaves it behind,
//    and the next launcher on the host removes every such folder whose lock
//    nobody holds (Create sweeps first). A lock works across pid
//    namespaces, where a pid says nothing.
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
  MemoryCopiesDir(std::string path, int lock_fd) : path_(std::move(path)), lock_fd_(lock_fd) {}
  std::string path_;
  int lock_fd_ = -1;
};

// Removes the folders under `root` left by launchers that are gone (no one
// holds their owner lock; a folder without one only once it is a minute
// old, as its launcher may be making it); how many. Best effort.
int SweepStaleMemoryCopies(const std::string& root = kMemoryCopiesRoot);

}  // namespace zt::comm
