// Bytes this process has moved over TCP, read from the kernel (TCP_INFO of
// every TCP socket in /proc/self/fd). Used to check the byte counters of the
// process groups against what really went over the wire. Linux >= 4.1 only;
// includes protocol framing and every other TCP socket of the process.
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"

namespace zt::comm {

struct SocketBytes {
  int64_t sent = 0;      // written by the process: tcpi_bytes_acked + SIOCOUTQ
  int64_t received = 0;  // tcpi_bytes_received: arrived, read or not
  int sockets = 0;       // TCP sockets looked at
};

// Sum over the TCP sockets open right now. Bytes of sockets closed between
// two calls are lost, so compare snapshots around work that keeps its
// connections open. Unavailable when the kernel does not report the fields.
absl::StatusOr<SocketBytes> ReadSocketBytes();

}  // namespace zt::comm
