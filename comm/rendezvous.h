// Rendezvous: rank 0 hosts c10d's TCPStore at MASTER_ADDR:MASTER_PORT, every
// rank connects and announces itself, and all wait until the world is
// complete. Failures name ranks and addresses instead of hanging.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <vector>

#include "absl/status/statusor.h"
#include "launch/rank_env.h"

namespace zt::comm {

// A c10d::Store value (bytes) holding `text`.
inline std::vector<uint8_t> StoreBytes(const std::string& text) { return {text.begin(), text.end()}; }

// A joined rendezvous: the shared key-value store plus who we are.
struct StoreHandle {
  c10::intrusive_ptr<c10d::Store> store;  // the TCPStore itself (unprefixed)
  RankEnv env;
  std::string address;  // "host:port" of the store, for messages
};

// Joins the rendezvous described by `env`. Rank 0 creates the store server
// (with port 0 for a single rank, any free port); other ranks connect to it,
// retrying until `timeout`. Every rank then writes "<prefix>/rdzv/<rank>" and
// waits for all `world_size` announcements, and checks that every rank was
// started with the same world size.
//
// Errors (Unavailable / DeadlineExceeded / InvalidArgument), for example:
//   "ranks 2, 3 of 4 did not join the rendezvous at 127.0.0.1:29500 within 30 s"
//   "rank 1 could not reach the rendezvous store of rank 0 at 10.0.0.1:29500
//    (MASTER_ADDR:MASTER_PORT) within 30 s: ..."
//   "rank 0 could not host the rendezvous store on port 29500 (MASTER_PORT): ..."
absl::StatusOr<StoreHandle> Rendezvous(const RankEnv& env, std::chrono::milliseconds timeout,
                                       const std::string& prefix = "zt");

// Hosts (`host_it`: listening on `port`) or connects to c10d's TCPStore at
// host:port. A client first waits for the port to accept connections (LibTorch
// 1.13's client sleeps a whole second after a refused connect), retries for
// `connect_timeout`, and then has `operation_timeout` on every read and write
// of its connection (comm/store_socket.h). On failure, the exception's first
// line (`error`) for the caller's message; the rendezvous and the launchers'
// store (comm/launcher_store.h) both open their stores here.
absl::StatusOr<c10::intrusive_ptr<c10d::TCPStore>> OpenTcpStore(const std::string& host, int port, bool host_it,
                                                                std::chrono::milliseconds connect_timeout,
                                                                std::chrono::milliseconds operation_timeout,
                                                                std::string* error);

// The first line of an exception's text, trimmed and at most 300 characters.
std::string ErrorFirstLine(const std::string& text);

// "30 s", "1.5 s", "250 ms": durations in messages.
std::string FormatDuration(std::chrono::milliseconds d);

// "2, 3" from {2, 3}; long lists are shortened ("0, 1, 2, ... (12 ranks)").
std::string FormatRankList(const std::vector<int>& ranks);

}  // namespace zt::comm
