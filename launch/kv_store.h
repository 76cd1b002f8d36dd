// The key-value store the launchers of a multi-node job agree through
// (launch/node_rounds.h). This library links no LibTorch, so it only names
// the operations; comm/launcher_store.h implements them over c10d's
// TCPStore, the store the ranks' own rendezvous uses.
//
// Contract
//  - Every call returns within the store's operation deadline or fails
//    with Unavailable naming the store's address: a store host that is gone
//    or silent is an error, never a wait without end.
//  - Nothing here waits for a key to appear: callers poll Find, so a
//    timed-out wait can never leave a late reply on the connection.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"

namespace zt::comm {

class KeyValueStore {
 public:
  virtual ~KeyValueStore() = default;
  virtual absl::Status Set(const std::string& key, const std::string& value) = 0;
  // The value, or nullopt when the key does not exist.
  virtual absl::StatusOr<std::optional<std::string>> Find(const std::string& key) = 0;
  // Adds `delta` to the key's counter (0 when absent) and returns the sum.
  virtual absl::StatusOr<int64_t> Add(const std::string& key, int64_t delta) = 0;
  // "host:port", for messages.
  virtual std::string address() const = 0;
};

// Hosts (host_it: listening on `port`, any interface) or connects to the
// store at host:port, retrying a connection for up to `connect_timeout`;
// `operation_timeout` bounds every later operation.
using KeyValueStoreOpener = std::function<absl::StatusOr<std::unique_ptr<KeyValueStore>>(
    const std::string& host, int port, bool host_it, std::chrono::milliseconds connect_timeout,
    std::chrono::milliseconds operation_timeout)>;

}  // namespace zt::comm
