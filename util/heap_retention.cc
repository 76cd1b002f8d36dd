#include "util/heap_retention.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

#ifdef __GLIBC__
#include <malloc.h>
#endif

namespace zt {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;
// glibc's DEFAULT_MMAP_THRESHOLD_MAX on 64-bit systems: the highest value
// its adaptive mmap threshold reaches, and the floor of the trim threshold.
constexpr int64_t kMmapThreshold = 32 * kMiB;
constexpr int64_t kMinTrimThreshold = 2 * kMmapThreshold;
// mallopt takes an int.
constexpr int64_t kMaxThreshold = int64_t{1} << 30;

}  // namespace

HeapRetentionPlan PlanHeapRetention(int64_t heap_bytes, const std::function<const char*(const char*)>& getenv) {
  HeapRetentionPlan plan;
  for (const char* name : {"MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TOP_PAD_"}) {
    if (const char* v = getenv(name); v != nullptr && *v != '\0') {
      plan.reason = absl::StrCat(name, "=", v, " is set in the environment; glibc's malloc keeps the user's settings");
      return plan;
    }
  }
  if (const char* t = getenv("GLIBC_TUNABLES");
      t != nullptr && absl::string_view(t).find("glibc.malloc.") != absl::string_view::npos) {
    plan.reason = absl::StrCat("GLIBC_TUNABLES=", t, " sets malloc tunables; glibc's malloc keeps the user's settings");
    return plan;
  }
  plan.apply = true;
  plan.mmap_threshold = kMmapThreshold;
  plan.trim_threshold = std::clamp<int64_t>(2 * std::max<int64_t>(heap_bytes, 0), kMinTrimThreshold, kMaxThreshold);
  return plan;
}

bool ApplyHeapRetention(const HeapRetentionPlan& plan) {
  if (!plan.apply) return false;
#ifdef __GLIBC__
  // Either call turns glibc's adaptive thresholds off, so both are set.
  return mallopt(M_MMAP_THRESHOLD, static_cast<int>(plan.mmap_threshold)) == 1 &&
         mallopt(M_TRIM_THRESHOLD, static_cast<int>(plan.trim_threshold)) == 1;
#else
  return false;
#endif
}

int64_t MainHeapBytes() {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
  return static_cast<int64_t>(mallinfo2().arena);
#else
  return -1;
#endif
}

}  // namespace zt
