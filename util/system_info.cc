// Implementation of util/system_info.h (Linux only: reads /proc).
#include "util/system_info.h"

#include <dlfcn.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>

#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "util/strings.h"

namespace zt {

std::string LoadedBlasLibrary() {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  std::string found;
  while (std::getline(maps, line)) {
    auto slash = line.find('/');
    if (slash == std::string::npos) continue;
    std::string path = line.substr(slash);
    std::string base = path.substr(path.rfind('/') + 1);
    if (base.find("openblas") != std::string::npos || base.find("mkl_rt") != std::string::npos ||
        base.find("blis") != std::string::npos) {
      return path;
    }
    if (base.rfind("libblas.so", 0) == 0) found = path + " (reference BLAS)";
  }
  return found.empty() ? "none loaded" : found;
}

std::string BlasCoreName() {
  // OpenBLAS exports char* openblas_get_corename(void); look it up in what is
  // already loaded rather than linking OpenBLAS (LibTorch links libblas.so.3).
  using CoreNameFn = char* (*)();
  auto fn = reinterpret_cast<CoreNameFn>(dlsym(RTLD_DEFAULT, "openblas_get_corename"));
  if (fn == nullptr) return "";
  const char* name = fn();
  return name == nullptr ? "" : std::string(name);
}

std::string HostName(const char* fallback) {
  char buf[256] = {0};
  if (gethostname(buf, sizeof(buf) - 1) != 0) return fallback;
  return buf;
}

std::string CpuModel() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("model name", 0) == 0) {
      auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(colon + 2);
    }
  }
  return "unknown";
}

int PlainThreadCount(const char* omp_num_threads) {
  if (omp_num_threads == nullptr || *omp_num_threads == '\0') return 0;
  long n = 0;
  for (const char* c = omp_num_threads; *c != '\0'; ++c) {
    if (*c < '0' || *c > '9' || n > 1000000) return 0;
    n = n * 10 + (*c - '0');
  }
  return static_cast<int>(n);
}

std::string SystemInfoLine() {
  const char* omp = std::getenv("OMP_NUM_THREADS");
  const std::string core = BlasCoreName();
  return absl::StrCat("cpu: ", CpuModel(), " | cores: ", sysconf(_SC_NPROCESSORS_ONLN),
                      " | OMP_NUM_THREADS: ", omp ? omp : "unset", " | BLAS: ", LoadedBlasLibrary(),
                      core.empty() ? "" : absl::StrCat(" (core ", core, ")"));
}

namespace {

// A "Name:   123 kB" line of a /proc file in bytes; -1 when absent.
int64_t ProcKib(const char* file, const char* key) {
  std::ifstream status(file);
  std::string line;
  const size_t key_len = std::strlen(key);
  while (std::getline(status, line)) {
    if (line.compare(0, key_len, key) == 0) {
      long long kib = -1;
      if (std::sscanf(line.c_str() + key_len, "%lld", &kib) == 1) return kib * 1024;
    }
  }
  return -1;
}

}  // namespace

int64_t PeakResidentBytes() { return ProcKib("/proc/self/status", "VmHWM:"); }
int64_t CurrentResidentBytes() { return ProcKib("/proc/self/status", "VmRSS:"); }
void ReturnFreedHeapMemory() {
#ifdef __GLIBC__
  malloc_trim(0);
#endif
}

int64_t AvailableMemoryBytes() { return ProcKib("/proc/meminfo", "MemAvailable:"); }

namespace {

// A file's first line as a whole number; -1 when absent or not a number
// ("max", a v2 cgroup without a limit, included).
int64_t NumberIn(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  if (!std::getline(in, line)) return -1;
  int64_t v = 0;
  return absl::SimpleAtoi(absl::StripAsciiWhitespace(line), &v) ? v : -1;
}

void Consider(MemoryBound* bound, int64_t bytes, std::string source) {
  if (bytes < 0) return;
  if (bound->bytes < 0 || bytes < bound->bytes) {
    bound->bytes = bytes;
    bound->source = std::move(source);
  }
}

}  // namespace

MemoryBound ProcessMemoryBoundAt(const std::string& proc_root, const std::string& cgroup_root) {
  MemoryBound bound;
  Consider(&bound, ProcKib((proc_root + "/meminfo").c_str(), "MemAvailable:"), "available on this host");
  // /proc/self/cgroup: "0::/path" (v2) or "N:memory:/path" (v1).
  std::ifstream groups(proc_root + "/self/cgroup");
  std::string line;
  while (std::getline(groups, line)) {
    const std::vector<std::string> f = absl::StrSplit(line, absl::MaxSplits(':', 2));
    if (f.size() != 3) continue;
    const bool v2 = f[0] == "0" && f[1].empty();
    bool v1 = false;
    for (absl::string_view c : absl::StrSplit(f[1], ',')) v1 = v1 || c == "memory";
    if (!v2 && !v1) continue;
    // Every level up to the root bounds it: a parent's limit holds too.
    std::string path = f[2];
    while (true) {
      const std::string dir = absl::StrCat(cgroup_root, v1 ? "/memory" : "", path == "/" ? "" : path);
      const int64_t limit = NumberIn(dir + (v2 ? "/memory.max" : "/memory.limit_in_bytes"));
      const int64_t used = NumberIn(dir + (v2 ? "/memory.current" : "/memory.usage_in_bytes"));
      // v1 says "no limit" with a number near 2^63.
      if (limit > 0 && limit < (int64_t{1} << 60)) {
        Consider(&bound, std::max<int64_t>(0, limit - std::max<int64_t>(0, used)),
                 absl::StrCat("left under the memory cgroup ", path, "'s limit of ",
                              HumanBytes(static_cast<double>(limit))));
      }
      if (path == "/" || path.empty()) break;
      const size_t slash = path.rfind('/');
      path = slash == 0 ? "/" : path.substr(0, slash);
    }
  }
  return bound;
}

MemoryBound ProcessMemoryBound() {
  MemoryBound bound = ProcessMemoryBoundAt("/proc", "/sys/fs/cgroup");
  struct rlimit as;
  if (::getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY) {
    const int64_t mapped = ProcKib("/proc/self/status", "VmSize:");
    const int64_t limit = static_cast<int64_t>(as.rlim_cur);
    Consider(&bound, std::max<int64_t>(0, limit - std::max<int64_t>(0, mapped)),
             absl::StrCat("left under this process's address-space limit (ulimit -v) of ",
                          HumanBytes(static_cast<double>(limit))));
  }
  return bound;
}

}  // namespace zt
