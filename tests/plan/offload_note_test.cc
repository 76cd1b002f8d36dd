// plan::NvmeOffloadNote: a note exactly when the swap buffers hold at least
// what the swap files do (the offload saves no host memory), naming what
// and both sizes; nothing when it saves memory or nothing is offloaded.
#include "plan/offload_note.h"

#include <gtest/gtest.h>

#include "absl/strings/match.h"

namespace zt::plan {
namespace {

TEST(NvmeOffloadNote, OnlyWhenTheBuffersHoldEverything) {
  EXPECT_EQ(NvmeOffloadNote("optimizer state", 0, 0), "");
  EXPECT_EQ(NvmeOffloadNote("optimizer state", 0, 4096), "");
  EXPECT_EQ(NvmeOffloadNote("optimizer state", 3 << 20, (3 << 20) - 1), "");
  for (int64_t pool : {int64_t{3} << 20, int64_t{9} << 20}) {
    const std::string note = NvmeOffloadNote("optimizer state", 3 << 20, pool);
    EXPECT_TRUE(absl::StrContains(note, "NVMe offload of the optimizer state saves no host memory")) << note;
    EXPECT_TRUE(absl::StrContains(note, "(3 MiB on disk)")) << note;
    EXPECT_TRUE(absl::StrContains(note, "device \"cpu\"")) << note;
    EXPECT_TRUE(absl::StrContains(note, "sub_group_size")) << note;
  }
  EXPECT_TRUE(absl::StrContains(NvmeOffloadNote("parameter shards", 100, 4096), "parameter shards"));
}

}  // namespace
}  // namespace zt::plan
