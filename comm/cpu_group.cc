// Implementation of comm/cpu_group.h: the worker pool, failure handling and
// the glue between at::Tensor arguments and the transport.
#include "comm/cpu_group.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <deque>
#include <exception>
#include <functional>
#include <thread>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "comm/collective_args.h"
#include "comm/collective_label.h"
#include "comm/connect_transport.h"
#include "comm/gloo_transport.h"
#include "comm/heartbeat.h"
#include "comm/single_group.h"
#include "comm/sub_group.h"
#include "comm/work.h"
#include "util/log.h"
#include "util/std_mutex.h"

namespace zt::comm {
namespace {

// A transport's exception as a status code: TransportError says; gloo's
// say it in their text.
absl::StatusCode ClassifyTransportError(const std::exception& e, const std::string& msg) {
  if (const auto* t = dynamic_cast<const TransportError*>(&e)) return t->code();
  return absl::StrContains(msg, "Timed out") || absl::StrContains(msg, "timed out")
             ? absl::StatusCode::kDeadlineExceeded
             : absl::StatusCode::kUnavailable;
}

// Before a sub-group's members connect, each writes the member list it was
// given under the sub-group's number and reads every other member's. Ranks
// that made their sub-groups in different orders (or skipped one) would
// otherwise meet another group's ranks under the same number and connect to
// them, or exchange data with the wrong peers; here they get an error naming
// both lists instead.
absl::Status AgreeOnMembers(const StoreHandle& store, const std::string& prefix, const std::vector<int>& world_ranks,
                            int world_rank) {
  const std::string mine = absl::StrJoin(world_ranks, ", ");
  try {
    auto members = c10::make_intrusive<c10d::PrefixStore>(prefix + "/members", store.store);
    members->set(std::to_string(world_rank), StoreBytes(mine));
    for (int r : world_ranks) {
      if (r == world_rank) continue;
      const std::vector<uint8_t> v = members->get(std::to_string(r));
      const std::string theirs(v.begin(), v.end());
      if (theirs != mine) {
        return absl::InvalidArgumentError(
            absl::StrCat("sub-group ", prefix, ": rank ", world_rank, " made it of world ranks [", mine, "], but rank ",
                         r, " made its sub-group of this number of [", theirs,
                         "]: every rank must call NewSubGroup for every sub-group, members or not, in the same order"));
      }
    }
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat("sub-group ", prefix, " of world ranks [", mine, "]: rank ", world_rank,
                                               " could not agree on its members through the store at ", store.address,
                                               ": ", CleanGlooMessage(e.what())));
  }
  return absl::OkStatus();
}

std::vector<int> AllRanks(int n) {
  std::vector<int> ranks(n);
  for (int r = 0; r < n; ++r) ranks[r] = r;
  return ranks;
}

}  // namespace

class CpuGroup::Impl : public std::enable_shared_from_this<Impl> {
 public:
  using Fn = std::function<void(Transport&, uint32_t tag, WireBytes&)>;

  // `world_ranks`: the members' world ranks (empty: this is the world);
  // `heartbeat`: the world's, for a sub-group (null: start one of our own).
  Impl(const StoreHandle& store, const GroupOptions& options, std::unique_ptr<Transport> transport,
       std::vector<int> world_ranks, std::shared_ptr<Heartbeat> heartbeat)
      : rank_(store.env.rank),
        size_(store.env.world_size),
        world_ranks_(world_ranks.empty() ? AllRanks(store.env.world_size) : std::move(world_ranks)),
        world_rank_(world_ranks_[rank_]),
        owns_heartbeat_(heartbeat == nullptr),
        options_(options),
        store_(store),
        transport_(std::move(transport)),
        heartbeat_(std::move(heartbeat)) {}

  ~Impl() {
    for (std::thread& t : workers_) {
      if (t.joinable()) t.detach();  // only reached when a worker owns the last reference
    }
  }

