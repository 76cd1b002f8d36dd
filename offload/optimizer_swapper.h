// OptimizerSwapper: one rank's fp32 optimizer state (the master weights when
// they are a copy, exp_avg, exp_avg_sq, ...) kept in swap files on NVMe and
// streamed through a bounded pool of host buffers, one sub-group at a time.
// This is ZeRO-Infinity's optimizer offload; the update itself is the
// caller's (zero/optimizer_state.h runs the CPU kernels on the buffers).
//
// The state is `kinds` arrays of `total_numel` fp32 elements, each the
// concatenation of this rank's owned shards. Sub-group s covers elements
// [s * S, min((s + 1) * S, total_numel)) of every kind, S = sub_group_numel
// rounded up to a multiple of 1024 elements (4 KiB, the O_DIRECT unit).
// Each kind has its own file, sub-group s at byte s * S * 4, so a sub-group
// is `kinds` sequential transfers.
//
//   auto sw = OptimizerSwapper::Create(options, io);
//   sw->Run(OptimizerSwapper::Access::kReadWrite, [&](const SubGroup& sg, float* const* data) {
//     // data[k] holds elements [sg.begin, sg.end) of kind k; update in place.
//     return absl::OkStatus();
//   });
//
// Pipelining (DeepSpeed's pipeline_read / pipeline_write): with read-ahead,
// sub-group s+1 is being read while the visitor updates s; with write-behind,
// s is being written while s+1 is updated. Both together keep three
// sub-groups' buffers busy (reading s+1, updating s, writing s-1). The pool
// holds `buffer_count` buffers of one kind's sub-group each, so it fits
// buffer_count / kinds sub-groups; where that is fewer than the pipeline
// needs, the overlap is reduced (write-behind first) and `pipeline()` says
// what runs. Memory is bounded by the pool, never by the model.
//
// Contract: not thread-safe; one caller (the training thread). Errors are
// Statuses naming the swap file, the sub-group and the offset; after an
// error the state on disk may be partly updated (the caller stops training).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "offload/aligned_buffer.h"
#include "offload/io_engine.h"
#include "offload/swap_file.h"

namespace zt::offload {

struct OptimizerSwapOptions {
  std::string dir;                        // offload_optimizer.nvme_path
  std::string file_prefix = "optimizer";  // files: <dir>/<prefix>.<kind>.swp (unlinked once open)
  std::vector<std::string> kinds;         // e.g. {"master", "exp_avg", "exp_avg_sq"}
  int64_t total_numel = 0;                // elements per kind
  int64_t sub_group_numel = 1000000000;   // zero_optimization.sub_group_size
  int buffer_count = 4;                   // offload_optimizer.buffer_count
  bool pipeline_read = false;
  bool pipeline_write = false;
};

class OptimizerSwapper {
 public:
  // Creates and reserves the files (every SwapFile check applies; the
  // message says how much this rank needs in all) and the buffer pool.
  // InvalidArgument when buffer_count cannot hold one sub-group of every
  // kind (names offload_optimizer.buffer_count and the minimum).
  static absl::StatusOr<std::unique_ptr<OptimizerSwapper>> Create(const OptimizerSwapOptions& options, IoEngine* io);

  struct SubGroup {
    int index = 0;
    int64_t begin = 0;  // first element (of every kind)
    int64_t end = 0;
  };
  enum class Access {
    kReadWrite,  // read, visit, write back (the optimizer step)
    kRead,       // read, visit (saving a checkpoint)
    kWrite,      // visit fills the buffers, write (initialization, loading)
  };
  // The visitor gets data[k] = the sub-group's elements of kind k. With
  // kWrite the buffers hold garbage on entry and the visitor must fill
  // every element. A visitor error stops the walk after in-flight transfers
  // land and is returned as is.
  using Visitor = std::function<absl::Status(const SubGroup& sg, float* const* data)>;
  absl::Status Run(Access access, const Visitor& visit);

  // Synchronous copies of elements [begin, end) of one kind, at any
  // alignment (through a bounce buffer from the pool): checkpoint I/O.
  absl::Status ReadRange(int kind, int64_t begin, int64_t end, float* dst);
  absl::Status WriteRange(int kind, int64_t begin, int64_t end, const float* src);

  const std::vector<std::string>& kinds() const { return options_.kinds; }
  // "read-ahead + write-behind, 3 sub-groups of 3 x 24 MiB buffers" etc.
  std::string Describe() const;
  uint64_t file_bytes() const;    // reserved on disk, all kinds
  uint64_t buffer_bytes() const;  // host memory of the pool

  struct Stats {
    uint64_t bytes_read = 0;
    uint64_t bytes_written = 0;
    double wait_seconds = 0;  // time Run spent blocked on I/O (not overlapped)
  };
  const Stats& stats() const { return stats_; }

 private:
  OptimizerSwapper() = default;
  SubGroup SubGroupAt(int s) const;
  uint64_t IoBytes(const SubGroup& sg) const;  // aligned transfer size per kind
  // Copies [begin, end) of one kind through the bounce buffer, a buffer-sized
  // aligned window at a time: into `read_into`, or from `write_from`
  // (read-modify-write of partially covered blocks).
  absl::Status BounceRange(int kind, int64_t begin, int64_t end, float* read_into, const float* write_from);
  absl::Status Annotate(const absl::Status& st, const char* what, int s) const;

  OptimizerSwapOptions options_;
  IoEngine* io_ = nullptr;
  std::vector<SwapFile> files_;  // one per kind
  std::unique_ptr<BufferPool> pool_;
  int64_t sub_group_numel_ = 0;
  int num_sub_groups_ = 0;
  int slots_ = 1;
  bool read_ahead_ = false;
  bool write_behind_ = false;
  Stats stats_;
};

}  // namespace zt::offload
