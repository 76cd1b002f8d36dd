// Implementation of comm/socket_counters.h.
#include "comm/socket_counters.h"

#include <dirent.h>
#include <linux/tcp.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <string>

#include "absl/strings/numbers.h"

namespace zt::comm {

absl::StatusOr<SocketBytes> ReadSocketBytes() {
  SocketBytes total;
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return absl::UnavailableError("cannot list /proc/self/fd");
  const int own_fd = dirfd(dir);
  bool fields_missing = false;
  while (dirent* entry = readdir(dir)) {
    int fd = -1;
    if (!absl::SimpleAtoi(entry->d_name, &fd) || fd == own_fd) continue;
    char target[64] = {0};
    std::string path = std::string("/proc/self/fd/") + entry->d_name;
    if (readlink(path.c_str(), target, sizeof(target) - 1) <= 0) continue;
    if (std::strncmp(target, "socket:", 7) != 0) continue;
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
    total.sent += static_cast<int64_t>(info.tcpi_bytes_acked);
    total.received += static_cast<int64_t>(info.tcpi_bytes_received);
    ++total.sockets;
  }
  closedir(dir);
  if (fields_missing && total.sockets == 0) {
    return absl::UnavailableError("this kernel's TCP_INFO has no tcpi_bytes_acked/received");
  }
  return total;
}

}  // namespace zt::comm
