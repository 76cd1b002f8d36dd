// SnapshotArena (ckpt/save_snapshot.h): after a snapshot every reference
// points at a copy, so changing the live buffers (what training does while
// an asynchronous save is written) changes nothing the files would hold,
// and deferred copies are taken when CopyDeferred runs;
// sources (state kept on NVMe) are read into the arena in chunks and
// cleared; the arena is reused when a save fits; a failing source is an
// error naming the tensor.
#include "ckpt/save_snapshot.h"

#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <vector>

#include "absl/strings/match.h"

namespace zt::ckpt {
namespace {

TensorRef FloatRef(std::vector<float>& v) {
  TensorRef r;
  r.dtype = DType::kFloat32;
  r.shape = {static_cast<int64_t>(v.size())};
  r.data = v.data();
  return r;
}

std::vector<float> Read(const TensorRef& r) {
  std::vector<float> out(static_cast<size_t>(r.numel()));
  std::memcpy(out.data(), r.data, r.nbytes());
  return out;
}

TEST(SnapshotArena, ReferencesSeeTheStateOfTheSnapshotNotLaterChanges) {
  std::vector<float> master(1000), moment(1000), frozen(77), buffer(13), rng(5);
  std::iota(master.begin(), master.end(), 1.0f);
  std::iota(moment.begin(), moment.end(), -50.0f);
  std::iota(frozen.begin(), frozen.end(), 7.0f);
  std::iota(buffer.begin(), buffer.end(), 3.0f);
  RankShards shards;
  shards.master.push_back(FloatRef(master));
  shards.state["exp_avg"].push_back(FloatRef(moment));
  shards.frozen.push_back(FloatRef(frozen));
  shards.rng_cpu = FloatRef(rng);
  // A source, as NVMe-resident state is: bytes produced on demand.
  int calls = 0;
  TensorRef streamed;
  streamed.dtype = DType::kFloat32;
  streamed.shape = {3 << 20};  // 12 MiB: more than one source chunk
  streamed.source = [&calls](uint64_t offset, void* dst, uint64_t n) {
    ++calls;
    for (uint64_t i = 0; i < n / 4; ++i) static_cast<float*>(dst)[i] = static_cast<float>((offset / 4 + i) % 1000);
    return absl::OkStatus();
  };
  shards.state["exp_avg_sq"].push_back(streamed);
  Dict module;
  module.Set(Value("bn.running_mean"), Value(FloatRef(buffer)));
  List nested;
  nested.push_back(Value(FloatRef(buffer)));
  module.Set(Value("nested"), Value(nested));

  const std::vector<float> master0 = master, moment0 = moment, frozen0 = frozen, buffer0 = buffer;
  SnapshotArena arena;
  ASSERT_TRUE(arena.Snapshot(&shards, &module).ok());
  EXPECT_GE(arena.bytes(), (1000 + 1000 + 77 + 5 + 13 + 13 + (3 << 20)) * 4u);
  EXPECT_GT(calls, 1) << "the source should be read in chunks";
  // Training goes on: every live buffer changes.
  for (auto* v : {&master, &moment, &frozen, &buffer}) std::fill(v->begin(), v->end(), 999.0f);
  EXPECT_EQ(Read(shards.master[0]), master0);
  EXPECT_EQ(Read(shards.state["exp_avg"][0]), moment0);
  EXPECT_EQ(Read(shards.frozen[0]), frozen0);
  EXPECT_EQ(Read(module.Find("bn.running_mean")->AsTensor()), buffer0);
  EXPECT_EQ(Read(module.Find("nested")->AsList()[0].AsTensor()), buffer0);
  const TensorRef& s = shards.state["exp_avg_sq"][0];
  EXPECT_FALSE(s.source) << "a snapshotted source is cleared";
  const std::vector<float> got = Read(s);
  for (size_t i = 0; i < got.size(); i += 4099) ASSERT_EQ(got[i], static_cast<float>(i % 1000)) << i;
  // No two references share bytes.
  EXPECT_NE(shards.master[0].data, master.data());

  // A second save of the same size reuses the arena.
  const uint64_t bytes = arena.bytes();
  RankShards again;
  again.master.push_back(FloatRef(master));
  ASSERT_TRUE(arena.Snapshot(&again, nullptr).ok());
  EXPECT_EQ(arena.bytes(), bytes);
  EXPECT_EQ(Read(again.master[0]), std::vector<float>(1000, 999.0f));
}

// Deferred: what a forward changes (the buffers named in copy_now) and
// sources are copied at once; the rest by CopyDeferred, which the engine runs
// before the next optimizer update.
TEST(SnapshotArena, DeferredCopiesWaitForCopyDeferredAndCopyNowKeysDoNot) {
  std::vector<float> master(500), buffer(9);
  std::iota(master.begin(), master.end(), 1.0f);
  std::iota(buffer.begin(), buffer.end(), 3.0f);
  const std::vector<float> master0 = master, buffer0 = buffer;
  RankShards shards;
  shards.master.push_back(FloatRef(master));
  Dict module;
  module.Set(Value("fc.weight"), Value(FloatRef(master)));
  module.Set(Value("bn.running_mean"), Value(FloatRef(buffer)));
  SnapshotArena arena;
  ASSERT_TRUE(arena.Snapshot(&shards, &module, /*defer=*/true, {"bn.running_mean"}).ok());
  EXPECT_NE(shards.master[0].data, master.data()) << "repointed at once";
  std::fill(buffer.begin(), buffer.end(), -1.0f);  // a forward updates the buffer
  EXPECT_EQ(Read(module.Find("bn.running_mean")->AsTensor()), buffer0);
  arena.CopyDeferred();
  std::fill(master.begin(), master.end(), -2.0f);  // the optimizer step, after the copy
  EXPECT_EQ(Read(shards.master[0]), master0);
  EXPECT_EQ(Read(module.Find("fc.weight")->AsTensor()), master0);
}

TEST(SnapshotArena, AFailingSourceIsAnErrorNamingTheTensor) {
  RankShards shards;
  TensorRef broken;
  broken.dtype = DType::kFloat32;
  broken.shape = {16};
  broken.source = [](uint64_t, void*, uint64_t) { return absl::DataLossError("swap file read failed"); };
  shards.state["exp_avg"].push_back(broken);
  SnapshotArena arena;
  const absl::Status st = arena.Snapshot(&shards, nullptr);
  EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss);
  EXPECT_TRUE(absl::StrContains(st.message(), "exp_avg 0")) << st;
  EXPECT_TRUE(absl::StrContains(st.message(), "swap file read failed")) << st;
}

}  // namespace
}  // namespace zt::ckpt
