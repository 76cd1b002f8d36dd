// RecordVerifier: the CRC-32 of a record read in pieces is checked from the
// pieces themselves when they come front to back, and by Finish (reading
// only the unhashed rest) otherwise. A flipped byte anywhere in a record that
// was read is an error naming the file and record, whether the byte was in a
// piece that was read or in a gap between pieces.
#include "ckpt/format/record_verifier.h"

#include <gtest/gtest.h>

#include <cstring>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "ckpt/format/pt_file.h"
#include "tests/ckpt/ckpt_test_util.h"

namespace zt::ckpt {
namespace {

using testing::ReadAll;
using testing::ScratchDir;
using testing::WriteAll;

constexpr int64_t kNumel = 100000;  // 400 KB: several pieces, one record

// A file with one float record of kNumel elements; `flip` >= 0 flips that
// byte of the record after writing.
std::unique_ptr<PtReader> OneRecordFile(const std::string& path, int64_t flip = -1) {
  std::vector<float> data(kNumel);
  for (int64_t i = 0; i < kNumel; ++i) data[static_cast<size_t>(i)] = static_cast<float>(i % 977) * 0.5f;
  TensorRef t;
  t.dtype = DType::kFloat32;
  t.shape = {kNumel};
  t.data = data.data();
  EXPECT_TRUE(WritePtFile(path, Value(t)).ok());
  if (flip >= 0) {
    auto clean = PtReader::Open(path);
    EXPECT_TRUE(clean.ok());
    std::string bytes = ReadAll(path);
    bytes[(*clean)->root().AsTensor().file_offset + static_cast<uint64_t>(flip)] ^= 0x10;
    WriteAll(path, bytes);
  }
  auto reader = PtReader::Open(path);
  EXPECT_TRUE(reader.ok()) << reader.status();
  return reader.ok() ? std::move(reader).value() : nullptr;
}

// Reads elements [b, e) and hands them to the verifier.
absl::Status ReadPiece(const PtReader& file, RecordVerifier& v, int64_t b, int64_t e) {
  const TensorRef& t = file.root().AsTensor();
  std::vector<float> buf(static_cast<size_t>(e - b));
  absl::Status st = file.ReadElements(t, b, e, buf.data());
  if (!st.ok()) return st;
  return v.Consumed(file, t, static_cast<uint64_t>(b) * 4, buf.data(), static_cast<uint64_t>(e - b) * 4);
}

void ExpectCrcError(const absl::Status& st, const PtReader& file) {
  EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss) << st;
  EXPECT_TRUE(absl::StrContains(st.message(), file.path())) << st;
  EXPECT_TRUE(absl::StrContains(st.message(), "'archive/data/0' CRC-32 mismatch")) << st;
}

TEST(RecordVerifier, PiecesFrontToBackCheckTheRecordWithoutFinish) {
  ScratchDir dir;
  auto file = OneRecordFile(dir.File("a.pt"));
  ASSERT_NE(file, nullptr);
  RecordVerifier v;
  for (int64_t b = 0; b < kNumel; b += 7919) {
    ASSERT_TRUE(ReadPiece(*file, v, b, std::min(kNumel, b + 7919)).ok());
    EXPECT_EQ(v.IsChecked(*file, "archive/data/0"), b + 7919 >= kNumel) << b;
  }
  EXPECT_TRUE(v.Finish().ok());
}

TEST(RecordVerifier, AFlippedByteInAPieceFailsAtTheLastPiece) {
  ScratchDir dir;
  auto file = OneRecordFile(dir.File("a.pt"), /*flip=*/4 * 50000 + 2);
  ASSERT_NE(file, nullptr);
  RecordVerifier v;
  ASSERT_TRUE(ReadPiece(*file, v, 0, 60000).ok()) << "the record is not complete yet";
  ExpectCrcError(ReadPiece(*file, v, 60000, kNumel), *file);
  ExpectCrcError(v.Finish(), *file);  // and again by Finish: a caller cannot publish past it
}

TEST(RecordVerifier, GapsAndOverlapsAreLeftToFinish) {
  for (int64_t flip : {int64_t{-1}, int64_t{4 * 20000}, 4 * kNumel - 1}) {
    SCOPED_TRACE(flip);
    ScratchDir dir;
    auto file = OneRecordFile(dir.File("a.pt"), flip);
    ASSERT_NE(file, nullptr);
    RecordVerifier v;
    // [0, 10000), then [5000, 15000) overlapping it, then [30000, 40000)
    // past a gap, and nothing of the tail: the byte at element 20000 and
    // the record's last byte lie where no piece was hashed.
    ASSERT_TRUE(ReadPiece(*file, v, 0, 10000).ok());
    ASSERT_TRUE(ReadPiece(*file, v, 5000, 15000).ok());
    ASSERT_TRUE(ReadPiece(*file, v, 30000, 40000).ok());
    EXPECT_FALSE(v.IsChecked(*file, "archive/data/0"));
    const absl::Status st = v.Finish();
    if (flip < 0) {
      EXPECT_TRUE(st.ok()) << st;
      EXPECT_TRUE(v.IsChecked(*file, "archive/data/0"));
    } else {
      ExpectCrcError(st, *file);
    }
  }
}

TEST(RecordVerifier, ConcurrentPiecesAreCheckedOnce) {
  for (int64_t flip : {int64_t{-1}, int64_t{4 * 77777}}) {
    SCOPED_TRACE(flip);
    ScratchDir dir;
    auto file = OneRecordFile(dir.File("a.pt"), flip);
    ASSERT_NE(file, nullptr);
    RecordVerifier v;
    // Two threads read interleaved pieces; whatever order they land in,
    // the record ends up checked (by a piece or by Finish) and a flipped
    // byte is reported.
    std::vector<absl::Status> results(2);
    std::vector<std::thread> threads;
    for (int w = 0; w < 2; ++w) {
      threads.emplace_back([&, w] {
        for (int64_t b = w * 1000; b < kNumel; b += 2000) {
          absl::Status st = ReadPiece(*file, v, b, std::min(kNumel, b + 1000));
          if (!st.ok()) results[static_cast<size_t>(w)] = st;
        }
      });
    }
    for (auto& t : threads) t.join();
    const absl::Status finish = v.Finish();
    EXPECT_TRUE(v.IsChecked(*file, "archive/data/0"));
    const bool failed = !results[0].ok() || !results[1].ok() || !finish.ok();
    EXPECT_EQ(failed, flip >= 0) << results[0] << " " << results[1] << " " << finish;
  }
}

}  // namespace
}  // namespace zt::ckpt
