// Hosts for the multi-host tests: each host is a Linux network namespace with
// its own interfaces and addresses, joined to the others through a bridge in a
// switch namespace of its own, each link rate-capped with tc's tbf (this
// kernel has no netem, so links have no added delay or loss). A command run
// "on" a host sees only that host's network (`ip netns exec`), while all
// hosts share the file system, as hosts with a shared file system do.
//
//   host h:  eth0 10.77.0.(h+1)/24 ──veth── br0 (switch namespace)
//            eth1 10.78.0.(h+1)/24 ──veth── br1   (with interfaces = 2)
//
// Names carry this process's pid (zt<pid>h<h>, zt<pid>sw), so concurrent
// runs never share a namespace and the addresses, which exist only inside
// these namespaces, never meet the machine's own. The destructor kills every
// process still on a host and deletes the namespaces (which removes their
// interfaces); Create first deletes namespaces left by test processes that
// are gone (killed before their destructor ran). Needs root (CAP_NET_ADMIN)
// and iproute2; Create says why when it cannot make them, and the tests skip
// with that message.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace zt::testing {

struct HostsOptions {
  int hosts = 2;
  int interfaces = 1;          // 1: eth0 only; 2: eth0 and eth1 on two separate bridges
  std::string rate = "1gbit";  // tc tbf rate on each host's egress; empty: uncapped
};

// A command started on a host, its output captured to a file.
struct HostProcess {
  pid_t pid = -1;
  std::string log;  // path: stdout and stderr
};

class NetnsHosts {
 public:
  static absl::StatusOr<std::unique_ptr<NetnsHosts>> Create(const HostsOptions& options);
  ~NetnsHosts();
  NetnsHosts(const NetnsHosts&) = delete;
  NetnsHosts& operator=(const NetnsHosts&) = delete;

  int size() const { return static_cast<int>(hosts_.size()); }
  // Host h's address on network n (0: eth0's 10.77.0.0/24, 1: eth1's 10.78.0.0/24).
  std::string Address(int h, int network = 0) const;

  // Starts `command` (/bin/sh) on host h, stdout and stderr to `log`.
  absl::StatusOr<HostProcess> Start(int h, const std::string& command, const std::string& log);

  // The pids of every process on host h (`ip netns pids`).
  std::vector<pid_t> Pids(int h) const;
  // Sends `sig` to every process on host h (SIGKILL: the host dies; SIGSTOP:
  // it freezes, its sockets open and silent).
  void Signal(int h, int sig);
  // Takes host h's interface eth<n> down (the cable pulled) or up again.
  absl::Status SetLink(int h, int network, bool up);
  // Bytes host h sent on eth<n> (the interface's own counter).
  int64_t TxBytes(int h, int network) const;

 private:
  NetnsHosts() = default;
  absl::Status Build(const HostsOptions& options);
  void Teardown();

  std::string prefix_;
  std::string switch_ns_;
  std::vector<std::string> hosts_;
  std::vector<pid_t> started_;
};

// Waits for `p` to exit, at most `timeout`; returns its exit code (128 + the
// signal when a signal ended it), or -1 when it is still running then.
int WaitExit(const HostProcess& p, std::chrono::milliseconds timeout);

}  // namespace zt::testing
