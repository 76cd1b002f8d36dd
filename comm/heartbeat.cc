// Implementation of comm/heartbeat.h. All store access happens on background
// threads that own a shared_ptr to the state, so a store that never answers
// (rank 0 stopped) can strand a thread but never the caller or a destructor.
#include "comm/heartbeat.h"

#include <algorithm>
#include <exception>
#include <thread>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>

#include "absl/base/thread_annotations.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "comm/rendezvous.h"
#include "util/std_mutex.h"

namespace zt::comm {
namespace {

int64_t UnixMillis() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

struct Beat {
  int64_t counter = -1;
  int64_t unix_ms = 0;
};

using SteadyTime = std::chrono::steady_clock::time_point;

Beat ParseBeat(const std::vector<uint8_t>& value) {
  std::string s(value.begin(), value.end());
  Beat b;
  size_t space = s.find(' ');
  if (space == std::string::npos) return b;
  if (!absl::SimpleAtoi(s.substr(0, space), &b.counter) || !absl::SimpleAtoi(s.substr(space + 1), &b.unix_ms)) {
    b.counter = -1;
  }
  return b;
}

}  // namespace

struct Heartbeat::State {
  c10::intrusive_ptr<c10d::Store> store;
  int rank = 0;
  int world = 1;
  std::chrono::milliseconds interval{1000};

  StdMutex mu;
  StdCondVar cv;
  bool stop ABSL_GUARDED_BY(mu) = false;
  bool exited ABSL_GUARDED_BY(mu) = false;
  int64_t counter = 0;  // the constructor's first beat, then the thread's own
  std::string pending_abort ABSL_GUARDED_BY(mu);
  bool pending_leave ABSL_GUARDED_BY(mu) = false;  // AnnounceLeaving asked for "left/<rank>"
  bool leave_written ABSL_GUARDED_BY(mu) = false;  // ... and the thread wrote it (or the store failed)

  void WriteBeat() { store->set(std::to_string(rank), StoreBytes(absl::StrCat(counter++, " ", UnixMillis()))); }

  std::vector<Beat> ReadBeats() {
    std::vector<Beat> beats(world);
    for (int r = 0; r < world; ++r) beats[r] = ParseBeat(store->get(std::to_string(r)));
    return beats;
  }

