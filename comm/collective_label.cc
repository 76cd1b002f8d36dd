// Implementation of comm/collective_label.h.
#include "comm/collective_label.h"

#include <utility>

namespace zt::comm {
namespace {

std::string& ThreadLabel() {
  thread_local std::string label;
  return label;
}

}  // namespace

CollectiveLabel::CollectiveLabel(std::string label) : previous_(std::exchange(ThreadLabel(), std::move(label))) {}

CollectiveLabel::~CollectiveLabel() { ThreadLabel() = std::move(previous_); }

const std::string& CollectiveLabel::Current() { return ThreadLabel(); }

}  // namespace zt::comm
