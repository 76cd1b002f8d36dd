// Implementation of tests/multihost/netns_hosts.h: iproute2 commands run with
// /bin/sh (RunShell, tests/testing/zt_command.h), each checked, so a step that
// fails names itself.
#include "tests/multihost/netns_hosts.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "tests/testing/zt_command.h"

namespace zt::testing {
namespace {

absl::Status Step(const std::string& command) {
  ZtRun r = RunShell(command);
  if (r.code == 0) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat("`", command, "` failed (exit ", r.code, "): ", r.output));
}

bool Alive(pid_t pid) { return ::kill(pid, 0) == 0 || errno == EPERM; }

std::vector<pid_t> NamespacePids(const std::string& ns) {
  std::vector<pid_t> pids;
  for (absl::string_view line : absl::StrSplit(RunShell("ip netns pids " + ns).output, '\n', absl::SkipWhitespace())) {
    int pid = 0;
    if (absl::SimpleAtoi(absl::StripAsciiWhitespace(line), &pid) && pid > 0) pids.push_back(pid);
  }
  return pids;
}

void KillAndDelete(const std::string& ns) {
  for (int round = 0; round < 50; ++round) {
    std::vector<pid_t> pids = NamespacePids(ns);
    if (pids.empty()) break;
    for (pid_t pid : pids) {
      ::kill(pid, SIGKILL);
      ::kill(pid, SIGCONT);  // a stopped process dies of SIGKILL too, but let it run its exit
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  RunShell("ip netns del " + ns);
}

// Namespaces of earlier test processes that died before their destructor ran.
void RemoveStale() {
  for (absl::string_view line : absl::StrSplit(RunShell("ip netns list").output, '\n', absl::SkipWhitespace())) {
    absl::string_view name = line.substr(0, line.find(' '));
    if (!absl::ConsumePrefix(&name, "zt")) continue;
    const size_t digits = name.find_first_not_of("0123456789");
    int pid = 0;
    if (digits == 0 || digits == absl::string_view::npos || !absl::SimpleAtoi(name.substr(0, digits), &pid)) continue;
    const absl::string_view rest = name.substr(digits);
    if (rest != "sw" && !(rest.size() >= 2 && rest[0] == 'h')) continue;
    if (!Alive(pid)) KillAndDelete(std::string(line.substr(0, line.find(' '))));
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<NetnsHosts>> NetnsHosts::Create(const HostsOptions& options) {
  if (::geteuid() != 0) {
    return absl::FailedPreconditionError("the multi-host tests make network namespaces, which needs root");
  }
  if (options.hosts < 1 || options.hosts > 8 || options.interfaces < 1 || options.interfaces > 2) {
    return absl::InvalidArgumentError("NetnsHosts: 1-8 hosts with 1 or 2 interfaces each");
  }
  RemoveStale();
  std::unique_ptr<NetnsHosts> hosts(new NetnsHosts());
  absl::Status built = hosts->Build(options);
  if (!built.ok()) return built;  // the destructor removes what was made
  return hosts;
}

absl::Status NetnsHosts::Build(const HostsOptions& options) {
  prefix_ = absl::StrCat("zt", ::getpid());
  switch_ns_ = prefix_ + "sw";
  if (absl::Status s = Step("ip netns add " + switch_ns_); !s.ok()) {
    switch_ns_.clear();
    return s;
  }
  for (int n = 0; n < options.interfaces; ++n) {
    const std::string br = absl::StrCat("br", n);
    if (absl::Status s = Step(absl::StrCat("ip -n ", switch_ns_, " link add ", br, " type bridge && ip -n ", switch_ns_,
                                           " link set ", br, " up"));
        !s.ok()) {
      return s;
    }
  }
  for (int h = 0; h < options.hosts; ++h) {
    const std::string ns = absl::StrCat(prefix_, "h", h);
    if (absl::Status s = Step("ip netns add " + ns); !s.ok()) return s;
    hosts_.push_back(ns);
    if (absl::Status s = Step(absl::StrCat("ip -n ", ns, " link set lo up")); !s.ok()) return s;
    for (int n = 0; n < options.interfaces; ++n) {
      // The switch side's name must be unique in the switch namespace and at
      // most 15 characters: zt<pid>v<h><n>.
      const std::string port = absl::StrCat(prefix_, "v", h, n);
      const std::string dev = absl::StrCat("eth", n);
      std::string cmd =
          absl::StrCat("ip link add ", port, " netns ", switch_ns_, " type veth peer name ", dev, " netns ", ns,
                       " && ip -n ", switch_ns_, " link set ", port, " master br", n, " up && ip -n ", ns, " addr add ",
                       Address(h, n), "/24 dev ", dev, " && ip -n ", ns, " link set ", dev, " up");
      if (!options.rate.empty()) {
        absl::StrAppend(&cmd, " && ip netns exec ", ns, " tc qdisc add dev ", dev, " root tbf rate ", options.rate,
                        " burst 256kb latency 50ms");
      }
      if (absl::Status s = Step(cmd); !s.ok()) return s;
    }
  }
  return absl::OkStatus();
}

NetnsHosts::~NetnsHosts() { Teardown(); }

void NetnsHosts::Teardown() {
  for (const std::string& ns : hosts_) KillAndDelete(ns);
  for (pid_t pid : started_) {
    int status = 0;
    ::waitpid(pid, &status, 0);  // every process on the hosts was killed: reap ours (at once if already reaped)
  }
  if (!switch_ns_.empty()) RunShell("ip netns del " + switch_ns_);
  hosts_.clear();
  switch_ns_.clear();
}

std::string NetnsHosts::Address(int h, int network) const { return absl::StrCat("10.", 77 + network, ".0.", h + 1); }

absl::StatusOr<HostProcess> NetnsHosts::Start(int h, const std::string& command, const std::string& log) {
  const std::string ns = hosts_.at(h);
  const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return absl::InternalError("cannot create " + log);
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fd);
    return absl::InternalError("fork failed");
  }
  if (pid == 0) {
    ::setpgid(0, 0);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    const int null = ::open("/dev/null", O_RDONLY);
    if (null >= 0) ::dup2(null, 0);
    ::execlp("ip", "ip", "netns", "exec", ns.c_str(), "/bin/sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(fd);
  started_.push_back(pid);
  return HostProcess{pid, log};
}

std::vector<pid_t> NetnsHosts::Pids(int h) const { return NamespacePids(hosts_.at(h)); }

void NetnsHosts::Signal(int h, int sig) {
  for (pid_t pid : Pids(h)) ::kill(pid, sig);
}

absl::Status NetnsHosts::SetLink(int h, int network, bool up) {
  return Step(absl::StrCat("ip -n ", hosts_.at(h), " link set eth", network, up ? " up" : " down"));
}

int64_t NetnsHosts::TxBytes(int h, int network) const {
  ZtRun r = RunShell(
      absl::StrCat("ip netns exec ", hosts_.at(h), " cat /sys/class/net/eth", network, "/statistics/tx_bytes"));
  int64_t bytes = -1;
  if (r.code != 0 || !absl::SimpleAtoi(absl::StripAsciiWhitespace(r.output), &bytes)) return -1;
  return bytes;
}

int WaitExit(const HostProcess& p, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    int status = 0;
    const pid_t r = ::waitpid(p.pid, &status, WNOHANG);
    if (r == p.pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (r < 0) return -1;
    if (std::chrono::steady_clock::now() >= deadline) return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

}  // namespace zt::testing