  void Run() ABSL_LOCKS_EXCLUDED(mu) {
    mu.Lock();
    for (;;) {
      const SteadyTime until = std::chrono::steady_clock::now() + interval;
      while (!(stop || !pending_abort.empty() || pending_leave) && cv.WaitUntil(&mu, until)) {
      }
      std::string abort_reason;
      abort_reason.swap(pending_abort);
      const bool leave = pending_leave && !leave_written;
      const bool last = stop;
      mu.Unlock();
      try {
        // An abort reason is written even when stopping: peers diagnosing
        // the failure we caused need it after we are gone.
        if (!abort_reason.empty()) store->set(absl::StrCat("abort/", rank), StoreBytes(abort_reason));
        if (leave) store->set(absl::StrCat("left/", rank), StoreBytes("1"));
        if (!last && !leave) WriteBeat();
      } catch (const std::exception&) {
        // The store is gone (rank 0 exited or died). Peers that need the
        // heartbeat will say the store is unreachable; nothing to do here.
      }
      mu.Lock();
      if (leave) {
        leave_written = true;
        cv.NotifyAll();
      }
      if (last && pending_abort.empty()) break;
    }
    exited = true;
    cv.NotifyAll();
    mu.Unlock();
  }
};

Heartbeat::Heartbeat(c10::intrusive_ptr<c10d::Store> store, const std::string& prefix, int rank, int world_size,
                     std::chrono::milliseconds interval)
    : state_(std::make_shared<State>()), interval_(interval) {
  state_->store = c10::make_intrusive<c10d::PrefixStore>(prefix + "/hb", std::move(store));
  state_->rank = rank;
  state_->world = world_size;
  state_->interval = interval;
  state_->WriteBeat();  // may throw c10::Error; the caller reports it
  std::shared_ptr<State> state = state_;
  std::thread([state] { state->Run(); }).detach();
}

Heartbeat::~Heartbeat() {
  StdMutexLock lock(&state_->mu);
  state_->stop = true;
  state_->cv.NotifyAll();
  // The thread is detached and owns the state: waiting is only to let a
  // healthy thread finish its last store write before the store goes away.
  const SteadyTime until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (!state_->exited && state_->cv.WaitUntil(&state_->mu, until)) {
  }
}

void Heartbeat::PostAbort(const std::string& reason) {
  StdMutexLock lock(&state_->mu);
  state_->pending_abort = reason.substr(0, 2000);
  state_->cv.NotifyAll();
}

Diagnosis Heartbeat::Diagnose(std::chrono::milliseconds budget, const std::vector<int>& members) {
  struct Result {
    StdMutex mu;
    StdCondVar cv;
    bool done ABSL_GUARDED_BY(mu) = false;
    Diagnosis diagnosis ABSL_GUARDED_BY(mu);
  };
  auto result = std::make_shared<Result>();
  std::shared_ptr<State> state = state_;
  // At least a second: a healthy rank's beat thread can be starved for a
  // while on an oversubscribed host, and must not be called stopped.
  const auto pause = std::max<std::chrono::milliseconds>(interval_ * 3 / 2, std::chrono::seconds(1));
  std::vector<int> ranks = members;
  if (ranks.empty()) {
    for (int r = 0; r < state_->world; ++r) ranks.push_back(r);
  }
  std::thread([state, result, pause, ranks] {
    Diagnosis d;
    try {
      std::vector<Beat> first = state->ReadBeats();
      std::this_thread::sleep_for(pause);
      std::vector<Beat> second = state->ReadBeats();
      const int64_t now = UnixMillis();
      for (int r : ranks) {
        if (r == state->rank) continue;
        const std::string abort_key = absl::StrCat("abort/", r);
        if (state->store->check({abort_key})) {
          std::vector<uint8_t> v = state->store->get(abort_key);
          d.aborts.push_back(absl::StrCat("rank ", r, ": ", std::string(v.begin(), v.end())));
          continue;
        }
        if (state->store->check({absl::StrCat("left/", r)})) {
          d.left_ranks.push_back(r);
          continue;
        }
        if (second[r].counter != first[r].counter) continue;
        d.stopped_ranks.push_back(r);
        d.silent_seconds.push_back(std::max<int64_t>(0, now - second[r].unix_ms) / 1000.0);
      }
    } catch (const std::exception& e) {
      d.store_unreachable = true;
      std::string what = e.what();
      d.store_error = what.substr(0, what.find('\n'));
    }
    StdMutexLock lock(&result->mu);
    result->diagnosis = std::move(d);
    result->done = true;
    result->cv.NotifyAll();
  }).detach();

  StdMutexLock lock(&result->mu);
  const SteadyTime until = std::chrono::steady_clock::now() + budget;
  while (!result->done && result->cv.WaitUntil(&result->mu, until)) {
  }
  if (!result->done) {
    Diagnosis d;
    d.store_unreachable = true;
    return d;
  }
  return result->diagnosis;
}

void Heartbeat::AnnounceLeaving(std::chrono::milliseconds bound) {
  // Through the background thread, never on the caller's: when rank 0 (the
  // store's host) is stopped, the thread may sit in a store read that only
  // the store's own timeout (minutes) ends, holding the client's lock, and a
  // write from here would queue behind it. Nobody needs our "left" mark then.
  StdMutexLock lock(&state_->mu);
  state_->pending_leave = true;
  state_->cv.NotifyAll();
  const SteadyTime until = std::chrono::steady_clock::now() + bound;
  while (!(state_->leave_written || state_->exited) && state_->cv.WaitUntil(&state_->mu, until)) {
  }
}

void Heartbeat::WaitUntilOthersLeft(std::chrono::milliseconds bound) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  const auto end = start + bound;
  const auto still_for = std::max<std::chrono::milliseconds>(interval_ * 3, std::chrono::seconds(3));
  std::vector<Beat> last(state_->world);
  std::vector<Clock::time_point> changed(state_->world, start);
  std::vector<bool> gone(state_->world, false);
  gone[state_->rank] = true;
  try {
    while (Clock::now() < end) {
      bool all_gone = true;
      for (int r = 0; r < state_->world; ++r) {
        if (gone[r]) continue;
        if (state_->store->check({absl::StrCat("left/", r)})) {
          gone[r] = true;
          continue;
        }
        Beat b = ParseBeat(state_->store->get(std::to_string(r)));
        const auto now = Clock::now();
        if (b.counter != last[r].counter) {
          last[r] = b;
          changed[r] = now;
        } else if (now - changed[r] > still_for) {
          gone[r] = true;  // dead or stopped: it will never need the store again
          continue;
        }
        all_gone = false;
      }
      if (all_gone) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  } catch (const std::exception&) {
    // Our own store failing: nothing to protect any more.
  }
}

std::string Diagnosis::ToString(int self_rank) const {
  std::vector<std::string> parts;
  if (!stopped_ranks.empty()) {
    std::vector<std::string> ages;
    for (double s : silent_seconds) ages.push_back(absl::StrFormat("%.3g s", s));
    parts.push_back(absl::StrCat(stopped_ranks.size() == 1 ? "peer rank " : "peer ranks ",
                                 FormatRankList(stopped_ranks), " stopped responding (no heartbeat for ",
                                 absl::StrJoin(ages, ", "), ")"));
  }
  if (store_unreachable && self_rank != 0) {
    parts.push_back(absl::StrCat("the rendezvous store on rank 0 ", store_error.empty() ? "did not answer" : "failed",
                                 " (rank 0 is probably dead or stopped)",
                                 store_error.empty() ? "" : absl::StrCat(": ", store_error)));
  }
  if (stopped_ranks.empty() && !aborts.empty()) {
    parts.push_back(absl::StrCat("reported by ", aborts.front()));
  }
  if (stopped_ranks.empty() && aborts.empty() && !left_ranks.empty()) {
    parts.push_back(absl::StrCat(left_ranks.size() == 1 ? "peer rank " : "peer ranks ", FormatRankList(left_ranks),
                                 " already shut down the process group (the ranks did not run "
                                 "the same collectives)"));
  }
  return absl::StrJoin(parts, "; ");
}

}  // namespace zt::comm
