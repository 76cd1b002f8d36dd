// Implementation of comm/store_socket.h: scan /proc/self/fd, match the peer
// port, set the socket options.
#include "comm/store_socket.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>

#include <cstdlib>

namespace zt::comm {
namespace {

int PeerPort(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return -1;
  if (addr.ss_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(&addr)->sin_port);
  if (addr.ss_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6*>(&addr)->sin6_port);
  return -1;
}

}  // namespace

int BoundStoreSocket(int port, std::chrono::milliseconds timeout) {
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return 0;
  const int64_t ms = std::max<int64_t>(1, timeout.count());
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(ms / 1000);
  tv.tv_usec = static_cast<suseconds_t>((ms % 1000) * 1000);
  int changed = 0;
  while (dirent* entry = readdir(dir)) {
    char* end = nullptr;
    const long fd = std::strtol(entry->d_name, &end, 10);
    if (end == entry->d_name || *end != '\0' || fd == dirfd(dir)) continue;
    struct stat st {};
    if (fstat(static_cast<int>(fd), &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
    if (PeerPort(static_cast<int>(fd)) != port) continue;
    const bool ok = setsockopt(static_cast<int>(fd), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) == 0 &&
                    setsockopt(static_cast<int>(fd), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) == 0;
    if (ok) ++changed;
  }
  closedir(dir);
  return changed;
}

}  // namespace zt::comm
