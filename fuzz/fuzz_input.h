// Fuzz inputs as the readers take them: the bytes as a file of its own (a
// memfd, a regular file to ReadFile's checks, named by /proc/self/fd/N), or
// written into a scratch folder that stays for the process.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace zt::fuzz {

// Holds `data` in an anonymous file; path() names it until destruction.
class MemFile {
 public:
  MemFile(const uint8_t* data, size_t size) {
    fd_ = ::memfd_create("zt_fuzz", 0);
    if (fd_ < 0) std::abort();
    for (size_t at = 0; at < size;) {
      const ssize_t n = ::write(fd_, data + at, size - at);
      if (n <= 0) std::abort();
      at += static_cast<size_t>(n);
    }
    path_ = "/proc/self/fd/" + std::to_string(fd_);
  }
  ~MemFile() { ::close(fd_); }
  MemFile(const MemFile&) = delete;
  MemFile& operator=(const MemFile&) = delete;
  const std::string& path() const { return path_; }

 private:
  int fd_ = -1;
  std::string path_;
};

// A folder under $TMPDIR made once per process (removed by the script that
// runs the targets).
inline const std::string& ScratchFolder() {
  static const std::string dir = [] {
    const char* tmp = std::getenv("TMPDIR");
    std::string templ = std::string(tmp != nullptr ? tmp : "/tmp") + "/zt_fuzz_XXXXXX";
    if (::mkdtemp(templ.data()) == nullptr) std::abort();
    return templ;
  }();
  return dir;
}

inline void WriteWhole(const std::string& path, const uint8_t* data, size_t size) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) std::abort();
  if (size > 0 && std::fwrite(data, 1, size, f) != size) std::abort();
  std::fclose(f);
}

}  // namespace zt::fuzz
