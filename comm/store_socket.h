// A deadline on every read and write of this process's connection to the
// rendezvous store. LibTorch 1.13's TCPStore client bounds only `wait` (and
// the `get` built on it); `add`, `set` and `check` read their reply with no
// deadline, so a store host that is stopped (SIGSTOP, a debugger, a swap
// storm) while the other ranks join would hold them forever: the kernel
// accepts their connection into the listen backlog and nothing answers.
//
// TCPStore keeps its socket private, so the connection is found among this
// process's sockets by its peer port (the store's port): a rank opens no
// other connection to that port. TCPStore's own `wait` sets the same socket
// options for its own timeout, so this changes nothing a healthy store does;
// an operation that runs past the deadline throws c10::Error ("Socket
// Timeout"), which the caller reports, and the store is not used again.
#pragma once

#include <chrono>

namespace zt::comm {

// Sets SO_RCVTIMEO and SO_SNDTIMEO to `timeout` on every TCP socket of this
// process connected to `port` (normally exactly one). Returns how many
// sockets it changed; 0 when none was found (then nothing is bounded, which
// is what TCPStore alone gives).
int BoundStoreSocket(int port, std::chrono::milliseconds timeout);

}  // namespace zt::comm
