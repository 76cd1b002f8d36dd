// The median of a benchmark's repeated measurements (the mean of the middle
// two for an even count; 0 for none). Header-only: every benchmark program
// uses it, and none links the results library.
#pragma once

#include <algorithm>
#include <vector>

namespace zt::bench {

inline double Median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace zt::bench
