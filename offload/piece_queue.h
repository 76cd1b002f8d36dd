// PieceQueue: the pieces one I/O worker has not started yet, in two classes.
// Urgent pieces (requests submitted with IoPriority::kUrgent, and requests a
// caller hurried or is blocked on) start before background ones; within a
// class, first in first out. Why: one engine serves both swappers, and a
// parameter shard the next layer needs must not queue behind tens of MiB of
// optimizer state that is not needed until the optimizer walk reaches it.
//
// Not thread-safe: each worker guards its queue with its own mutex.
#pragma once

#include <cstddef>
#include <deque>
#include <vector>

#include "offload/io_engine.h"
#include "offload/io_engine_internal.h"

namespace zt::offload::internal {

class PieceQueue {
 public:
  bool empty() const { return urgent_.empty() && background_.empty(); }
  size_t size() const { return urgent_.size() + background_.size(); }

  // Appends `pieces` to the end of their class.
  void Push(std::vector<IoPiece> pieces, IoPriority priority);
  // The next piece to start (urgent first). Precondition: !empty().
  IoPiece Pop();
  // Moves the queued pieces of `ticket` ahead of every other queued piece,
  // urgent ones included (the caller is about to wait for it); keeps their
  // order. Pieces already started are not touched. Returns how many pieces
  // changed place: 0 when they would start next anyway.
  size_t Hurry(IoTicket ticket);

 private:
  std::deque<IoPiece> urgent_;
  std::deque<IoPiece> background_;
};

}  // namespace zt::offload::internal
