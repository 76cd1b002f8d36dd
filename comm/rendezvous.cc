// Implementation of comm/rendezvous.h over c10d::TCPStore. c10d reports
// problems as c10::Error with socket-level text; we catch them here and say
// which rank, address and variable are involved.
#include "comm/rendezvous.h"

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <exception>
#include <set>
#include <thread>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "comm/store_socket.h"
#include "util/system_info.h"

namespace zt::comm {
namespace {

// Parses "world=4 host=h pid=123" into its world size (-1 when malformed).
int AnnouncedWorld(const std::vector<uint8_t>& value) {
  std::string s(value.begin(), value.end());
  for (absl::string_view field : absl::StrSplit(s, ' ')) {
    if (absl::ConsumePrefix(&field, "world=")) {
      int world = -1;
      if (absl::SimpleAtoi(field, &world)) return world;
    }
  }
  return -1;
}

// Waits until something accepts TCP connections at host:port, or `timeout`
// passes (then returns and lets TCPStore report the failure). LibTorch 1.13's
// TCPStore client sleeps a whole second after a refused connect, and a rank
// that starts a few milliseconds before rank 0 listens hits that in about
// half of all launches; probing every 10 ms here removes the second. The
// probe connects and closes at once, which the store's server ignores.
void WaitForListener(const std::string& host, int port, std::chrono::milliseconds timeout) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) != 0 || found == nullptr) return;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  bool connected = false;
  while (!connected && std::chrono::steady_clock::now() < deadline) {
    for (addrinfo* a = found; a != nullptr && !connected; a = a->ai_next) {
      const int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
      if (fd < 0) continue;
      connected = connect(fd, a->ai_addr, a->ai_addrlen) == 0;
      close(fd);
    }
    if (!connected) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  freeaddrinfo(found);
}

// Connects to (rank 0 without a torchrun agent: hosts) the TCPStore at
// MASTER_ADDR:MASTER_PORT. Errors name the rank, the address and the
// variables to check. Every later store operation of this rank gets the
// rendezvous deadline, so a store host that stops answering ends the
// rendezvous (and the gloo connect after it) with an error instead of a
// wait without end.
absl::StatusOr<c10::intrusive_ptr<c10d::TCPStore>> ConnectStore(const RankEnv& env, std::chrono::milliseconds timeout) {
  const int rank = env.rank;
  const std::string wanted = absl::StrCat(env.master_addr, ":", env.master_port);
  const bool hosts_store = rank == 0 && !env.agent_hosts_store;
  std::string error;
  absl::StatusOr<c10::intrusive_ptr<c10d::TCPStore>> tcp =
      OpenTcpStore(env.master_addr, env.master_port, hosts_store, timeout, timeout, &error);
  if (tcp.ok()) return tcp;
  if (hosts_store) {
    return absl::UnavailableError(absl::StrCat("rank 0 could not host the rendezvous store on port ", env.master_port,
                                               " (MASTER_PORT) for ", env.master_addr, " (MASTER_ADDR): ", error,
                                               ". Another process may hold the port: choose a free MASTER_PORT"));
  }
  return absl::UnavailableError(
      absl::StrCat("rank ", rank, " could not reach the rendezvous store of ",
                   env.agent_hosts_store ? "the torchrun agent" : "rank 0", " at ", wanted,
                   " (MASTER_ADDR:MASTER_PORT) within ", FormatDuration(timeout), ": ", error,
                   ". Check that rank 0 is running, that every rank has the same MASTER_ADDR and "
                   "MASTER_PORT, and that this host can reach that address"));
}

// One rank's rendezvous over a connected store: the steps after the
// connect, in the order Rendezvous runs them. Each returns the error to
// report, or OK to go on.
class RendezvousSteps {
 public:
  RendezvousSteps(const RankEnv& env, std::chrono::milliseconds timeout, std::string address,
                  c10::intrusive_ptr<c10d::Store> store)
      : env_(env),
        rank_(env.rank),
        world_(env.world_size),
        timeout_(timeout),
        address_(std::move(address)),
        host_(env.agent_hosts_store ? "the torchrun agent" : "rank 0"),
        store_(std::move(store)) {
    keys_.reserve(world_);
    for (int r = 0; r < world_; ++r) keys_.push_back(std::to_string(r));
  }

  absl::Status Announce();
  absl::Status WaitForAll();
  absl::Status CheckAgreement();

 private:
  absl::Status Lost(const std::exception& e) const;
  absl::Status ReportMissing(const std::exception& wait_error);

  const RankEnv& env_;
  const int rank_;
  const int world_;
  const std::chrono::milliseconds timeout_;
  const std::string address_;  // "host:port" of the store, for messages
  const std::string host_;     // who hosts the store, for messages
  c10::intrusive_ptr<c10d::Store> store_;
  std::vector<std::string> keys_;  // each rank's announcement key: its number
};

