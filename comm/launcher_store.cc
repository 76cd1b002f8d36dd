// Implementation of comm/launcher_store.h.
#include "comm/launcher_store.h"

#include <exception>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "absl/strings/str_cat.h"
#include "comm/rendezvous.h"

namespace zt::comm {
namespace {

class TcpKeyValueStore : public KeyValueStore {
 public:
  TcpKeyValueStore(c10::intrusive_ptr<c10d::TCPStore> store, std::string address)
      : store_(std::move(store)), address_(std::move(address)) {}

  absl::Status Set(const std::string& key, const std::string& value) override {
    try {
      store_->set(key, StoreBytes(value));
      return absl::OkStatus();
    } catch (const std::exception& e) {
      return Failed("set", key, e);
    }
  }
  absl::StatusOr<std::optional<std::string>> Find(const std::string& key) override {
    try {
      if (!store_->check({key})) return std::optional<std::string>();
      const std::vector<uint8_t> v = store_->get(key);  // exists: get does not wait
      return std::optional<std::string>(std::string(v.begin(), v.end()));
    } catch (const std::exception& e) {
      return Failed("read", key, e);
    }
  }
  absl::StatusOr<int64_t> Add(const std::string& key, int64_t delta) override {
    try {
      return store_->add(key, delta);
    } catch (const std::exception& e) {
      return Failed("add to", key, e);
    }
  }
  std::string address() const override { return address_; }

 private:
  absl::Status Failed(const char* op, const std::string& key, const std::exception& e) const {
    return absl::UnavailableError(
        absl::StrCat("could not ", op, " ", key, " in the store at ", address_, ": ", ErrorFirstLine(e.what())));
  }

  c10::intrusive_ptr<c10d::TCPStore> store_;
  std::string address_;
};

}  // namespace

KeyValueStoreOpener TcpKeyValueStoreOpener() {
  return [](const std::string& host, int port, bool host_it, std::chrono::milliseconds timeout,
            std::chrono::milliseconds operation_timeout) -> absl::StatusOr<std::unique_ptr<KeyValueStore>> {
    const std::string address = absl::StrCat(host, ":", port);
    std::string error;
    absl::StatusOr<c10::intrusive_ptr<c10d::TCPStore>> store =
        OpenTcpStore(host, port, host_it, timeout, operation_timeout, &error);
    if (!store.ok() && host_it) {
      return absl::UnavailableError(absl::StrCat("node 0 could not host the job's rendezvous store on port ", port,
                                                 " (--master-port): ", error,
                                                 ". Another process may hold the port: choose a free --master-port"));
    }
    if (!store.ok()) {
      return absl::UnavailableError(absl::StrCat("could not reach node 0's launcher at ", address,
                                                 " (--master-addr:--master-port) within ", FormatDuration(timeout),
                                                 ": ", error,
                                                 ". Check that zt launch runs on node 0 with the same --master-port, "
                                                 "and that this host can reach that address"));
    }
    return std::unique_ptr<KeyValueStore>(std::make_unique<TcpKeyValueStore>(*store, address));
  };
}

}  // namespace zt::comm
