// In-memory checkpoint copies, the LibTorch-free halves: the folder a
// launcher lends its ranks (launch/memory_copies_dir.h: made, removed at
// the end, stale ones swept) and the copies' layout (ckpt/memory_copies.h:
// whole or absent, one tag, untrusted manifests ignored, each file found by
// name). The exchange between nodes and the loads that use the copies are
// tested end to end in tests/engine/checkpoint_test.cc and
// tests/train/restart_test.cc.
#include "ckpt/memory_copies.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "absl/strings/str_cat.h"
#include "launch/memory_copies_dir.h"
#include "tests/testing/scratch_dir.h"

namespace zt::ckpt {
namespace {

using zt::testing::ReadFileBytes;
using zt::testing::ScratchDir;
using zt::testing::WriteFileBytes;

HeldCopy Sample() {
  HeldCopy h;
  h.tag = "global_step20";
  h.rank = 1;
  h.world_size = 4;
  h.local_world_size = 2;
  h.own = {"zero_pp_rank_1_mp_rank_00_model_states.pt", "zero_pp_rank_1_mp_rank_00_optim_states.pt"};
  h.neighbour = 3;
  h.neighbour_files = {"zero_pp_rank_3_mp_rank_00_optim_states.pt"};
  return h;
}

TEST(MemoryCopies, ManifestRoundTripsAndRefusesWhatIsNotOne) {
  const HeldCopy h = Sample();
  const std::string text = h.ToText();
  std::optional<HeldCopy> back = HeldCopy::FromText(text);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->tag, h.tag);
  EXPECT_EQ(back->rank, 1);
  EXPECT_EQ(back->world_size, 4);
  EXPECT_EQ(back->local_world_size, 2);
  EXPECT_EQ(back->own, h.own);
  EXPECT_EQ(back->neighbour, 3);
  EXPECT_EQ(back->neighbour_files, h.neighbour_files);
  // Torn (no "end"), foreign, or naming anything but a plain file: no copy.
  EXPECT_FALSE(HeldCopy::FromText(text.substr(0, text.size() - 4)).has_value());
  EXPECT_FALSE(HeldCopy::FromText("").has_value());
  EXPECT_FALSE(HeldCopy::FromText("zt-memory-copy 2\n" + text.substr(text.find('\n') + 1)).has_value());
  for (const std::string bad : {"own ../../etc/passwd", "own a/b", "tag ..", "own manifest", "rank x", "what 1"}) {
    std::string t = text;
    t.insert(t.find("end\n"), bad + "\n");
    EXPECT_FALSE(HeldCopy::FromText(t).has_value()) << bad;
  }
}

TEST(MemoryCopies, ACopyIsWholeOrAbsentAndFoundByName) {
  ScratchDir dir("zt_memory_copies");
  const MemoryCopies r0(dir.path(), 0), r1(dir.path(), 1);
  EXPECT_FALSE(r0.Held().has_value());
  EXPECT_TRUE(r0.Locate("t1").empty());

  // Files written into incoming/ are no copy until promoted.
  ASSERT_TRUE(r0.Begin().ok());
  WriteFileBytes(r0.Incoming("a.pt"), "A");
  WriteFileBytes(r0.Incoming("shared.pt"), "from rank 0");
  EXPECT_FALSE(r0.Held().has_value());
  EXPECT_TRUE(r0.Locate("t1").empty());
  HeldCopy h;
  h.tag = "t1";
  h.world_size = 2;
  h.local_world_size = 1;
  h.own = {"a.pt", "shared.pt"};
  h.rank = 7;  // Promote writes the rank it belongs to
  ASSERT_TRUE(r0.Promote(h).ok());
  std::optional<HeldCopy> held = r0.Held();
  ASSERT_TRUE(held.has_value());
  EXPECT_EQ(held->rank, 0);
  EXPECT_EQ(ReadFileBytes(held->folder + "/a.pt"), "A");

  // Another rank's copy of the same tag is found too; this rank's own first.
  ASSERT_TRUE(r1.Begin().ok());
  WriteFileBytes(r1.Incoming("b.pt"), "B");
  WriteFileBytes(r1.Incoming("shared.pt"), "from rank 1");
  h.own = {"b.pt"};
  h.neighbour = 0;
  h.neighbour_files = {"shared.pt"};
  ASSERT_TRUE(r1.Promote(h).ok());
  std::map<std::string, std::string> found = r0.Locate("t1");
  ASSERT_EQ(found.size(), 3u);
  EXPECT_EQ(ReadFileBytes(found["b.pt"]), "B");
  EXPECT_EQ(ReadFileBytes(found["shared.pt"]), "from rank 0");
  EXPECT_EQ(ReadFileBytes(r1.Locate("t1")["shared.pt"]), "from rank 1");
  EXPECT_TRUE(r0.Locate("t2").empty());

  // A hostile manifest in a rank's folder counts as no copy.
  ::mkdir(dir.File("rank5").c_str(), 0700);
  ::mkdir(dir.File("rank5/current").c_str(), 0700);
  WriteFileBytes(dir.File("rank5/current/c.pt"), "C");
  HeldCopy evil = h;
  evil.rank = 5;
  evil.own = {"c.pt"};
  WriteFileBytes(dir.File("rank5/current/manifest"), evil.ToText() + "own ../../a.pt\n");
  EXPECT_FALSE(MemoryCopies(dir.path(), 5).Held().has_value());
  EXPECT_EQ(r0.Locate("t1").count("c.pt"), 0u);
  h.own = {"../a.pt"};
  EXPECT_FALSE(r1.Promote(h).ok());

  // A new copy replaces the old one whole, which goes as the new one begins
  // (one copy's memory at a time); a save of the held tag forgets it first.
  ASSERT_TRUE(r0.Begin().ok());
  EXPECT_FALSE(r0.Held().has_value());
  EXPECT_EQ(r1.Locate("t1").count("a.pt"), 0u);
  WriteFileBytes(r0.Incoming("a2.pt"), "A2");
  h.tag = "t2";
  h.own = {"a2.pt"};
  h.neighbour = -1;
  h.neighbour_files.clear();
  ASSERT_TRUE(r0.Promote(h).ok());
  EXPECT_EQ(r0.Held()->tag, "t2");
  EXPECT_FALSE(std::filesystem::exists(r0.Held()->folder + "/a.pt"));
  r0.Forget("t1");
  EXPECT_TRUE(r0.Held().has_value());
  r0.Forget("t2");
  EXPECT_FALSE(r0.Held().has_value());
  // A smaller world: the folders of the ranks that are gone go.
  r0.RemoveRanksFrom(1);
  EXPECT_FALSE(std::filesystem::exists(dir.File("rank1")));
  EXPECT_FALSE(std::filesystem::exists(dir.File("rank5")));
}

TEST(MemoryCopiesDir, IsRemovedAtTheEndAndStaleOnesAreSwept) {
  ScratchDir dir("zt_memory_copies_dir");
  // A folder of a launcher that is gone (a child that exited) and one of a live one.
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ASSERT_GT(child, 0);
  ::waitpid(child, nullptr, 0);
  const std::string stale = dir.File(absl::StrCat("zt-copies-", child, "-node0"));
  const std::string live = dir.File(absl::StrCat("zt-copies-", ::getppid(), "-node1"));
  ::mkdir(stale.c_str(), 0700);
  ::mkdir(live.c_str(), 0700);
  WriteFileBytes(stale + "/x", "x");
  std::string path;
  {
    absl::StatusOr<std::unique_ptr<comm::MemoryCopiesDir>> d = comm::MemoryCopiesDir::Create(3, dir.path());
    ASSERT_TRUE(d.ok()) << d.status();
    path = (*d)->path();
    EXPECT_EQ(path, dir.File(absl::StrCat("zt-copies-", ::getpid(), "-node3")));
    EXPECT_TRUE(std::filesystem::is_directory(path));
    EXPECT_FALSE(std::filesystem::exists(stale));
    EXPECT_TRUE(std::filesystem::exists(live));
    WriteFileBytes(path + "/y", "y");
  }
  EXPECT_FALSE(std::filesystem::exists(path));
  // Where it cannot be made, the error says what to change.
  absl::StatusOr<std::unique_ptr<comm::MemoryCopiesDir>> bad = comm::MemoryCopiesDir::Create(0, dir.File("missing"));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("run without --memory-copies"), std::string::npos) << bad.status();
}

}  // namespace
}  // namespace zt::ckpt
