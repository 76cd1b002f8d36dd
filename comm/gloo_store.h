// Adapter that lets gloo's rendezvous (connectFullMesh) exchange addresses
// through a c10d::Store (our TCPStore, under a key prefix). Header-only: it
// only forwards calls.
#pragma once

#include <gloo/rendezvous/store.h>

#include <chrono>
#include <string>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <vector>

namespace zt::comm {

class GlooStoreAdapter : public ::gloo::rendezvous::Store {
 public:
  explicit GlooStoreAdapter(c10::intrusive_ptr<c10d::Store> store) : store_(std::move(store)) {}

  void set(const std::string& key, const std::vector<char>& data) override {
    store_->set(key, std::vector<uint8_t>(data.begin(), data.end()));
  }

  std::vector<char> get(const std::string& key) override {
    std::vector<uint8_t> v = store_->get(key);
    return std::vector<char>(v.begin(), v.end());
  }

  void wait(const std::vector<std::string>& keys) override { store_->wait(keys); }

  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override {
    store_->wait(keys, timeout);
  }

 private:
  c10::intrusive_ptr<c10d::Store> store_;
};

}  // namespace zt::comm