  absl::Status StartHeartbeat() {
    if (!owns_heartbeat_) return absl::OkStatus();  // a sub-group: the world's beats for us
    try {
      heartbeat_ =
          std::make_shared<Heartbeat>(store_.store, options_.store_prefix, rank_, size_, options_.heartbeat_interval);
    } catch (const std::exception& e) {
      return absl::UnavailableError(absl::StrCat("rank ", world_rank_,
                                                 " could not write its heartbeat to the store at ", store_.address,
                                                 ": ", CleanGlooMessage(e.what())));
    }
    return absl::OkStatus();
  }

  void StartWorkers() ABSL_LOCKS_EXCLUDED(mu_) {
    const int n = std::max(1, std::min(options_.worker_threads, transport_->max_concurrent()));
    {
      StdMutexLock lock(&mu_);  // no worker runs yet; the lock is for the analysis
      live_workers_ = n;
    }
    for (int i = 0; i < n; ++i) {
      std::shared_ptr<Impl> self = shared_from_this();
      workers_.emplace_back([self] { self->WorkerLoop(); });
    }
  }

  std::unique_ptr<Work> Submit(CollectiveInfo info, Fn fn) ABSL_LOCKS_EXCLUDED(mu_) {
    std::shared_ptr<WorkState> state;
    {
      StdMutexLock lock(&mu_);
      info.seq = next_seq_++;
      if (failing_) return CompletedWork(info, NotStarted(info));
      state = std::make_shared<WorkState>(info);
      queue_.push_back(Task{state, std::move(fn)});
      active_.push_back(state);
    }
    cv_.NotifyOne();
    std::weak_ptr<Impl> weak = weak_from_this();
    // Wait() allows the transfer timeout plus the time a failure diagnosis
    // takes, so the worker's own, more specific error normally arrives first.
    return std::make_unique<AsyncWork>(
        std::move(state), options_.timeout + DiagnosisBudget() + std::chrono::seconds(1),
        [weak](const std::shared_ptr<WorkState>& s, std::chrono::milliseconds waited) {
          if (auto impl = weak.lock()) impl->OnWaitTimeout(s, waited);
        },
        waited_);
  }

  // A call whose arguments are wrong fails the group: the other ranks are
  // running this collective and would otherwise wait for us until timeout.
  std::unique_ptr<Work> Reject(CollectiveInfo info, const absl::Status& error) ABSL_LOCKS_EXCLUDED(mu_) {
    std::shared_ptr<WorkState> state;
    {
      StdMutexLock lock(&mu_);
      info.seq = next_seq_++;
      if (failing_) return CompletedWork(info, NotStarted(info));
      state = std::make_shared<WorkState>(info);
      active_.push_back(state);
    }
    absl::Status status(error.code(), absl::StrCat(error.message(), " (", info.Describe(), " on rank ", world_rank_,
                                                   "; the process group is no longer usable)"));
    Fail(state, std::string(status.message()), status, /*diagnose=*/false);
    Forget(state);
    return CompletedWork(info, state->status());
  }

  void OnWaitTimeout(const std::shared_ptr<WorkState>& state, std::chrono::milliseconds waited)
      ABSL_LOCKS_EXCLUDED(mu_) {
    const std::string headline = absl::StrCat(state->info().Describe(), " did not complete within ",
                                              FormatDuration(waited), " on rank ", world_rank_);
    Fail(state, headline, absl::DeadlineExceededError(headline), /*diagnose=*/true);
  }

