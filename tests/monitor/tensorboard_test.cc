// CRC-32C vectors, the hand-written protobuf/TFRecord encoding against bytes
// worked out from the specs, a write -> read round trip, corruption and
// truncation detection, and (where installed) TensorBoard's own reader.
#include "monitor/tensorboard.h"

#include <sys/wait.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "monitor/crc32c.h"
#include "monitor/event_file_reader.h"
#include "monitor_test_util.h"

namespace zt::monitor {
namespace {

using testing::ReadAll;
using testing::ScratchDir;
using testing::WriteAll;

std::string Bytes(std::initializer_list<int> b) {
  std::string s;
  for (int x : b) s.push_back(static_cast<char>(x));
  return s;
}

TEST(Crc32cTest, KnownVectors) {
  // "123456789" is the standard check value; the 32-byte vectors are from RFC 3720 (iSCSI), B.4.
  std::string incrementing, decrementing;
  for (int i = 0; i < 32; ++i) incrementing.push_back(static_cast<char>(i));
  for (int i = 31; i >= 0; --i) decrementing.push_back(static_cast<char>(i));
  const struct {
    std::string data;
    uint32_t crc;
  } cases[] = {
      {"", 0},
      {"123456789", 0xE3069283u},
      {std::string(32, '\0'), 0x8A9136AAu},
      {std::string(32, '\xff'), 0x62A8AB43u},
      {incrementing, 0x46DD794Eu},
      {decrementing, 0x113FDB5Cu},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(Crc32c(0, c.data.data(), c.data.size()), c.crc) << "size " << c.data.size();
    // Incremental in two pieces gives the same.
    const size_t half = c.data.size() / 2;
    EXPECT_EQ(Crc32c(Crc32c(0, c.data.data(), half), c.data.data() + half, c.data.size() - half), c.crc);
  }
}

TEST(Crc32cTest, Mask) {
  EXPECT_EQ(MaskCrc32c(0), 0xa282ead8u);
  EXPECT_EQ(MaskCrc32c(0x12345678u), 0x4F730F40u);  // rotate right 15, add 0xa282ead8
  for (uint32_t c : {0u, 1u, 0x80000000u, 0xE3069283u, 0xFFFFFFFFu}) EXPECT_EQ(UnmaskCrc32c(MaskCrc32c(c)), c);
}

TEST(TensorBoardEncodingTest, ScalarEventBytes) {
  // Event{wall_time: 1.5, step: 3, summary {value {tag: "a", simple_value: 2.0}}}, by hand:
  const std::string want = Bytes({0x09, 0,    0,   0, 0,   0, 0, 0xF8, 0x3F,  // 1: double 1.5
                                  0x10, 0x03,                                 // 2: varint 3
                                  0x2A, 0x0A,                                 // 5: 10 bytes
                                  0x0A, 0x08,                                 //   Summary.value: 8 bytes
                                  0x0A, 0x01, 'a',                            //     tag "a"
                                  0x15, 0,    0,   0, 0x40});                 //     float 2.0
  EXPECT_EQ(EncodeScalarEvent(1.5, 3, {{"a", 2.0f}}), want);
  // Negative steps are 10-byte varints (int64 two's complement).
  const std::string neg = EncodeScalarEvent(0.0, -1, {});
  EXPECT_EQ(neg.substr(9, 11), Bytes({0x10, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01}));
  // A multi-byte varint: step 300 = 0xAC 0x02.
  EXPECT_EQ(EncodeScalarEvent(0.0, 300, {}).substr(9, 3), Bytes({0x10, 0xAC, 0x02}));
}

TEST(TensorBoardEncodingTest, FileVersionRecordHeaderMatchesTensorFlow) {
  // Every TensorFlow event file starts with these 12 bytes: length 24, then
  // the masked CRC-32C of the length.
  const std::string record = FrameTfRecord(EncodeFileVersionEvent(1234.5, kEventFileVersion));
  ASSERT_EQ(record.size(), 12u + 24u + 4u);
  EXPECT_EQ(record.substr(0, 12), Bytes({0x18, 0, 0, 0, 0, 0, 0, 0, 0xa3, 0x7f, 0x4b, 0x22}));
  EXPECT_EQ(record.substr(12 + 9, 15),
            "\x1a\x0d"
            "brain.Event:2");
}

struct Written {
  std::string tag;
  double value;
  int64_t step;
};

TEST(TensorBoardTest, RoundTrip) {
  ScratchDir dir;
  auto tb = TensorBoardMonitor::Create({dir.path(), "job"});
  ASSERT_TRUE(tb.ok()) << tb.status();
  const std::string path = (*tb)->path();
  EXPECT_EQ(path.rfind(dir.path() + "/job/events.out.tfevents.", 0), 0u) << path;

  std::vector<Event> batch1 = {{tags::kTrainLoss, 2.31, 10}, {tags::kLr, 3e-4, 10}, {tags::kLossScale, 65536, 10}};
  // Steps interleave; the writer groups them (in order of first appearance).
  std::vector<Event> batch2 = {{tags::kTrainLoss, 2.05, 20}, {tags::kTrainLoss, 1.9, 30},
                               {tags::kEvalLoss, 2.2, 20},   {tags::kMemoryBytes, 412.0 * (1 << 20), 30},
                               {"x/neg", -7.25, -5},         {tags::kTokensPerSec, 12345.5, 20}};
  ASSERT_TRUE((*tb)->Write(batch1).ok());
  ASSERT_TRUE((*tb)->Write(batch2).ok());
  ASSERT_TRUE((*tb)->Flush().ok());

  auto contents = ReadEventFile(path);
  ASSERT_TRUE(contents.ok()) << contents.status();
  EXPECT_EQ(contents->file_version, "brain.Event:2");
  EXPECT_EQ(contents->file_version_record, 0);
  // Record 0 is the version; then one per step per Write: {10}, {20, 30, -5}.
  EXPECT_EQ(contents->num_records, 5);
  std::vector<Event> all = batch1;
  for (size_t i : {0, 2, 5, 1, 3, 4}) all.push_back(batch2[i]);
  ASSERT_EQ(contents->scalars.size(), all.size());
  const double now = static_cast<double>(std::time(nullptr));
  for (size_t i = 0; i < all.size(); ++i) {
    const ScalarRecord& r = contents->scalars[i];
    const Event& e = all[i];
    EXPECT_EQ(r.tag, e.tag) << i;
    EXPECT_EQ(r.step, e.step) << i;
    EXPECT_EQ(r.value, static_cast<float>(e.value)) << i;
    EXPECT_NEAR(r.wall_time, now, 120.0) << i;
  }
}

TEST(TensorBoardTest, SameSecondGetsADistinctFile) {
  ScratchDir dir;
  auto a = TensorBoardMonitor::Create({dir.path(), "j"});
  auto b = TensorBoardMonitor::Create({dir.path(), "j"});
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE((*a)->path(), (*b)->path());
}

class TensorBoardCorruptionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto tb = TensorBoardMonitor::Create({dir_.path(), "c"});
    ASSERT_TRUE(tb.ok()) << tb.status();
    path_ = (*tb)->path();
    ASSERT_TRUE((*tb)->Write({{"a", 1.0, 1}}).ok());
    ASSERT_TRUE((*tb)->Write({{"b", 2.0, 2}}).ok());
    tb->reset();
    bytes_ = ReadAll(path_);
    ASSERT_TRUE(ReadEventFile(path_).ok());
    // Offsets: record 0 is 40 bytes; record 1 starts at 40.
    ASSERT_GT(bytes_.size(), 60u);
  }
  std::string ReadError(const std::string& bytes) {
    WriteAll(path_, bytes);
    auto r = ReadEventFile(path_);
    EXPECT_FALSE(r.ok());
    return r.ok() ? "" : std::string(r.status().message());
  }
  ScratchDir dir_;
  std::string path_, bytes_;
};

