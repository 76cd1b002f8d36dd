// OptimizerSwapper against a plain in-memory copy of the same state: random
// sequences of walks (update, read, fill), range reads and writes and
// flushes, over pools smaller than, equal to and larger than the state, with
// and without pipelining, on both I/O backends. Every visit must see exactly
// the reference's current values, whichever buffer or file they come from.
// Then the traffic the buffers kept between walks must save (n - P
// sub-groups read and written per walk, nothing when the pool holds the
// state), the walk order, and failures: a write-back that fails after its
// walk returned is reported by the next call, names the sub-group and stays.
#include "offload/optimizer_swapper.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "tests/offload/offload_test_util.h"
#include "tests/testing/scratch_dir.h"

namespace zt::offload {
namespace {

constexpr int64_t kBlock = 1024;  // elements per 4 KiB

struct Case {
  std::string name;
  int64_t total = 0;
  int64_t sub_group = 0;
  int kinds = 2;
  int buffer_count = 4;
  bool pipeline_read = true;
  bool pipeline_write = true;
};

std::vector<Case> Cases() {
  return {
      {"pool_smaller_pipelined", 10 * kBlock + 77, 2 * kBlock, 2, 6, true, true},      // 6 sub-groups, 3 slots
      {"pool_smaller_unpipelined", 10 * kBlock + 77, 2 * kBlock, 3, 6, false, false},  // 6 sub-groups, 2 slots
      {"pool_smaller_read_ahead_only", 9 * kBlock, kBlock, 2, 8, true, false},         // 9 sub-groups, 4 slots
      {"one_slot", 5 * kBlock + 1, kBlock, 3, 4, true, true},                          // 6 sub-groups, 1 slot
      {"pool_equal", 4 * kBlock, kBlock, 2, 8, true, true},                            // 4 sub-groups, 4 slots
      {"pool_larger", 3 * kBlock - 5, kBlock, 1, 9, true, true},                       // 3 sub-groups, 9 slots
      {"whole_state_one_sub_group", 3000, 1000000000, 2, 4, false, false},
  };
}

std::vector<std::string> Kinds(int n) {
  std::vector<std::string> k;
  for (int i = 0; i < n; ++i) k.push_back(absl::StrCat("kind", i));
  return k;
}

// Swap options for `kinds` kinds of `total` elements in sub-groups of
// `sub_group`, with `buffer_count` buffers and both pipelines set as given.
OptimizerSwapOptions SwapOptions(const std::string& dir, int kinds, int64_t total, int64_t sub_group, int buffer_count,
                                 bool pipelined = false) {
  OptimizerSwapOptions o;
  o.dir = dir;
  o.kinds = Kinds(kinds);
  o.total_numel = total;
  o.sub_group_numel = sub_group;
  o.buffer_count = buffer_count;
  o.pipeline_read = o.pipeline_write = pipelined;
  return o;
}

// The state as plain vectors, [kind][element].
using Reference = std::vector<std::vector<float>>;

float Update(float old, int k, int64_t e, int walk) {
  return old * 0.5f + static_cast<float>((e * 7 + k * 13 + walk) % 101);
}

// One walk of `access`, checked against and applied to `ref`. Also checks
// the order: every sub-group once, ascending or descending as announced.
// `driven`: a descending walk opened with BeginWalk and advanced without
// blocking as a random "ready" frontier moves down (as gradients become
// final during backward), with pauses that let transfers finish, then
// finished with a blocking Advance. The frontier cuts through sub-groups,
// which are then visited in pieces: every element once, pieces going down.
void Walk(OptimizerSwapper& sw, OptimizerSwapper::Access access, Reference& ref, int walk, std::mt19937_64& rng,
          bool driven = false) {
  using Access = OptimizerSwapper::Access;
  const int kinds = static_cast<int>(ref.size());
  std::vector<int> seen;
  bool reverse = false;
  std::vector<float> fill(static_cast<size_t>(kinds));
  const uint64_t seed = rng();
  int64_t ready_from = 0;                                    // a driven walk's frontier: no visit below it
  int64_t last_begin = static_cast<int64_t>(ref[0].size());  // a driven walk's lowest element visited so far
  auto visit = [&](const OptimizerSwapper::SubGroup& sg, float* const* data) {
    if (sg.begin < ready_from) {
      return absl::InternalError(absl::StrCat("walk ", walk, ": sub-group ", sg.index, " visited before it was ready"));
    }
    if (driven) {
      // Pieces come down without gaps or overlaps; a sub-group counts as
      // seen at its first piece.
      if (sg.end != last_begin || sg.begin >= sg.end) {
        return absl::InternalError(absl::StrCat("walk ", walk, ": piece ", sg.begin, "..", sg.end, " of sub-group ",
                                                sg.index, " after element ", last_begin));
      }
      last_begin = sg.begin;
    }
    if (seen.empty() || seen.back() != sg.index) seen.push_back(sg.index);
    reverse = sg.reverse;
    for (int k = 0; k < kinds; ++k) {
      for (int64_t e = sg.begin; e < sg.end; ++e) {
        float& want = ref[static_cast<size_t>(k)][static_cast<size_t>(e)];
        float& got = data[k][e - sg.begin];
        if (access != Access::kWrite && got != want) {
          return absl::InternalError(
              absl::StrCat("walk ", walk, ": kind ", k, " element ", e, " is ", got, ", the reference holds ", want));
        }
        if (access == Access::kReadWrite) want = got = Update(got, k, e, walk);
        if (access == Access::kWrite) want = got = static_cast<float>((seed + static_cast<uint64_t>(e * 3 + k)) % 997);
      }
    }
    return absl::OkStatus();
  };
  absl::Status st;
  if (!driven) {
    st = sw.Run(access, visit);
  } else {
    st = sw.BeginWalk(/*descending=*/true);
    const int64_t total = static_cast<int64_t>(ref[0].size());
    ready_from = total + 1;
    for (int step = 0; st.ok() && step < 3 * sw.num_sub_groups() && sw.walk_open(); ++step) {
      if (rng() % 2 == 0)
        ready_from = std::max<int64_t>(0, ready_from - static_cast<int64_t>(rng() % (2 * kBlock + 1)));
      if (rng() % 3 == 0) std::this_thread::sleep_for(std::chrono::microseconds(rng() % 2000));
      const int64_t from = ready_from;
      st = sw.Advance(
          [from](const OptimizerSwapper::SubGroup& sg) { return sg.end - std::clamp(from, sg.begin, sg.end); },
          OptimizerSwapper::Wait::kNever, visit);
    }
    ready_from = 0;
    if (st.ok() && sw.walk_open()) {
      st = sw.Advance([](const OptimizerSwapper::SubGroup& sg) { return sg.end - sg.begin; },
                      OptimizerSwapper::Wait::kToEnd, visit);
    }
    if (st.ok() && last_begin != 0) st = absl::InternalError(absl::StrCat("walk ", walk, " stopped at ", last_begin));
    EXPECT_FALSE(sw.walk_open());
  }
  ASSERT_TRUE(st.ok()) << st;
  if (driven) {
    ASSERT_TRUE(reverse) << "a driven walk goes down";
  }
  ASSERT_EQ(static_cast<int>(seen.size()), sw.num_sub_groups());
  for (int i = 0; i < sw.num_sub_groups(); ++i) {
    EXPECT_EQ(seen[static_cast<size_t>(i)], reverse ? sw.num_sub_groups() - 1 - i : i) << "walk " << walk;
  }
}

void CheckWhole(OptimizerSwapper& sw, const Reference& ref, const std::string& when) {
  for (int k = 0; k < static_cast<int>(ref.size()); ++k) {
    std::vector<float> got(ref[static_cast<size_t>(k)].size());
    ASSERT_TRUE(sw.ReadRange(k, 0, static_cast<int64_t>(got.size()), got.data()).ok());
    for (size_t e = 0; e < got.size(); ++e) {
      ASSERT_EQ(got[e], ref[static_cast<size_t>(k)][e]) << when << ": kind " << k << " element " << e;
    }
  }
}

class OptimizerSwapperTest : public ::testing::TestWithParam<std::tuple<Case, IoBackend>> {};

TEST_P(OptimizerSwapperTest, EveryVisitSeesTheReferenceState) {
  const auto& [c, backend] = GetParam();
  zt::testing::ScratchDir dir("zt_optswap");
  IoOptions io_options;
  io_options.backend = backend;
  ZT_ENGINE_OR_SKIP(io, io_options);
  OptimizerSwapOptions o = SwapOptions(dir.path(), c.kinds, c.total, c.sub_group, c.buffer_count);
  o.pipeline_read = c.pipeline_read;
  o.pipeline_write = c.pipeline_write;
  auto sw = OptimizerSwapper::Create(o, io.get());
  ASSERT_TRUE(sw.ok()) << sw.status();
  // The pool is registered with io_uring for the swapper's life.
  const bool fixed = backend == IoBackend::kUring && testing::CanRegister(uint64_t{64} << 20);
  if (fixed) {
    EXPECT_GT(io->bytes_registered(), 0u);
  }

  Reference ref(static_cast<size_t>(c.kinds), std::vector<float>(static_cast<size_t>(c.total), 0.0f));
  std::mt19937_64 rng(17);
  using Access = OptimizerSwapper::Access;
  for (int op = 0; op < 80; ++op) {
    const int pick = static_cast<int>(rng() % 12);
    if (pick < 5) {
      ASSERT_NO_FATAL_FAILURE(Walk(**sw, Access::kReadWrite, ref, op, rng));
    } else if (pick >= 10) {
      ASSERT_NO_FATAL_FAILURE(Walk(**sw, Access::kReadWrite, ref, op, rng, /*driven=*/true));
    } else if (pick == 5) {
      ASSERT_NO_FATAL_FAILURE(Walk(**sw, Access::kRead, ref, op, rng));
    } else if (pick == 6) {
      ASSERT_NO_FATAL_FAILURE(Walk(**sw, Access::kWrite, ref, op, rng));
    } else if (pick == 7 || pick == 8) {
      const int k = static_cast<int>(rng() % static_cast<uint64_t>(c.kinds));
      const int64_t b = static_cast<int64_t>(rng() % static_cast<uint64_t>(c.total));
      const int64_t e = b + static_cast<int64_t>(rng() % static_cast<uint64_t>(c.total - b + 1));
      std::vector<float> buf(static_cast<size_t>(e - b));
      if (pick == 7) {
        ASSERT_TRUE((*sw)->ReadRange(k, b, e, buf.data()).ok());
        for (int64_t i = b; i < e; ++i) {
          ASSERT_EQ(buf[static_cast<size_t>(i - b)], ref[static_cast<size_t>(k)][static_cast<size_t>(i)])
              << "op " << op << ": ReadRange of kind " << k << " element " << i;
        }
      } else {
        for (int64_t i = b; i < e; ++i) {
          buf[static_cast<size_t>(i - b)] = ref[static_cast<size_t>(k)][static_cast<size_t>(i)] =
              static_cast<float>(rng() % 1000);
        }
        ASSERT_TRUE((*sw)->WriteRange(k, b, e, buf.data()).ok());
      }
    } else {
      ASSERT_TRUE((*sw)->Flush().ok());
    }
  }
  ASSERT_NO_FATAL_FAILURE(CheckWhole(**sw, ref, "at the end"));
  if (fixed) {
    EXPECT_GT(io->pieces_fixed(), 0u);
  }
  sw->reset();
  EXPECT_EQ(io->bytes_registered(), 0u) << "the pool's registration outlived it";
}

INSTANTIATE_TEST_SUITE_P(Pools, OptimizerSwapperTest,
                         ::testing::Combine(::testing::ValuesIn(Cases()),
                                            ::testing::Values(IoBackend::kUring, IoBackend::kThreads)),
                         [](const auto& info) {
                           return std::get<0>(info.param).name + "_" +
                                  (std::get<1>(info.param) == IoBackend::kUring ? "uring" : "threads");
                         });

// Traffic of one update walk after the first two: (n - P) sub-groups in each
// direction, nothing when the pool holds the whole state.
TEST(OptimizerSwapperTraffic, OnlyWhatThePoolCannotHoldMoves) {
  struct Shape {
    int sub_groups;
    int buffer_count;  // 2 kinds: slots = buffer_count / 2
  };
  for (const Shape& shape : {Shape{6, 8}, Shape{6, 6}, Shape{5, 2}, Shape{4, 8}, Shape{3, 12}}) {
    SCOPED_TRACE(absl::StrCat(shape.sub_groups, " sub-groups, ", shape.buffer_count, " buffers"));
    zt::testing::ScratchDir dir("zt_optswap");
    ZT_ENGINE_OR_SKIP(io, IoOptions{});
    const OptimizerSwapOptions o =
        SwapOptions(dir.path(), 2, shape.sub_groups * kBlock, kBlock, shape.buffer_count, /*pipelined=*/true);
    auto sw = OptimizerSwapper::Create(o, io.get());
    ASSERT_TRUE(sw.ok()) << sw.status();
    Reference ref(2, std::vector<float>(static_cast<size_t>(o.total_numel), 0.0f));
    std::mt19937_64 rng(3);
    for (int w = 0; w < 2; ++w) ASSERT_NO_FATAL_FAILURE(Walk(**sw, OptimizerSwapper::Access::kReadWrite, ref, w, rng));
    const int slots = shape.buffer_count / 2;
    const uint64_t moved_per_walk = static_cast<uint64_t>(std::max(0, shape.sub_groups - slots)) * 2 * kBlock * 4;
    for (int w = 2; w < 6; ++w) {
      const OptimizerSwapper::Stats before = (*sw)->stats();
      ASSERT_NO_FATAL_FAILURE(Walk(**sw, OptimizerSwapper::Access::kReadWrite, ref, w, rng));
      const OptimizerSwapper::Stats after = (*sw)->stats();
      EXPECT_EQ(after.bytes_read - before.bytes_read, moved_per_walk) << "walk " << w;
      EXPECT_EQ(after.bytes_written - before.bytes_written, moved_per_walk) << "walk " << w;
      EXPECT_EQ(after.buffer_hits - before.buffer_hits, static_cast<uint64_t>(std::min(slots, shape.sub_groups)))
          << "walk " << w;
    }
    // A flush writes what the buffers hold newer than the files, once.
    const uint64_t written = (*sw)->stats().bytes_written;
    ASSERT_TRUE((*sw)->Flush().ok());
    EXPECT_EQ((*sw)->stats().bytes_written - written,
              static_cast<uint64_t>(std::min(slots, shape.sub_groups)) * 2 * kBlock * 4);
    ASSERT_TRUE((*sw)->Flush().ok());
    EXPECT_EQ((*sw)->stats().bytes_written - written,
              static_cast<uint64_t>(std::min(slots, shape.sub_groups)) * 2 * kBlock * 4);
    ASSERT_NO_FATAL_FAILURE(CheckWhole(**sw, ref, "after the walks"));
  }
}

// A driven walk makes progress without ever blocking: repeated
// non-blocking calls with everything ready finish it, reading what the
// buffers do not hold and writing back what they must give up; a plain walk
// afterwards sees the result. While it is open, everything else that would
// touch the buffers or the files is refused, naming the update.
TEST(OptimizerSwapperDriven, NonBlockingCallsFinishTheWalkAndExcludeTheRest) {
  zt::testing::ScratchDir dir("zt_optswap");
  ZT_ENGINE_OR_SKIP(io, IoOptions{});
  const OptimizerSwapOptions o = SwapOptions(dir.path(), 2, 6 * kBlock, kBlock, /*buffer_count=*/6);  // 3 slots
  auto sw = OptimizerSwapper::Create(o, io.get());
  ASSERT_TRUE(sw.ok()) << sw.status();
  Reference ref(2, std::vector<float>(static_cast<size_t>(o.total_numel), 0.0f));
  std::mt19937_64 rng(5);
  using Access = OptimizerSwapper::Access;
  for (int w = 0; w < 4; ++w) {
    ASSERT_NO_FATAL_FAILURE(Walk(**sw, Access::kReadWrite, ref, w, rng));
    std::vector<int> seen;
    ASSERT_TRUE((*sw)->BeginWalk(/*descending=*/true).ok());
    auto nothing = [](const OptimizerSwapper::SubGroup&, float* const*) { return absl::OkStatus(); };
    std::vector<float> buf(4);
    EXPECT_EQ((*sw)->Run(Access::kRead, nothing).code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_EQ((*sw)->Flush().code(), absl::StatusCode::kFailedPrecondition);
    const absl::Status refused = (*sw)->ReadRange(0, 0, 4, buf.data());
    EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_TRUE(absl::StrContains(refused.message(), "optimizer update is in progress")) << refused;
    EXPECT_EQ((*sw)->BeginWalk(true).code(), absl::StatusCode::kFailedPrecondition);
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while ((*sw)->walk_open() && std::chrono::steady_clock::now() < give_up) {
      absl::Status st = (*sw)->Advance([](const OptimizerSwapper::SubGroup& sg) { return sg.end - sg.begin; },
                                       OptimizerSwapper::Wait::kNever,
                                       [&](const OptimizerSwapper::SubGroup& sg, float* const* data) {
                                         seen.push_back(sg.index);
                                         for (int k = 0; k < 2; ++k) {
                                           for (int64_t e = sg.begin; e < sg.end; ++e) {
                                             float& want = ref[static_cast<size_t>(k)][static_cast<size_t>(e)];
                                             if (data[k][e - sg.begin] != want) {
                                               return absl::InternalError(absl::StrCat("element ", e, " differs"));
                                             }
                                             want = data[k][e - sg.begin] = Update(want, k, e, 100 + w);
                                           }
                                         }
                                         return absl::OkStatus();
                                       });
      ASSERT_TRUE(st.ok()) << st;
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    ASSERT_FALSE((*sw)->walk_open()) << "non-blocking calls did not finish the walk";
    EXPECT_EQ(seen, (std::vector<int>{5, 4, 3, 2, 1, 0}));
    EXPECT_EQ((*sw)
                  ->Advance([](const OptimizerSwapper::SubGroup&) { return int64_t{1}; },
                            OptimizerSwapper::Wait::kNever, nothing)
                  .code(),
              absl::StatusCode::kFailedPrecondition);
  }
  ASSERT_NO_FATAL_FAILURE(CheckWhole(**sw, ref, "after the driven walks"));
}

// A write-back fails on the disk after the walk that issued it returned: the
// next call reports it, naming the sub-group, and so does every call after.
TEST(OptimizerSwapperErrors, AFailedWriteBackIsReportedByTheNextCallAndStays) {
  for (IoBackend backend : {IoBackend::kUring, IoBackend::kThreads}) {
    SCOPED_TRACE(IoBackendName(backend));
    zt::testing::ScratchDir dir("zt_optswap");
    std::atomic<bool> fail{false};
    IoOptions io_options;
    io_options.backend = backend;
    io_options.inject_error = [&fail](bool write, uint64_t) { return write && fail.load() ? EIO : 0; };
    ZT_ENGINE_OR_SKIP(io, io_options);
    // 2 slots of 6 sub-groups: write-backs in every walk.
    const OptimizerSwapOptions o =
        SwapOptions(dir.path(), 2, 6 * kBlock, kBlock, /*buffer_count=*/4, /*pipelined=*/true);
    auto sw = OptimizerSwapper::Create(o, io.get());
    ASSERT_TRUE(sw.ok()) << sw.status();
    auto nothing = [](const OptimizerSwapper::SubGroup&, float* const*) { return absl::OkStatus(); };
    ASSERT_TRUE((*sw)->Run(OptimizerSwapper::Access::kReadWrite, nothing).ok());
    fail = true;
    absl::Status st = (*sw)->Run(OptimizerSwapper::Access::kReadWrite, nothing);
    if (st.ok()) st = (*sw)->Flush();  // the write-backs still in flight
    ASSERT_FALSE(st.ok());
    EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss) << st;
    EXPECT_TRUE(absl::StrContains(st.message(), "writing back optimizer state sub-group")) << st;
    EXPECT_TRUE(absl::StrContains(st.message(), "kind0.swp") || absl::StrContains(st.message(), "kind1.swp")) << st;
    fail = false;
    const absl::Status again = (*sw)->Run(OptimizerSwapper::Access::kRead, nothing);
    EXPECT_EQ(again, st);
    std::vector<float> buf(16);
    EXPECT_EQ((*sw)->ReadRange(0, 0, 16, buf.data()), st);
  }
}

// A visitor error stops the walk where it is and comes back as is; the
// swapper still works for the caller that wants to look (a checkpoint).
TEST(OptimizerSwapperErrors, AVisitorErrorStopsTheWalk) {
  zt::testing::ScratchDir dir("zt_optswap");
  ZT_ENGINE_OR_SKIP(io, IoOptions{});
  const OptimizerSwapOptions o = SwapOptions(dir.path(), 1, 4 * kBlock, kBlock, /*buffer_count=*/2);
  auto sw = OptimizerSwapper::Create(o, io.get());
  ASSERT_TRUE(sw.ok()) << sw.status();
  int visits = 0;
  const absl::Status st =
      (*sw)->Run(OptimizerSwapper::Access::kReadWrite, [&](const OptimizerSwapper::SubGroup& sg, float* const* data) {
        ++visits;
        for (int64_t e = sg.begin; e < sg.end; ++e) data[0][e - sg.begin] = 1.0f;
        if (sg.index == 1) return absl::InternalError("the update failed");
        return absl::OkStatus();
      });
  EXPECT_EQ(st, absl::InternalError("the update failed"));
  EXPECT_EQ(visits, 2);
  std::vector<float> got(static_cast<size_t>(o.total_numel));
  ASSERT_TRUE((*sw)->ReadRange(0, 0, o.total_numel, got.data()).ok());
  for (int64_t e = 0; e < o.total_numel; ++e) {
    EXPECT_EQ(got[static_cast<size_t>(e)], e < 2 * kBlock ? 1.0f : 0.0f) << "element " << e;
    if (got[static_cast<size_t>(e)] != (e < 2 * kBlock ? 1.0f : 0.0f)) break;
  }
}

}  // namespace
}  // namespace zt::offload
