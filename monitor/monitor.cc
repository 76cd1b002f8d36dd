// MonitorSet: fan-out with first-error-wins.
#include "monitor/monitor.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace zt::monitor {
namespace {

// Keeps the first error, with the monitor's name in front.
void Keep(absl::Status* first, const Monitor& m, const absl::Status& st) {
  if (st.ok() || !first->ok()) return;
  *first = absl::Status(st.code(), absl::StrCat(m.name(), ": ", st.message()));
}

}  // namespace

void MonitorSet::Add(std::unique_ptr<Monitor> monitor) {
  if (monitor != nullptr) monitors_.push_back(std::move(monitor));
}

absl::Status MonitorSet::Write(const std::vector<Event>& events) {
  absl::Status first;
  for (auto& m : monitors_) Keep(&first, *m, m->Write(events));
  return first;
}

absl::Status MonitorSet::Flush() {
  absl::Status first;
  for (auto& m : monitors_) Keep(&first, *m, m->Flush());
  return first;
}

}  // namespace zt::monitor
