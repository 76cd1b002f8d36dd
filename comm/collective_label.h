// What a collective is for, in words: "parameters of unit h.3", "the
// gradient norm". The caller sets a label around its calls; each collective
// submitted on that thread carries it, and every error about the collective
// names it. When ranks disagree on a collective, the other ranks' labels come
// over the wire with the agreement check, so a mismatch says which unit or
// step each rank was in, not only which collective kind and size.
//
//   {
//     comm::CollectiveLabel label("the gradient norm");
//     group.AllReduce(norm, ReduceOp::kSum)->Wait();
//   }
//
// Labels are thread-local and nest (the innermost wins; the previous one is
// restored on destruction). A label must read the same on every rank for the
// same collective (no rank numbers in it): the agreement check compares its
// first 48 bytes too, because two ranks gathering different units of the
// same size would otherwise exchange the wrong parameters without an error.
#pragma once

#include <string>

namespace zt::comm {

class CollectiveLabel {
 public:
  explicit CollectiveLabel(std::string label);
  ~CollectiveLabel();
  CollectiveLabel(const CollectiveLabel&) = delete;
  CollectiveLabel& operator=(const CollectiveLabel&) = delete;

  // This thread's innermost label ("" when none is set).
  static const std::string& Current();

 private:
  std::string previous_;
};

}  // namespace zt::comm
