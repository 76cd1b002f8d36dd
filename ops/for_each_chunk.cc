// ForEachChunk (ops/optimizer_common.h): where the optimizers enter the
// intra-op thread pool. Built with -fopenmp (ops/CMakeLists.txt): at::parallel_for
// is an inline template whose OpenMP region exists only in translation units
// compiled with OpenMP; without it, it silently runs the whole range on the
// calling thread (LibTorch's own kernels are built with it, ours were not).
#include <ATen/Parallel.h>

#include <algorithm>

#include "ops/optimizer_common.h"

#if AT_PARALLEL_OPENMP && !defined(_OPENMP)
#error "for_each_chunk.cc must be compiled with OpenMP (-fopenmp); see ops/CMakeLists.txt"
#endif

namespace zt::ops::internal {

void ForEachChunk(int64_t n, const std::function<void(int64_t begin, int64_t end)>& fn) {
  if (n == 0) return;
  constexpr int64_t kTile = kernels::kTile;
  const int64_t tiles = (n + kTile - 1) / kTile;
  at::parallel_for(0, tiles, kGrainSize / kTile,
                   [&](int64_t first, int64_t last) { fn(first * kTile, std::min(last * kTile, n)); });
}

}  // namespace zt::ops::internal