  void Shutdown() ABSL_LOCKS_EXCLUDED(mu_) {
    std::chrono::milliseconds bound;
    {
      StdMutexLock lock(&mu_);
      stopping_ = true;
      bound = failing_ ? std::chrono::milliseconds(500) : options_.timeout;
    }
    cv_.NotifyAll();
    bool exited;
    {
      StdMutexLock lock(&mu_);
      // wait_for(bound, live_workers_ == 0) on the steady clock: the count
      // decides, not the timeout.
      const auto deadline = std::chrono::steady_clock::now() + bound;
      while (live_workers_ != 0) {
        if (!exit_cv_.WaitUntil(&mu_, deadline)) break;
      }
      exited = live_workers_ == 0;
    }
    if (!exited) {
      Fail(nullptr, "the process group was destroyed with collectives still running",
           absl::CancelledError(
               absl::StrCat("process group destroyed on rank ", world_rank_, " while collectives were still running")),
           /*diagnose=*/false);
    }
    for (std::thread& t : workers_) {
      if (!t.joinable()) continue;
      if (exited) {
        t.join();
      } else {
        t.detach();  // stuck in a dead transport; it owns a reference to us
      }
    }
    workers_.clear();
    if (heartbeat_ && owns_heartbeat_) {
      heartbeat_->AnnounceLeaving(std::min<std::chrono::milliseconds>(options_.timeout, std::chrono::seconds(2)));
      // Rank 0's process hosts the store: it stays until the others have
      // left. Under an agent's store (torchrun's, or node 0's zt launch
      // across nodes) the store outlives every rank, and rank 0 need not wait.
      if (rank_ == 0 && size_ > 1 && !store_.env.agent_hosts_store) {
        heartbeat_->WaitUntilOthersLeft(std::min<std::chrono::milliseconds>(
            options_.timeout,
            std::max<std::chrono::milliseconds>(std::chrono::seconds(10), options_.heartbeat_interval * 5)));
      }
    }
    if (exited) heartbeat_.reset();
  }

  CommStats stats() const ABSL_LOCKS_EXCLUDED(stats_mu_) {
    StdMutexLock lock(&stats_mu_);
    CommStats s = stats_;
    s.wait_seconds = static_cast<double>(waited_->load(std::memory_order_relaxed)) * 1e-9;
    return s;
  }
  void ResetStats() ABSL_LOCKS_EXCLUDED(stats_mu_) {
    StdMutexLock lock(&stats_mu_);
    stats_ = CommStats{};
    waited_->store(0, std::memory_order_relaxed);
  }

  int rank_;
  int size_;
  const std::vector<int> world_ranks_;  // world rank of each of our ranks
  const int world_rank_;                // ours
  const bool owns_heartbeat_;           // the world group; a sub-group shares the world's
  std::atomic<int> sub_groups_{0};      // NewSubGroup calls so far: numbers their key prefixes
  GroupOptions options_;
  StoreHandle store_;
  const std::unique_ptr<Transport> transport_;
  // The world's heartbeat, shared with its sub-groups (each keeps it alive).
  std::shared_ptr<Heartbeat> heartbeat_;
  // Time callers blocked in Wait on this group's works (shared with them).
  const std::shared_ptr<WaitClock> waited_ = std::make_shared<WaitClock>(0);

 private:
  struct Task {
    std::shared_ptr<WorkState> state;
    Fn fn;
  };

  std::chrono::milliseconds DiagnosisBudget() const {
    return std::max<std::chrono::milliseconds>(options_.heartbeat_interval * 3 / 2, std::chrono::seconds(1)) +
           std::chrono::seconds(3);
  }

