// Sequence packing for supervised examples (TRL's packing=True with
// padding-free attention): several examples share one sample, each a
// document of its own -- the model attends within a document only and
// positions restart with each (models/common.h's MakeCausalLayout), so a
// packed sample computes exactly what its examples compute one per sample,
// without the padding. LibTorch-free.
#pragma once

#include <cstdint>
#include <vector>

#include "data/supervised.h"

namespace zt::data {

// One packed sample: indices into the examples, in placement order.
struct PackedSample {
  std::vector<int64_t> examples;
};

// Best-fit decreasing (TRL's default "bfd" strategy): examples, longest
// first (ties in file order), each go to the fullest sample that still has
// room; an example longer than `seq_len` takes min(length, seq_len) tokens
// (cut, as SupervisedWindow cuts it) in a sample of its own. Deterministic.
std::vector<PackedSample> PackExamples(const std::vector<SupervisedExample>& examples, int64_t seq_len);

// The tokens an example occupies in a sample of `seq_len`.
int64_t PackedLength(const SupervisedExample& e, int64_t seq_len);

// One packed sample of `seq_len` positions: the examples one after another,
// each with the targets SupervisedWindow gives it (its last token predicts
// nothing unless the example was cut), document ids 1, 2, ... and 0 on the
// padding (input `pad`, target kIgnoreTarget). Returns the targets that
// take loss.
int64_t PackedWindow(const std::vector<SupervisedExample>& examples, const PackedSample& sample, int64_t seq_len,
                     int32_t pad, int64_t* input, int64_t* target, int64_t* documents);

}  // namespace zt::data
