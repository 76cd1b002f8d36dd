// The monitor model (DeepSpeed's deepspeed/monitor): rank 0 reports scalar
// events (tag, value, step) to one or more sinks -- CSV files, TensorBoard
// event files, the end-of-run report. Sinks are not thread-safe; call them
// from one thread (the training loop).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace zt::monitor {

// Tags. The first three are DeepSpeed's own names (engine.py), so dashboards
// built for DeepSpeed runs read ours; the rest follow the same scheme.
namespace tags {
inline constexpr char kTrainLoss[] = "Train/Samples/train_loss";
inline constexpr char kLr[] = "Train/Samples/lr";
inline constexpr char kLossScale[] = "Train/Samples/loss_scale";
inline constexpr char kTokensPerSec[] = "Train/Samples/tokens_per_sec";
inline constexpr char kSamplesPerSec[] = "Train/Samples/samples_per_sec";
inline constexpr char kMemoryBytes[] = "Train/Samples/memory_bytes";  // peak device (or host) bytes
inline constexpr char kGradNorm[] = "Train/Samples/grad_norm";
inline constexpr char kStepTimeSec[] = "Train/Samples/step_time_sec";
// Bytes rank 0 sent in the step inside its shard group (the world under flat
// sharding) and across replicas (hierarchical sharding only).
inline constexpr char kCommShardBytes[] = "Train/Samples/comm_bytes_shard_group";
inline constexpr char kCommAcrossBytes[] = "Train/Samples/comm_bytes_across_replicas";
// Seconds rank 0 waited in the step for those groups' collectives.
inline constexpr char kCommShardWaitSec[] = "Train/Samples/comm_wait_sec_shard_group";
inline constexpr char kCommAcrossWaitSec[] = "Train/Samples/comm_wait_sec_across_replicas";
inline constexpr char kEvalLoss[] = "Eval/Samples/eval_loss";
}  // namespace tags

// One scalar measurement, e.g. {"Train/Samples/train_loss", 2.31, 120}.
struct Event {
  std::string tag;
  double value = 0.0;
  int64_t step = 0;
};

// A sink for events. Write() may buffer; Flush() makes everything written so
// far visible to readers (e.g. a running TensorBoard or `tail -f`).
class Monitor {
 public:
  virtual ~Monitor() = default;
  // A short name for messages, e.g. "csv_monitor" or "tensorboard".
  virtual std::string name() const = 0;
  virtual absl::Status Write(const std::vector<Event>& events) = 0;
  virtual absl::Status Flush() { return absl::OkStatus(); }
};

// Fans events out to several monitors. Every monitor gets every call even
// when an earlier one fails; the first error is returned, prefixed with the
// failing monitor's name ("tensorboard: ...").
class MonitorSet : public Monitor {
 public:
  void Add(std::unique_ptr<Monitor> monitor);
  bool empty() const { return monitors_.empty(); }
  size_t size() const { return monitors_.size(); }

  std::string name() const override { return "monitors"; }
  absl::Status Write(const std::vector<Event>& events) override;
  absl::Status Flush() override;

 private:
  std::vector<std::unique_ptr<Monitor>> monitors_;
};

}  // namespace zt::monitor
