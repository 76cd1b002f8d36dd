// Implementation of comm/gloo_device.h.
#include "comm/gloo_device.h"

#include <arpa/inet.h>
#include <gloo/transport/tcp/device.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <exception>

#include "absl/strings/str_cat.h"
#include "util/system_info.h"

namespace zt::comm {
namespace {

// RAII owner of a socket descriptor.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

// The source address the kernel would use to reach host:port. A UDP
// connect() sends nothing; it only resolves the route.
std::string LocalAddressTowards(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* res = nullptr;
  if (getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res) != 0 || !res) {
    return "";
  }
  std::string result;
  for (addrinfo* ai = res; ai != nullptr && result.empty(); ai = ai->ai_next) {
    Fd fd(::socket(ai->ai_family, SOCK_DGRAM, 0));
    if (fd.get() < 0 || ::connect(fd.get(), ai->ai_addr, ai->ai_addrlen) != 0) continue;
    sockaddr_storage local{};
    socklen_t len = sizeof(local);
    if (::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&local), &len) != 0) continue;
    char text[INET6_ADDRSTRLEN] = {0};
    const void* addr = local.ss_family == AF_INET
                           ? static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(&local)->sin_addr)
                           : static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(&local)->sin6_addr);
    if (inet_ntop(local.ss_family, addr, text, sizeof(text)) != nullptr) result = text;
  }
  freeaddrinfo(res);
  return result;
}

}  // namespace

absl::StatusOr<GlooDevice> CreateGlooDevice(const RankEnv& env) {
  ::gloo::transport::tcp::attr attr;
  GlooDevice result;
  const char* ifname = std::getenv("GLOO_SOCKET_IFNAME");
  if (ifname != nullptr && *ifname != '\0') {
    std::string first(ifname);
    first = first.substr(0, first.find(','));  // torch accepts a list; we use the first
    attr.iface = first;
    result.description = absl::StrCat("interface ", first, " (GLOO_SOCKET_IFNAME)");
  } else if (IsLoopbackHost(env.master_addr)) {
    attr.hostname = "127.0.0.1";
    result.description = "address 127.0.0.1 (MASTER_ADDR is loopback)";
  } else {
    std::string local = LocalAddressTowards(env.master_addr, env.master_port > 0 ? env.master_port : 1);
    if (!local.empty()) {
      attr.hostname = local;
      result.description = absl::StrCat("address ", local, " (route to MASTER_ADDR ", env.master_addr, ")");
    } else {
      attr.hostname = HostName("localhost");
      result.description = absl::StrCat("host name ", attr.hostname);
    }
  }
  try {
    result.device = ::gloo::transport::tcp::CreateDevice(attr);
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat("rank ", env.rank, " could not create the Gloo TCP device on ", result.description, ": ", e.what(),
                     ". Set GLOO_SOCKET_IFNAME to the network interface that connects the hosts "
                     "(see `ip addr`)"));
  }
  return result;
}

}  // namespace zt::comm
