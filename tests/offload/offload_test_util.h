// Helpers for the offload tests: random fills and byte-exact comparison that
// names the first differing offset, engines that skip the test when the
// kernel refuses io_uring, and a forked child that reports back over a pipe.
// Header-only.
#pragma once

#include <gtest/gtest.h>
#include <linux/capability.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "offload/io_engine.h"

namespace zt::offload::testing {

// Fills `n` bytes with a reproducible pseudo-random pattern.
inline void FillRandom(void* p, size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  auto* out = static_cast<unsigned char*>(p);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t v = rng();
    std::memcpy(out + i, &v, 8);
  }
  for (; i < n; ++i) out[i] = static_cast<unsigned char>(rng());
}

// "" when equal, else where the first difference is.
inline std::string FirstMismatch(const void* got, const void* want, size_t n, uint64_t base_offset = 0) {
  if (std::memcmp(got, want, n) == 0) return "";
  const auto* g = static_cast<const unsigned char*>(got);
  const auto* w = static_cast<const unsigned char*>(want);
  size_t i = 0;
  while (g[i] == w[i]) ++i;
  return absl::StrCat("first difference at file offset ", base_offset + i, ": got ", int{g[i]}, ", want ", int{w[i]});
}

inline std::string OptionsName(const IoOptions& o) {
  return absl::StrCat(IoBackendName(o.backend), " threads=", o.threads, " queue_depth=", o.queue_depth,
                      " block_size=", o.block_size, " single_submit=", o.single_submit,
                      " overlap_events=", o.overlap_events);
}

// A byte range of a file, both ends multiples of kIoAlignment.
struct Region {
  uint64_t offset = 0;
  uint64_t bytes = 0;
};

// Non-overlapping regions at random offsets (random gaps of 0-3 pages) with
// random lengths of 1 page to `max_bytes`, until `budget` bytes or
// `max_count` regions; shuffled, so they are submitted out of file order.
// `*end` is where the last one ends.
inline std::vector<Region> RandomRegions(std::mt19937_64& rng, uint64_t max_bytes, uint64_t budget, int max_count,
                                         uint64_t* end) {
  std::vector<Region> regions;
  const uint64_t max_pages = std::max<uint64_t>(1, max_bytes / kIoAlignment);
  uint64_t at = 0;
  uint64_t total = 0;
  while (total < budget && static_cast<int>(regions.size()) < max_count) {
    at += (rng() % 4) * kIoAlignment;
    Region r{at, (1 + rng() % max_pages) * kIoAlignment};
    regions.push_back(r);
    at += r.bytes;
    total += r.bytes;
  }
  std::shuffle(regions.begin(), regions.end(), rng);
  *end = at;
  return regions;
}

// Result of a forked child: its exit code and what it wrote to the pipe.
struct ChildResult {
  int exit_code = -1;
  std::string output;
};

// Runs `body` in a forked child, which writes its report to the fd it is
// given and returns its exit code. For limits, mounts and identities that
// must not leak into the test process.
inline ChildResult RunInChild(const std::function<int(int report_fd)>& body) {
  ChildResult result;
  int fds[2];
  if (::pipe(fds) != 0) {
    ADD_FAILURE() << "pipe: " << std::strerror(errno);
    return result;
  }
  pid_t pid = ::fork();
  if (pid < 0) {
    ADD_FAILURE() << "fork: " << std::strerror(errno);
    return result;
  }
  if (pid == 0) {
    ::close(fds[0]);
    int code = body(fds[1]);
    ::close(fds[1]);
    ::_exit(code);
  }
  ::close(fds[1]);
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fds[0], buf, sizeof(buf))) > 0) result.output.append(buf, static_cast<size_t>(n));
  ::close(fds[0]);
  int status = 0;
  if (::waitpid(pid, &status, 0) != pid) {
    ADD_FAILURE() << "waitpid: " << std::strerror(errno);
    return result;
  }
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

// Whether this process holds CAP_IPC_LOCK in its effective set (io_uring
// then charges registered buffers to no locked-memory limit).
inline bool HasIpcLock() {
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2] = {};
  if (::syscall(SYS_capget, &header, data) != 0) return false;
  return (data[CAP_TO_INDEX(CAP_IPC_LOCK)].effective & CAP_TO_MASK(CAP_IPC_LOCK)) != 0;
}

// Drops CAP_IPC_LOCK from this process's effective set (true when it is
// gone, or was never there). For a forked child testing the memlock limit.
inline bool DropIpcLock() {
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2] = {};
  if (::syscall(SYS_capget, &header, data) != 0) return false;
  data[CAP_TO_INDEX(CAP_IPC_LOCK)].effective &= ~CAP_TO_MASK(CAP_IPC_LOCK);
  if (::syscall(SYS_capset, &header, data) != 0) return false;
  return !HasIpcLock();
}

// Whether io_uring can register `bytes` of buffers for this process: with
// CAP_IPC_LOCK always; without it, within RLIMIT_MEMLOCK (other locked
// memory of the same user counts too, so this is an upper bound).
inline bool CanRegister(uint64_t bytes) {
  if (HasIpcLock()) return true;
  struct rlimit rl {};
  if (::getrlimit(RLIMIT_MEMLOCK, &rl) != 0) return false;
  return rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= bytes;
}

inline void Report(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    ssize_t w = ::write(fd, text.data() + done, text.size() - done);
    if (w <= 0) return;
    done += static_cast<size_t>(w);
  }
}

}  // namespace zt::offload::testing

// Declares `var` (a std::unique_ptr<IoEngine>) from `options`; skips the test
// when the backend asked for cannot start here (io_uring refused by the
// kernel), fails it on any other error.
#define ZT_ENGINE_OR_SKIP(var, options)                                                     \
  std::unique_ptr<::zt::offload::IoEngine> var;                                             \
  do {                                                                                      \
    auto zt_engine_ = ::zt::offload::IoEngine::Create(options);                             \
    if (!zt_engine_.ok() && zt_engine_.status().code() == absl::StatusCode::kUnavailable) { \
      GTEST_SKIP() << "backend unavailable here: " << zt_engine_.status();                  \
    }                                                                                       \
    ASSERT_TRUE(zt_engine_.ok()) << zt_engine_.status();                                    \
    var = std::move(zt_engine_).value();                                                    \
  } while (0)
