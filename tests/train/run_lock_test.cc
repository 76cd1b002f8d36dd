// train/job/run_lock.h: one run per output directory, released with its holder.
#include "train/job/run_lock.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <optional>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "tests/testing/scratch_dir.h"

namespace zt::train {
namespace {

TEST(RunLock, SecondHolderIsRefusedUntilTheFirstLetsGo) {
  testing::ScratchDir scratch("zt_run_lock");
  const std::string out = scratch.File("out");
  std::optional<RunLock> first;
  {
    absl::StatusOr<RunLock> lock = RunLock::Acquire(out);
    ASSERT_TRUE(lock.ok()) << lock.status();
    first.emplace(std::move(*lock));
  }
  absl::StatusOr<RunLock> second = RunLock::Acquire(out);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(second.status().message(), absl::StrCat("pid ", getpid()))) << second.status();
  EXPECT_TRUE(absl::StrContains(second.status().message(), out)) << second.status();

  first.reset();  // what the kernel does when the holder exits, kill -9 included
  absl::StatusOr<RunLock> third = RunLock::Acquire(out);
  EXPECT_TRUE(third.ok()) << third.status();
}

TEST(RunLock, DirectoryThatCannotBeMadeIsNamed) {
  testing::ScratchDir scratch("zt_run_lock");
  std::ofstream(scratch.File("file")) << "x";
  absl::StatusOr<RunLock> lock = RunLock::Acquire(scratch.File("file") + "/out");
  ASSERT_FALSE(lock.ok());
  EXPECT_TRUE(absl::StrContains(lock.status().message(), scratch.File("file") + "/out")) << lock.status();
}

}  // namespace
}  // namespace zt::train
