// CRC-32: the carry-less-multiplication path equals the table reference for
// every length, alignment and starting value, and both give the standard
// check values of the zip polynomial.
#include "ckpt/format/crc32.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace zt::ckpt {
namespace {

TEST(Crc32, StandardCheckValues) {
  const std::string check = "123456789";
  const std::string fox = "The quick brown fox jumps over the lazy dog";
  for (auto* f : {&Crc32, &Crc32Reference}) {
    EXPECT_EQ(f(0, check.data(), check.size()), 0xCBF43926u);
    EXPECT_EQ(f(0, fox.data(), fox.size()), 0x414FA339u);
    EXPECT_EQ(f(0, nullptr, 0), 0u);
  }
  // 64 and more bytes reach the folding path: 1 KiB of zeros and of 0xFF.
  std::vector<unsigned char> zeros(1024, 0), ones(1024, 0xFF);
  EXPECT_EQ(Crc32(0, zeros.data(), zeros.size()), 0xEFB5AF2Eu);
  EXPECT_EQ(Crc32(0, ones.data(), ones.size()), Crc32Reference(0, ones.data(), ones.size()));
}

TEST(Crc32, FastPathEqualsTheReferenceForEveryLengthAndOffset) {
  std::printf("carry-less multiplication: %s\n", Crc32UsesClmul() ? "yes" : "no (both paths are the table)");
  std::mt19937 rng(7);
  std::vector<unsigned char> buf(70000);
  for (auto& b : buf) b = static_cast<unsigned char>(rng());
  for (size_t offset = 0; offset < 17; ++offset) {
    for (size_t n = 0; n < 400; ++n) {
      const uint32_t seed = static_cast<uint32_t>(rng());
      ASSERT_EQ(Crc32(seed, buf.data() + offset, n), Crc32Reference(seed, buf.data() + offset, n))
          << "offset " << offset << " length " << n;
    }
  }
  for (size_t n : {size_t{4096}, size_t{65536 + 13}, buf.size() - 3}) {
    ASSERT_EQ(Crc32(0, buf.data() + 3, n), Crc32Reference(0, buf.data() + 3, n)) << n;
  }
  // Incremental use in uneven pieces equals one pass.
  uint32_t piecewise = 0;
  for (size_t at = 0, step = 1; at < buf.size(); at += step, step = step * 3 % 997 + 1) {
    const size_t n = std::min(step, buf.size() - at);
    piecewise = Crc32(piecewise, buf.data() + at, n);
  }
  EXPECT_EQ(piecewise, Crc32Reference(0, buf.data(), buf.size()));
}

TEST(Crc32, CombineEqualsOnePassOverTheConcatenation) {
  // The reference (the table) over A||B against Crc32Combine of the two
  // halves' CRCs, at every split of buffers up to 300 bytes and at a few
  // large splits.
  std::mt19937 rng(11);
  std::vector<unsigned char> buf(1 << 20);
  for (auto& b : buf) b = static_cast<unsigned char>(rng());
  for (size_t n = 0; n < 300; n += 7) {
    const uint32_t whole = Crc32Reference(0, buf.data(), n);
    for (size_t split = 0; split <= n; ++split) {
      const uint32_t a = Crc32Reference(0, buf.data(), split);
      const uint32_t b = Crc32Reference(0, buf.data() + split, n - split);
      ASSERT_EQ(Crc32Combine(a, b, n - split), whole) << n << " split at " << split;
    }
  }
  const uint32_t whole = Crc32Reference(0, buf.data(), buf.size());
  for (size_t split : {size_t{1}, size_t{4096}, size_t{333333}, buf.size() - 1}) {
    EXPECT_EQ(
        Crc32Combine(Crc32(0, buf.data(), split), Crc32(0, buf.data() + split, buf.size() - split), buf.size() - split),
        whole)
        << split;
  }
  // Three pieces, combined left to right.
  const uint32_t ab = Crc32Combine(Crc32(0, buf.data(), 1000), Crc32(0, buf.data() + 1000, 5000), 5000);
  EXPECT_EQ(Crc32Combine(ab, Crc32(0, buf.data() + 6000, buf.size() - 6000), buf.size() - 6000), whole);
}

}  // namespace
}  // namespace zt::ckpt
