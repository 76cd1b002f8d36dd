// A deadline on every read and write of this process's connection to the
// rendezvous store. LibTorch 1.13's TCPStore client bounds only `wait` (and
// the `get` built on it); `add`, `set` and `check` read their reply with no
// deadline, so a store host that is stopped (SIGSTOP, a debugger, a swap
// storm) while the other ranks join would hold them forever: the kernel
// accepts their connection into the listen backlog and nothing answers.
//
// TCPStore keeps its socket private, so the connection is found among this
// process's sockets: one that did not exist before the store was created
// and whose peer is the store's port. TCPStore's own `wait` sets the same
// socket options for its own timeout, so this changes nothing a healthy
// store does; an operation that runs past the deadline throws c10::Error
// ("Socket Timeout"), which the caller reports, and the store is not used
// again.
//
//   const std::set<int> before = SocketFds();
//   auto store = c10::make_intrusive<c10d::TCPStore>(host, opts);
//   BoundStoreSocket(before, port, timeout);
#pragma once

#include <chrono>
#include <set>

namespace zt::comm {

// This process's open socket descriptors. Reads /proc/self/fd names only
// (never touches the descriptors), so threads opening sockets meanwhile are
// not disturbed.
std::set<int> SocketFds();

// Sets SO_RCVTIMEO and SO_SNDTIMEO to `timeout` on every socket that is not
// in `before` and is connected to `port`. Returns how many it changed (0:
// none found, and nothing is bounded, which is what TCPStore alone gives).
int BoundStoreSocket(const std::set<int>& before, int port, std::chrono::milliseconds timeout);

}  // namespace zt::comm
