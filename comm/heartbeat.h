// Liveness of the ranks of a group, kept in the rendezvous store, so that a
// failed collective can name the peer that died or stopped. Cheap: one store
// write per rank per interval; reads happen only after a failure.
//
// Limits: the store lives in rank 0's process, so when rank 0 itself is dead
// or stopped the diagnosis can only say that (store unreachable). No call
// here waits on the store without a deadline: every store access runs on a
// background thread that a hung store can strand, never the caller. Ages come
// from wall clocks, which are only as close as the hosts' clocks.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <vector>

namespace zt::comm {

// What the store says about the other ranks after a failure.
struct Diagnosis {
  // Heartbeat did not advance during the check, and the rank neither
  // reported a failure nor shut its group down: dead or stopped.
  std::vector<int> stopped_ranks;
  std::vector<double> silent_seconds;  // per stopped rank: time since its last beat
  std::vector<std::string> aborts;     // "rank 3: <reason>" posted by ranks that failed
  std::vector<int> left_ranks;         // shut their group down without a failure report
  bool store_unreachable = false;      // the store (rank 0) did not answer in time
  std::string store_error;             // its error, when it failed rather than hung

  // "peer rank 2 stopped responding (no heartbeat for 6 s)"; "" when nothing found.
  std::string ToString(int self_rank) const;
};

// Writes "<counter> <unix-ms>" under "<prefix>/hb/<rank>" every `interval`
// from a background thread. Thread-safe. The destructor stops the thread with
// a bounded wait (a thread stuck in a dead store is detached, never joined).
class Heartbeat {
 public:
  // Writes the first beat synchronously (so every key exists once all ranks
  // have started) and starts the thread. `store` is shared with the group.
  Heartbeat(c10::intrusive_ptr<c10d::Store> store, const std::string& prefix, int rank, int world_size,
            std::chrono::milliseconds interval);
  ~Heartbeat();
  Heartbeat(const Heartbeat&) = delete;
  Heartbeat& operator=(const Heartbeat&) = delete;

  // Reads every rank's beat twice, max(1.5 * interval, 1 s) apart, and reports ranks
  // whose counter did not move, plus abort reasons other ranks posted. Never
  // blocks longer than `budget` (a hung store yields store_unreachable).
  // `members`: the ranks to look at (a sub-group's world ranks); empty: all.
  Diagnosis Diagnose(std::chrono::milliseconds budget, const std::vector<int>& members = {});

  // Records why this rank's group failed, for other ranks' diagnoses. Written
  // by the background thread (never blocks the caller).
  void PostAbort(const std::string& reason);

  // Shutdown protocol. The store lives in rank 0, so rank 0 must not take it
  // down while a peer may still need it (e.g. to diagnose a failure). Every
  // rank announces that it is leaving; rank 0 then waits until each peer has
  // left or its heartbeat has been still for max(3 intervals, 3 s) (dead or stopped),
  // at most `bound`. AnnounceLeaving waits at most `bound` for its mark to be
  // written (the store may be hung: rank 0 stopped) and never blocks longer.
  void AnnounceLeaving(std::chrono::milliseconds bound);
  void WaitUntilOthersLeft(std::chrono::milliseconds bound);

  std::chrono::milliseconds interval() const { return interval_; }

 private:
  struct State;
  std::shared_ptr<State> state_;
  std::chrono::milliseconds interval_;
};

}  // namespace zt::comm
