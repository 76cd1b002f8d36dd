// Test helpers for files: a fresh scratch directory under the test temp dir,
// removed with its contents, and whole-file reads and writes of raw bytes.
// Header-only; shared by every test binary that touches the file system.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace zt::testing {

class ScratchDir {
 public:
  // `prefix` names the directory (e.g. "zt_ckpt_XXXXXX"), to tell whose it is.
  explicit ScratchDir(const std::string& prefix = "zt") {
    std::string base = ::testing::TempDir();
    if (!base.empty() && base.back() == '/') base.pop_back();
    std::string tmpl = base + "/" + prefix + "_XXXXXX";
    char* made = ::mkdtemp(tmpl.data());
    EXPECT_NE(made, nullptr) << "mkdtemp " << tmpl;
    path_ = tmpl;
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  const std::string& path() const { return path_; }
  std::string File(const std::string& name) const { return path_ + "/" + name; }
  // Names of the files in the directory, sorted (to check no temporaries are left).
  std::vector<std::string> List() const {
    std::vector<std::string> names;
    for (const auto& e : std::filesystem::directory_iterator(path_)) names.push_back(e.path().filename());
    std::sort(names.begin(), names.end());
    return names;
  }

 private:
  std::string path_;
};

// The whole file ("" when it cannot be read).
inline std::string ReadFileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Replaces the file's contents; a failure is a test failure.
inline void WriteFileBytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  EXPECT_TRUE(out.good()) << "writing " << path;
}

}  // namespace zt::testing