  absl::Status NotStarted(const CollectiveInfo& info) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return absl::FailedPreconditionError(
        absl::StrCat(info.Describe(), " not started on rank ", world_rank_, ": the process group failed earlier",
                     failure_.ok() ? std::string() : absl::StrCat(": ", failure_.message())));
  }

  bool IsFailing() ABSL_LOCKS_EXCLUDED(mu_) {
    StdMutexLock lock(&mu_);
    return failing_;
  }

  void WorkerLoop() ABSL_LOCKS_EXCLUDED(mu_, stats_mu_) {
    for (;;) {
      Task task;
      {
        StdMutexLock lock(&mu_);
        while (!(stopping_ || !queue_.empty())) cv_.Wait(&mu_);
        if (queue_.empty()) break;
        task = std::move(queue_.front());
        queue_.pop_front();
      }
      const CollectiveInfo& info = task.state->info();
      WireBytes wire;
      absl::Status status;
      if (IsFailing()) {
        StdMutexLock lock(&mu_);
        status = NotStarted(info);
      } else {
        try {
          absl::Status agreed =
              options_.check_agreement && size_ > 1 ? CheckAgreement(info.seq, info) : absl::OkStatus();
          if (!agreed.ok()) {
            Fail(task.state, std::string(agreed.message()), agreed, /*diagnose=*/false);
          } else {
            task.fn(*transport_, info.seq, wire);
          }
          status = task.state->IsCompleted() ? task.state->status() : absl::OkStatus();
        } catch (const std::exception& e) {
          const std::string cause = absl::StrCat(transport_->name(), ": ", CleanGlooMessage(e.what()));
          const std::string headline = absl::StrCat(info.Describe(), " failed on rank ", world_rank_);
          Fail(task.state, headline,
               absl::Status(ClassifyTransportError(e, cause), absl::StrCat(headline, ": ", cause)),
               /*diagnose=*/true, cause);
          status = task.state->status();
        }
      }
      {
        StdMutexLock lock(&stats_mu_);
        CollectiveCounters& c = stats_.by_kind[static_cast<int>(info.kind)];
        c.calls += 1;
        c.bytes_sent += wire.sent;
        c.bytes_received += wire.received;
      }
      // Drop the captured tensors before signalling completion: once Wait()
      // returns, the group holds no reference to the caller's memory.
      task.fn = nullptr;
      task.state->Complete(status);
      Forget(task.state);
    }
    StdMutexLock lock(&mu_);
    --live_workers_;
    exit_cv_.NotifyAll();
  }

  // Exchanges (seq, kind, bytes, dtype) and the label's first 48 bytes with
  // every rank before any data moves; any difference is a named error naming
  // each rank's collective and what it was for.
  absl::Status CheckAgreement(uint32_t tag, const CollectiveInfo& info) {
    constexpr int kWords = 4;
    constexpr int kLabelWords = 6;  // 48 bytes of the label; longer ones are cut for peers
    constexpr int kAll = kWords + kLabelWords;
    int64_t mine[kAll] = {static_cast<int64_t>(info.seq), static_cast<int64_t>(info.kind), info.bytes,
                          static_cast<int64_t>(info.dtype)};
    std::memcpy(&mine[kWords], info.label.data(), std::min(info.label.size(), sizeof(int64_t) * kLabelWords));
    std::vector<int64_t> all(static_cast<size_t>(size_) * kAll);
    static_assert(kAll <= Transport::kMaxHeaderWords);
    transport_->ExchangeHeaders(tag, mine, all.data(), kAll);
    std::vector<std::string> differ;
    for (int r = 0; r < size_; ++r) {
      const int64_t* h = &all[static_cast<size_t>(r) * kAll];
      if (std::equal(h, h + kAll, mine)) continue;
      const char* text = reinterpret_cast<const char*>(h + kWords);
      CollectiveInfo theirs{static_cast<CollectiveKind>(h[1]), static_cast<uint32_t>(h[0]), h[2],
                            static_cast<c10::ScalarType>(h[3]),
                            std::string(text, strnlen(text, sizeof(int64_t) * kLabelWords))};
      differ.push_back(absl::StrCat("rank ", world_ranks_[r], " is in ", theirs.Describe()));
    }
    if (differ.empty()) return absl::OkStatus();
    return absl::FailedPreconditionError(
        absl::StrCat("ranks disagree on collective #", info.seq, ": ", absl::StrJoin(differ, ", "), " while rank ",
                     world_rank_, " is in ", info.Describe(),
                     ": the ranks ran different numbers of steps or different modules (for example, evaluation on one "
                     "rank only); every rank must issue the same collectives in the same order"));
  }

  void Forget(const std::shared_ptr<WorkState>& state) ABSL_LOCKS_EXCLUDED(mu_) {
    StdMutexLock lock(&mu_);
    active_.erase(std::remove(active_.begin(), active_.end(), state), active_.end());
  }

  // Fails the group once. The first caller closes the connections (peers
  // notice at once), diagnoses which peer is gone, records the reason and
  // completes every pending Work; `state` (if any) gets `status` with the
  // diagnosis inserted before the transport's cause. Later callers wait for
  // that reason and complete their work as aborted because of it.
  void Fail(const std::shared_ptr<WorkState>& state, const std::string& headline, absl::Status status, bool diagnose,
            const std::string& transport_cause = "") ABSL_LOCKS_EXCLUDED(mu_) {
    {
      StdMutexLock lock(&mu_);
      if (failing_) {
        // wait_for(DiagnosisBudget() + 2 s, !failure_.ok()) on the steady
        // clock; what follows reads failure_ either way.
        const auto deadline = std::chrono::steady_clock::now() + DiagnosisBudget() + std::chrono::seconds(2);
        while (failure_.ok()) {
          if (!failure_cv_.WaitUntil(&mu_, deadline)) break;
        }
        if (state != nullptr) {
          state->Complete(absl::Status(
              status.code(), absl::StrCat(headline, ": aborted because the process group failed",
                                          failure_.ok() ? std::string() : absl::StrCat(": ", failure_.message()))));
        }
        return;
      }
      failing_ = true;
    }
    if (heartbeat_) heartbeat_->PostAbort(std::string(status.message()));
    transport_->Abort(std::string(status.message()));
    if (diagnose && heartbeat_ && size_ > 1) {
      const Diagnosis d = heartbeat_->Diagnose(DiagnosisBudget(), world_ranks_);
      const std::string found = d.ToString(world_rank_);
      if (!found.empty()) {
        status = absl::Status(
            status.code(),
            absl::StrCat(headline, ": ", found, transport_cause.empty() ? "" : absl::StrCat("; ", transport_cause)));
        heartbeat_->PostAbort(std::string(status.message()));
      }
    }
    ZT_LOG(ERROR) << status.message();
    // Complete our own work before publishing the failure: a secondary
    // failure of the same work (its transfer timing out while Wait() gave up)
    // must not overtake the diagnosed message.
    if (state != nullptr) state->Complete(status);
    std::vector<std::shared_ptr<WorkState>> pending;
    {
      StdMutexLock lock(&mu_);
      failure_ = status;
      pending = active_;
    }
    failure_cv_.NotifyAll();
    for (const auto& other : pending) {
      if (other == state) continue;
      other->Complete(
          absl::Status(status.code(), absl::StrCat(other->info().Describe(), " aborted on rank ", world_rank_,
                                                   " because the process group failed: ", status.message())));
    }
  }

  std::vector<std::thread> workers_;

  StdMutex mu_;
  StdCondVar cv_;
  StdCondVar exit_cv_;
  StdCondVar failure_cv_;
  std::deque<Task> queue_ ABSL_GUARDED_BY(mu_);
  std::vector<std::shared_ptr<WorkState>> active_ ABSL_GUARDED_BY(mu_);  // submitted, not yet completed by a worker
  uint32_t next_seq_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  int live_workers_ ABSL_GUARDED_BY(mu_) = 0;
  bool failing_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status failure_ ABSL_GUARDED_BY(mu_);  // set once the first failure is diagnosed

  mutable StdMutex stats_mu_;
  CommStats stats_ ABSL_GUARDED_BY(stats_mu_);
};

