// In-memory checkpoint copies, the LibTorch-free halves: the folder a
// launcher lends its ranks (launch/memory_copies_dir.h: made, removed at
// the end, stale ones swept) and the copies' layout (ckpt/memory_copies.h:
// whole or absent, one tag, untrusted manifests ignored, each file found by
// name). The exchange between nodes and the loads that use the copies are
// tested end to end in tests/engine/checkpoint_test.cc and
// tests/train/restart_test.cc.
#include "ckpt/memory_copies.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "absl/strings/match.h"
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
  h.dir = "/runs/a b/checkpoints";
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
  EXPECT_EQ(back->dir, h.dir);
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
  std::string relative = text;
  relative.replace(relative.find("dir /"), 5, "dir ");
  EXPECT_FALSE(HeldCopy::FromText(relative).has_value()) << "a relative save directory";
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
  EXPECT_TRUE(r0.Locate("/ckpt", "t1").empty());

  // Files written into incoming/ are no copy until promoted.
  ASSERT_TRUE(r0.Begin().ok());
  WriteFileBytes(r0.Incoming("a.pt"), "A");
  WriteFileBytes(r0.Incoming("shared.pt"), "from rank 0");
  EXPECT_FALSE(r0.Held().has_value());
  EXPECT_TRUE(r0.Locate("/ckpt", "t1").empty());
  HeldCopy h;
  h.dir = "/ckpt";
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
  std::map<std::string, std::string> found = r0.Locate("/ckpt", "t1");
  ASSERT_EQ(found.size(), 3u);
  EXPECT_EQ(ReadFileBytes(found["b.pt"]), "B");
  EXPECT_EQ(ReadFileBytes(found["shared.pt"]), "from rank 0");
  EXPECT_EQ(ReadFileBytes(r1.Locate("/ckpt", "t1")["shared.pt"]), "from rank 1");
  EXPECT_TRUE(r0.Locate("/ckpt", "t2").empty());
  EXPECT_TRUE(r0.Locate("/other", "t1").empty()) << "a copy of another save directory";

  // A hostile manifest in a rank's folder counts as no copy.
  ::mkdir(dir.File("rank5").c_str(), 0700);
  ::mkdir(dir.File("rank5/current").c_str(), 0700);
  WriteFileBytes(dir.File("rank5/current/c.pt"), "C");
  HeldCopy evil = h;
  evil.rank = 5;
  evil.own = {"c.pt"};
  WriteFileBytes(dir.File("rank5/current/manifest"), evil.ToText() + "own ../../a.pt\n");
  EXPECT_FALSE(MemoryCopies(dir.path(), 5).Held().has_value());
  EXPECT_EQ(r0.Locate("/ckpt", "t1").count("c.pt"), 0u);
  h.own = {"../a.pt"};
  EXPECT_FALSE(r1.Promote(h).ok());

  // A new copy replaces the old one whole, which goes as the new one begins
  // (one copy's memory at a time); a save of the held tag forgets it first.
  ASSERT_TRUE(r0.Begin().ok());
  EXPECT_FALSE(r0.Held().has_value());
  EXPECT_EQ(r1.Locate("/ckpt", "t1").count("a.pt"), 0u);
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
  // Folders no rank of the node writes now: those of a tag about to be
  // saved again are dropped first, and after a save all go.
  ASSERT_TRUE(r1.Begin().ok());
  WriteFileBytes(r1.Incoming("b.pt"), "B");
  h.tag = "t3";
  h.own = {"b.pt"};
  ASSERT_TRUE(r1.Promote(h).ok());
  r0.ForgetOthers("t2", {0});
  EXPECT_TRUE(MemoryCopies(dir.path(), 1).Held().has_value());
  r0.ForgetOthers("t3", {0});
  EXPECT_FALSE(MemoryCopies(dir.path(), 1).Held().has_value());
  r0.RemoveRanksExcept({0});
  EXPECT_FALSE(std::filesystem::exists(dir.File("rank1")));
  EXPECT_FALSE(std::filesystem::exists(dir.File("rank5")));
  EXPECT_TRUE(std::filesystem::exists(dir.File("rank0")));
}

TEST(MemoryCopiesDir, IsRemovedAtTheEndAndStaleOnesAreSwept) {
  ScratchDir dir("zt_memory_copies_dir");
  // A folder whose owner lock nobody holds (its launcher is gone), one whose
  // lock is held (a live launcher, whatever its pid), and one without an
  // owner file yet (being made: left for a minute).
  const std::string stale = dir.File("zt-copies-123-0000abcd-node0");
  const std::string live = dir.File("zt-copies-123-0000abce-node1");
  const std::string young = dir.File("zt-copies-124-0000abcf-node0");
  for (const std::string& f : {stale, live, young}) ::mkdir(f.c_str(), 0700);
  WriteFileBytes(stale + "/owner", "");
  WriteFileBytes(stale + "/x", "x");
  WriteFileBytes(live + "/owner", "");
  const int held = ::open((live + "/owner").c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(held, 0);
  ASSERT_EQ(::flock(held, LOCK_EX), 0);
  std::string path;
  {
    absl::StatusOr<std::unique_ptr<comm::MemoryCopiesDir>> d = comm::MemoryCopiesDir::Create(3, dir.path());
    ASSERT_TRUE(d.ok()) << d.status();
    path = (*d)->path();
    EXPECT_TRUE(absl::StartsWith(path, dir.File(absl::StrCat("zt-copies-", ::getpid(), "-")))) << path;
    EXPECT_TRUE(absl::EndsWith(path, "-node3")) << path;
    EXPECT_TRUE(std::filesystem::is_directory(path));
    EXPECT_FALSE(std::filesystem::exists(stale));
    EXPECT_TRUE(std::filesystem::exists(live));
    EXPECT_TRUE(std::filesystem::exists(young));
    // A second launcher's sweep leaves this one's folder: its lock is held.
    EXPECT_EQ(comm::SweepStaleMemoryCopies(dir.path()), 0);
    EXPECT_TRUE(std::filesystem::is_directory(path));
    // Another launcher in this process gets a folder of its own.
    absl::StatusOr<std::unique_ptr<comm::MemoryCopiesDir>> other = comm::MemoryCopiesDir::Create(3, dir.path());
    ASSERT_TRUE(other.ok()) << other.status();
    EXPECT_NE((*other)->path(), path);
    WriteFileBytes(path + "/y", "y");
  }
  EXPECT_FALSE(std::filesystem::exists(path));
  ::close(held);  // the live launcher ends without cleaning up: now it is stale
  EXPECT_EQ(comm::SweepStaleMemoryCopies(dir.path()), 1);
  EXPECT_FALSE(std::filesystem::exists(live));
  // Where it cannot be made, the error says what to change.
  absl::StatusOr<std::unique_ptr<comm::MemoryCopiesDir>> bad = comm::MemoryCopiesDir::Create(0, dir.File("missing"));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("run without --memory-copies"), std::string::npos) << bad.status();
}

}  // namespace
}  // namespace zt::ckpt
