// Checkpoints end to end, every rank a real process:
//  * exact resume: K steps, save, fresh processes load and run K more ==
//    2K steps straight through, bitwise (fp32; a scheduler, accumulation and
//    RNG-driven data order; and fp16 with a loss-scale overflow), per stage;
//  * resume at another world size: saved by 4 ranks, loaded by 1, 2 and 3
//    (and by 2 at another stage): identical consolidated weights and the
//    same next loss;
//  * a rank dying during a save leaves the previous checkpoint loadable;
//  * corrupted and truncated files are clear errors and load nothing;
//  * Python's torch.load opens every .pt file, and the safetensors export
//    reads back with a plain Python reader.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "ckpt/export.h"
#include "ckpt/format/pt_file.h"
#include "ckpt/format/safetensors.h"
#include "ckpt/memory_copies.h"
#include "ckpt/zero_checkpoint.h"
#include "comm/init.h"
#include "engine/engine.h"
#include "engine/gathered_parameters.h"
#include "engine/weight_decay_groups.h"
#include "engine/weights.h"
#include "launch/rank_env.h"
#include "tests/ckpt/ckpt_test_util.h"
#include "tests/engine/parity_model.h"
#include "tests/engine/stage3_model.h"
#include "tests/testing/ranks.h"
#include "tests/testing/test_config.h"
#include "tests/testing/worker_args.h"
#include "tests/testing/zt_command.h"
#include "util/error.h"
#include "util/status.h"

