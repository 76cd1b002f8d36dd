// Implementation of util/system_info.h (Linux only: reads /proc).
#include "util/system_info.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>

#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <string>

#include "absl/strings/str_cat.h"

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

}  // namespace zt