// The error for a store operation that threw: the store stopped answering
// within the timeout, or the connection broke.
absl::Status RendezvousSteps::Lost(const std::exception& e) const {
  const std::string what = ErrorFirstLine(e.what());
  if (absl::StrContains(what, "Socket Timeout") || absl::StrContains(what, "timed out")) {
    return absl::UnavailableError(
        absl::StrCat("rank ", rank_, ": the rendezvous store at ", address_, " (hosted by ", host_,
                     ") did not answer within ", FormatDuration(timeout_), " (", what, "): ", host_,
                     " may be stopped, hung or overloaded; ZT_RENDEZVOUS_TIMEOUT_S sets this timeout"));
  }
  return absl::UnavailableError(absl::StrCat("rank ", rank_, " lost the rendezvous store at ", address_, " (hosted by ",
                                             host_, ") during the rendezvous: ", what));
}

absl::Status RendezvousSteps::Announce() {
  // Rank 0 publishes its job before it announces itself, so every rank that
  // sees rank 0 joined can compare.
  if (rank_ == 0) {
    try {
      store_->set("job", StoreBytes(env_.job_id));
    } catch (const std::exception& e) {
      return Lost(e);
    }
  }
  // A rank of another job that found this job's store on the same port is
  // refused before it claims a slot, so that this job's own rank can still
  // take it. Rank 0 publishes its job first thing: wait for it.
  if (rank_ != 0) {
    try {
      store_->wait({"job"}, timeout_);
      const std::vector<uint8_t> job_bytes = store_->get("job");
      const std::string job(job_bytes.begin(), job_bytes.end());
      if (!job.empty() && !env_.job_id.empty() && job != env_.job_id) {
        const bool by_command =
            absl::StartsWith(job, kCommandLineJobPrefix) || absl::StartsWith(env_.job_id, kCommandLineJobPrefix);
        return absl::FailedPreconditionError(absl::StrCat(
            "rank ", rank_, " of job ", env_.job_id, " reached the rendezvous store of job ", job, " at ", address_,
            ": two jobs use the same MASTER_ADDR:MASTER_PORT; give each job its own MASTER_PORT",
            by_command ? " (ranks started without ZT_JOB_ID are named by their command line: if these ranks are one "
                         "job whose command lines differ on purpose, set the same ZT_JOB_ID on every rank)"
                       : ""));
      }
    } catch (const std::exception& e) {
      return Lost(e);
    }
  }
  // Claim this rank's slot with an atomic counter: a second process with the
  // same rank (two processes started with one RANK, or another job's rank
  // where the jobs have no ids) is refused instead of overwriting the first
  // one's entry.
  // (LibTorch 1.13's compareSet does not wake waiters, so it cannot be used.)
  const std::string announce =
      absl::StrCat("world=", world_, " host=", HostName("unknown-host"), " pid=", getpid(), " job=", env_.job_id);
  try {
    // torchrun's agent keeps its store across worker restarts: a restarted
    // worker claims afresh under its restart count.
    const char* restart = std::getenv("TORCHELASTIC_RESTART_COUNT");
    const std::string claim = absl::StrCat("claim/", restart != nullptr ? restart : "0", "/", keys_[rank_]);
    if (store_->add(claim, 1) != 1) {
      const std::vector<uint8_t> got =
          store_->check({keys_[rank_]}) ? store_->get(keys_[rank_]) : StoreBytes("unknown");
      return absl::AlreadyExistsError(absl::StrCat(
          "rank ", rank_, " is already taken in the rendezvous at ", address_, " by another process (",
          std::string(got.begin(), got.end()), "; this one: ", announce,
          "): two jobs use the same MASTER_ADDR:MASTER_PORT, or two processes were started with the same RANK; "
          "give each job its own MASTER_PORT"));
    }
    store_->set(keys_[rank_], StoreBytes(announce));
  } catch (const std::exception& e) {
    return Lost(e);
  }
  return absl::OkStatus();
}

absl::Status RendezvousSteps::WaitForAll() {
  try {
    store_->wait(keys_, timeout_);
  } catch (const std::exception& wait_error) {
    return ReportMissing(wait_error);
  }
  return absl::OkStatus();
}

