#include "util/read_ahead.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace zt {
namespace {

// Piece i's bytes: its index and position, so a piece handed out in the
// wrong order or from the wrong slot shows.
char ByteOf(size_t piece, size_t at) { return static_cast<char>(piece * 31 + at * 7 + 1); }

TEST(ReadAhead, HandsOutEveryPieceInOrder) {
  std::mt19937 rng(3);
  std::vector<ReadAhead::Piece> pieces;
  std::vector<size_t> sizes;
  for (size_t i = 0; i < 200; ++i) {
    // Large pieces with small ones (and empty ones) between them, as a
    // model's weights with its biases.
    const size_t n = i % 5 == 0 ? 0 : (i % 3 == 0 ? 40000 + rng() % 20000 : rng() % 100);
    sizes.push_back(n);
    pieces.push_back({n, [i, n](char* dst) {
                        for (size_t k = 0; k < n; ++k) dst[k] = ByteOf(i, k);
                        return absl::OkStatus();
                      }});
  }
  ReadAhead stream(std::move(pieces), 50000, 4);
  for (size_t i = 0; i < sizes.size(); ++i) {
    auto bytes = stream.Next();
    ASSERT_TRUE(bytes.ok()) << bytes.status();
    ASSERT_EQ(bytes->size(), sizes[i]);
    for (size_t k = 0; k < sizes[i]; ++k) ASSERT_EQ((*bytes)[k], ByteOf(i, k)) << "piece " << i << " byte " << k;
  }
  auto past = stream.Next();
  ASSERT_FALSE(past.ok());
  EXPECT_EQ(past.status().code(), absl::StatusCode::kOutOfRange);
}

// One read at a time, and the reader never runs further ahead of a slow
// consumer than its lead and slots allow.
TEST(ReadAhead, ReadsOneAtATimeWithinTheLead) {
  constexpr size_t kPieces = 60, kBytes = 1000, kLead = 2500, kSlots = 8;
  std::atomic<int> in_flight{0}, most_in_flight{0};
  std::atomic<size_t> started{0}, consumed{0}, most_ahead{0};
  std::vector<ReadAhead::Piece> pieces;
  for (size_t i = 0; i < kPieces; ++i) {
    pieces.push_back({kBytes, [&, i](char* dst) {
                        const int now = ++in_flight;
                        most_in_flight = std::max(most_in_flight.load(), now);
                        // Pieces started past the one the consumer holds.
                        const size_t ahead = ++started - consumed.load();
                        most_ahead = std::max(most_ahead.load(), ahead);
                        std::memset(dst, static_cast<int>(i), kBytes);
                        std::this_thread::sleep_for(std::chrono::microseconds(200));
                        --in_flight;
                        return absl::OkStatus();
                      }});
  }
  ReadAhead stream(std::move(pieces), kLead, kSlots);
  for (size_t i = 0; i < kPieces; ++i) {
    auto bytes = stream.Next();
    ASSERT_TRUE(bytes.ok());
    ASSERT_EQ((*bytes)[0], static_cast<char>(i));
    consumed = i + 1;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));  // a slow writer
    ASSERT_EQ((*bytes)[kBytes - 1], static_cast<char>(i)) << "the held piece was overwritten";
  }
  EXPECT_EQ(most_in_flight.load(), 1);
  // Held piece + the ones read ahead: the lead admits 3 pieces of 1000
  // bytes (2000 < 2500 starts the third), so at most 1 + 3 + 1 started
  // past what the consumer took when the counter was read.
  EXPECT_LE(most_ahead.load(), 1 + 3 + 1u);
  EXPECT_GE(most_ahead.load(), 2u) << "the reader never ran ahead";
}

TEST(ReadAhead, AFailedReadIsReturnedForItsPiece) {
  std::vector<ReadAhead::Piece> pieces;
  std::atomic<int> reads{0};
  for (int i = 0; i < 10; ++i) {
    pieces.push_back({8, [i, &reads](char* dst) {
                        ++reads;
                        if (i == 4) return absl::DataLossError("piece 4 is corrupt");
                        std::memset(dst, i, 8);
                        return absl::OkStatus();
                      }});
  }
  ReadAhead stream(std::move(pieces), 1 << 20);
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(stream.Next().ok()) << i;
  auto failed = stream.Next();
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(failed.status().message(), "piece 4 is corrupt");
  EXPECT_FALSE(stream.Next().ok()) << "nothing past the failure";
  EXPECT_EQ(reads.load(), 5) << "the reader stops at the failure";
}

// A consumer that gives up early (an error of its own) destroys the stream
// with reads pending: the destructor stops the reader, nothing hangs, and
// no read starts after it returns.
TEST(ReadAhead, DestroyedEarlyStopsTheReader) {
  auto reads = std::make_shared<std::atomic<int>>(0);
  {
    std::vector<ReadAhead::Piece> pieces;
    for (int i = 0; i < 1000; ++i) {
      pieces.push_back({16, [reads](char* dst) {
                          ++*reads;
                          std::memset(dst, 0, 16);
                          return absl::OkStatus();
                        }});
    }
    ReadAhead stream(std::move(pieces), 64);
    ASSERT_TRUE(stream.Next().ok());
  }
  const int at_destruction = reads->load();
  EXPECT_LT(at_destruction, 1000);
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(reads->load(), at_destruction);
}

}  // namespace
}  // namespace zt
