// A free TCP port for the rendezvous store of a single-node job.
//
// Why not just bind port 0: the kernel hands out port 0 binds from its
// ephemeral range, the same range every outgoing connection (Gloo's pairs, the
// store's clients) takes its local port from, and a port closed a moment ago
// is often handed out again at once. Two jobs started together (a test suite
// run with `ctest -j`) then pick the same port, or a connection of one job
// takes the port the other is about to listen on. Ports are therefore drawn at
// random below the ephemeral range (net.ipv4.ip_local_port_range), where
// nothing takes ports without asking for them, and checked by binding.
#pragma once

#include <string>
#include <utility>

#include "absl/status/statusor.h"

namespace zt::comm {

// A TCP port that is free on `addr` right now: random candidates from
// [10000, first ephemeral port), each checked by binding it; bind port 0 if
// that range is empty or full. Another process may still take the port
// before it is used (the caller's bind then fails with a clear error).
// InvalidArgument when `addr` does not resolve, Unavailable when no port can
// be bound on it.
absl::StatusOr<int> PickFreePort(const std::string& addr);

// The kernel's ephemeral port range from `text` (the contents of
// /proc/sys/net/ipv4/ip_local_port_range, "32768\t60999"); {32768, 60999},
// Linux's default, when the text does not parse. Exposed for tests.
std::pair<int, int> ParseEphemeralRange(const std::string& text);

}  // namespace zt::comm