namespace zt::testing {
namespace {

// Worker arguments: "key=value;key=value".
std::map<std::string, std::string> Args(const std::string& arg) { return WorkerArgs(arg); }

int Int(const std::map<std::string, std::string>& a, const std::string& k) {
  int v = 0;
  if (!absl::SimpleAtoi(a.at(k), &v)) throw Error(absl::InvalidArgumentError(k));
  return v;
}

absl::StatusOr<std::shared_ptr<comm::ProcessGroup>> Group(int timeout_s = 60) {
  ZT_ASSIGN_OR_RETURN(comm::RankEnv env, comm::ReadRankEnv());
  comm::GroupOptions options;
  options.timeout = std::chrono::seconds(timeout_s);
  return comm::InitProcessGroup(env, options);
}

constexpr int64_t kGlobalBatch = 12;  // divides by 1, 2, 3 and 4

Config TrainConfig(int stage, bool fp16) {
  // The global batch is fixed, the micro-batch follows from the world size.
  Config c = TestConfig(stage, /*micro_batch=*/1, /*accumulation=*/2, OptimizerType::kAdamW, 1e-2);
  c.batch.train_micro_batch_size_per_gpu.reset();
  c.batch.train_batch_size = kGlobalBatch;
  c.optimizer.weight_decay = 0.01;
  c.scheduler.type = SchedulerType::kWarmupDecayLR;
  c.scheduler.warmup_max_lr = 1e-2;
  c.scheduler.warmup_num_steps = 3;
  c.scheduler.total_num_steps = 20;
  c.zero.reduce_bucket_size = 300;
  c.zero.param_persistence_threshold = 0;
  c.zero.overlap_comm = stage >= 2;
  if (fp16) {
    c.fp16.enabled = true;
    c.fp16.initial_scale_power = 6;
    c.fp16.loss_scale_window = 3;
    c.fp16.hysteresis = 1;
    c.optimizer.type = OptimizerType::kSGD;
    c.optimizer.momentum = 0.9;
    c.optimizer.lr = 0.05;
    c.scheduler.type = SchedulerType::kNone;
  }
  return c;
}

// The model and how a micro-batch's loss is computed; GPT-style (tied, a
// frozen unit) in fp32, elementwise in fp16 (CPU LibTorch has no fp16 matmul).
struct Model {
  std::shared_ptr<torch::nn::Module> module;
  std::function<torch::Tensor(const torch::Tensor& rows)> loss;  // rows: indices into the data
};

Model MakeModel(bool fp16, bool root_unit, uint64_t seed) {
  torch::manual_seed(seed);
  Model m;
  if (fp16) {
    auto net = std::make_shared<zt::UnitImpl<ScaleShiftImpl>>();
    m.module = net;
    auto data = std::make_shared<ParityData>(MakeData(64, 13, 13, 5));
    m.loss = [net, data](const torch::Tensor& rows) {
      torch::Tensor x = data->x.index_select(0, rows).to(torch::kHalf);
      return (net->forward(x).to(torch::kFloat) - data->y.index_select(0, rows)).pow(2).mean();
    };
    return m;
  }
  TinyGptOptions o;
  TinyGptHandle h = MakeTinyGpt(o, root_unit);
  m.module = h.module;
  auto data = std::make_shared<ParityData>(MakeTokenData(64, o, 5));
  m.loss = [h, data](const torch::Tensor& rows) {
    torch::Tensor logits = h.forward(data->x.index_select(0, rows));
    return torch::cross_entropy_loss(logits.reshape({-1, logits.size(-1)}),
                                     data->y.index_select(0, rows).reshape({-1}));
  };
  return m;
}

// One optimizer step: micro-batches drawn at random (the RNG must resume too).
double TrainStep(Engine& engine, Model& m, int step, bool inject_overflow) {
  double sum = 0;
  for (int64_t k = 0; k < engine.config().batch.accumulation_steps; ++k) {
    torch::Tensor rows = torch::randint(64, {engine.config().batch.micro_batch}, torch::kLong);
    torch::Tensor loss = m.loss(rows);
    if (inject_overflow && step == 4 && k == 0 && engine.process_group().rank() == 0) {
      loss = loss * std::numeric_limits<float>::infinity();  // every gradient inf: a skipped step
    }
    sum += loss.item<double>();
    engine.Backward(loss);
    engine.Step();
  }
  return sum;
}

// All parameters, full, in model order (collective at stage 3).
torch::Tensor FullParams(Engine& engine, torch::nn::Module& module) {
  GatheredParameters full(engine);
  std::vector<torch::Tensor> flat;
  for (const auto& p : module.parameters()) flat.push_back(p.detach().to(torch::kFloat).flatten().clone());
  full.Release();
  return torch::cat(flat);
}

// mode=continuous: `total` steps, dump. mode=save: `k` steps, save to `dir`.
// mode=resume: load `dir` into a differently initialized model, run to `total`, dump.
ZT_RANK_WORKER(resume) {
  const auto a = Args(ctx.arg);
  const int stage = Int(a, "stage"), k = Int(a, "k"), total = Int(a, "total");
  const bool fp16 = a.at("fp16") == "1";
  const std::string mode = a.at("mode"), dir = a.at("dir");
  ZT_ASSIGN_OR_RETURN(auto pg, Group());
  Config c = TrainConfig(stage, fp16);
  if (a.count("mics")) c.zero.mics_shard_size = Int(a, "mics");
  if (a.count("gas")) c.batch.gradient_accumulation_steps = Int(a, "gas");
  const bool async = a.count("async") && a.at("async") == "1";
  c.checkpoint.async_save = async;
  if (a.count("nvme") && mode == "save") {
    // The optimizer state on NVMe, streamed through 3 buffers: the save
    // reads it back (into staging memory, when asynchronous).
    c.zero.offload_optimizer.device = OffloadDevice::kNvme;
    c.zero.offload_optimizer.nvme_path = dir + ".swap";
    c.zero.offload_optimizer.buffer_count = 3;
    c.zero.sub_group_size = 1024;
  }
  if (a.count("copies")) {
    // copies=<folder>: in-memory checkpoint copies, each rank a node of its
    // own (LOCAL_WORLD_SIZE 1) with its own memory folder, as the launchers
    // of two hosts would set them.
    // local=L: L ranks per node instead.
    const int local = a.count("local") ? Int(a, "local") : 1;
    ::setenv("LOCAL_WORLD_SIZE", std::to_string(local).c_str(), 1);
    ::setenv("LOCAL_RANK", std::to_string(pg->rank() % local).c_str(), 1);
    ::setenv(ckpt::kMemoryCopiesEnv, absl::StrCat(a.at("copies"), "/node", pg->rank() / local).c_str(), 1);
  }
  Model m = MakeModel(fp16, /*root_unit=*/stage == 3, mode == "resume" ? 777 : 1);
  // groups=hf: HF Trainer's param groups (weight decay 0.1 and 0.0; the
  // config says 0.01); wrong: the same groups with another decay. Left
  // out on resume: the checkpoint's groups are taken.
  const std::string groups = a.count("groups") ? a.at("groups") : "";
  EngineOptions options;
  if (!groups.empty()) options.param_groups = WeightDecayGroups(*m.module, groups == "wrong" ? 0.05 : 0.1);
  ZT_ASSIGN_OR_RETURN(auto engine, Engine::Create(m.module, c, pg, options));
  torch::manual_seed(1000 + static_cast<uint64_t>(pg->rank()));
  int step = 0;
  if (mode == "resume") {
    torch::manual_seed(4242);  // whatever: the checkpoint's RNG state replaces it
    auto loaded = engine->LoadCheckpoint(dir);
    if (groups == "wrong") {
      if (loaded.ok()) return absl::InternalError("a resume with another group weight decay was not refused");
      if (!absl::StrContains(loaded.status().message(), "was trained with weight_decay 0.1 (this run: 0.05)") ||
          !absl::StrContains(loaded.status().message(), "'decay'")) {
        return absl::InternalError(absl::StrCat("refused with: ", loaded.status().message()));
      }
      return absl::OkStatus();
    }
    ZT_ASSIGN_OR_RETURN(ckpt::Value client, std::move(loaded));
    if (a.count("expect_groups") && engine->param_groups().size() != static_cast<size_t>(Int(a, "expect_groups"))) {
      return absl::InternalError(absl::StrCat("resumed with ", engine->param_groups().size(), " param groups"));
    }
    const ckpt::Value* saved_step = client.AsDict().Find("next_step");
    if (saved_step == nullptr || saved_step->AsInt() != k)
      return absl::InternalError("client state did not round-trip");
    step = k;
  }
  const int until = mode == "save" ? k : total;
  for (; step < until; ++step) TrainStep(*engine, m, step, fp16);
  if (fp16 && engine->skipped_steps() != 1 && until > 4) return absl::InternalError("expected one skipped step");
  if (mode == "save") {
    ckpt::Dict client;
    client.Set("next_step", k);
    client.Set("note", "sampler position and such");
    ZT_RETURN_IF_ERROR(engine->SaveCheckpoint(dir, "", ckpt::Value(client)));
    if (!async) return absl::OkStatus();
    // Asynchronous: not published until every rank's files are written and
    // the save is committed, which SaveCheckpoint itself never does.
    const std::string tag = absl::StrCat("global_step", k);
    absl::StatusOr<std::string> latest = ckpt::ReadLatestTag(dir);
    if (latest.ok() && *latest == tag) return absl::InternalError("`latest` moved before the save was committed");
    // Training goes on while the files are written, changing every state
    // the save holds; the checkpoint must keep the state of step k.
    for (int more = 0; more < 3; ++more) TrainStep(*engine, m, k + more, fp16);
    ZT_RETURN_IF_ERROR(engine->WaitForPendingSave());
    ZT_ASSIGN_OR_RETURN(latest, ckpt::ReadLatestTag(dir));
    if (*latest != tag) return absl::InternalError(absl::StrCat("`latest` names ", *latest, ", not ", tag));
    return absl::OkStatus();
  }
  // The weights and everything else that must continue: counters, the loss
  // scale, the lr the scheduler gives next.
  torch::Tensor params = FullParams(*engine, *m.module);
  torch::Tensor extra =
      torch::tensor({static_cast<double>(engine->global_steps()), static_cast<double>(engine->skipped_steps()),
                     static_cast<double>(engine->global_samples()), engine->loss_scale(), engine->lr()},
                    torch::kDouble);
  if (pg->rank() == 0) torch::save(torch::cat({params.to(torch::kDouble), extra}), a.at("out"));
  return absl::OkStatus();
}

std::string TempDir(const std::string& name) {
  std::string dir = absl::StrCat(::testing::TempDir(), "zt_ckpt_", name, "_", ::getpid());
  std::system(absl::StrCat("rm -rf '", dir, "'").c_str());
  ::mkdir(dir.c_str(), 0755);
  return dir;
}

RankRunResult RunWorker(const char* worker, int world, const std::string& arg, std::vector<int> may_fail = {}) {
  RankRunOptions o;
  o.world_size = world;
  o.arg = arg;
  o.timeout = std::chrono::seconds(300);
  o.may_fail_ranks = std::move(may_fail);
  return RunRanks(worker, o);
}

// The resume worker's three runs in `dir` (straight, save with `save_args`
// added, resume) and the check that the resumed run ends bitwise where the
// straight one does.
void ExpectResumeIsBitwise(const std::string& dir, const std::string& base, const std::string& save_args) {
  RankRunResult r = RunWorker("resume", 2, base + ";mode=continuous;out=" + dir + "/straight.pt");
  ASSERT_TRUE(r.ok()) << r.Summary();
  r = RunWorker("resume", 2, base + ";mode=save" + save_args);
  ASSERT_TRUE(r.ok()) << r.Summary();
  r = RunWorker("resume", 2, base + ";mode=resume;out=" + dir + "/resumed.pt");
  ASSERT_TRUE(r.ok()) << r.Summary();
  torch::Tensor straight, resumed;
  torch::load(straight, dir + "/straight.pt");
  torch::load(resumed, dir + "/resumed.pt");
  EXPECT_TRUE(torch::equal(straight, resumed)) << "max diff " << (straight - resumed).abs().max().item<double>();
}

class ResumeTest : public ::testing::TestWithParam<std::tuple<int, bool>> {};

TEST_P(ResumeTest, SaveLoadContinueIsBitwiseTheStraightRun) {
  const auto [stage, fp16] = GetParam();
  const std::string dir = TempDir(absl::StrCat("resume", stage, fp16));
  ExpectResumeIsBitwise(dir, absl::StrCat("stage=", stage, ";fp16=", fp16 ? 1 : 0, ";k=3;total=6;dir=", dir, "/ck"),
                        "");
}

// checkpoint.async_save: the files are written by a background thread while
// training goes on; a resume from them is bitwise the straight run, at every
// stage, as a synchronous save's is.
TEST(AsyncSave, SaveWhileTrainingThenResumeIsBitwiseTheStraightRun) {
  const std::vector<std::pair<int, std::string>> cases = {{0, ""}, {1, ""},        {2, ""},
                                                          {3, ""}, {2, ";nvme=1"}, {3, ";nvme=1"}};
  for (const auto& [stage, extra] : cases) {
    SCOPED_TRACE(absl::StrCat("stage ", stage, extra));
    const std::string dir = TempDir(absl::StrCat("async", stage, extra.empty() ? "" : "_nvme"));
    ExpectResumeIsBitwise(dir, absl::StrCat("stage=", stage, ";fp16=0;k=3;total=6;dir=", dir, "/ck"),
                          ";async=1" + extra);
  }
}

// A background write that fails (here: the save dir's parent is a file) is
// reported by the commit, naming the checkpoint, on every rank; `latest`
// keeps naming the previous checkpoint; the next save works.
ZT_RANK_WORKER(async_failure) {
  const auto a = Args(ctx.arg);
  ZT_ASSIGN_OR_RETURN(auto pg, Group());
  Config c = TrainConfig(/*stage=*/2, /*fp16=*/false);
  c.checkpoint.async_save = true;
  Model m = MakeModel(false, false, 1);
  ZT_ASSIGN_OR_RETURN(auto engine, Engine::Create(m.module, c, pg));
  const std::string good = a.at("dir") + "/ck", bad = a.at("dir") + "/a_file/ck";
  TrainStep(*engine, m, 0, false);
  ZT_RETURN_IF_ERROR(engine->SaveCheckpoint(good));
  ZT_RETURN_IF_ERROR(engine->WaitForPendingSave());
  TrainStep(*engine, m, 1, false);
  // Staging succeeds (no file is touched yet); the write fails.
  ZT_RETURN_IF_ERROR(engine->SaveCheckpoint(bad));
  const absl::Status failed = engine->WaitForPendingSave();
  if (failed.ok() || !absl::StrContains(failed.message(), "a_file/ck/global_step2")) {
    return absl::InternalError(absl::StrCat("the failed background save was reported as: ", failed.ToString()));
  }
  ZT_ASSIGN_OR_RETURN(std::string latest, ckpt::ReadLatestTag(good));
  if (latest != "global_step1") return absl::InternalError(absl::StrCat("latest moved to ", latest));
  TrainStep(*engine, m, 2, false);
  ZT_RETURN_IF_ERROR(engine->SaveCheckpoint(good));
  ZT_RETURN_IF_ERROR(engine->WaitForPendingSave());
  ZT_ASSIGN_OR_RETURN(latest, ckpt::ReadLatestTag(good));
  return latest == "global_step3" ? absl::OkStatus() : absl::InternalError(absl::StrCat("latest is ", latest));
}

TEST(AsyncSave, AFailedBackgroundWriteIsReportedAndLeavesLatest) {
  const std::string dir = TempDir("async_failure");
  std::ofstream(dir + "/a_file") << "not a directory";
  RankRunResult r = RunWorker("async_failure", 2, "dir=" + dir);
  ASSERT_TRUE(r.ok()) << r.Summary();
}

// Optimizer param groups survive a checkpoint: saved with HF Trainer's two
// groups, resumed with the same groups given again or with none given (the
// engine takes the checkpoint's, as DeepSpeed does): bitwise the straight
// run with groups. Given with another weight decay: refused, naming it.
class ResumeWithGroupsTest : public ::testing::TestWithParam<int> {};

TEST_P(ResumeWithGroupsTest, GroupsComeBackFromTheCheckpoint) {
  const int stage = GetParam();
  const std::string dir = TempDir(absl::StrCat("resume_groups", stage));
  const std::string base = absl::StrCat("stage=", stage, ";fp16=0;k=3;total=6;dir=", dir, "/ck");
  RankRunResult r = RunWorker("resume", 2, base + ";groups=hf;mode=continuous;out=" + dir + "/straight.pt");
  ASSERT_TRUE(r.ok()) << r.Summary();
  r = RunWorker("resume", 2, base + ";mode=continuous;out=" + dir + "/ungrouped.pt");
  ASSERT_TRUE(r.ok()) << r.Summary();
  r = RunWorker("resume", 2, base + ";groups=hf;mode=save");
  ASSERT_TRUE(r.ok()) << r.Summary();
  auto saved = ckpt::ZeroCheckpoint::Open(dir + "/ck");
  ASSERT_TRUE(saved.ok()) << saved.status();
  const auto& settings = (*saved)->layout().optimizer_group_settings;
  ASSERT_EQ(settings.size(), 2u);
  EXPECT_EQ(settings[0].weight_decay, 0.1);
  EXPECT_EQ(settings[1].weight_decay, 0.0);
  const zt::testing::ZtRun inspect = zt::testing::RunZt(absl::StrCat("ckpt inspect ", dir, "/ck"));
  EXPECT_EQ(inspect.code, 0) << inspect.output;
  EXPECT_TRUE(absl::StrContains(inspect.output, "optimizer param group 1: ") &&
              absl::StrContains(inspect.output, "weight_decay 0.1, eps 1e-08"))
      << inspect.output;
  if (stage >= 1) {
    // In DeepSpeed's files (stages 1-3): the base optimizer's param_groups,
    // one per group, each with its weight decay and members (read back by
    // DeepSpeed's layout).
    const zt::testing::ZtRun convert =
        zt::testing::RunZt(absl::StrCat("ckpt convert ", dir, "/ck ", dir, "/ds --to deepspeed"));
    ASSERT_EQ(convert.code, 0) << convert.output;
    auto ds = ckpt::ZeroCheckpoint::Open(dir + "/ds");
    ASSERT_TRUE(ds.ok()) << ds.status();
    ASSERT_EQ((*ds)->layout().optimizer_group_settings.size(), 2u);
    EXPECT_EQ((*ds)->layout().optimizer_group_settings[0].weight_decay, 0.1);
    EXPECT_EQ((*ds)->layout().optimizer_group_settings[1].weight_decay, 0.0);
    EXPECT_EQ((*ds)->layout().optimizer_groups, (*saved)->layout().optimizer_groups);
    // Back to zerotorch's format: the groups come along.
    const zt::testing::ZtRun back =
        zt::testing::RunZt(absl::StrCat("ckpt convert ", dir, "/ds ", dir, "/back --to zerotorch"));
    ASSERT_EQ(back.code, 0) << back.output;
    auto again = ckpt::ZeroCheckpoint::Open(dir + "/back");
    ASSERT_TRUE(again.ok()) << again.status();
    EXPECT_EQ((*again)->layout().optimizer_groups, (*saved)->layout().optimizer_groups);
    EXPECT_TRUE((*again)->layout().optimizer_group_settings == (*ds)->layout().optimizer_group_settings);
  }
  // Resharded for 3 ranks: the same groups and settings (a reshard that
  // dropped them would resume with the config's single setting).
  const zt::testing::ZtRun reshard =
      zt::testing::RunZt(absl::StrCat("ckpt reshard ", dir, "/ck ", dir, "/r3 --world-size 3"));
  ASSERT_EQ(reshard.code, 0) << reshard.output;
  auto r3 = ckpt::ZeroCheckpoint::Open(dir + "/r3");
  ASSERT_TRUE(r3.ok()) << r3.status();
  EXPECT_EQ((*r3)->layout().optimizer_groups, (*saved)->layout().optimizer_groups);
  EXPECT_TRUE((*r3)->layout().optimizer_group_settings == settings);
  torch::Tensor straight, ungrouped;
  torch::load(straight, dir + "/straight.pt");
  torch::load(ungrouped, dir + "/ungrouped.pt");
  // The groups change the training (else this test could not fail).
  EXPECT_FALSE(torch::equal(straight, ungrouped));
  for (const std::string given : {"hf", ""}) {
    const std::string out = absl::StrCat(dir, "/resumed_", given.empty() ? "adopted" : given, ".pt");
    r = RunWorker("resume", 2, absl::StrCat(base, ";groups=", given, ";expect_groups=2;mode=resume;out=", out));
    ASSERT_TRUE(r.ok()) << given << ": " << r.Summary();
    torch::Tensor resumed;
    torch::load(resumed, out);
    EXPECT_TRUE(torch::equal(straight, resumed)) << (given.empty() ? "taken from the checkpoint" : "given again")
                                                 << ": max diff " << (straight - resumed).abs().max().item<double>();
  }
  r = RunWorker("resume", 2, base + ";groups=wrong;mode=resume;out=" + dir + "/never.pt");
  EXPECT_TRUE(r.ok()) << r.Summary();
}

INSTANTIATE_TEST_SUITE_P(Stages, ResumeWithGroupsTest, ::testing::Values(0, 1, 2, 3),
                         [](const auto& info) { return absl::StrCat("stage", info.param); });

INSTANTIATE_TEST_SUITE_P(Stages, ResumeTest,
                         ::testing::Values(std::make_tuple(0, false), std::make_tuple(1, false),
                                           std::make_tuple(2, false), std::make_tuple(3, false),
                                           std::make_tuple(2, true), std::make_tuple(3, true)),
                         [](const auto& info) {
                           return absl::StrCat("stage", std::get<0>(info.param),
                                               std::get<1>(info.param) ? "_fp16" : "");
                         });

// Hierarchical sharding (mics_shard_size 2 at world 4: the layout of 2 hosts
// x 2 ranks). The checkpoint is one of shard-group size (2 files, written by
// the first shard group, with the other replicas' RNG streams): resumed in
// the same layout it continues bitwise as the straight run; loaded at world 2
// or 3 flat, or at world 4 with another shard size, every rank holds exactly
// the saved weights, counters and lr.
class MicsCheckpointTest : public ::testing::TestWithParam<int> {};

TEST_P(MicsCheckpointTest, ResumesInTheSameLayoutAndLoadsIntoAnyOther) {
  const int stage = GetParam();
  const std::string dir = TempDir(absl::StrCat("mics", stage));
  // One micro-batch per step: the global batch of 12 splits over 2, 3 and 4 ranks.
  const std::string base = absl::StrCat("stage=", stage, ";fp16=0;gas=1;k=3;dir=", dir, "/ck");
  RankRunResult r = RunWorker("resume", 4, base + ";mics=2;total=6;mode=continuous;out=" + dir + "/straight.pt");
  ASSERT_TRUE(r.ok()) << r.Summary();
  r = RunWorker("resume", 4, base + ";mics=2;total=3;mode=continuous;out=" + dir + "/at_save.pt");
  ASSERT_TRUE(r.ok()) << r.Summary();
  r = RunWorker("resume", 4, base + ";mics=2;total=6;mode=save");
  ASSERT_TRUE(r.ok()) << r.Summary();
  auto saved = ckpt::ZeroCheckpoint::Open(dir + "/ck");
  ASSERT_TRUE(saved.ok()) << saved.status();
  EXPECT_EQ((*saved)->layout().world_size, 2);
  std::vector<uint8_t> rng0, rng2;
  ASSERT_TRUE((*saved)->ReadRngState(0, &rng0).ok());
  ASSERT_TRUE((*saved)->ReadRngState(0, &rng2, /*replica=*/1).ok()) << "world rank 2's RNG stream was not saved";
  EXPECT_NE(rng0, rng2) << "ranks 0 and 2 draw different samples: their streams differ";
  EXPECT_FALSE((*saved)->ReadRngState(0, &rng2, /*replica=*/2).ok());

  r = RunWorker("resume", 4, base + ";mics=2;total=6;mode=resume;out=" + dir + "/resumed.pt");
  ASSERT_TRUE(r.ok()) << r.Summary();
  torch::Tensor straight, resumed, at_save;
  torch::load(straight, dir + "/straight.pt");
  torch::load(resumed, dir + "/resumed.pt");
  torch::load(at_save, dir + "/at_save.pt");
  EXPECT_TRUE(torch::equal(straight, resumed)) << "max diff " << (straight - resumed).abs().max().item<double>();
  for (const auto& [world, mics] : std::vector<std::pair<int, int>>{{2, -1}, {3, -1}, {4, 1}, {4, -1}}) {
    const std::string out = absl::StrCat(dir, "/loaded_w", world, "_k", mics, ".pt");
    r = RunWorker("resume", world, absl::StrCat(base, ";mics=", mics, ";total=3;mode=resume;out=", out));
    ASSERT_TRUE(r.ok()) << "world " << world << " mics_shard_size " << mics << ": " << r.Summary();
    torch::Tensor loaded;
    torch::load(loaded, out);
    EXPECT_TRUE(torch::equal(at_save, loaded)) << "world " << world << " mics_shard_size " << mics << ": max diff "
                                               << (at_save - loaded).abs().max().item<double>();
  }
}

// Replicas that diverged (here: a parameter changed on world rank 2 alone,
// which under flat sharding GatheredParameters would say to broadcast) make
// the save fail on every rank, naming the replicas, instead of writing
// replica 0's state as if it were everyone's.
ZT_RANK_WORKER(mics_diverged) {
  ZT_ASSIGN_OR_RETURN(auto pg, Group());
  Config c = TrainConfig(/*stage=*/1, false);
  c.batch.gradient_accumulation_steps = 1;
  c.zero.mics_shard_size = 2;
  Model m = MakeModel(false, /*root_unit=*/false, 1);
  ZT_ASSIGN_OR_RETURN(auto engine, Engine::Create(m.module, c, pg));
  torch::manual_seed(1000 + static_cast<uint64_t>(pg->rank()));
  TrainStep(*engine, m, 0, false);
  ZT_RETURN_IF_ERROR(engine->SaveCheckpoint(ctx.arg, "agreed"));  // identical replicas save
  if (pg->rank() == 2) {
    torch::NoGradGuard no_grad;
    m.module->parameters().front().view(-1)[0].add_(1.0);  // in shard rank 0's slice
  }
  const absl::Status st = engine->SaveCheckpoint(ctx.arg, "diverged");
  if (st.ok()) return absl::InternalError("a save with diverged replicas succeeded");
  // The pair that diverged says why; the others name it.
  const bool pair = pg->rank() % 2 == 0;
  const bool named = pair ? absl::StrContains(st.message(), "hold different master weights") &&
                                absl::StrContains(st.message(), "world ranks 0, 2")
                          : absl::StrContains(st.message(), "failed on ranks 0, 2");
  if (!named) return absl::InternalError(absl::StrCat("refused with: ", st.message()));
  return absl::OkStatus();
}

TEST(MicsCheckpoint, DivergedReplicasAreRefusedAtSave) {
  const std::string dir = TempDir("mics_diverged");
  RankRunResult r = RunWorker("mics_diverged", 4, dir);
  EXPECT_TRUE(r.ok()) << r.Summary();
  EXPECT_FALSE(std::filesystem::exists(dir + "/diverged/" + ckpt::OptimStatesFile(0, ckpt::DType::kFloat32)));
}

INSTANTIATE_TEST_SUITE_P(Stages, MicsCheckpointTest, ::testing::Values(1, 2, 3),
                         [](const auto& info) { return absl::StrCat("stage", info.param); });

// mode=save at world 4: K steps, save, export, then the next step's global
// loss. mode=load at world M: load, export, the next step's global loss.
ZT_RANK_WORKER(reshard) {
  const auto a = Args(ctx.arg);
  const int stage = Int(a, "stage");
  const std::string mode = a.at("mode"), dir = a.at("dir");
  ZT_ASSIGN_OR_RETURN(auto pg, Group());
  Config c = TrainConfig(stage, false);
  c.batch.gradient_accumulation_steps = 1;
  Model m = MakeModel(false, stage == 3, mode == "load" ? 99 : 1);
  ZT_ASSIGN_OR_RETURN(auto engine, Engine::Create(m.module, c, pg));
  torch::manual_seed(1000 + static_cast<uint64_t>(pg->rank()));
  if (mode == "save") {
    for (int s = 0; s < 3; ++s) TrainStep(*engine, m, s, false);
    ZT_RETURN_IF_ERROR(engine->SaveCheckpoint(dir + "/ck", "tag"));
  } else {
    ZT_RETURN_IF_ERROR(engine->LoadCheckpoint(dir + "/ck", "tag").status());
    ZT_RETURN_IF_ERROR(engine->SaveCheckpoint(dir + "/again_" + a.at("world"), "tag"));
  }
  if (pg->rank() == 0) {
    const std::string src = mode == "save" ? dir + "/ck" : dir + "/again_" + a.at("world");
    ZT_ASSIGN_OR_RETURN(auto ck, ckpt::ZeroCheckpoint::Open(src, "tag"));
    ZT_RETURN_IF_ERROR(ckpt::ExportSafetensors(*ck, dir + "/" + a.at("world") + ".safetensors").status());
  }
  // The next step's loss over the same global batch (rows 0..11, split by rank).
  const int64_t per = kGlobalBatch / pg->size();
  torch::Tensor rows = torch::arange(pg->rank() * per, (pg->rank() + 1) * per, torch::kLong);
  torch::Tensor loss;
  {
    torch::NoGradGuard no_grad;
    loss = m.loss(rows).reshape({1}).to(torch::kDouble) / pg->size();
  }
  ZT_RETURN_IF_ERROR(pg->AllReduce(loss, comm::ReduceOp::kSum)->Wait());
  if (pg->rank() == 0) {
    std::ofstream(dir + "/" + a.at("world") + ".loss") << absl::StrFormat("%.17g", loss.item<double>());
  }
  return absl::OkStatus();
}

std::vector<char> ReadAll(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<char>((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

double ReadDouble(const std::string& path) {
  std::ifstream f(path);
  double v = 0;
  f >> v;
  return v;
}

class ReshardTest : public ::testing::TestWithParam<int> {};

TEST_P(ReshardTest, SavedByFourLoadsAtOneTwoAndThree) {
  const int stage = GetParam();
  const std::string dir = TempDir(absl::StrCat("reshard", stage));
  const std::string base = absl::StrCat("stage=", stage, ";dir=", dir);
  RankRunResult r = RunWorker("reshard", 4, base + ";mode=save;world=4");
  ASSERT_TRUE(r.ok()) << r.Summary();
  const std::vector<char> original = ReadAll(dir + "/4.safetensors");
  ASSERT_FALSE(original.empty());
  const double loss4 = ReadDouble(dir + "/4.loss");
  for (int world : {1, 2, 3}) {
    r = RunWorker("reshard", world, absl::StrCat(base, ";mode=load;world=", world));
    ASSERT_TRUE(r.ok()) << "world " << world << ": " << r.Summary();
    // Same weights bit for bit (the export of a re-save holds no world size).
    EXPECT_TRUE(ReadAll(absl::StrCat(dir, "/", world, ".safetensors")) == original) << "world " << world;
    const double loss = ReadDouble(absl::StrCat(dir, "/", world, ".loss"));
    EXPECT_NEAR(loss, loss4, 1e-6 * std::abs(loss4)) << "world " << world;
  }
  // And into another stage: the layout, not the stage, says where things are.
  const int other = stage == 3 ? 1 : 3;
  r = RunWorker("reshard", 2, absl::StrCat("stage=", other, ";dir=", dir, ";mode=load;world=other"));
  ASSERT_TRUE(r.ok()) << "stage " << other << ": " << r.Summary();
  // Another stage groups the parameters differently, so the file lists
  // them in another order: compare tensor by tensor.
  auto want = ckpt::SafetensorsModel::Open(dir + "/4.safetensors");
  auto got = ckpt::SafetensorsModel::Open(dir + "/other.safetensors");
  ASSERT_TRUE(want.ok() && got.ok());
  ASSERT_EQ((*want)->names(), (*got)->names());
  for (const std::string& name : (*want)->names()) {
    auto [wr, wt] = (*want)->Find(name);
    auto [gr, gt] = (*got)->Find(name);
    std::vector<char> a(wt->nbytes), b(gt->nbytes);
    ASSERT_TRUE(wr->Read(*wt, a.data()).ok() && gr->Read(*gt, b.data()).ok());
    EXPECT_TRUE(a == b && wt->shape == gt->shape) << name << " differs when loaded at stage " << other;
  }
  EXPECT_NEAR(ReadDouble(dir + "/other.loss"), loss4, 1e-6 * std::abs(loss4));
}

INSTANTIATE_TEST_SUITE_P(Stages, ReshardTest, ::testing::Values(1, 2, 3),
                         [](const auto& info) { return absl::StrCat("stage", info.param); });

// `zt ckpt`: inspect (with --verify), consolidate and reshard a checkpoint
// the engine saved; the resharded checkpoint exports the same bytes.
using CommandResult = zt::testing::ZtRun;

CommandResult Zt(const std::string& args) { return zt::testing::RunZt(args); }

TEST(CheckpointCli, InspectConsolidateReshard) {
  const std::string dir = TempDir("cli");
  RankRunResult run = RunWorker("reshard", 2, absl::StrCat("stage=2;dir=", dir, ";mode=save;world=2"));
  ASSERT_TRUE(run.ok()) << run.Summary();
  const std::vector<char> exported = ReadAll(dir + "/2.safetensors");

  CommandResult r = Zt(absl::StrCat("ckpt inspect ", dir, "/ck --verify"));
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(absl::StrContains(r.output, "ZeRO stage 2, 2 ranks")) << r.output;
  EXPECT_TRUE(absl::StrContains(r.output, "every record of every file matches")) << r.output;

  r = Zt(absl::StrCat("ckpt consolidate ", dir, "/ck ", dir, "/cli.safetensors"));
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(ReadAll(dir + "/cli.safetensors") == exported);

  r = Zt(absl::StrCat("ckpt reshard ", dir, "/ck ", dir, "/r3 --world-size 3"));
  ASSERT_EQ(r.code, 0) << r.output;
  r = Zt(absl::StrCat("ckpt inspect ", dir, "/r3 --verify"));
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(absl::StrContains(r.output, "ZeRO stage 2, 3 ranks")) << r.output;
  r = Zt(absl::StrCat("ckpt consolidate ", dir, "/r3 ", dir, "/r3.safetensors"));
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(ReadAll(dir + "/r3.safetensors") == exported);

  // The config was built in code (no JSON text): the checkpoint carries its
  // resolved JSON, which conversion to DeepSpeed's files reads (the
  // optimizer's hyperparameters). This model has a frozen parameter
  // ('adapter.proj.weight'), which DeepSpeed's stage-2 files hold whole in
  // the module and in frozen_param_shapes/fragments: the copy consolidates
  // to the same file. (zt_bench_checkpoint converts a whole engine checkpoint.)
  r = Zt(absl::StrCat("ckpt convert ", dir, "/ck ", dir, "/ds --to deepspeed"));
  EXPECT_EQ(r.code, 0) << r.output;
  r = Zt(absl::StrCat("ckpt consolidate ", dir, "/ds ", dir, "/ds.safetensors"));
  EXPECT_EQ(r.code, 0) << r.output;
  {
    // The same tensors (DeepSpeed's files list them in model order, the
    // engine's export in its groups' order).
    auto want = ckpt::SafetensorsReader::Open(dir + "/2.safetensors");
    auto got = ckpt::SafetensorsReader::Open(dir + "/ds.safetensors");
    ASSERT_TRUE(want.ok() && got.ok());
    EXPECT_EQ((*want)->tensors().size(), (*got)->tensors().size());
    for (const auto& t : (*want)->tensors()) {
      const auto* u = (*got)->Find(t.name);
      ASSERT_NE(u, nullptr) << t.name;
      ASSERT_EQ(u->nbytes, t.nbytes) << t.name;
      std::string x(t.nbytes, '\0'), y(t.nbytes, '\0');
      ASSERT_TRUE((*want)->Read(t, x.data()).ok());
      ASSERT_TRUE((*got)->Read(*u, y.data()).ok());
      EXPECT_TRUE(x == y) << t.name;
    }
  }
  {
    auto ms = ckpt::PtReader::Open(dir + "/ds/tag/mp_rank_00_model_states.pt");
    ASSERT_TRUE(ms.ok()) << ms.status();
    const ckpt::Value* frozen = (*ms)->root().AsDict().Find("frozen_param_shapes");
    ASSERT_TRUE(frozen != nullptr && frozen->is_dict());
    EXPECT_NE(frozen->AsDict().Find("adapter.proj.weight"), nullptr);
  }

  // Sharded export: a directory with shards and an index.
  r = Zt(absl::StrCat("ckpt consolidate ", dir, "/ck ", dir, "/sharded --max-shard-size 4KB --dtype bf16"));
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(absl::StrContains(r.output, "model.safetensors.index.json")) << r.output;
  auto model = ckpt::SafetensorsModel::Open(dir + "/sharded");
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_GT((*model)->names().size(), 10u);
  // Into the same folder as one file: the shards and index go, so a loader
  // cannot pick up the old set; and back to shards: the single file goes.
  r = Zt(absl::StrCat("ckpt consolidate ", dir, "/ck ", dir, "/sharded"));
  EXPECT_EQ(r.code, 0) << r.output;
  std::vector<std::string> left;
  for (const auto& e : std::filesystem::directory_iterator(dir + "/sharded")) left.push_back(e.path().filename());
  EXPECT_EQ(left, std::vector<std::string>{"model.safetensors"});
  r = Zt(absl::StrCat("ckpt consolidate ", dir, "/ck ", dir, "/sharded --max-shard-size 4KB"));
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_FALSE(std::filesystem::exists(dir + "/sharded/model.safetensors"));
  EXPECT_TRUE(std::filesystem::exists(dir + "/sharded/model.safetensors.index.json"));

  // Bad input: usage errors exit 2, unreadable checkpoints 1, naming the path.
  EXPECT_EQ(Zt("ckpt consolidate").code, 2);
  EXPECT_EQ(Zt(absl::StrCat("ckpt reshard ", dir, "/ck ", dir, "/x --world-size 0")).code, 2);
  EXPECT_EQ(Zt(absl::StrCat("ckpt consolidate ", dir, "/ck ", dir, "/x --dtype int8")).code, 2);
  r = Zt(absl::StrCat("ckpt inspect ", dir, "/missing"));
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_TRUE(absl::StrContains(r.output, dir + "/missing")) << r.output;
  const std::string victim = dir + "/r3/tag/" + ckpt::OptimStatesFile(1, ckpt::DType::kFloat32);
  {
    std::fstream f(victim, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(200);
    f.write("\xff\xff\xff\xff", 4);
  }
  r = Zt(absl::StrCat("ckpt inspect ", dir, "/r3 --verify"));
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_TRUE(absl::StrContains(r.output, victim)) << r.output;
}

// Fine-tuning's start: weights exported from one run load into another
// model — through the engine, straight into stage-3 shards, or into a plain
// module before any engine — and a file that lacks weights is refused.
ZT_RANK_WORKER(import) {
  const auto a = Args(ctx.arg);
  const std::string dir = a.at("dir");
  ZT_ASSIGN_OR_RETURN(auto pg, Group());
  Model trained = MakeModel(false, true, 1);
  ZT_ASSIGN_OR_RETURN(auto engine, Engine::Create(trained.module, TrainConfig(2, false), pg));
  torch::manual_seed(5);
  for (int s = 0; s < 2; ++s) TrainStep(*engine, trained, s, false);
  ZT_RETURN_IF_ERROR(engine->SaveCheckpoint(dir + "/ck"));
  if (pg->rank() == 0) {
    ZT_ASSIGN_OR_RETURN(auto ck, ckpt::ZeroCheckpoint::Open(dir + "/ck"));
    ZT_RETURN_IF_ERROR(ckpt::ExportSafetensors(*ck, dir + "/weights.safetensors").status());
    ZT_ASSIGN_OR_RETURN(auto partial,
                        ckpt::SafetensorsWriter::Create(dir + "/partial.safetensors",
                                                        {{"wte.weight", ckpt::DType::kFloat32, {29, 12}}}));
    std::vector<float> zeros(29 * 12);
    ZT_RETURN_IF_ERROR(partial->Write(zeros.data(), zeros.size() * 4));
    ZT_RETURN_IF_ERROR(partial->Finish());
    // The same weights with wte.weight in another shape of the same size
    // ([12, 29], a transposed embedding) or as int32: each would load the
    // right number of elements into the wrong places or as garbage.
    ZT_ASSIGN_OR_RETURN(auto good, ckpt::SafetensorsReader::Open(dir + "/weights.safetensors"));
    for (const auto& [file, dtype, shape] : std::vector<std::tuple<std::string, ckpt::DType, std::vector<int64_t>>>{
             {"transposed", ckpt::DType::kFloat32, {12, 29}}, {"int32", ckpt::DType::kInt32, {29, 12}}}) {
      std::vector<ckpt::SafetensorsEntry> entries;
      for (const auto& t : good->tensors()) {
        entries.push_back(t.name == "wte.weight" ? ckpt::SafetensorsEntry{t.name, dtype, shape}
                                                 : ckpt::SafetensorsEntry{t.name, t.dtype, t.shape});
      }
      ZT_ASSIGN_OR_RETURN(auto w, ckpt::SafetensorsWriter::Create(dir + "/" + file + ".safetensors", entries));
      for (const auto& t : good->tensors()) {
        std::string bytes(t.nbytes, '\0');
        ZT_RETURN_IF_ERROR(good->Read(t, bytes.data()));
        ZT_RETURN_IF_ERROR(w->Write(bytes.data(), bytes.size()));
      }
      ZT_RETURN_IF_ERROR(w->Finish());
    }
  }
  ZT_RETURN_IF_ERROR(pg->Barrier()->Wait());
  const torch::Tensor want = FullParams(*engine, *trained.module);

  Model fresh = MakeModel(false, true, 55);
  ZT_ASSIGN_OR_RETURN(auto stage3, Engine::Create(fresh.module, TrainConfig(3, false), pg));
  ZT_RETURN_IF_ERROR(stage3->LoadWeights(dir + "/weights.safetensors"));
  if (!torch::equal(FullParams(*stage3, *fresh.module), want)) return absl::InternalError("stage-3 import differs");
  absl::Status partial = stage3->LoadWeights(dir + "/partial.safetensors");
  if (partial.ok() || !absl::StrContains(partial.message(), "h0.c_fc.weight")) {
    return absl::InternalError(
        absl::StrCat("a file lacking weights should be refused naming them: ", partial.ToString()));
  }
  for (const auto& [file, expect] : std::vector<std::pair<std::string, std::string>>{
           {"transposed", "'wte.weight' has shape [12, 29], the model [29, 12]"},
           {"int32", "'wte.weight' is int32 where the model holds Float"}}) {
    const absl::Status st = stage3->LoadWeights(dir + "/" + file + ".safetensors");
    if (st.ok() || !absl::StrContains(st.message(), expect)) {
      return absl::InternalError(
          absl::StrCat(file, ": expected a refusal naming \"", expect, "\", got ", st.ToString()));
    }
  }
  if (!torch::equal(FullParams(*stage3, *fresh.module), want)) {
    return absl::InternalError("a refused load changed the weights");
  }

  Model plain = MakeModel(false, false, 66);
  ZT_RETURN_IF_ERROR(LoadSafetensors(*plain.module, dir + "/weights.safetensors"));
  std::vector<torch::Tensor> flat;
  for (const auto& p : plain.module->parameters()) flat.push_back(p.detach().flatten());
  if (!torch::equal(torch::cat(flat), want)) return absl::InternalError("module import differs");
  return absl::OkStatus();
}

TEST(CheckpointImport, ExportedWeightsLoadIntoShardsAndModules) {
  RankRunResult r = RunWorker("import", 2, "dir=" + TempDir("import"));
  EXPECT_TRUE(r.ok()) << r.Summary();
}

// Engine::ExportWeights writes exactly what `zt ckpt consolidate` writes
// from a checkpoint saved at the same step (every tensor, bit for bit), at
// every stage, and leaves no temporary folder behind.
ZT_RANK_WORKER(export_weights) {
  const auto a = Args(ctx.arg);
  const std::string dir = a.at("dir");
  const int stage = std::stoi(a.at("stage"));
  ZT_ASSIGN_OR_RETURN(auto pg, Group());
  Model model = MakeModel(false, stage == 3, 1);
  ZT_ASSIGN_OR_RETURN(auto engine, Engine::Create(model.module, TrainConfig(stage, false), pg));
  torch::manual_seed(5);
  for (int s = 0; s < 2; ++s) TrainStep(*engine, model, s, false);
  ZT_RETURN_IF_ERROR(engine->ExportWeights(dir + "/out/engine.safetensors"));
  ZT_RETURN_IF_ERROR(engine->SaveCheckpoint(dir + "/ck"));
  if (pg->rank() != 0) return absl::OkStatus();
  ZT_ASSIGN_OR_RETURN(auto ck, ckpt::ZeroCheckpoint::Open(dir + "/ck"));
  ZT_RETURN_IF_ERROR(ckpt::ExportSafetensors(*ck, dir + "/consolidated.safetensors").status());
  ZT_ASSIGN_OR_RETURN(auto got, ckpt::SafetensorsReader::Open(dir + "/out/engine.safetensors"));
  ZT_ASSIGN_OR_RETURN(auto want, ckpt::SafetensorsReader::Open(dir + "/consolidated.safetensors"));
  if (got->tensors().size() != want->tensors().size() || got->tensors().empty()) {
    return absl::InternalError(
        absl::StrCat(got->tensors().size(), " tensors exported, ", want->tensors().size(), " consolidated"));
  }
  for (const ckpt::SafetensorsReader::Tensor& w : want->tensors()) {
    const ckpt::SafetensorsReader::Tensor* g = got->Find(w.name);
    if (g == nullptr || g->dtype != w.dtype || g->shape != w.shape) {
      return absl::InternalError(absl::StrCat("tensor '", w.name, "' missing or of another type"));
    }
    std::string gb(g->nbytes, '\0'), wb(w.nbytes, '\0');
    ZT_RETURN_IF_ERROR(got->Read(*g, gb.data()));
    ZT_RETURN_IF_ERROR(want->Read(w, wb.data()));
    if (gb != wb) return absl::InternalError(absl::StrCat("tensor '", w.name, "' differs"));
  }
  for (const auto& entry : std::filesystem::directory_iterator(dir + "/out")) {
    if (entry.path().filename() != "engine.safetensors") {
      return absl::InternalError(absl::StrCat("left behind: ", entry.path().string()));
    }
  }
  return absl::OkStatus();
}

TEST(CheckpointExport, EngineExportEqualsConsolidationAtEveryStage) {
  for (int stage = 0; stage <= 3; ++stage) {
    RankRunResult r = RunWorker("export_weights", 2,
                                absl::StrCat("dir=", TempDir("export") + std::to_string(stage), ";stage=", stage));
    EXPECT_TRUE(r.ok()) << "stage " << stage << ": " << r.Summary();
  }
}

// A rank dies (or, with `stop`, freezes: SIGSTOP) as a save begins: the
// save fails on the others and `latest` still names the previous checkpoint,
// which loads. `tags` (comma-separated) are saved one per training step; the
// `victim` rank (default 1) dies instead of saving the last. A frozen rank 0
// is the store's host as well: the survivors must still fail within the
// 3 s collective timeout plus the diagnosis, and shut down, not wait for it.
ZT_RANK_WORKER(crash_during_save) {
  const auto a = Args(ctx.arg);
  const std::string dir = a.at("dir");
  const std::vector<std::string> tags = absl::StrSplit(a.at("tags"), ',');
  const int victim = a.count("victim") ? Int(a, "victim") : 1;
  const bool stop = a.count("stop") > 0;
  ZT_ASSIGN_OR_RETURN(auto pg, Group(/*timeout_s=*/stop ? 3 : 10));
  Model m = MakeModel(false, true, 1);
  ZT_ASSIGN_OR_RETURN(auto engine, Engine::Create(m.module, TrainConfig(3, false), pg));
  for (size_t i = 0; i + 1 < tags.size(); ++i) {
    TrainStep(*engine, m, static_cast<int>(i), false);
    ZT_RETURN_IF_ERROR(engine->SaveCheckpoint(dir, tags[i]));
  }
  TrainStep(*engine, m, static_cast<int>(tags.size()) - 1, false);
  const std::string pid_file = dir + ".victim_pid";
  if (pg->rank() == victim) {
    if (!stop) std::_Exit(3);  // dies instead of saving
    std::ofstream(pid_file) << getpid() << "\n";
    ::raise(SIGSTOP);  // until the last survivor kills it
    std::this_thread::sleep_for(std::chrono::seconds(60));
    return absl::InternalError("the stopped rank went on");
  }
  const auto start = std::chrono::steady_clock::now();
  absl::Status st = engine->SaveCheckpoint(dir, tags.back());
  const auto failed = std::chrono::steady_clock::now();
  engine.reset();
  pg.reset();
  const auto done = std::chrono::steady_clock::now();
  auto seconds = [](auto d) { return std::chrono::duration<double>(d).count(); };
  std::printf("rank %d: save failed after %.2f s, shut down in %.2f s: %s\n", ctx.rank, seconds(failed - start),
              seconds(done - failed), std::string(st.message()).c_str());
  std::fflush(stdout);
  if (stop) {
    std::ofstream(absl::StrCat(dir, ".done", ctx.rank)) << "1\n";
    bool all_done = true;
    for (int r = 0; r < ctx.world_size; ++r) {
      if (r != victim && access(absl::StrCat(dir, ".done", r).c_str(), F_OK) != 0) all_done = false;
    }
    int pid = 0;
    if (all_done && (std::ifstream(pid_file) >> pid) && pid > 0) ::kill(pid, SIGKILL);
  }
  if (st.ok()) return absl::InternalError("a save with a dead rank succeeded");
  if (stop && (seconds(failed - start) > 15.0 || seconds(done - failed) > 8.0)) {
    return absl::InternalError(
        absl::StrFormat("the save failed after %.2f s and the shutdown took %.2f s; expected "
                        "within the 3 s timeout plus the diagnosis (15 s) and 8 s",
                        seconds(failed - start), seconds(done - failed)));
  }
  return absl::OkStatus();
}

ZT_RANK_WORKER(load_after_crash) {
  const auto a = Args(ctx.arg);
  const std::string dir = a.at("dir");
  ZT_ASSIGN_OR_RETURN(auto pg, Group());
  Model m = MakeModel(false, true, 5);
  ZT_ASSIGN_OR_RETURN(auto engine, Engine::Create(m.module, TrainConfig(3, false), pg));
  auto second = engine->LoadCheckpoint(dir, "second");
  if (second.ok()) return absl::InternalError("the half-written checkpoint loaded");
  ZT_RETURN_IF_ERROR(engine->LoadCheckpoint(dir).status());
  if (engine->global_steps() != 1) return absl::InternalError("latest did not load the first checkpoint");
  return absl::OkStatus();
}

// The same tag saved again (a second run into the same save dir) while a
// rank dies (crash_during_save with tags first,first,first): the tag must
// still hold the last complete save, whole.
ZT_RANK_WORKER(load_replaced) {
  const auto a = Args(ctx.arg);
  ZT_ASSIGN_OR_RETURN(auto pg, Group());
  Model m = MakeModel(false, true, 5);
  ZT_ASSIGN_OR_RETURN(auto engine, Engine::Create(m.module, TrainConfig(3, false), pg));
  ZT_RETURN_IF_ERROR(engine->LoadCheckpoint(a.at("dir")).status());
  if (engine->global_steps() != 2) {
    return absl::InternalError(
        absl::StrCat("expected the second complete save (step 2), got step ", engine->global_steps()));
  }
  return absl::OkStatus();
}

ZT_RANK_WORKER(save_again) {
  const auto a = Args(ctx.arg);
  ZT_ASSIGN_OR_RETURN(auto pg, Group());
  Model m = MakeModel(false, true, 5);
  ZT_ASSIGN_OR_RETURN(auto engine, Engine::Create(m.module, TrainConfig(3, false), pg));
  ZT_RETURN_IF_ERROR(engine->LoadCheckpoint(a.at("dir")).status());
  return engine->SaveCheckpoint(a.at("dir"), "first");
}

TEST(CheckpointFaults, RankDyingWhileATagIsSavedAgainLeavesTheTagWhole) {
  const std::string dir = TempDir("replace") + "/ck";
  RankRunResult r = RunWorker("crash_during_save", 2, "dir=" + dir + ";tags=first,first,first", /*may_fail=*/{1});
  ASSERT_TRUE(r.ok()) << r.Summary();
  r = RunWorker("load_replaced", 2, "dir=" + dir);
  EXPECT_TRUE(r.ok()) << r.Summary();
  // Only the tag and `latest` remain: no staging or replaced folders.
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"first", "latest"}));

  // What a save killed outright (kill -9: no rank left to clean up) leaves
  // is removed, with a warning, by the next complete save into the dir;
  // names that only look alike stay.
  for (const std::string left : {"first.saving.1a2b3c", "second.saving.ff", "first.replaced.9"}) {
    std::filesystem::create_directories(dir + "/" + left);
    std::ofstream(dir + "/" + left + "/zero_pp_rank_0_mp_rank_00_optim_states.pt.tmp.123") << "partial";
  }
  std::filesystem::create_directories(dir + "/notes.saving.txt");
  r = RunWorker("save_again", 2, "dir=" + dir);
  ASSERT_TRUE(r.ok()) << r.Summary();
  EXPECT_NE(r.outputs[0].find("left by an interrupted save"), std::string::npos) << r.Summary();
  names.clear();
  for (const auto& e : std::filesystem::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"first", "latest", "notes.saving.txt"}));
}

TEST(CheckpointFaults, RankDyingDuringSaveLeavesThePreviousCheckpoint) {
  const std::string dir = TempDir("crash") + "/ck";
  RankRunResult r = RunWorker("crash_during_save", 2, "dir=" + dir + ";tags=first,second", /*may_fail=*/{1});
  ASSERT_TRUE(r.ok()) << r.Summary();
  EXPECT_EQ(ReadAll(dir + "/latest"), std::vector<char>({'f', 'i', 'r', 's', 't', '\n'}));
  r = RunWorker("load_after_crash", 2, "dir=" + dir);
  EXPECT_TRUE(r.ok()) << r.Summary();
}

// The store's host (rank 0) or the last rank freezes as a save begins, at
// worlds 2 and 3: the survivors fail and exit on time, and the previous
// checkpoint stays `latest` and loads.
class FrozenRankDuringSave : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(FrozenRankDuringSave, SurvivorsFailOnTimeAndThePreviousCheckpointLoads) {
  const auto [world, victim] = GetParam();
  const std::string dir = TempDir(absl::StrCat("frozen", world, victim)) + "/ck";
  RankRunResult r = RunWorker("crash_during_save", world,
                              absl::StrCat("dir=", dir, ";tags=first,second;stop=1;victim=", victim), {victim});
  if (std::getenv("ZT_TEST_VERBOSE") != nullptr) {  // the measured times
    for (int rank = 0; rank < world; ++rank) std::printf("rank %d: %s", rank, r.outputs[rank].c_str());
  }
  ASSERT_TRUE(r.ok()) << r.Summary();
  for (int rank = 0; rank < world; ++rank) EXPECT_FALSE(r.timed_out[rank]) << r.Summary();
  EXPECT_EQ(ReadAll(dir + "/latest"), std::vector<char>({'f', 'i', 'r', 's', 't', '\n'}));
  r = RunWorker("load_after_crash", world, "dir=" + dir);
  EXPECT_TRUE(r.ok()) << r.Summary();
}

INSTANTIATE_TEST_SUITE_P(WorldsAndVictims, FrozenRankDuringSave,
                         ::testing::Values(std::make_tuple(2, 0), std::make_tuple(2, 1), std::make_tuple(3, 0),
                                           std::make_tuple(3, 2)),
                         [](const auto& info) {
                           return absl::StrCat("world", std::get<0>(info.param), "_stop_rank", std::get<1>(info.param));
                         });

// Damaged files: a flipped byte in a tensor, a truncated file. Each is a
// clear error naming the file, and the engine's parameters stay as they were.
ZT_RANK_WORKER(corruption) {
  const auto a = Args(ctx.arg);
  const std::string dir = a.at("dir");
  ZT_ASSIGN_OR_RETURN(auto pg, Group());
  Model m = MakeModel(false, true, 1);
  ZT_ASSIGN_OR_RETURN(auto engine, Engine::Create(m.module, TrainConfig(2, false), pg));
  TrainStep(*engine, m, 0, false);
  ZT_RETURN_IF_ERROR(engine->SaveCheckpoint(dir));
  const std::string optim = dir + "/global_step1/" + ckpt::OptimStatesFile(0, ckpt::DType::kFloat32);
  TrainStep(*engine, m, 1, false);
  const torch::Tensor before = FullParams(*engine, *m.module);

  // Flip one byte inside rank 0's fp32 master.
  ZT_ASSIGN_OR_RETURN(auto reader, ckpt::PtReader::Open(optim));
  const ckpt::Value* groups =
      reader->root().AsDict().Find("optimizer_state_dict")->AsDict().Find("single_partition_of_fp32_groups");
  const uint64_t offset = groups->AsList()[0].AsTensor().file_offset + 8;
  reader.reset();
  if (pg->rank() == 0) {  // once: two ranks flipping the same byte would undo it
    std::fstream f(optim, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(static_cast<std::streamoff>(offset));
    char c = 0;
    f.read(&c, 1);
    c = static_cast<char>(c ^ 0x5a);
    f.seekp(static_cast<std::streamoff>(offset));
    f.write(&c, 1);
  }
  ZT_RETURN_IF_ERROR(pg->Barrier()->Wait());
  auto corrupted = engine->LoadCheckpoint(dir);
  if (corrupted.ok()) return absl::InternalError("a corrupted checkpoint loaded");
  const std::string msg(corrupted.status().message());
  std::printf("corrupted: %s\n", msg.c_str());
  if (pg->rank() == 0 && (!absl::StrContains(msg, "CRC") || !absl::StrContains(msg, "optim_states.pt"))) {
    return absl::InternalError(absl::StrCat("the error should name the file and the CRC: ", msg));
  }
  if (!torch::equal(before, FullParams(*engine, *m.module)))
    return absl::InternalError("a failed load changed weights");

  // Truncate it.
  if (pg->rank() == 0) ZT_CHECK(::truncate(optim.c_str(), static_cast<off_t>(offset)) == 0);
  ZT_RETURN_IF_ERROR(pg->Barrier()->Wait());
  auto truncated = engine->LoadCheckpoint(dir);
  if (truncated.ok()) return absl::InternalError("a truncated checkpoint loaded");
  std::printf("truncated: %s\n", std::string(truncated.status().message()).c_str());
  if (!torch::equal(before, FullParams(*engine, *m.module)))
    return absl::InternalError("a failed load changed weights");
  return absl::OkStatus();
}

TEST(CheckpointFaults, CorruptedAndTruncatedFilesAreClearErrors) {
  RankRunResult r = RunWorker("corruption", 2, "dir=" + TempDir("corrupt") + "/ck");
  EXPECT_TRUE(r.ok()) << r.Summary();
}

// Files of different saves in one folder: each file's CRCs are fine, so only
// the save identity every file carries can tell. Rank 0 and 1's optim files
// swapped; rank 1's files replaced by those of an older step of the same run;
// rank 1's files from another run. Each must be refused at load with the
// file named, never trained on. Also: temporaries a killed save left are
// gone after the next save and load.
ZT_RANK_WORKER(mixed_saves) {
  const auto a = Args(ctx.arg);
  const std::string dir = a.at("dir");
  const int stage = Int(a, "stage");
  ZT_ASSIGN_OR_RETURN(auto pg, Group());
  Model m = MakeModel(false, true, 1);
  ZT_ASSIGN_OR_RETURN(auto engine, Engine::Create(m.module, TrainConfig(stage, false), pg));
  TrainStep(*engine, m, 0, false);
  ZT_RETURN_IF_ERROR(engine->SaveCheckpoint(dir + "/a", "one"));
  TrainStep(*engine, m, 1, false);
  ZT_RETURN_IF_ERROR(engine->SaveCheckpoint(dir + "/a", "two"));
  ZT_RETURN_IF_ERROR(engine->SaveCheckpoint(dir + "/b", "two"));  // "another run": same step, another save
  const std::string o0 = ckpt::OptimStatesFile(0, ckpt::DType::kFloat32);
  const std::string o1 = ckpt::OptimStatesFile(1, ckpt::DType::kFloat32);
  const std::string m1 = ckpt::ModelStatesFile(stage, 1);
  auto expect_refused = [&](const std::string& what) -> absl::Status {
    ZT_RETURN_IF_ERROR(pg->Barrier()->Wait());
    auto loaded = engine->LoadCheckpoint(dir + "/a", "two");
    if (loaded.ok()) return absl::InternalError(absl::StrCat(what, ": the mixed checkpoint loaded"));
    const std::string msg(loaded.status().message());
    std::printf("%s: %s\n", what.c_str(), msg.c_str());
    if (!absl::StrContains(msg, "optim_states.pt") && !absl::StrContains(msg, "model_states.pt")) {
      return absl::InternalError(absl::StrCat(what, ": the error should name the file: ", msg));
    }
    return absl::OkStatus();
  };
  const std::string two = dir + "/a/two/";
  auto cp = [](const std::string& from, const std::string& to) {
    std::filesystem::copy_file(from, to, std::filesystem::copy_options::overwrite_existing);
  };
  if (pg->rank() == 0) {
    cp(two + o0, dir + "/o0.bak");
    cp(two + o1, dir + "/o1.bak");
    if (stage == 3) cp(two + m1, dir + "/m1.bak");
    // Swapped optim files.
    cp(dir + "/o1.bak", two + o0);
    cp(dir + "/o0.bak", two + o1);
  }
  ZT_RETURN_IF_ERROR(expect_refused("swapped optim files"));
  if (pg->rank() == 0) {
    cp(dir + "/o0.bak", two + o0);
    cp(dir + "/a/one/" + o1, two + o1);  // rank 1 from an older step
    if (stage == 3) cp(dir + "/a/one/" + m1, two + m1);
  }
  ZT_RETURN_IF_ERROR(expect_refused("rank 1 from an older step"));
  if (pg->rank() == 0) {
    cp(dir + "/b/two/" + o1, two + o1);  // rank 1 from another run
    if (stage == 3) cp(dir + "/b/two/" + m1, two + m1);
  }
  ZT_RETURN_IF_ERROR(expect_refused("rank 1 from another save"));
  if (pg->rank() == 0) {
    cp(dir + "/o1.bak", two + o1);
    if (stage == 3) cp(dir + "/m1.bak", two + m1);
    // What a save killed mid-write leaves: a temporary of a dead process.
    std::ofstream(two + o1 + ".tmp.999999999") << "partial";
    std::ofstream(dir + "/a/one/" + o0 + ".tmp.999999999") << "partial";
  }
  ZT_RETURN_IF_ERROR(pg->Barrier()->Wait());
  ZT_RETURN_IF_ERROR(engine->LoadCheckpoint(dir + "/a", "two").status());  // whole again: loads
  ZT_RETURN_IF_ERROR(engine->SaveCheckpoint(dir + "/a", "one"));
  ZT_RETURN_IF_ERROR(pg->Barrier()->Wait());
  for (const std::string& tmp : {two + o1 + ".tmp.999999999", dir + "/a/one/" + o0 + ".tmp.999999999"}) {
    if (std::filesystem::exists(tmp)) return absl::InternalError(absl::StrCat(tmp, " was left behind"));
  }
  return absl::OkStatus();
}

TEST(CheckpointFaults, FilesOfDifferentSavesAreRefused) {
  for (int stage : {2, 3}) {
    SCOPED_TRACE(stage);
    RankRunResult r = RunWorker("mixed_saves", 2, absl::StrCat("stage=", stage, ";dir=", TempDir("mixed")));
    ASSERT_TRUE(r.ok()) << r.Summary();
    EXPECT_TRUE(absl::StrContains(r.outputs[0], "is named for rank")) << r.outputs[0];
    EXPECT_TRUE(absl::StrContains(r.outputs[0], "belongs to another save")) << r.outputs[0];
  }
}

// In-memory checkpoint copies (engine/neighbour_copies.h) on two nodes of
// one rank each. After a save, each node holds its own rank's files and the
// other's. Then, with the save directory's files of the tag removed:
//  * node 1 replaced (its memory gone): the resume fetches node 1's files
//    back from node 0 and ends bitwise where the straight run ends;
//  * both copies gone: the same resume from the disk;
//  * a damaged copy: refused by its CRC, the disk is read instead;
//  * neither: a named error, nothing loaded.
TEST(MemoryCopies, AReplacedNodeResumesFromItsNeighboursCopyWithoutTheDisk) {
  namespace fs = std::filesystem;
  const std::string dir = TempDir("memory_copies");
  const std::string copies = dir + "/shm", saved = dir + "/ckpt", tag = "global_step3";
  const std::string base = absl::StrCat("stage=3;fp16=0;k=3;total=6;dir=", saved, ";copies=", copies);
  RankRunResult r = RunWorker("resume", 2, base + ";mode=continuous;out=" + dir + "/straight.pt");
  ASSERT_TRUE(r.ok()) << r.Summary();
  r = RunWorker("resume", 2, base + ";mode=save");
  ASSERT_TRUE(r.ok()) << r.Summary();
  torch::Tensor straight;
  torch::load(straight, dir + "/straight.pt");
  auto resume_equals_straight = [&](const std::string& name) {
    RankRunResult run = RunWorker("resume", 2, base + ";mode=resume;out=" + dir + "/" + name);
    if (!run.ok()) return ::testing::AssertionFailure() << run.Summary();
    torch::Tensor resumed;
    torch::load(resumed, dir + "/" + name);
    if (!torch::equal(straight, resumed)) return ::testing::AssertionFailure() << name << " differs";
    return ::testing::AssertionSuccess() << run.outputs[0] << run.outputs[1];
  };
  // Each node holds its rank's two files (model and optimizer states) and the other rank's.
  for (int node : {0, 1}) {
    std::optional<ckpt::HeldCopy> held = ckpt::MemoryCopies(absl::StrCat(copies, "/node", node), node).Held();
    ASSERT_TRUE(held.has_value()) << node;
    EXPECT_EQ(held->tag, tag);
    EXPECT_EQ(held->neighbour, 1 - node);
    ASSERT_EQ(held->own.size(), 2u);
    ASSERT_EQ(held->neighbour_files.size(), 2u);
    for (const auto* names : {&held->own, &held->neighbour_files}) {
      for (const std::string& f : *names) {
        EXPECT_EQ(ReadAll(held->folder + "/" + f), ReadAll(saved + "/" + tag + "/" + f)) << f;
      }
    }
  }
  const std::string backup = dir + "/backup";
  fs::copy(saved + "/" + tag, backup, fs::copy_options::recursive);
  auto remove_disk_files = [&] {
    for (const auto& e : fs::directory_iterator(saved + "/" + tag)) fs::remove_all(e.path());
  };

  remove_disk_files();
  fs::remove_all(copies + "/node1");
  ::testing::AssertionResult first = resume_equals_straight("from_memory.pt");
  ASSERT_TRUE(first) << first.message();
  EXPECT_TRUE(absl::StrContains(first.message(),
                                "4 of 4 files read from memory copies (4 fetched from the "
                                "neighbouring node), 0 from disk"))
      << first.message();
  std::optional<ckpt::HeldCopy> back = ckpt::MemoryCopies(copies + "/node1", 1).Held();
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->own.size(), 2u);
  EXPECT_EQ(back->neighbour_files.size(), 2u);

  fs::remove_all(copies);
  for (const auto& e : fs::directory_iterator(backup))
    fs::copy(e.path(), saved + "/" + tag + "/" + e.path().filename().string());
  ::testing::AssertionResult from_disk = resume_equals_straight("from_disk.pt");
  ASSERT_TRUE(from_disk) << from_disk.message();
  EXPECT_TRUE(absl::StrContains(from_disk.message(), "0 of 4 files read from memory copies, 4 from disk"))
      << from_disk.message();

  // A copy of rank 0's optimizer states with bytes changed across it: its
  // checks (CRCs, the zip structure) refuse it and the whole read goes to the disk.
  {
    const ckpt::MemoryCopies m(copies + "/node0", 0);
    ASSERT_TRUE(m.Begin().ok());
    ckpt::HeldCopy h;
    h.dir = ckpt::CanonicalSaveDir(saved);
    h.tag = tag;
    h.world_size = 2;
    h.local_world_size = 1;
    for (const auto& e : fs::directory_iterator(backup)) {
      const std::string name = e.path().filename().string();
      std::string bytes = ReadFileBytes(e.path().string());
      if (absl::StrContains(name, "optim_states") && absl::StrContains(name, "rank_0_")) {
        // Bytes across the middle half (a single byte may fall in padding no load reads).
        for (size_t i = bytes.size() / 4; i < bytes.size() * 3 / 4; i += 512) bytes[i] ^= 0x5a;
      }
      WriteFileBytes(m.Incoming(name), bytes);
      h.own.push_back(name);
    }
    ASSERT_TRUE(m.Promote(h).ok());
  }
  ::testing::AssertionResult damaged = resume_equals_straight("damaged_copy.pt");
  ASSERT_TRUE(damaged) << damaged.message();
  EXPECT_TRUE(absl::StrContains(damaged.message(), "loading from memory copies failed")) << damaged.message();
  // The error names the damaged copy.
  EXPECT_TRUE(absl::StrContains(damaged.message(), "shm/node0/rank0/current/zero_pp_rank_0_mp_rank_00_optim_states.pt"))
      << damaged.message();

  // Neither copy: the resume fails and says which file is missing.
  fs::remove_all(copies);
  remove_disk_files();
  r = RunWorker("resume", 2, base + ";mode=resume;out=" + dir + "/none.pt");
  EXPECT_FALSE(r.ok());
  EXPECT_TRUE(absl::StrContains(r.Summary(), "has no model states file")) << r.Summary();
  fs::remove_all(dir);
}

// The same exchange on more nodes and with several ranks per node: 3 nodes
// of 1 rank (a ring: each rank sends to the next node and receives from the
// previous one, over two different pair groups) and 2 nodes of 2 ranks.
// The second node's memory is wiped (a replaced node): its ranks fetch
// their files back and the resume ends bitwise where the straight run
// does. On 2 nodes the fetched files are all a rank needs, so the disk's
// are removed too; on 3 a rank still reads the third node's files there.
TEST(MemoryCopies, ReplacedNodesOfLargerWorldsFetchTheirFilesBack) {
  namespace fs = std::filesystem;
  for (const auto& [world, local] : {std::pair<int, int>{3, 1}, std::pair<int, int>{4, 2}}) {
    SCOPED_TRACE(absl::StrCat(world, " ranks, ", local, " per node"));
    const std::string dir = TempDir(absl::StrCat("memory_copies_", world));
    const std::string copies = dir + "/shm", saved = dir + "/ckpt", tag = "global_step3";
    const std::string base =
        absl::StrCat("stage=3;fp16=0;k=3;total=6;dir=", saved, ";copies=", copies, ";local=", local,
                     world == 4 ? ";gas=1" : "");  // the global batch of 12 over 4 ranks
    RankRunResult r = RunWorker("resume", world, base + ";mode=continuous;out=" + dir + "/straight.pt");
    ASSERT_TRUE(r.ok()) << r.Summary();
    r = RunWorker("resume", world, base + ";mode=save");
    ASSERT_TRUE(r.ok()) << r.Summary();
    // Every rank holds its own two files and its previous node's rank's.
    for (int rank = 0; rank < world; ++rank) {
      std::optional<ckpt::HeldCopy> held = ckpt::MemoryCopies(absl::StrCat(copies, "/node", rank / local), rank).Held();
      ASSERT_TRUE(held.has_value()) << rank;
      EXPECT_EQ(held->own.size(), 2u) << rank;
      EXPECT_EQ(held->neighbour, (rank - local + world) % world) << rank;
      EXPECT_EQ(held->neighbour_files.size(), 2u) << rank;
    }
    fs::remove_all(copies + "/node1");
    const bool two_nodes = world / local == 2;
    if (two_nodes) {
      for (const auto& e : fs::directory_iterator(saved + "/" + tag)) fs::remove_all(e.path());
    }
    r = RunWorker("resume", world, base + ";mode=resume;out=" + dir + "/resumed.pt");
    ASSERT_TRUE(r.ok()) << r.Summary();
    torch::Tensor straight, resumed;
    torch::load(straight, dir + "/straight.pt");
    torch::load(resumed, dir + "/resumed.pt");
    EXPECT_TRUE(torch::equal(straight, resumed));
    const int files = 2 * world;
    for (int rank = local; rank < 2 * local; ++rank) {  // node 1's ranks
      const std::string want = two_nodes
                                   ? absl::StrCat(files, " of ", files,
                                                  " files read from memory copies (4 fetched from the "
                                                  "neighbouring node), 0 from disk")
                                   : absl::StrCat("4 of ", files,
                                                  " files read from memory copies (4 fetched from the neighbouring "
                                                  "node), 2 from disk");
      EXPECT_TRUE(absl::StrContains(r.outputs[static_cast<size_t>(rank)], want))
          << r.outputs[static_cast<size_t>(rank)];
    }
    fs::remove_all(dir);
  }
}

// Python: torch.load opens every file of a saved checkpoint; the export
// reads back with json + struct and matches our reader.
ZT_RANK_WORKER(save_for_python) {
  const auto a = Args(ctx.arg);
  ZT_ASSIGN_OR_RETURN(auto pg, Group());
  Model m = MakeModel(false, true, 1);
  Config c = TrainConfig(std::stoi(a.at("stage")), false);
  c.zero.gather_16bit_weights_on_model_save = true;  // also <tag>/model.safetensors
  ZT_ASSIGN_OR_RETURN(auto engine, Engine::Create(m.module, c, pg));
  TrainStep(*engine, m, 0, false);
  ZT_RETURN_IF_ERROR(engine->SaveCheckpoint(a.at("dir")));
  if (pg->rank() == 0) {
    ZT_ASSIGN_OR_RETURN(auto ck, ckpt::ZeroCheckpoint::Open(a.at("dir")));
    ZT_RETURN_IF_ERROR(ckpt::ExportSafetensors(*ck, a.at("dir") + "/export").status());
  }
  return absl::OkStatus();
}

TEST(CheckpointPython, TorchLoadOpensEveryFileAndTheExportReadsBack) {
  const std::optional<std::string> python = ckpt::testing::PythonWithTorch();
  if (!python) {
    GTEST_SKIP() << "no Python with torch (tried $ZT_PYTHON, python3, /usr/bin/python3); scripts/setup.sh "
                    "installs python3-torch";
  }
  for (int stage : {2, 3}) {
    const std::string dir = TempDir(absl::StrCat("python", stage)) + "/ck";
    RankRunResult r = RunWorker("save_for_python", 2, absl::StrCat("stage=", stage, ";dir=", dir));
    ASSERT_TRUE(r.ok()) << r.Summary();
    const std::string script = absl::StrCat(R"PY(
import glob, json, struct, sys, torch
d = sys.argv[1]
files = sorted(glob.glob(d + "/global_step1/*.pt"))
assert len(files) >= 3, files
for f in files:
    s = torch.load(f, map_location="cpu")
    if "optim_states" in f:
        osd = s["optimizer_state_dict"]
        key = "fp32_flat_groups" if osd["zero_stage"] == 3 else "single_partition_of_fp32_groups"
        assert osd["partition_count"] == 2 and all(t.dtype == torch.float32 for t in osd[key])
        assert set(osd["base_optimizer_state"]["state"][0]) >= {"exp_avg", "exp_avg_sq", "step"}
    else:
        assert s["global_steps"] == 1 and s["dp_world_size"] == 2 and "zt_layout" in s
        assert isinstance(s["param_shapes"], list) and "module" in s
with open(d + "/export/model.safetensors", "rb") as f:
    n = struct.unpack("<Q", f.read(8))[0]
    header = json.loads(f.read(n))
    data = f.read()
total = 0.0
for name, e in header.items():
    if name == "__metadata__":
        continue
    b, end = e["data_offsets"]
    t = torch.frombuffer(bytearray(data[b:end]), dtype={"F32": torch.float32}[e["dtype"]]).reshape(e["shape"])
    total += float(t.double().sum())
print("%.17g" % total)
)PY");
    const std::string py = absl::StrCat(TempDir(absl::StrCat("pyscript", stage)), "/check.py");
    std::ofstream(py) << script;
    FILE* p = ::popen(absl::StrCat(*python, " '", py, "' '", dir, "' 2>&1").c_str(), "r");
    ASSERT_NE(p, nullptr);
    std::string out;
    char buf[4096];
    while (size_t n = std::fread(buf, 1, sizeof(buf), p)) out.append(buf, n);
    ASSERT_EQ(::pclose(p), 0) << out;
    // stage3_gather_16bit_weights_on_model_save wrote the same weights (fp32 model) with the checkpoint.
    EXPECT_TRUE(ReadAll(dir + "/global_step1/model.safetensors") == ReadAll(dir + "/export/model.safetensors"));
    // Our own reader's sum of the same export.
    auto model = ckpt::SafetensorsModel::Open(dir + "/export");
    ASSERT_TRUE(model.ok()) << model.status();
    double total = 0;
    for (const std::string& name : (*model)->names()) {
      auto [reader, t] = (*model)->Find(name);
      std::vector<float> v(t->nbytes / 4);
      ASSERT_TRUE(reader->Read(*t, v.data()).ok());
      for (float x : v) total += x;
    }
    double python_total = 0;
    ASSERT_TRUE(absl::SimpleAtod(absl::StripAsciiWhitespace(out), &python_total)) << out;
    EXPECT_NEAR(python_total, total, 1e-9 * std::abs(total) + 1e-9) << "stage " << stage;
  }
}

}  // namespace
}  // namespace zt::testing

int main(int argc, char** argv) { return zt::testing::RankTestMain(argc, argv); }