absl::StatusOr<std::shared_ptr<CpuGroup>> CpuGroup::Create(const StoreHandle& store, const GroupOptions& options) {
  return Connect(store, options, {}, nullptr);
}

absl::StatusOr<std::shared_ptr<CpuGroup>> CpuGroup::Connect(const StoreHandle& store, const GroupOptions& options,
                                                            std::vector<int> world_ranks,
                                                            std::shared_ptr<Heartbeat> heartbeat) {
  const int world_rank = world_ranks.empty() ? store.env.rank : world_ranks[store.env.rank];
  if (!world_ranks.empty()) {
    if (absl::Status agreed = AgreeOnMembers(store, options.store_prefix, world_ranks, world_rank); !agreed.ok()) {
      return agreed;
    }
  }
  absl::StatusOr<std::unique_ptr<Transport>> transport = ConnectTransport(store, options, world_ranks);
  if (!transport.ok()) return transport.status();
  auto impl =
      std::make_shared<Impl>(store, options, *std::move(transport), std::move(world_ranks), std::move(heartbeat));
  if (absl::Status s = impl->StartHeartbeat(); !s.ok()) return s;
  impl->StartWorkers();
  std::shared_ptr<CpuGroup> group(new CpuGroup(impl));
  absl::Status ready = group->Barrier()->Wait(options.rendezvous_timeout);
  if (!ready.ok()) return ready;
  group->ResetStats();
  return group;
}

