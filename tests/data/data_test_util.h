// Helpers shared by the data tests (tests/testing/scratch_dir.h under the
// names these tests use).
#pragma once

#include <string>

#include "tests/testing/scratch_dir.h"

namespace zt::data::testing {

class ScratchDir : public zt::testing::ScratchDir {
 public:
  ScratchDir() : zt::testing::ScratchDir("zt_data") {}
};

inline void WriteBytes(const std::string& path, const std::string& bytes) { zt::testing::WriteFileBytes(path, bytes); }
inline std::string ReadBytes(const std::string& path) { return zt::testing::ReadFileBytes(path); }

}  // namespace zt::data::testing
