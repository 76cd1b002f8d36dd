// Implementation of comm/gloo_transport.h.
#include "comm/gloo_transport.h"

#include <gloo/rendezvous/context.h>

#include <exception>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "comm/gloo_collectives.h"
#include "comm/gloo_device.h"
#include "comm/gloo_store.h"

namespace zt::comm {
namespace {

class GlooTransport final : public Transport {
 public:
  GlooTransport(GlooDevice device, std::shared_ptr<::gloo::rendezvous::Context> context, const GroupOptions& options)
      : device_(std::move(device)),
        context_(std::move(context)),
        timeout_(options.timeout),
        algorithm_(options.reduce_scatter_algorithm),
        segment_bytes_(options.segment_bytes) {}

  const char* name() const override { return "gloo"; }
  const std::string& description() const override { return device_.description; }
  int max_concurrent() const override { return 64; }

  void AllGather(uint32_t tag, const void* shard, void* flat, int64_t numel, size_t elem_size,
                 WireBytes& wire) override {
    GlooAllGather(Call(tag), shard, flat, numel, elem_size, wire);
  }
  void ReduceScatter(uint32_t tag, const void* flat, void* shard, int64_t numel, c10::ScalarType dtype, ReduceOp op,
                     WireBytes& wire) override {
    GlooReduceScatter(Call(tag), algorithm_, flat, shard, numel, dtype, op, segment_bytes_, wire);
  }
  void AllReduce(uint32_t tag, void* data, int64_t numel, c10::ScalarType dtype, ReduceOp op,
                 WireBytes& wire) override {
    GlooAllReduce(Call(tag), algorithm_, data, numel, dtype, op, segment_bytes_, wire);
  }
  void Broadcast(uint32_t tag, void* data, int64_t bytes, int root, WireBytes& wire) override {
    GlooBroadcast(Call(tag), data, bytes, root, wire);
  }
  void Barrier(uint32_t tag) override { GlooBarrier(Call(tag)); }
  void AllToAll(uint32_t tag, const void* input, void* output, int64_t block_bytes, WireBytes& wire) override {
    GlooAllToAll(Call(tag), input, output, block_bytes, wire);
  }
  void ExchangeHeaders(uint32_t tag, const int64_t* mine, int64_t* all, int words) override {
    GlooExchangeHeaders(Call(tag), mine, all, words);
  }
  // Closed connections make every peer's pending transfer fail at once.
  void Abort(const std::string&) override { context_->closeConnections(); }

 private:
  GlooCall Call(uint32_t tag) const { return GlooCall{context_, tag, timeout_}; }

  const GlooDevice device_;
  const std::shared_ptr<::gloo::rendezvous::Context> context_;
  const std::chrono::milliseconds timeout_;
  const ReduceScatterAlgorithm algorithm_;
  const int64_t segment_bytes_;
};

}  // namespace

std::string CleanGlooMessage(const std::string& what) {
  std::string msg = what;
  if (!msg.empty() && msg.front() == '[') {
    size_t close = msg.find("] ");
    if (close != std::string::npos) msg = msg.substr(close + 2);
  }
  size_t newline = msg.find('\n');
  if (newline != std::string::npos) msg = msg.substr(0, newline);
  return msg;
}

absl::StatusOr<std::unique_ptr<Transport>> ConnectGlooTransport(const StoreHandle& store, const GroupOptions& options,
                                                                const std::vector<int>& world_ranks) {
  const RankEnv& env = store.env;
  const int world_rank = world_ranks.empty() ? env.rank : world_ranks[env.rank];
  absl::StatusOr<GlooDevice> device = CreateGlooDevice(env);
  if (!device.ok()) return device.status();
  auto context = std::make_shared<::gloo::rendezvous::Context>(env.rank, env.world_size);
  context->setTimeout(options.rendezvous_timeout);
  try {
    GlooStoreAdapter adapter(c10::make_intrusive<c10d::PrefixStore>(options.store_prefix + "/gloo", store.store));
    context->connectFullMesh(adapter, device->device);
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat(
        "rank ", world_rank, " could not connect to its ", env.world_size - 1, " peers",
        world_ranks.empty() ? std::string() : absl::StrCat(" of sub-group [", absl::StrJoin(world_ranks, ", "), "]"),
        " through Gloo (listening on ", device->description, ", store ", store.address, ") within ",
        FormatDuration(options.rendezvous_timeout), ": ", CleanGlooMessage(e.what()),
        ". On several hosts, set GLOO_SOCKET_IFNAME to the interface that connects them"));
  }
  context->setTimeout(options.timeout);
  return std::unique_ptr<Transport>(new GlooTransport(std::move(*device), std::move(context), options));
}

}  // namespace zt::comm