std::vector<int> CpuGroup::world_ranks() const { return impl_->world_ranks_; }

absl::StatusOr<std::shared_ptr<ProcessGroup>> CpuGroup::NewSubGroup(const std::vector<int>& ranks) {
  if (absl::Status s = CheckSubGroupRanks(ranks, size()); !s.ok()) return s;
  const int n = impl_->sub_groups_++;  // every rank counts every call, members or not
  const auto me = std::find(ranks.begin(), ranks.end(), rank());
  if (me == ranks.end()) return std::shared_ptr<ProcessGroup>();
  std::vector<int> world;
  for (int r : ranks) world.push_back(impl_->world_ranks_[r]);
  if (ranks.size() == 1) return std::shared_ptr<ProcessGroup>(std::make_shared<SingleGroup>(timeout(), world[0]));
  StoreHandle store = impl_->store_;
  store.env.rank = static_cast<int>(me - ranks.begin());
  store.env.world_size = static_cast<int>(ranks.size());
  GroupOptions options = impl_->options_;
  options.store_prefix = absl::StrCat(options.store_prefix, "/sub", n);
  absl::StatusOr<std::shared_ptr<CpuGroup>> made = Connect(store, options, std::move(world), impl_->heartbeat_);
  if (!made.ok()) return made.status();
  return std::shared_ptr<ProcessGroup>(*std::move(made));
}

CpuGroup::~CpuGroup() { impl_->Shutdown(); }

int CpuGroup::rank() const { return impl_->rank_; }
int CpuGroup::size() const { return impl_->size_; }
std::chrono::milliseconds CpuGroup::timeout() const { return impl_->options_.timeout; }
const std::string& CpuGroup::device_description() const { return impl_->transport_->description(); }
std::string CpuGroup::backend_name() const { return impl_->transport_->name(); }
CommStats CpuGroup::stats() const { return impl_->stats(); }
void CpuGroup::ResetStats() { impl_->ResetStats(); }

std::unique_ptr<Work> CpuGroup::AllGather(const at::Tensor& shard, const at::Tensor& flat) {
  CollectiveInfo info{CollectiveKind::kAllGather, 0,
                      flat.defined() ? flat.numel() * static_cast<int64_t>(flat.element_size()) : 0,
                      flat.defined() ? flat.scalar_type() : c10::ScalarType::Byte, CollectiveLabel::Current()};
  bool in_place = false;
  absl::Status ok = CheckAllGatherArgs(shard, flat, rank(), size(), c10::DeviceType::CPU, &in_place);
  if (!ok.ok()) return impl_->Reject(info, ok);
  return impl_->Submit(info, [shard, flat, in_place](Transport& t, uint32_t tag, WireBytes& wire) {
    t.AllGather(tag, in_place ? nullptr : shard.data_ptr(), flat.data_ptr(), flat.numel(), flat.element_size(), wire);
  });
}

