// Helpers shared by the monitor tests (tests/testing/scratch_dir.h under the
// names these tests use).
#pragma once

#include <string>

#include "tests/testing/scratch_dir.h"

namespace zt::monitor::testing {

class ScratchDir : public zt::testing::ScratchDir {
 public:
  ScratchDir() : zt::testing::ScratchDir("zt_monitor") {}
};

inline std::string ReadAll(const std::string& path) { return zt::testing::ReadFileBytes(path); }
inline void WriteAll(const std::string& path, const std::string& bytes) { zt::testing::WriteFileBytes(path, bytes); }

}  // namespace zt::monitor::testing
