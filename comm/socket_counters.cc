// Implementation of comm/socket_counters.h.
#include "comm/socket_counters.h"

#include <linux/sockios.h>
#include <linux/tcp.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <string>

#include "comm/store_socket.h"

namespace zt::comm {

absl::StatusOr<SocketBytes> ReadSocketBytes() {
  SocketBytes total;
  if (access("/proc/self/fd", R_OK) != 0) return absl::UnavailableError("cannot list /proc/self/fd");
  bool fields_missing = false;
  // SocketFds (comm/store_socket.h) lists the descriptors from their names only.
  for (int fd : SocketFds()) {
    int protocol = 0;
    socklen_t len = sizeof(protocol);
    if (getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &protocol, &len) != 0 || protocol != IPPROTO_TCP) {
      continue;
    }
    tcp_info info{};
    len = sizeof(info);
    if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len) != 0) continue;
    if (len < offsetof(tcp_info, tcpi_bytes_received) + sizeof(info.tcpi_bytes_received)) {
      fields_missing = true;
      continue;
    }
    // Bytes the process wrote = acknowledged + still in the send queue
    // (SIOCOUTQ: written, not yet acknowledged). Counting only the acknowledged
    // part would make a snapshot depend on how quickly the peer's kernel acks.
    int queued = 0;
    if (ioctl(fd, SIOCOUTQ, &queued) != 0) queued = 0;
    total.sent += static_cast<int64_t>(info.tcpi_bytes_acked) + queued;
    total.received += static_cast<int64_t>(info.tcpi_bytes_received);
    ++total.sockets;
  }
  if (fields_missing && total.sockets == 0) {
    return absl::UnavailableError("this kernel's TCP_INFO has no tcpi_bytes_acked/received");
  }
  return total;
}

}  // namespace zt::comm
