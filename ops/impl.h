// Which implementation of the optimizer kernels runs: the fast one, or the
// plain reference that tests compare it with. Its own header so that the
// engine's public API can name it without pulling in the kernels.
#pragma once

namespace zt::ops {

// kFast: one fused, vectorised pass over memory per step, split across
// intra-op threads (ops/kernels.h). kReference: the textbook formula per
// element in double precision, single-threaded; tests compare against it.
// Both run on CPU tensors only.
enum class Impl { kFast, kReference };

}  // namespace zt::ops