TEST_F(TensorBoardCorruptionTest, DataByte) {
  std::string bad = bytes_;
  bad[40 + 12 + 3] ^= 0x10;  // inside record 1's data
  const std::string msg = ReadError(bad);
  EXPECT_NE(msg.find(path_), std::string::npos) << msg;
  EXPECT_NE(msg.find("record 1 at byte 40"), std::string::npos) << msg;
  EXPECT_NE(msg.find("data CRC mismatch"), std::string::npos) << msg;
}

TEST_F(TensorBoardCorruptionTest, LengthByte) {
  std::string bad = bytes_;
  bad[40] ^= 0x01;
  const std::string msg = ReadError(bad);
  EXPECT_NE(msg.find("record 1 at byte 40: length CRC mismatch"), std::string::npos) << msg;
}

TEST_F(TensorBoardCorruptionTest, StoredCrcByte) {
  std::string bad = bytes_;
  bad.back() ^= 0x80;  // the last record's data CRC
  EXPECT_NE(ReadError(bad).find("record 2"), std::string::npos);
}

TEST_F(TensorBoardCorruptionTest, Truncated) {
  for (size_t cut : {bytes_.size() - 1, bytes_.size() - 5, static_cast<size_t>(45)}) {
    const std::string msg = ReadError(bytes_.substr(0, cut));
    EXPECT_NE(msg.find("truncated"), std::string::npos) << cut << ": " << msg;
  }
}

