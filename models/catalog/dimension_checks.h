// The checks every built-in architecture's dimensions share (models/*_config.h).
// Each error is InvalidArgument "model NAME: ..." naming the override key and
// what to change.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>

#include "absl/status/status.h"

namespace zt::models {

// One dimension: its override key, its value, and the largest value allowed
// (the smallest is 1).
struct DimensionRange {
  const char* key;
  int64_t value;
  int64_t max;
};

// "model NAME: WHAT".
absl::Status ModelError(const std::string& model, const std::string& what);

// The first dimension outside 1..max, named.
absl::Status CheckDimensionRanges(const std::string& model, std::initializer_list<DimensionRange> dims);

// n_embd must split evenly into n_head heads.
absl::Status CheckHeadsDivideWidth(const std::string& model, int64_t n_embd, int64_t n_head);

// The `dropout` override: a percentage in 0..99.
absl::Status CheckDropoutPercent(const std::string& model, int64_t percent);

}  // namespace zt::models
