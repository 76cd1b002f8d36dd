#include "util/heap_retention.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <string>
#include <vector>

namespace zt {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

// An environment of its own, so the test does not depend on the caller's.
struct Env {
  std::map<std::string, std::string> vars;
  std::function<const char*(const char*)> Lookup() const {
    return [this](const char* name) -> const char* {
      auto it = vars.find(name);
      return it == vars.end() ? nullptr : it->second.c_str();
    };
  }
};

TEST(HeapRetention, TrimThresholdIsTwiceTheStepHeapWithinBounds) {
  const Env env;
  // Small heaps get glibc's own adaptive ceiling, never less.
  for (int64_t heap : {int64_t{-1}, int64_t{0}, 10 * kMiB, 32 * kMiB}) {
    const HeapRetentionPlan p = PlanHeapRetention(heap, env.Lookup());
    EXPECT_TRUE(p.apply) << heap;
    EXPECT_EQ(p.trim_threshold, 64 * kMiB) << heap;
    EXPECT_EQ(p.mmap_threshold, 32 * kMiB) << heap;
  }
  EXPECT_EQ(PlanHeapRetention(431 * kMiB, env.Lookup()).trim_threshold, 862 * kMiB);
  // mallopt takes an int: the threshold stops at 1 GiB.
  EXPECT_EQ(PlanHeapRetention(int64_t{8} << 30, env.Lookup()).trim_threshold, int64_t{1} << 30);
}

TEST(HeapRetention, TheUsersMallocSettingsWin) {
  for (const char* name : {"MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TOP_PAD_"}) {
    Env env;
    env.vars[name] = "1048576";
    const HeapRetentionPlan p = PlanHeapRetention(100 * kMiB, env.Lookup());
    EXPECT_FALSE(p.apply) << name;
    EXPECT_NE(p.reason.find(name), std::string::npos) << p.reason;
    EXPECT_FALSE(ApplyHeapRetention(p));
  }
  Env tunables;
  tunables.vars["GLIBC_TUNABLES"] = "glibc.malloc.trim_threshold=0";
  const HeapRetentionPlan p = PlanHeapRetention(100 * kMiB, tunables.Lookup());
  EXPECT_FALSE(p.apply);
  EXPECT_NE(p.reason.find("GLIBC_TUNABLES"), std::string::npos) << p.reason;
  // Tunables of other subsystems, and empty values, change nothing.
  Env other;
  other.vars["GLIBC_TUNABLES"] = "glibc.cpu.hwcaps=-AVX512F";
  other.vars["MALLOC_TRIM_THRESHOLD_"] = "";
  EXPECT_TRUE(PlanHeapRetention(100 * kMiB, other.Lookup()).apply);
}

#ifdef __GLIBC__
// With the plan applied, 1 MiB blocks come from the heap (glibc starts with
// a 128 KiB mmap threshold: each would be its own mapping, faulted in anew
// every time), and the 48 MiB they leave free at the heap's top stays
// mapped (glibc starts with a 128 KiB trim threshold). Without the plan the
// heap neither grows nor keeps anything here.
TEST(HeapRetention, AppliedPlanKeepsFreedTopMapped) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "a sanitizer's allocator serves malloc here, not glibc's heap";
#endif
  const Env env;
  const HeapRetentionPlan p = PlanHeapRetention(64 * kMiB, env.Lookup());
  ASSERT_TRUE(ApplyHeapRetention(p));
  const int64_t before = MainHeapBytes();
  ASSERT_GT(before, 0);
  // Many blocks below the mmap threshold, freed top first: the heap grows by
  // about their sum and, with the plan, does not shrink after the frees.
  std::vector<void*> blocks;
  for (int i = 0; i < 48; ++i) blocks.push_back(std::malloc(kMiB));
  const int64_t grown = MainHeapBytes();
  EXPECT_GE(grown - before, 40 * kMiB);
  for (auto it = blocks.rbegin(); it != blocks.rend(); ++it) std::free(*it);
  EXPECT_GE(MainHeapBytes(), grown);
}
#endif

}  // namespace
}  // namespace zt
