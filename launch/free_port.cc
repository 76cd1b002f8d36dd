// Implementation of launch/free_port.h.
#include "launch/free_port.h"

#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "util/unique_fd.h"

namespace zt::comm {
namespace {

constexpr int kLowestPort = 10000;  // below: well-known services' ports
constexpr int kRandomTries = 64;

using AddrInfoPtr = std::unique_ptr<struct addrinfo, decltype(&::freeaddrinfo)>;

int BoundPort(int fd) {
  struct sockaddr_storage bound {};
  socklen_t len = sizeof(bound);
  if (::getsockname(fd, reinterpret_cast<struct sockaddr*>(&bound), &len) != 0) return -1;
  if (bound.ss_family == AF_INET) return ntohs(reinterpret_cast<struct sockaddr_in*>(&bound)->sin_port);
  if (bound.ss_family == AF_INET6) return ntohs(reinterpret_cast<struct sockaddr_in6*>(&bound)->sin6_port);
  return -1;
}

// Binds `port` (0: the kernel chooses) on every address `addr` resolves to
// until one bind succeeds; returns the bound port or -1 with `error` set.
int TryBind(const struct addrinfo* found, int port, std::string* error) {
  for (const struct addrinfo* ai = found; ai != nullptr; ai = ai->ai_next) {
    UniqueFd sock(::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol));
    if (!sock.valid()) {
      *error = std::strerror(errno);
      continue;
    }
    struct sockaddr_storage where {};
    std::memcpy(&where, ai->ai_addr, ai->ai_addrlen);
    if (where.ss_family == AF_INET) {
      reinterpret_cast<struct sockaddr_in*>(&where)->sin_port = htons(static_cast<uint16_t>(port));
    } else if (where.ss_family == AF_INET6) {
      reinterpret_cast<struct sockaddr_in6*>(&where)->sin6_port = htons(static_cast<uint16_t>(port));
    } else {
      continue;
    }
    if (::bind(sock.get(), reinterpret_cast<struct sockaddr*>(&where), ai->ai_addrlen) != 0) {
      *error = std::strerror(errno);
      continue;
    }
    const int bound = BoundPort(sock.get());
    if (bound > 0) return bound;
    *error = std::strerror(errno);
  }
  return -1;
}

}  // namespace

std::pair<int, int> ParseEphemeralRange(const std::string& text) {
  std::istringstream in(text);
  int lo = 0;
  int hi = 0;
  if (!(in >> lo >> hi) || lo < 1 || hi > 65535 || lo > hi) return {32768, 60999};
  return {lo, hi};
}

absl::StatusOr<int> PickFreePort(const std::string& addr) {
  struct addrinfo hints {};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  struct addrinfo* found = nullptr;
  const int rc = ::getaddrinfo(addr.c_str(), "0", &hints, &found);
  if (rc != 0) {
    return absl::InvalidArgumentError(absl::StrCat("cannot resolve master address '", addr, "': ", ::gai_strerror(rc)));
  }
  AddrInfoPtr owner(found, &::freeaddrinfo);
  std::string last_error = "no address";

  std::ifstream range_file("/proc/sys/net/ipv4/ip_local_port_range");
  std::stringstream range_text;
  range_text << range_file.rdbuf();
  const int first_ephemeral = ParseEphemeralRange(range_text.str()).first;
  if (first_ephemeral - kLowestPort >= 1000) {
    std::mt19937 rng(std::random_device{}());
    std::uniform_int_distribution<int> draw(kLowestPort, first_ephemeral - 1);
    for (int i = 0; i < kRandomTries; ++i) {
      const int port = TryBind(found, draw(rng), &last_error);
      if (port > 0) return port;
    }
  }
  const int port = TryBind(found, 0, &last_error);
  if (port > 0) return port;
  return absl::UnavailableError(absl::StrCat("cannot bind a free port on master address '", addr, "': ", last_error,
                                             " (is it an address of this machine?)"));
}

}  // namespace zt::comm
