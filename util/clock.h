// Wall-clock intervals on the steady clock, in seconds.
#pragma once

#include <chrono>

namespace zt {

using SteadyClock = std::chrono::steady_clock;

// b - a in seconds (negative when b comes first).
inline double Seconds(SteadyClock::time_point a, SteadyClock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

}  // namespace zt
