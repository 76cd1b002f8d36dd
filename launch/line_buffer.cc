// Implementation of launch/line_buffer.h.
#include "launch/line_buffer.h"

namespace zt::comm {

void LineBuffer::Append(std::string_view data, const Emit& emit) {
  while (!data.empty()) {
    size_t newline = data.find('\n');
    if (newline == std::string_view::npos) {
      pending_.append(data);
      while (pending_.size() >= kMaxLineBytes) {
        std::string piece = pending_.substr(0, kMaxLineBytes);
        pending_.erase(0, kMaxLineBytes);
        piece.push_back('\n');
        emit(piece);
      }
      return;
    }
    if (pending_.empty()) {
      emit(data.substr(0, newline + 1));  // the common case: no copy
    } else {
      pending_.append(data.substr(0, newline + 1));
      emit(pending_);
      pending_.clear();
    }
    data.remove_prefix(newline + 1);
  }
}

void LineBuffer::Flush(const Emit& emit) {
  if (pending_.empty()) return;
  pending_.push_back('\n');
  emit(pending_);
  pending_.clear();
}

}  // namespace zt::comm
