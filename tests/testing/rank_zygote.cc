// Implementation of tests/testing/rank_zygote.h.
//
// Wire format over a SOCK_SEQPACKET socketpair, one message per rank:
//   request: u32 launcher_pid, u32 argc, u32 envc, then argc + envc
//            NUL-terminated strings; SCM_RIGHTS: stdin, stdout, stderr.
//   reply:   i64, the rank's pid, or -errno when it could not be forked.
#include "tests/testing/rank_zygote.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "launch/fork_spawner.h"
#include "tests/testing/ranks.h"

namespace zt::testing {
namespace {

constexpr size_t kMaxRequestBytes = 1 << 20;
constexpr int kReplyTimeoutMs = 30000;

absl::Status Errno(const std::string& what) {
  return absl::InternalError(absl::StrCat("rank fork server: ", what, ": ", std::strerror(errno)));
}

// One message of one buffer, with room for the three descriptors a request
// carries (SCM_RIGHTS). Not copyable: msg points into it.
struct FdMessage {
  FdMessage(void* data, size_t size) {
    iov.iov_base = data;
    iov.iov_len = size;
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
  }
  FdMessage(const FdMessage&) = delete;
  FdMessage& operator=(const FdMessage&) = delete;
  alignas(struct cmsghdr) char control[CMSG_SPACE(3 * sizeof(int))] = {};
  struct iovec iov {};
  struct msghdr msg {};
};

void AppendU32(std::string& out, uint32_t v) { out.append(reinterpret_cast<const char*>(&v), sizeof(v)); }

// The rank side: re-parenting, then comm::RunForkedRank (descriptors,
// signals, environment, the worker). Runs in a child of a single-threaded
// process, so it may allocate.
[[noreturn]] void BecomeRank(int server_fd, const int fds[3], pid_t launcher_pid, std::vector<std::string> argv,
                             const std::vector<std::string>& env,
                             const std::function<int(const std::vector<std::string>&)>& run_rank) {
  ::close(server_fd);
  ::setpgid(0, 0);
  // The intermediate that forked this process exits at once; the launcher,
  // a child subreaper, then becomes the parent. Only then can the death
  // signal refer to it.
  for (int i = 0; i < 20000 && ::getppid() != launcher_pid; ++i) ::usleep(500);
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != launcher_pid) ::_exit(127);
  comm::RunForkedRank(fds, argv, env, run_rank);
}

}  // namespace

bool RankForkedFromServer() { return comm::RankWasForked(); }

absl::StatusOr<std::unique_ptr<RankZygote>> RankZygote::Start(const std::string& self_exe,
                                                              const std::map<std::string, std::string>& env_overrides) {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) return Errno("socketpair");
  std::unique_ptr<RankZygote> zygote(new RankZygote());
  zygote->fd_ = sv[0];
  zygote->self_exe_ = self_exe;

  // Everything the child needs is built before fork: this process may run
  // threads, so the child makes only async-signal-safe calls before execve.
  std::map<std::string, std::string> env_map = comm::CurrentEnvironment();
  for (const auto& [k, v] : env_overrides) env_map[k] = v;
  std::vector<std::string> env_strings;
  for (const auto& [k, v] : env_map) env_strings.push_back(absl::StrCat(k, "=", v));
  zygote->load_env_ = comm::LoadTimeEnvironment(env_strings);
  std::vector<char*> envp;
  for (std::string& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::string flag = absl::StrCat(kZygoteFlag, sv[1]);
  std::string exe = self_exe;
  char* argv[] = {exe.data(), flag.data(), nullptr};
  const pid_t parent = ::getpid();

  // Ranks are re-parented here (see the contract), so the launcher reaps them.
  if (::prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) {
    ::close(sv[0]);
    ::close(sv[1]);
    zygote->fd_ = -1;
    return Errno("PR_SET_CHILD_SUBREAPER");
  }
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::fcntl(sv[1], F_SETFD, 0);  // the server keeps its end across execve
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);
    ::execve(argv[0], argv, envp.data());
    ::_exit(127);
  }
  const int fork_errno = errno;
  ::close(sv[1]);
  if (pid < 0) {
    errno = fork_errno;
    return Errno("fork");
  }
  zygote->pid_ = pid;
  return zygote;
}

RankZygote::~RankZygote() {
  if (fd_ >= 0) ::close(fd_);  // the server reads end of stream and exits
  if (pid_ > 0) {
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
  }
}

