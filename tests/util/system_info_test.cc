// ProcessMemoryBoundAt on made-up /proc and cgroup trees: the least of the
// host's MemAvailable and every cgroup level's limit less its use.
#include "util/system_info.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace zt {
namespace {

namespace fs = std::filesystem;

class FakeTree {
 public:
  FakeTree() {
    std::string templ = (fs::temp_directory_path() / "zt_sysinfo_XXXXXX").string();
    root_ = ::mkdtemp(templ.data());
  }
  ~FakeTree() {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }
  void Write(const std::string& rel, const std::string& text) const {
    const fs::path p = fs::path(root_) / rel;
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text;
  }
  std::string proc() const { return root_ + "/proc"; }
  std::string cgroup() const { return root_ + "/cgroup"; }

 private:
  std::string root_;
};

constexpr int64_t kGiB = int64_t{1} << 30;

TEST(ProcessMemoryBound, HostOnly) {
  FakeTree t;
  t.Write("proc/meminfo", "MemTotal: 25165824 kB\nMemAvailable: 20971520 kB\n");
  t.Write("proc/self/cgroup", "0::/\n");
  const MemoryBound b = ProcessMemoryBoundAt(t.proc(), t.cgroup());
  EXPECT_EQ(b.bytes, 20 * kGiB);
  EXPECT_EQ(b.source, "available on this host");
}

TEST(ProcessMemoryBound, CgroupV2ParentLimitHoldsForItsChildren) {
  FakeTree t;
  t.Write("proc/meminfo", "MemAvailable: 20971520 kB\n");
  t.Write("proc/self/cgroup", "0::/jobs/run7\n");
  t.Write("cgroup/jobs/memory.max", std::to_string(3 * kGiB) + "\n");
  t.Write("cgroup/jobs/memory.current", std::to_string(kGiB) + "\n");
  t.Write("cgroup/jobs/run7/memory.max", "max\n");
  t.Write("cgroup/jobs/run7/memory.current", "4096\n");
  const MemoryBound b = ProcessMemoryBoundAt(t.proc(), t.cgroup());
  EXPECT_EQ(b.bytes, 2 * kGiB);
  EXPECT_EQ(b.source, "left under the memory cgroup /jobs's limit of 3 GiB");
  // A tighter child wins.
  t.Write("cgroup/jobs/run7/memory.max", std::to_string(kGiB) + "\n");
  EXPECT_EQ(ProcessMemoryBoundAt(t.proc(), t.cgroup()).bytes, kGiB - 4096);
}

TEST(ProcessMemoryBound, CgroupV1AndItsNoLimitValue) {
  FakeTree t;
  t.Write("proc/meminfo", "MemAvailable: 20971520 kB\n");
  t.Write("proc/self/cgroup", "12:cpu,cpuacct:/x\n5:memory:/x\n");
  t.Write("cgroup/memory/x/memory.limit_in_bytes", "9223372036854771712\n");  // v1's "unlimited"
  t.Write("cgroup/memory/x/memory.usage_in_bytes", "100\n");
  EXPECT_EQ(ProcessMemoryBoundAt(t.proc(), t.cgroup()).bytes, 20 * kGiB);
  t.Write("cgroup/memory/x/memory.limit_in_bytes", std::to_string(4 * kGiB) + "\n");
  const MemoryBound b = ProcessMemoryBoundAt(t.proc(), t.cgroup());
  EXPECT_EQ(b.bytes, 4 * kGiB - 100);
  EXPECT_EQ(b.source, "left under the memory cgroup /x's limit of 4 GiB");
}

TEST(ProcessMemoryBound, NothingKnown) {
  FakeTree t;
  EXPECT_EQ(ProcessMemoryBoundAt(t.proc(), t.cgroup()).bytes, -1);
}

}  // namespace
}  // namespace zt
