// Implementation of comm/store_socket.h: list /proc/self/fd, keep the
// sockets (their link reads "socket:[inode]"), match the peer port, set the
// socket options.
#include "comm/store_socket.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

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

std::set<int> SocketFds() {
  std::set<int> out;
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return out;
  while (dirent* entry = readdir(dir)) {
    char* end = nullptr;
    const long fd = std::strtol(entry->d_name, &end, 10);
    if (end == entry->d_name || *end != '\0') continue;
    const std::string link_path = std::string("/proc/self/fd/") + entry->d_name;
    char target[64] = {0};
    const ssize_t n = readlink(link_path.c_str(), target, sizeof(target) - 1);
    if (n > 0 && std::strncmp(target, "socket:", 7) == 0) out.insert(static_cast<int>(fd));
  }
  closedir(dir);
  return out;
}

int BoundStoreSocket(const std::set<int>& before, int port, std::chrono::milliseconds timeout) {
  const int64_t ms = std::max<int64_t>(1, timeout.count());
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(ms / 1000);
  tv.tv_usec = static_cast<suseconds_t>((ms % 1000) * 1000);
  int changed = 0;
  for (int fd : SocketFds()) {
    if (before.count(fd) != 0 || PeerPort(fd) != port) continue;
    const bool ok = setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) == 0 &&
                    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) == 0;
    if (ok) ++changed;
  }
  return changed;
}

}  // namespace zt::comm
