// FNV-1a, 64 bits: a digest that is the same in every process and build
// (absl::Hash is seeded per process), for values ranks compare with each
// other at run time (a job's command line, a setup description, a tag).
// Not for anything stored or adversarial. Header-only, LibTorch-free.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace zt {

class Fnv1a64 {
 public:
  void AddBytes(const void* data, size_t n) {
    const auto* p = static_cast<const unsigned char*>(data);
    for (size_t i = 0; i < n; ++i) h_ = (h_ ^ p[i]) * kPrime;
  }
  // The length first, so that ("ab", "c") and ("a", "bc") differ.
  void AddString(std::string_view s) {
    const uint64_t n = s.size();
    AddBytes(&n, sizeof(n));
    AddBytes(s.data(), s.size());
  }
  uint64_t value() const { return h_; }

 private:
  static constexpr uint64_t kPrime = 1099511628211ULL;
  uint64_t h_ = 14695981039346656037ULL;
};

}  // namespace zt
