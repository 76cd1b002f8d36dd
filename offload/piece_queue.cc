#include "offload/piece_queue.h"

#include <algorithm>
#include <iterator>
#include <utility>

namespace zt::offload::internal {

void PieceQueue::Push(std::vector<IoPiece> pieces, IoPriority priority) {
  std::deque<IoPiece>& q = priority == IoPriority::kUrgent ? urgent_ : background_;
  for (IoPiece& p : pieces) q.push_back(p);
}

IoPiece PieceQueue::Pop() {
  std::deque<IoPiece>& q = urgent_.empty() ? background_ : urgent_;
  IoPiece p = q.front();
  q.pop_front();
  return p;
}

size_t PieceQueue::Hurry(IoTicket ticket) {
  auto mine = [ticket](const IoPiece& p) { return p.request->ticket == ticket; };
  // Pieces of `ticket` that start next already, in Pop order.
  size_t leading = 0;
  for (const std::deque<IoPiece>* q : {&urgent_, &background_}) {
    const auto first_other = std::find_if_not(q->begin(), q->end(), mine);
    leading += static_cast<size_t>(first_other - q->begin());
    if (first_other != q->end()) break;
  }
  const size_t total = static_cast<size_t>(std::count_if(urgent_.begin(), urgent_.end(), mine) +
                                           std::count_if(background_.begin(), background_.end(), mine));
  if (total == leading) return 0;
  // Gathered from both classes, in queue order (an urgent request's pieces
  // are never in the background class, but a hurried one may be in either).
  std::vector<IoPiece> hurried;
  for (std::deque<IoPiece>* q : {&urgent_, &background_}) {
    auto keep = std::stable_partition(q->begin(), q->end(), [&mine](const IoPiece& p) { return !mine(p); });
    std::move(keep, q->end(), std::back_inserter(hurried));
    q->erase(keep, q->end());
  }
  urgent_.insert(urgent_.begin(), hurried.begin(), hurried.end());
  return hurried.size();
}

}  // namespace zt::offload::internal