TEST_F(TensorBoardCorruptionTest, WrongWireTypeIsCaught) {
  // A valid frame around an Event whose step (field 2) is a fixed64.
  std::string data = Bytes({0x11, 1, 0, 0, 0, 0, 0, 0, 0});
  const std::string msg = ReadError(FrameTfRecord(data));
  EXPECT_NE(msg.find("Event.step"), std::string::npos) << msg;
  EXPECT_NE(msg.find("wire type 1"), std::string::npos) << msg;
}

TEST(TensorBoardTest, UnwritableDirectoryNamesTheKey) {
  ScratchDir dir;
  WriteAll(dir.File("file"), "x");
  auto tb = TensorBoardMonitor::Create({dir.File("file"), "job"});
  ASSERT_FALSE(tb.ok());
  EXPECT_NE(tb.status().message().find("tensorboard.output_path"), std::string::npos) << tb.status();
  EXPECT_NE(tb.status().message().find(dir.File("file")), std::string::npos) << tb.status();
}

// TensorBoard's own reader, where a Python with tensorboard is installed.
TEST(TensorBoardTest, TensorBoardReadsOurFile) {
  std::string python = "python3";
  if (const char* env = std::getenv("ZT_PYTHON")) python = env;
  if (std::system((python + " -c 'import tensorboard' >/dev/null 2>&1").c_str()) != 0) {
    GTEST_SKIP() << "no Python with the tensorboard package ($ZT_PYTHON or python3); pip install tensorboard "
                    "to run this test";
  }
  ScratchDir dir;
  auto tb = TensorBoardMonitor::Create({dir.path(), "job"});
  ASSERT_TRUE(tb.ok()) << tb.status();
  ASSERT_TRUE((*tb)->Write({{tags::kTrainLoss, 2.5, 1}, {tags::kLr, 1e-3, 1}, {tags::kTrainLoss, 2.25, 2}}).ok());
  tb->reset();
  const std::string script = dir.File("read.py");
  WriteAll(script,
           "import sys\n"
           "from tensorboard.backend.event_processing.event_accumulator import EventAccumulator\n"
           "ea = EventAccumulator(sys.argv[1]); ea.Reload()\n"
           "for tag in sorted(ea.Tags()['scalars']):\n"
           "  for e in ea.Scalars(tag): print(tag, e.step, repr(e.value))\n");
  const std::string out = dir.File("out.txt");
  const int rc = std::system(
      absl::StrCat(python, " ", script, " ", dir.path(), "/job >", out, " 2>", dir.File("err.txt")).c_str());
  ASSERT_TRUE(WIFEXITED(rc) && WEXITSTATUS(rc) == 0) << ReadAll(dir.File("err.txt"));
  EXPECT_EQ(ReadAll(out),
            "Train/Samples/lr 1 0.0010000000474974513\n"
            "Train/Samples/train_loss 1 2.5\n"
            "Train/Samples/train_loss 2 2.25\n");
}

}  // namespace
}  // namespace zt::monitor
