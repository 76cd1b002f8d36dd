// DeepSpeed's own checkpoints, read by zerotorch. The files under
// tests/fixtures/deepspeed-0.14.5 were written by DeepSpeed 0.14.5 (stages
// 1, 2, 3; fp32 and bf16; 2 ranks; a GPT-2 with a tied lm_head), each with
// the consolidated weights DeepSpeed's own zero_to_fp32 produced from it.
// The reference is that file, not anything zerotorch wrote: our
// consolidation must reproduce it bit for bit, tied copy included, and so
// must a consolidation after resharding to another world size.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "ckpt/checkpoint_convert.h"
#include "ckpt/export.h"
#include "ckpt/format/dtype_convert.h"
#include "ckpt/format/safetensors.h"
#include "ckpt/reshard.h"
#include "ckpt/zero_checkpoint.h"
#include "tests/ckpt/ckpt_test_util.h"

namespace zt::ckpt {
namespace {

const std::string kFixtures = std::string(ZT_SOURCE_DIR) + "/tests/fixtures/deepspeed-0.14.5";

struct Fixture {
  const char* dir;
  int stage;
  DType dtype;
};

class DeepSpeedCheckpoint : public ::testing::TestWithParam<Fixture> {};

// Every tensor of `want` is in `got` with the same dtype, shape and bytes, and nothing else.
void ExpectSameTensors(const std::string& want_path, const std::string& got_path) {
  auto want = SafetensorsReader::Open(want_path);
  ASSERT_TRUE(want.ok()) << want.status();
  auto got = SafetensorsReader::Open(got_path);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ((*want)->tensors().size(), (*got)->tensors().size());
  for (const auto& w : (*want)->tensors()) {
    const SafetensorsReader::Tensor* g = (*got)->Find(w.name);
    ASSERT_NE(g, nullptr) << w.name << " is missing from " << got_path;
    EXPECT_EQ(g->dtype, w.dtype) << w.name;
    EXPECT_EQ(g->shape, w.shape) << w.name;
    std::string a(w.nbytes, '\0'), b(g->nbytes, '\0');
    ASSERT_TRUE((*want)->Read(w, a.data()).ok());
    ASSERT_TRUE((*got)->Read(*g, b.data()).ok());
    EXPECT_TRUE(a == b) << w.name << " differs from DeepSpeed's zero_to_fp32 output";
  }
}

TEST_P(DeepSpeedCheckpoint, OpensWithItsTrainingState) {
  const Fixture f = GetParam();
  auto ck = ZeroCheckpoint::Open(absl::StrCat(kFixtures, "/", f.dir));
  ASSERT_TRUE(ck.ok()) << ck.status();
  const ZeroCheckpoint& c = **ck;
  EXPECT_EQ(c.format(), "DeepSpeed 0.14.5+unknown");
  EXPECT_EQ(c.tag(), "global_step4");
  EXPECT_EQ(c.layout().stage, f.stage);
  EXPECT_EQ(c.layout().world_size, 2);
  EXPECT_EQ(c.layout().model_dtype, f.dtype);
  EXPECT_EQ(c.layout().trainable_numel(), 124672);  // the fixtures' README
  EXPECT_EQ(c.layout().shared.at("lm_head.weight"), "transformer.wte.weight");
  const TrainingState& ts = c.training_state();
  EXPECT_EQ(ts.global_steps, 4);
  EXPECT_EQ(ts.global_samples, 16);
  EXPECT_EQ(ts.optimizer_type, "AdamW");
  EXPECT_EQ(ts.optimizer_step, 4);
  EXPECT_EQ(c.state_names(), (std::vector<std::string>{"exp_avg", "exp_avg_sq"}));
  EXPECT_TRUE(absl::StrContains(ts.ds_config, "\"train_micro_batch_size_per_gpu\": 2")) << ts.ds_config;
  EXPECT_TRUE(c.VerifyAll().ok());
  // A parameter's master and moments by name: the moments are not the master.
  std::vector<float> master(64), moment(64);
  ASSERT_TRUE(c.ReadTrainable("transformer.ln_f.weight", "master", 0, 64, master.data()).ok());
  ASSERT_TRUE(c.ReadTrainable("transformer.ln_f.weight", "exp_avg_sq", 0, 64, moment.data()).ok());
  EXPECT_NE(master, moment);
}

TEST_P(DeepSpeedCheckpoint, ConsolidatesBitForBitAsZeroToFp32) {
  const Fixture f = GetParam();
  testing::ScratchDir tmp;
  auto ck = ZeroCheckpoint::Open(absl::StrCat(kFixtures, "/", f.dir));
  ASSERT_TRUE(ck.ok()) << ck.status();
  ExportOptions options;
  options.tied_copies = true;
  const std::string out = tmp.path() + "/model.safetensors";
  auto written = ExportSafetensors(**ck, out, options);
  ASSERT_TRUE(written.ok()) << written.status();
  ExpectSameTensors(absl::StrCat(kFixtures, "/", f.dir, "/zero_to_fp32.safetensors"), out);
}

TEST_P(DeepSpeedCheckpoint, ReshardedToThreeRanksStillConsolidatesTheSame) {
  const Fixture f = GetParam();
  testing::ScratchDir tmp;
  auto ck = ZeroCheckpoint::Open(absl::StrCat(kFixtures, "/", f.dir));
  ASSERT_TRUE(ck.ok()) << ck.status();
  ASSERT_TRUE(Reshard(**ck, tmp.path() + "/three", 3).ok());
  auto three = ZeroCheckpoint::Open(tmp.path() + "/three");
  ASSERT_TRUE(three.ok()) << three.status();
  EXPECT_EQ((*three)->layout().world_size, 3);
  ExportOptions options;
  options.tied_copies = true;
  ASSERT_TRUE(ExportSafetensors(**three, tmp.path() + "/model.safetensors", options).ok());
  ExpectSameTensors(absl::StrCat(kFixtures, "/", f.dir, "/zero_to_fp32.safetensors"),
                    tmp.path() + "/model.safetensors");
}

INSTANTIATE_TEST_SUITE_P(Fixtures, DeepSpeedCheckpoint,
                         ::testing::Values(Fixture{"zero1_fp32", 1, DType::kFloat32},
                                           Fixture{"zero2_fp32", 2, DType::kFloat32},
                                           Fixture{"zero2_bf16", 2, DType::kBFloat16},
                                           Fixture{"zero3_fp32", 3, DType::kFloat32},
                                           Fixture{"zero3_bf16", 3, DType::kBFloat16}),
                         [](const auto& info) { return std::string(info.param.dir); });

// The three newer fixtures (the fixtures' README, "The three newer
// fixtures"): tail padding at world 3, a frozen parameter at stage 3 bf16,
// a frozen tied weight with two param groups at stage 1 world 3. Besides
// zero_to_fp32's output each carries optim_ref.safetensors, read from the
// live DeepSpeed engine before it saved (fp32 master and both moments of
// every trainable parameter, the module value of a frozen one), and
// meta.json with each param group's hyper-parameters.
struct NewFixture {
  const char* dir;
  int stage;
  DType dtype;
  int world;
  const char* tag;
  int64_t trainable;
  std::vector<std::string> frozen;  // names, tied aliases not included
  // zero_to_fp32 drops frozen parameters at stage 1 (DeepSpeed saves no
  // frozen_param_shapes there): its output lacks these, which ours has.
  std::vector<std::string> dropped_by_zero_to_fp32;
};

class DeepSpeedNewerCheckpoint : public ::testing::TestWithParam<NewFixture> {};

// Every tensor of a safetensors file as fp32 bytes: zero_to_fp32 keeps a
// frozen parameter in the module dtype (bf16 among fp32 tensors, though it
// prints "fp32"), where our fp32 export writes it widened, exactly. The
// widening is exact, so fp32 bytes compare both bit for bit; `dtypes` gets
// each tensor's dtype as stored.
std::map<std::string, std::vector<char>> ReadAllTensors(const std::string& path,
                                                        std::map<std::string, DType>* dtypes = nullptr) {
  std::map<std::string, std::vector<char>> out;
  auto r = SafetensorsReader::Open(path);
  EXPECT_TRUE(r.ok()) << r.status();
  if (!r.ok()) return out;
  for (const auto& t : (*r)->tensors()) {
    std::vector<char> bytes(t.nbytes);
    EXPECT_TRUE((*r)->Read(t, bytes.data()).ok()) << t.name;
    if (dtypes != nullptr) (*dtypes)[t.name] = t.dtype;
    if (t.dtype != DType::kFloat32) {
      const size_t n = t.nbytes / DTypeSize(t.dtype);
      std::vector<char> wide(n * 4);
      EXPECT_TRUE(ConvertElements(t.dtype, bytes.data(), DType::kFloat32, wide.data(), n).ok()) << t.name;
      bytes = std::move(wide);
    }
    out[t.name] = std::move(bytes);
  }
  return out;
}

nlohmann::json ReadMeta(const std::string& dir) {
  std::ifstream in(kFixtures + "/" + dir + "/meta.json");
  return nlohmann::json::parse(in);
}

TEST_P(DeepSpeedNewerCheckpoint, EveryTrainableStateIsDeepSpeedsLiveState) {
  const NewFixture f = GetParam();
  auto ck = ZeroCheckpoint::Open(kFixtures + "/" + f.dir);
  ASSERT_TRUE(ck.ok()) << ck.status();
  const ZeroCheckpoint& c = **ck;
  EXPECT_EQ(c.format(), "DeepSpeed 0.14.5+eb07d41f9");
  EXPECT_EQ(c.tag(), f.tag);
  EXPECT_EQ(c.layout().stage, f.stage);
  EXPECT_EQ(c.layout().world_size, f.world);
  EXPECT_EQ(c.layout().model_dtype, f.dtype);
  EXPECT_EQ(c.layout().trainable_numel(), f.trainable);
  EXPECT_TRUE(c.VerifyAll().ok());
  const auto ref = ReadAllTensors(kFixtures + "/" + f.dir + "/optim_ref.safetensors");
  int compared = 0;
  for (const SavedGroup& g : c.layout().groups) {
    for (const SavedParam& p : g.params) {
      for (const auto& [what, key] : {std::pair<std::string, std::string>{"master", "fp32"},
                                      {"exp_avg", "exp_avg"},
                                      {"exp_avg_sq", "exp_avg_sq"}}) {
        std::vector<float> got(static_cast<size_t>(p.numel));
        ASSERT_TRUE(c.ReadTrainable(p.name, what, 0, p.numel, got.data()).ok()) << p.name;
        const auto it = ref.find(p.name + "/" + key);
        ASSERT_NE(it, ref.end()) << p.name << "/" << key;
        ASSERT_EQ(it->second.size(), got.size() * 4) << p.name;
        EXPECT_EQ(std::memcmp(it->second.data(), got.data(), it->second.size()), 0)
            << p.name << " " << what << " differs from DeepSpeed's live state";
      }
      ++compared;
    }
  }
  EXPECT_GT(compared, 0);
  // Each group's hyper-parameters as DeepSpeed's optimizer held them.
  const nlohmann::json meta = ReadMeta(f.dir);
  const auto& settings = c.layout().optimizer_group_settings;
  ASSERT_EQ(settings.size(), meta["param_groups"].size());
  for (size_t g = 0; g < settings.size(); ++g) {
    const auto& m = meta["param_groups"][g];
    EXPECT_EQ(settings[g].weight_decay, m["weight_decay"].get<double>()) << "group " << g;
    EXPECT_EQ(settings[g].lr, m["lr"].get<double>()) << "group " << g;
    EXPECT_EQ(settings[g].eps, m["eps"].get<double>()) << "group " << g;
    EXPECT_EQ(settings[g].betas, m["betas"].get<std::vector<double>>()) << "group " << g;
  }
}

// Consolidated as DeepSpeed's zero_to_fp32 did, bit for bit, and the frozen
// parameters as the live module held them: at stage 3 zero_to_fp32 keeps
// the frozen one (in the module dtype, bf16 here), at stage 1 it drops them,
// and ours keeps them (the model states' module holds them whole). The same
// after resharding to 2 and 4 ranks.
TEST_P(DeepSpeedNewerCheckpoint, ConsolidatesAsZeroToFp32WithTheFrozenParameters) {
  const NewFixture f = GetParam();
  testing::ScratchDir tmp;
  auto ck = ZeroCheckpoint::Open(kFixtures + "/" + f.dir);
  ASSERT_TRUE(ck.ok()) << ck.status();
  for (const std::string& name : f.frozen) {
    if (f.stage == 3) {
      EXPECT_TRUE((*ck)->layout().FindFrozen(name).has_value()) << name;
    }
    EXPECT_FALSE((*ck)->layout().FindTrainable(name).has_value()) << name;
  }
  std::map<std::string, DType> want_dtypes;
  const auto want = ReadAllTensors(kFixtures + "/" + f.dir + "/zero_to_fp32.safetensors", &want_dtypes);
  for (const std::string& name : f.frozen) {
    // The fixture as described: zero_to_fp32 keeps the stage-3 frozen weight in bf16.
    if (f.stage == 3) {
      EXPECT_EQ(want_dtypes.at(name), DType::kBFloat16) << name;
    }
  }
  const auto ref = ReadAllTensors(kFixtures + "/" + f.dir + "/optim_ref.safetensors");
  std::vector<std::string> sources = {"saved"};
  for (int world : {2, 4}) {
    ASSERT_TRUE(Reshard(**ck, absl::StrCat(tmp.path(), "/w", world), world).ok()) << world;
    sources.push_back(absl::StrCat("w", world));
  }
  for (const std::string& src : sources) {
    SCOPED_TRACE(src);
    auto from =
        src == "saved" ? ZeroCheckpoint::Open(kFixtures + "/" + f.dir) : ZeroCheckpoint::Open(tmp.path() + "/" + src);
    ASSERT_TRUE(from.ok()) << from.status();
    ExportOptions options;
    options.tied_copies = true;
    const std::string out = tmp.path() + "/" + src + ".safetensors";
    ASSERT_TRUE(ExportSafetensors(**from, out, options).ok());
    std::map<std::string, DType> got_dtypes;
    const auto got = ReadAllTensors(out, &got_dtypes);
    for (const auto& [name, dtype] : got_dtypes) EXPECT_EQ(dtype, DType::kFloat32) << name << ": an fp32 export";
    for (const auto& [name, bytes] : want) {
      const auto it = got.find(name);
      ASSERT_NE(it, got.end()) << name << " is missing";
      EXPECT_TRUE(it->second == bytes) << name << " differs from zero_to_fp32's";
    }
    for (const auto& [name, bytes] : got) {
      if (want.count(name)) continue;
      ASSERT_TRUE(std::find(f.dropped_by_zero_to_fp32.begin(), f.dropped_by_zero_to_fp32.end(), name) !=
                  f.dropped_by_zero_to_fp32.end())
          << name << " is in ours only";
      const auto r = ref.find(name + "/module");
      ASSERT_NE(r, ref.end()) << name;
      EXPECT_TRUE(r->second == bytes) << name << " differs from DeepSpeed's live module";
    }
    for (const std::string& name : f.frozen) {
      const auto it = got.find(name);
      ASSERT_NE(it, got.end()) << "frozen " << name << " is missing";
      EXPECT_TRUE(it->second == ref.at(name + "/module")) << name << " differs from DeepSpeed's live module";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Fixtures, DeepSpeedNewerCheckpoint,
    ::testing::Values(
        NewFixture{"zero2_fp32_w3_padded", 2, DType::kFloat32, 3, "global_step5", 13360, {}, {}},
        NewFixture{
            "zero3_bf16_w2_frozen", 3, DType::kBFloat16, 2, "global_step4", 116480, {"transformer.wpe.weight"}, {}},
        NewFixture{"zero1_fp32_w3_frozen_groups",
                   1,
                   DType::kFloat32,
                   3,
                   "global_step5",
                   30144,
                   {"transformer.wte.weight"},
                   {"transformer.wte.weight"}}),
    [](const auto& info) { return std::string(info.param.dir); });

// The padding DeepSpeed leaves out of the last rank's partition is checked,
// not assumed: a group_paddings entry that disagrees with the partitions
// (here rank 2 claims none) is a named error rather than values read from
// shifted offsets.
TEST(DeepSpeedCheckpointErrors, AWrongGroupPaddingIsNamed) {
  testing::ScratchDir tmp;
  std::filesystem::copy(kFixtures + "/zero2_fp32_w3_padded", tmp.path() + "/ck",
                        std::filesystem::copy_options::recursive);
  // Rank 1's file in rank 2's place: same save, but a whole partition and
  // group_paddings [0, 0] where rank 2's has 4 elements fewer and [4, 4].
  std::filesystem::copy_file(tmp.path() + "/ck/global_step5/zero_pp_rank_1_mp_rank_00_optim_states.pt",
                             tmp.path() + "/ck/global_step5/zero_pp_rank_2_mp_rank_00_optim_states.pt",
                             std::filesystem::copy_options::overwrite_existing);
  auto ck = ZeroCheckpoint::Open(tmp.path() + "/ck");
  ASSERT_FALSE(ck.ok());
  EXPECT_EQ(ck.status().code(), absl::StatusCode::kDataLoss) << ck.status();
  EXPECT_TRUE(absl::StrContains(ck.status().message(), "group_paddings")) << ck.status();
}

// A DeepSpeed checkpoint with per-group weight decay converts back to
// DeepSpeed with each group's own (before: the config's 0.01 for all).
TEST(DeepSpeedGroups, ConvertingBackKeepsEachGroupsWeightDecay) {
  testing::ScratchDir tmp;
  auto ck = ZeroCheckpoint::Open(kFixtures + "/zero2_fp32_w3_padded");
  ASSERT_TRUE(ck.ok()) << ck.status();
  for (int world : {3, 2}) {
    ConvertOptions options;
    options.to = CheckpointFormat::kDeepSpeed;
    options.world_size = world;
    const std::string dst = absl::StrCat(tmp.path(), "/ds", world);
    ASSERT_TRUE(ConvertCheckpoint(**ck, dst, options).ok());
    for (int r = 0; r < world; ++r) {
      auto file = PtReader::Open(absl::StrCat(dst, "/global_step5/zero_pp_rank_", r, "_mp_rank_00_optim_states.pt"));
      ASSERT_TRUE(file.ok()) << file.status();
      const Value* osd = (*file)->root().AsDict().Find("optimizer_state_dict");
      ASSERT_NE(osd, nullptr);
      const Value* groups = osd->AsDict().Find("base_optimizer_state")->AsDict().Find("param_groups");
      ASSERT_TRUE(groups != nullptr && groups->AsList().size() == 2u);
      EXPECT_EQ(groups->AsList()[0].AsDict().Find("weight_decay")->AsDouble(), 0.1);
      EXPECT_EQ(groups->AsList()[1].AsDict().Find("weight_decay")->AsDouble(), 0.0);
    }
    auto back = ZeroCheckpoint::Open(dst);
    ASSERT_TRUE(back.ok()) << back.status();
    const auto& got = back->get()->layout().optimizer_group_settings;
    const auto& want = (*ck)->layout().optimizer_group_settings;
    ASSERT_EQ(got.size(), want.size());
    for (size_t g = 0; g < got.size(); ++g) {
      EXPECT_EQ(got[g].weight_decay, want[g].weight_decay) << g;
      EXPECT_EQ(got[g].eps, want[g].eps) << g;
      EXPECT_EQ(got[g].betas, want[g].betas) << g;
      // The lr is the schedule's after the saved steps (WarmupLR), which
      // must be what DeepSpeed's optimizer held when it saved (meta.json).
      EXPECT_EQ(got[g].lr, want[g].lr) << g;
    }
    ExportOptions eo;
    eo.tied_copies = true;
    ASSERT_TRUE(ExportSafetensors(**back, dst + ".safetensors", eo).ok());
    ExpectSameTensors(kFixtures + "/zero2_fp32_w3_padded/zero_to_fp32.safetensors", dst + ".safetensors");
  }
}

// `latest` is untrusted: the tag it names must be a folder of the
// checkpoint, not a path out of it (traversal or a symlink elsewhere).
TEST(DeepSpeedCheckpointErrors, LatestCannotNameAPathOutOfTheCheckpoint) {
  testing::ScratchDir tmp;
  std::filesystem::copy(kFixtures + "/zero2_fp32", tmp.path() + "/ck", std::filesystem::copy_options::recursive);
  std::filesystem::copy(kFixtures + "/zero2_fp32", tmp.path() + "/other", std::filesystem::copy_options::recursive);
  for (const std::string bad : {"../other/global_step4", "..", "/tmp"}) {
    SCOPED_TRACE(bad);
    testing::WriteAll(tmp.path() + "/ck/latest", bad + "\n");
    auto ck = ZeroCheckpoint::Open(tmp.path() + "/ck");
    ASSERT_FALSE(ck.ok());
    EXPECT_EQ(ck.status().code(), absl::StatusCode::kDataLoss) << ck.status();
    EXPECT_TRUE(absl::StrContains(ck.status().message(), "not a plain file name")) << ck.status();
  }
  std::filesystem::create_directory_symlink(tmp.path() + "/other/global_step4", tmp.path() + "/ck/elsewhere");
  testing::WriteAll(tmp.path() + "/ck/latest", "elsewhere\n");
  auto ck = ZeroCheckpoint::Open(tmp.path() + "/ck");
  ASSERT_FALSE(ck.ok());
  EXPECT_TRUE(absl::StrContains(ck.status().message(), "outside")) << ck.status();
  testing::WriteAll(tmp.path() + "/ck/latest", "global_step4\n");
  EXPECT_TRUE(ZeroCheckpoint::Open(tmp.path() + "/ck").ok());
}

// Damaged or foreign files are named errors, never a crash or wrong weights.
TEST(DeepSpeedCheckpointErrors, AMissingRankFileIsNamed) {
  testing::ScratchDir tmp;
  std::filesystem::copy(kFixtures + "/zero3_fp32", tmp.path() + "/ck", std::filesystem::copy_options::recursive);
  std::filesystem::remove(tmp.path() + "/ck/global_step4/zero_pp_rank_1_mp_rank_00_optim_states.pt");
  auto ck = ZeroCheckpoint::Open(tmp.path() + "/ck");
  ASSERT_FALSE(ck.ok());
  EXPECT_TRUE(absl::StrContains(ck.status().message(), "zero_pp_rank_1_mp_rank_00_optim_states.pt")) << ck.status();
}

TEST(DeepSpeedCheckpointErrors, AnOptimFileOfAnotherStageIsNamed) {
  // Rank 1's optim file of a stage-1 save in a stage-3 folder: the stage differs.
  testing::ScratchDir tmp;
  std::filesystem::copy(kFixtures + "/zero3_fp32", tmp.path() + "/ck", std::filesystem::copy_options::recursive);
  std::filesystem::copy_file(kFixtures + "/zero1_fp32/global_step4/zero_pp_rank_1_mp_rank_00_optim_states.pt",
                             tmp.path() + "/ck/global_step4/zero_pp_rank_1_mp_rank_00_optim_states.pt",
                             std::filesystem::copy_options::overwrite_existing);
  auto ck = ZeroCheckpoint::Open(tmp.path() + "/ck");
  ASSERT_FALSE(ck.ok());
  EXPECT_TRUE(absl::StrContains(ck.status().message(), "zero_pp_rank_1_mp_rank_00_optim_states.pt")) << ck.status();
}

// A flipped byte in rank 1's fp32 partition (its first byte, one in the
// middle, its last byte): consolidation, resharding and conversion read that
// record in pieces, so the CRC check streams with the pieces. At stage 3
// DeepSpeed pads every parameter's partition, and padding no reader asks
// for is left between the pieces (ZeroCheckpoint::VerifyRead reads it).
// Each reader must end in an error naming the file and publish nothing.
TEST(DeepSpeedCheckpointErrors, AFlippedPartitionByteStopsEveryReaderWithNoOutput) {
  const std::string file = "global_step4/zero_pp_rank_1_mp_rank_00_optim_states.pt";
  struct Case {
    const char* fixture;
    const char* key;  // rank 1's fp32 partitions in optimizer_state_dict
  };
  for (const Case c : {Case{"zero2_fp32", "single_partition_of_fp32_groups"}, Case{"zero3_fp32", "fp32_flat_groups"}}) {
    for (const char* where : {"first", "middle", "last"}) {
      SCOPED_TRACE(absl::StrCat(c.fixture, ", ", where));
      testing::ScratchDir tmp;
      std::filesystem::copy(kFixtures + "/" + c.fixture, tmp.path() + "/ck", std::filesystem::copy_options::recursive);
      const std::string path = tmp.path() + "/ck/" + file;
      uint64_t at = 0;
      {
        auto reader = PtReader::Open(path);
        ASSERT_TRUE(reader.ok()) << reader.status();
        const Value* osd = (*reader)->root().AsDict().Find("optimizer_state_dict");
        ASSERT_NE(osd, nullptr);
        const Value* parts = osd->AsDict().Find(c.key);
        ASSERT_TRUE(parts != nullptr && !parts->AsList().empty());
        const TensorRef& t = parts->AsList()[0].AsTensor();
        const uint64_t offset = std::string(where) == "first"    ? 0
                                : std::string(where) == "middle" ? t.storage_nbytes / 2 + 1
                                                                 : t.storage_nbytes - 1;
        at = t.file_offset + offset;
      }
      std::string bytes = testing::ReadAll(path);
      bytes[at] ^= 0x01;
      testing::WriteAll(path, bytes);

      auto expect_named = [&](const absl::Status& st, const char* what) {
        EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss) << what << ": " << st;
        EXPECT_TRUE(absl::StrContains(st.message(), "zero_pp_rank_1_mp_rank_00_optim_states.pt")) << what << ": " << st;
        EXPECT_TRUE(absl::StrContains(st.message(), "CRC-32 mismatch")) << what << ": " << st;
      };
      {
        auto ck = ZeroCheckpoint::Open(tmp.path() + "/ck");
        ASSERT_TRUE(ck.ok()) << "the directories are intact: " << ck.status();
        expect_named(ExportSafetensors(**ck, tmp.path() + "/model.safetensors").status(), "consolidate");
        EXPECT_FALSE(std::filesystem::exists(tmp.path() + "/model.safetensors"));
      }
      {
        auto ck = ZeroCheckpoint::Open(tmp.path() + "/ck");
        ASSERT_TRUE(ck.ok());
        expect_named(Reshard(**ck, tmp.path() + "/three", 3), "reshard");
        EXPECT_FALSE(std::filesystem::exists(tmp.path() + "/three/latest"));
      }
      for (CheckpointFormat to : {CheckpointFormat::kDeepSpeed, CheckpointFormat::kZerotorch}) {
        auto ck = ZeroCheckpoint::Open(tmp.path() + "/ck");
        ASSERT_TRUE(ck.ok());
        ConvertOptions options;
        options.to = to;
        options.world_size = 3;
        const std::string dst = tmp.path() + (to == CheckpointFormat::kDeepSpeed ? "/ds" : "/zt");
        expect_named(ConvertCheckpoint(**ck, dst, options), "convert");
        EXPECT_FALSE(std::filesystem::exists(dst + "/latest"));
        EXPECT_FALSE(std::filesystem::exists(dst + "/global_step4"));
      }
    }
  }
}

// A flipped byte in a module tensor of the model states (stages 1/2 keep
// the whole module there): conversion to DeepSpeed's format streams every
// module tensor chunk by chunk, hashed on the way, and must refuse with the
// file named and publish nothing.
TEST(DeepSpeedCheckpointErrors, AFlippedModuleByteStopsConversion) {
  testing::ScratchDir tmp;
  std::filesystem::copy(kFixtures + "/zero2_fp32", tmp.path() + "/ck", std::filesystem::copy_options::recursive);
  const std::string path = tmp.path() + "/ck/global_step4/mp_rank_00_model_states.pt";
  uint64_t at = 0;
  {
    auto reader = PtReader::Open(path);
    ASSERT_TRUE(reader.ok()) << reader.status();
    const Value* module = (*reader)->root().AsDict().Find("module");
    ASSERT_NE(module, nullptr);
    const Value* w = module->AsDict().Find("transformer.h.1.mlp.c_fc.weight");
    ASSERT_NE(w, nullptr);
    const TensorRef& t = w->AsTensor();
    at = t.file_offset + (t.storage_offset + t.numel() / 2) * DTypeSize(t.dtype);
  }
  std::string bytes = testing::ReadAll(path);
  bytes[at] ^= 0x08;
  testing::WriteAll(path, bytes);
  auto ck = ZeroCheckpoint::Open(tmp.path() + "/ck");
  ASSERT_TRUE(ck.ok()) << ck.status();
  ConvertOptions options;
  options.to = CheckpointFormat::kDeepSpeed;
  const absl::Status st = ConvertCheckpoint(**ck, tmp.path() + "/ds", options);
  EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss) << st;
  EXPECT_TRUE(absl::StrContains(st.message(), "mp_rank_00_model_states.pt")) << st;
  EXPECT_FALSE(std::filesystem::exists(tmp.path() + "/ds/latest"));
  EXPECT_FALSE(std::filesystem::exists(tmp.path() + "/ds/global_step4"));
}

// A training run's DeepSpeed copies (zt train --save-format deepspeed): each
// save adds its tag to one folder; the same tag again replaces the earlier
// copy whole; without add_tag a folder with anything in it is refused.
TEST(ConvertAddTag, AddsAndReplacesTagsInOneFolder) {
  testing::ScratchDir tmp;
  auto ck = ZeroCheckpoint::Open(kFixtures + "/zero2_fp32");
  ASSERT_TRUE(ck.ok()) << ck.status();
  const std::string dst = tmp.path() + "/ds";
  ConvertOptions options;
  options.to = CheckpointFormat::kDeepSpeed;
  options.add_tag = true;
  options.tag = "first";
  ASSERT_TRUE(ConvertCheckpoint(**ck, dst, options).ok());
  options.tag = "second";
  ASSERT_TRUE(ConvertCheckpoint(**ck, dst, options).ok());
  // The same tag again, over a copy with a stray file: replaced whole.
  testing::WriteAll(dst + "/second/stray", "x");
  ASSERT_TRUE(ConvertCheckpoint(**ck, dst, options).ok());
  EXPECT_FALSE(std::filesystem::exists(dst + "/second/stray"));
  EXPECT_EQ(testing::ReadAll(dst + "/latest"), "second\n");
  std::vector<std::string> entries;
  for (const auto& e : std::filesystem::directory_iterator(dst)) entries.push_back(e.path().filename().string());
  std::sort(entries.begin(), entries.end());
  EXPECT_EQ(entries, (std::vector<std::string>{"first", "latest", "second"})) << "a staging folder was left behind";
  for (const char* tag : {"first", "second"}) {
    auto copy = ZeroCheckpoint::Open(dst, tag);
    ASSERT_TRUE(copy.ok()) << copy.status();
    ExportOptions eo;
    eo.tied_copies = true;
    const std::string out = absl::StrCat(tmp.path(), "/", tag, ".safetensors");
    ASSERT_TRUE(ExportSafetensors(**copy, out, eo).ok());
    ExpectSameTensors(kFixtures + "/zero2_fp32/zero_to_fp32.safetensors", out);
  }
  options.add_tag = false;
  options.tag = "third";
  const absl::Status refused = ConvertCheckpoint(**ck, dst, options);
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << refused;
  EXPECT_TRUE(absl::StrContains(refused.message(), "is not empty")) << refused;
}

}  // namespace
}  // namespace zt::ckpt