absl::StatusOr<pid_t> RankZygote::Spawn(const comm::RankSpawnRequest& request) {
  auto fallback = [](const std::string& why) { return absl::UnimplementedError(why); };
  if (broken_ || fd_ < 0) return fallback("the fork server is not running");
  if (request.path == nullptr || *request.path != self_exe_ || request.argv == nullptr || request.env == nullptr) {
    return fallback("not this binary's rank");
  }
  if (request.stdin_fd < 0 || request.stdout_fd < 0 || request.stderr_fd < 0) return fallback("no descriptors");
  if (comm::LoadTimeEnvironment(*request.env) != load_env_) return fallback("another load-time environment");

  std::string payload;
  AppendU32(payload, static_cast<uint32_t>(request.launcher_pid));
  AppendU32(payload, static_cast<uint32_t>(request.argv->size()));
  AppendU32(payload, static_cast<uint32_t>(request.env->size()));
  for (const auto* list : {request.argv, request.env}) {
    for (const std::string& s : *list) payload.append(s.c_str(), s.size() + 1);
  }
  if (payload.size() > kMaxRequestBytes) return fallback("request too large");

  int fds[3] = {request.stdin_fd, request.stdout_fd, request.stderr_fd};
  FdMessage message(payload.data(), payload.size());
  struct msghdr& msg = message.msg;
  struct cmsghdr* cmsg = CMSG_FIRSTHDR(&msg);
  cmsg->cmsg_level = SOL_SOCKET;
  cmsg->cmsg_type = SCM_RIGHTS;
  cmsg->cmsg_len = CMSG_LEN(sizeof(fds));
  std::memcpy(CMSG_DATA(cmsg), fds, sizeof(fds));
  ssize_t sent;
  while ((sent = ::sendmsg(fd_, &msg, MSG_NOSIGNAL)) < 0 && errno == EINTR) {
  }
  if (sent != static_cast<ssize_t>(payload.size())) {
    broken_ = true;  // nothing was started: exec this rank instead
    return fallback(absl::StrCat("the fork server is gone (", std::strerror(errno), ")"));
  }
  struct pollfd p {
    fd_, POLLIN, 0
  };
  int ready;
  while ((ready = ::poll(&p, 1, kReplyTimeoutMs)) < 0 && errno == EINTR) {
  }
  int64_t reply = 0;
  ssize_t got = -1;
  if (ready == 1) {
    while ((got = ::recv(fd_, &reply, sizeof(reply), 0)) < 0 && errno == EINTR) {
    }
  }
  if (got != static_cast<ssize_t>(sizeof(reply))) {
    // The request went out and no answer came: a rank may exist that the
    // launcher does not know of, so this is an error, not a fallback.
    broken_ = true;
    return absl::InternalError(
        absl::StrCat("the rank fork server (pid ", pid_, ") did not answer within ", kReplyTimeoutMs / 1000, " s"));
  }
  if (reply < 0) {
    errno = static_cast<int>(-reply);
    return Errno("fork");
  }
  return static_cast<pid_t>(reply);
}

void ServeRankZygote(int fd, const std::function<int(const std::vector<std::string>&)>& run_rank) {
  std::vector<char> buffer(kMaxRequestBytes);
  while (true) {
    int fds[3] = {-1, -1, -1};
    FdMessage message(buffer.data(), buffer.size());
    struct msghdr& msg = message.msg;
    ssize_t n = ::recvmsg(fd, &msg, MSG_CMSG_CLOEXEC);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) ::_exit(0);  // the test binary closed the socket (or is gone)
    for (struct cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS && c->cmsg_len == CMSG_LEN(sizeof(fds))) {
        std::memcpy(fds, CMSG_DATA(c), sizeof(fds));
      }
    }
    auto close_fds = [&] {
      for (int f : fds) {
        if (f >= 0) ::close(f);
      }
    };
    auto reply = [&](int64_t value) {
      close_fds();
      while (::send(fd, &value, sizeof(value), MSG_NOSIGNAL) < 0 && errno == EINTR) {
      }
    };
    // Parse: three counts, then the strings.
    const char* data = buffer.data();
    const size_t size = static_cast<size_t>(n);
    uint32_t head[3];
    if ((msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) != 0 || size < sizeof(head) || fds[0] < 0 || fds[1] < 0 ||
        fds[2] < 0) {
      reply(-EPROTO);
      continue;
    }
    std::memcpy(head, data, sizeof(head));
    std::vector<std::string> strings;
    size_t pos = sizeof(head);
    while (pos < size && strings.size() < static_cast<size_t>(head[1]) + head[2]) {
      const void* nul = std::memchr(data + pos, '\0', size - pos);
      if (nul == nullptr) break;
      const size_t end = static_cast<size_t>(static_cast<const char*>(nul) - data);
      strings.emplace_back(data + pos, end - pos);
      pos = end + 1;
    }
    if (strings.size() != static_cast<size_t>(head[1]) + head[2]) {
      reply(-EPROTO);
      continue;
    }
    std::vector<std::string> argv(strings.begin(), strings.begin() + head[1]);
    std::vector<std::string> env(strings.begin() + head[1], strings.end());
    const pid_t launcher = static_cast<pid_t>(head[0]);

    int pid_pipe[2];
    if (::pipe2(pid_pipe, O_CLOEXEC) != 0) {
      reply(-errno);
      continue;
    }
    const pid_t middle = ::fork();
    if (middle == 0) {
      ::close(pid_pipe[0]);
      const pid_t rank = ::fork();
      if (rank == 0) {
        ::close(pid_pipe[1]);
        BecomeRank(fd, fds, launcher, std::move(argv), env, run_rank);
      }
      const int64_t value = rank > 0 ? rank : -errno;
      // Also done in the rank; whichever runs first makes its group exist
      // before the launcher can signal it.
      if (rank > 0) ::setpgid(rank, rank);
      [[maybe_unused]] ssize_t w = ::write(pid_pipe[1], &value, sizeof(value));
      ::_exit(0);
    }
    ::close(pid_pipe[1]);
    int64_t value = -ECHILD;
    if (middle < 0) {
      value = -errno;
    } else {
      int64_t got = 0;
      ssize_t r;
      while ((r = ::read(pid_pipe[0], &got, sizeof(got))) < 0 && errno == EINTR) {
      }
      if (r == static_cast<ssize_t>(sizeof(got))) value = got;
      int status = 0;
      while (::waitpid(middle, &status, 0) < 0 && errno == EINTR) {
      }
    }
    ::close(pid_pipe[0]);
    reply(value);
  }
}

}  // namespace zt::testing