std::unique_ptr<Work> CpuGroup::ReduceScatter(const at::Tensor& flat, const at::Tensor& shard, ReduceOp op) {
  CollectiveInfo info{CollectiveKind::kReduceScatter, 0,
                      flat.defined() ? flat.numel() * static_cast<int64_t>(flat.element_size()) : 0,
                      flat.defined() ? flat.scalar_type() : c10::ScalarType::Byte, CollectiveLabel::Current()};
  absl::Status ok = CheckReduceScatterArgs(flat, shard, op, rank(), size(), c10::DeviceType::CPU);
  if (!ok.ok()) return impl_->Reject(info, ok);
  return impl_->Submit(info, [flat, shard, op](Transport& t, uint32_t tag, WireBytes& wire) {
    t.ReduceScatter(tag, flat.data_ptr(), shard.data_ptr(), flat.numel(), flat.scalar_type(), op, wire);
  });
}

std::unique_ptr<Work> CpuGroup::AllReduce(const at::Tensor& tensor, ReduceOp op) {
  CollectiveInfo info{CollectiveKind::kAllReduce, 0,
                      tensor.defined() ? tensor.numel() * static_cast<int64_t>(tensor.element_size()) : 0,
                      tensor.defined() ? tensor.scalar_type() : c10::ScalarType::Byte, CollectiveLabel::Current()};
  absl::Status ok = CheckAllReduceArgs(tensor, op, c10::DeviceType::CPU);
  if (!ok.ok()) return impl_->Reject(info, ok);
  return impl_->Submit(info, [tensor, op](Transport& t, uint32_t tag, WireBytes& wire) {
    t.AllReduce(tag, tensor.data_ptr(), tensor.numel(), tensor.scalar_type(), op, wire);
  });
}

std::unique_ptr<Work> CpuGroup::Broadcast(const at::Tensor& tensor, int root) {
  CollectiveInfo info{CollectiveKind::kBroadcast, 0,
                      tensor.defined() ? tensor.numel() * static_cast<int64_t>(tensor.element_size()) : 0,
                      tensor.defined() ? tensor.scalar_type() : c10::ScalarType::Byte, CollectiveLabel::Current()};
  absl::Status ok = CheckBroadcastArgs(tensor, root, size(), c10::DeviceType::CPU);
  if (!ok.ok()) return impl_->Reject(info, ok);
  return impl_->Submit(info, [tensor, root](Transport& t, uint32_t tag, WireBytes& wire) {
    t.Broadcast(tag, tensor.data_ptr(), tensor.numel() * tensor.element_size(), root, wire);
  });
}

std::unique_ptr<Work> CpuGroup::Barrier() {
  CollectiveInfo info{CollectiveKind::kBarrier, 0, 0, c10::ScalarType::Byte, CollectiveLabel::Current()};
  return impl_->Submit(info, [](Transport& t, uint32_t tag, WireBytes&) { t.Barrier(tag); });
}

std::unique_ptr<Work> CpuGroup::AllToAll(const at::Tensor& input, const at::Tensor& output) {
  CollectiveInfo info{CollectiveKind::kAllToAll, 0,
                      input.defined() ? input.numel() * static_cast<int64_t>(input.element_size()) : 0,
                      input.defined() ? input.scalar_type() : c10::ScalarType::Byte, CollectiveLabel::Current()};
  absl::Status ok = CheckAllToAllArgs(input, output, size(), c10::DeviceType::CPU);
  if (!ok.ok()) return impl_->Reject(info, ok);
  const int64_t block_bytes = input.numel() / size() * static_cast<int64_t>(input.element_size());
  return impl_->Submit(info, [input, output, block_bytes](Transport& t, uint32_t tag, WireBytes& wire) {
    t.AllToAll(tag, input.data_ptr(), output.data_ptr(), block_bytes, wire);
  });
}

}  // namespace zt::comm