// After the wait for every rank failed: names the ranks that never
// announced themselves.
absl::Status RendezvousSteps::ReportMissing(const std::exception& wait_error) {
  std::vector<int> missing;
  std::vector<int> joined;
  try {
    for (int r = 0; r < world_; ++r) {
      (store_->check({keys_[r]}) ? joined : missing).push_back(r);
    }
  } catch (const std::exception& e) {
    return Lost(e);
  }
  // The store lives in rank 0: it stays up until the ranks that joined
  // have read who is missing (each says so under "done/"), so they can
  // report the same list instead of a broken connection.
  try {
    if (rank_ == 0) {
      std::vector<std::string> done;
      for (int r : joined) {
        if (r != 0) done.push_back("done/" + keys_[r]);
      }
      if (!done.empty()) store_->wait(done, timeout_);
    } else {
      store_->set("done/" + keys_[rank_], StoreBytes("1"));
    }
  } catch (const std::exception&) {
    // A joined rank that died meanwhile; nothing more to report.
  }
  if (missing.empty()) {
    return absl::UnavailableError(absl::StrCat("rank ", rank_, " failed waiting for the rendezvous at ", address_, ": ",
                                               ErrorFirstLine(wait_error.what())));
  }
  return absl::DeadlineExceededError(
      absl::StrCat(missing.size() == 1 ? "rank " : "ranks ", FormatRankList(missing), " of ", world_,
                   " did not join the rendezvous at ", address_, " within ", FormatDuration(timeout_),
                   " (joined: ", FormatRankList(joined),
                   "). Start the missing ranks, or check their WORLD_SIZE, MASTER_ADDR and MASTER_PORT; "
                   "ZT_RENDEZVOUS_TIMEOUT_S sets this timeout"));
}

// Every rank must agree on the world size; a rank launched with another WORLD_SIZE would
// otherwise wait for ranks that never come.
absl::Status RendezvousSteps::CheckAgreement() {
  try {
    for (int r = 0; r < world_; ++r) {
      int other = AnnouncedWorld(store_->get(keys_[r]));
      if (other != world_) {
        return absl::InvalidArgumentError(absl::StrCat("rank ", r, " joined the rendezvous at ", address_,
                                                       " with world size ", other, " but rank ", rank_, " has ", world_,
                                                       ": start every rank with the same WORLD_SIZE"));
      }
    }
  } catch (const std::exception& e) {
    return Lost(e);
  }
  return absl::OkStatus();
}

}  // namespace

std::string ErrorFirstLine(const std::string& text) {
  std::string line = text.substr(0, text.find('\n'));
  while (!line.empty() && (line.back() == '.' || line.back() == ' ')) line.pop_back();
  return line.size() > 300 ? line.substr(0, 300) + "..." : line;
}

absl::StatusOr<c10::intrusive_ptr<c10d::TCPStore>> OpenTcpStore(const std::string& host, int port, bool host_it,
                                                                std::chrono::milliseconds connect_timeout,
                                                                std::chrono::milliseconds operation_timeout,
                                                                std::string* error) {
  c10d::TCPStoreOptions opts;
  opts.port = static_cast<std::uint16_t>(port);
  opts.isServer = host_it;
  opts.numWorkers = c10::nullopt;  // callers count their members themselves, to name the missing ones
  opts.waitWorkers = false;
  opts.timeout = connect_timeout;
  if (!host_it) WaitForListener(host, port, connect_timeout);
  const std::set<int> sockets_before = host_it ? std::set<int>() : SocketFds();
  c10::intrusive_ptr<c10d::TCPStore> tcp;
  try {
    tcp = c10::make_intrusive<c10d::TCPStore>(host, opts);
  } catch (const std::exception& e) {
    *error = ErrorFirstLine(e.what());
    return absl::UnavailableError(*error);
  }
  if (!host_it) BoundStoreSocket(sockets_before, tcp->getPort(), operation_timeout);
  return tcp;
}

std::string FormatDuration(std::chrono::milliseconds d) {
  const int64_t ms = d.count();
  if (ms < 1000) return absl::StrCat(ms, " ms");
  if (ms % 1000 == 0) return absl::StrCat(ms / 1000, " s");
  return absl::StrCat(absl::SixDigits(static_cast<double>(ms) / 1000.0), " s");
}

std::string FormatRankList(const std::vector<int>& ranks) {
  constexpr size_t kMaxShown = 8;
  if (ranks.size() <= kMaxShown) return absl::StrJoin(ranks, ", ");
  std::vector<int> head(ranks.begin(), ranks.begin() + kMaxShown);
  return absl::StrCat(absl::StrJoin(head, ", "), ", ... (", ranks.size(), " ranks)");
}

absl::StatusOr<StoreHandle> Rendezvous(const RankEnv& env, std::chrono::milliseconds timeout,
                                       const std::string& prefix) {
  absl::StatusOr<c10::intrusive_ptr<c10d::TCPStore>> tcp = ConnectStore(env, timeout);
  if (!tcp.ok()) return tcp.status();
  StoreHandle handle;
  handle.env = env;
  handle.address = absl::StrCat(env.master_addr, ":", (*tcp)->getPort());
  handle.store = *tcp;
  handle.env.master_port = (*tcp)->getPort();

  RendezvousSteps steps(env, timeout, handle.address, c10::make_intrusive<c10d::PrefixStore>(prefix + "/rdzv", *tcp));
  if (absl::Status s = steps.Announce(); !s.ok()) return s;
  if (absl::Status s = steps.WaitForAll(); !s.ok()) return s;
  if (absl::Status s = steps.CheckAgreement(); !s.ok()) return s;
  return handle;
}

}  // namespace zt::comm
