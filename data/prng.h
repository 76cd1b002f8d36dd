// A deterministic PRNG for data order: SplitMix64 (seeding) and
// xoshiro256** (draws), with unbiased bounded draws (Lemire's method) and a
// Fisher-Yates shuffle. Unlike std::shuffle / std::uniform_int_distribution,
// the results are the same with every compiler and standard library, so a
// seed names one data order everywhere. Not cryptographic.
#pragma once

#include <cstdint>
#include <vector>

namespace zt::data {

// One SplitMix64 step: advances *state and returns the next output.
uint64_t SplitMix64(uint64_t* state);

// xoshiro256** (Blackman and Vigna), seeded from a 64-bit value through SplitMix64.
class Xoshiro256 {
 public:
  explicit Xoshiro256(uint64_t seed);
  uint64_t Next();
  // Uniform in [0, bound), bound >= 1, without modulo bias.
  uint64_t Below(uint64_t bound);

 private:
  uint64_t s_[4];
};

// The identity permutation of [0, n) shuffled by Fisher-Yates with `rng`.
std::vector<int64_t> RandomPermutation(int64_t n, Xoshiro256& rng);

}  // namespace zt::data
