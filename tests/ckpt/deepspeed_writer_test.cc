// Writing DeepSpeed's checkpoint format (`zt ckpt convert --to deepspeed`),
// checked against the real artefacts in tests/fixtures/deepspeed-0.14.5
// (written by DeepSpeed 0.14.5 itself), never against copies we wrote:
//
//  * round trip: fixture -> zerotorch -> DeepSpeed at the same world size
//    reproduces every file, key, pickled type and tensor byte of the fixture,
//    compared as canonical dumps made by Python's own unpickler
//    (ds_canonical_dump.py, with stand-ins for deepspeed's classes);
//  * fixture -> DeepSpeed at 3 and 1 ranks: the fp32 partitions are laid out
//    by DeepSpeed's rules (rebuilt here from DeepSpeed's own zero_to_fp32
//    output), and consolidating gives that output bit for bit;
//  * a checkpoint as zerotorch's engine writes it (several flat groups, no
//    recorded param order) -> DeepSpeed -> the same consolidated weights;
//  * bad input is a named error with the documented exit code, and a failed
//    conversion leaves nothing that looks like a checkpoint.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "ckpt/export.h"
#include "ckpt/format/dtype_convert.h"
#include "ckpt/format/pickle.h"
#include "ckpt/format/safetensors.h"
#include "ckpt/zero_checkpoint.h"
#include "plan/layout.h"
#include "tests/ckpt/ckpt_test_util.h"
#include "tests/testing/zt_command.h"

namespace zt::ckpt {
namespace {

namespace fs = std::filesystem;
using zt::testing::RunZt;

const std::string kFixtures = std::string(ZT_SOURCE_DIR) + "/tests/fixtures/deepspeed-0.14.5";
const std::string kDumpScript = std::string(ZT_SOURCE_DIR) + "/tests/ckpt/ds_canonical_dump.py";

// What a conversion cannot reproduce from a fixture, and why. Matched on the
// key path's end; `ours` is the value we write instead.
struct KnownDifference {
  const char* path_suffix;
  const char* ours;
  const char* why;
};
constexpr KnownDifference kKnownDifferences[] = {
    {"['ds_version']", "builtins.str '0.14.5'",
     "we write the version whose format we write; '+unknown' is the local-build suffix of the DeepSpeed that wrote "
     "the fixtures, which zerotorch's own format does not keep"},
};

struct Fixture {
  const char* dir;
  int stage;
};

std::vector<std::string> FilesIn(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

std::string Quote(const std::string& s) { return absl::StrCat("'", s, "'"); }

// The canonical dumps of `files` by Python's unpickler (see the script), in
// the order given, from one Python process: importing torch costs seconds.
std::vector<std::string> Dumps(const std::string& python, const std::vector<std::string>& files) {
  testing::ScratchDir tmp;
  const std::string out = tmp.File("dump.txt");
  std::string cmd = absl::StrCat("PYTHONDONTWRITEBYTECODE=1 ", python, " ", Quote(kDumpScript));
  for (const std::string& f : files) absl::StrAppend(&cmd, " ", Quote(f));
  absl::StrAppend(&cmd, " >", Quote(out), " 2>&1");
  const int rc = std::system(cmd.c_str());
  const std::string text = testing::ReadAll(out);
  EXPECT_EQ(rc, 0) << text;
  std::vector<std::string> dumps(files.size());
  size_t next = 0;
  std::string* current = nullptr;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (next < files.size() && line == absl::StrCat("=== ", files[next])) {
      current = &dumps[next++];
      continue;
    }
    if (current == nullptr) continue;
    if (!current->empty()) current->push_back('\n');
    absl::StrAppend(current, line);
  }
  EXPECT_EQ(next, files.size()) << "the dump script stopped before file " << next << ":\n" << text;
  for (std::string& d : dumps) {
    while (!d.empty() && d.back() == '\n') d.pop_back();  // the last file's print ends with one
  }
  return dumps;
}

// Line by line, `got` must be `want` except for the known differences.
void ExpectSameDump(const std::string& file, const std::string& want, const std::string& got) {
  const std::vector<std::string> w = absl::StrSplit(want, '\n');
  const std::vector<std::string> g = absl::StrSplit(got, '\n');
  ASSERT_EQ(w.size(), g.size()) << file << ": the dumps differ in length\n--- DeepSpeed's\n"
                                << want << "\n--- ours\n"
                                << got;
  for (size_t i = 0; i < w.size(); ++i) {
    if (w[i] == g[i]) continue;
    bool known = false;
    for (const KnownDifference& k : kKnownDifferences) {
      const std::string key = absl::StrCat(k.path_suffix, ": ");
      const size_t at = w[i].find(key);
      known |= at != std::string::npos && g[i] == absl::StrCat(w[i].substr(0, at + key.size()), k.ours);
    }
    EXPECT_TRUE(known) << file << ", line " << i + 1 << ":\n  DeepSpeed: " << w[i] << "\n  ours:      " << g[i];
  }
}

class DeepSpeedWriter : public ::testing::TestWithParam<Fixture> {
 protected:
  std::string FixtureDir() const { return absl::StrCat(kFixtures, "/", GetParam().dir); }
};

// DeepSpeed's files of `fixture` (tag `tag`) -> zerotorch -> DeepSpeed at
// the saving world size: every file, key, pickled type and tensor byte as
// DeepSpeed wrote it, compared as dumps of Python's own unpickler.
void ExpectRoundTripReproducesDeepSpeedsFiles(const std::string& fixture, int stage, const std::string& tag) {
  testing::ScratchDir tmp;
  const std::string zt_dir = tmp.path() + "/zt", ds_dir = tmp.path() + "/ds";
  auto r = RunZt(absl::StrCat("ckpt convert ", Quote(fixture), " ", Quote(zt_dir), " --to zerotorch"));
  ASSERT_EQ(r.code, 0) << r.output;
  auto zt = ZeroCheckpoint::Open(zt_dir);
  ASSERT_TRUE(zt.ok()) << zt.status();
  EXPECT_EQ((*zt)->format(), "zerotorch");
  r = RunZt(absl::StrCat("ckpt convert ", Quote(zt_dir), " ", Quote(ds_dir), " --to deepspeed"));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(testing::ReadAll(ds_dir + "/latest"), tag + "\n");
  const std::string want_folder = fixture + "/" + tag, got_folder = ds_dir + "/" + tag;
  ASSERT_EQ(FilesIn(got_folder), FilesIn(want_folder));
  // Our own reader takes it for DeepSpeed's.
  auto ds = ZeroCheckpoint::Open(ds_dir);
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ((*ds)->format(), "DeepSpeed 0.14.5");
  EXPECT_EQ((*ds)->layout().stage, stage);
  ZT_SKIP_WITHOUT_TORCH_PYTHON();
  const std::string python = *testing::PythonWithTorch();
  const std::vector<std::string> names = FilesIn(want_folder);
  std::vector<std::string> paths;
  for (const std::string& f : names) paths.push_back(want_folder + "/" + f);
  for (const std::string& f : names) paths.push_back(got_folder + "/" + f);
  const std::vector<std::string> dumps = Dumps(python, paths);
  for (size_t i = 0; i < names.size(); ++i) ExpectSameDump(names[i], dumps[i], dumps[names.size() + i]);
}

TEST_P(DeepSpeedWriter, RoundTripThroughZerotorchReproducesDeepSpeedsFiles) {
  ExpectRoundTripReproducesDeepSpeedsFiles(FixtureDir(), GetParam().stage, "global_step4");
}

// The three newer fixtures: tail padding at world 3 (the last rank's fp32
// partition without it, group_paddings), a frozen parameter at stage 3 bf16
// (frozen_param_shapes, each rank's frozen_param_fragments), a frozen tied
// weight at stage 1 with two param groups (whole in module, each group's
// weight decay).
TEST(DeepSpeedWriterNewer, RoundTripThroughZerotorchReproducesDeepSpeedsFiles) {
  struct Newer {
    const char* dir;
    int stage;
    const char* tag;
  };
  for (const Newer n :
       {Newer{"zero2_fp32_w3_padded", 2, "global_step5"}, Newer{"zero3_bf16_w2_frozen", 3, "global_step4"},
        Newer{"zero1_fp32_w3_frozen_groups", 1, "global_step5"}}) {
    SCOPED_TRACE(n.dir);
    ExpectRoundTripReproducesDeepSpeedsFiles(absl::StrCat(kFixtures, "/", n.dir), n.stage, n.tag);
  }
}

// The full fp32 weights DeepSpeed's zero_to_fp32 wrote for the fixture.
std::map<std::string, std::vector<float>> ReferenceWeights(const std::string& fixture) {
  std::map<std::string, std::vector<float>> out;
  auto st = SafetensorsReader::Open(fixture + "/zero_to_fp32.safetensors");
  EXPECT_TRUE(st.ok()) << st.status();
  if (!st.ok()) return out;
  for (const auto& t : (*st)->tensors()) {
    std::vector<float>& v = out[t.name];
    v.resize(t.nbytes / 4);
    EXPECT_TRUE((*st)->Read(t, v.data()).ok());
  }
  return out;
}

std::vector<float> ReadFloats(const PtReader& file, const TensorRef& t) {
  std::vector<float> v(static_cast<size_t>(t.numel()));
  EXPECT_TRUE(file.Read(t, v.data()).ok());
  return v;
}

// Rank r's fp32 partitions of `folder`, rebuilt from the reference weights
// by DeepSpeed's rules, must be the ones written.
void ExpectDeepSpeedPartitions(const std::string& folder, const std::vector<std::string>& order, int stage, int world,
                               DType dtype, const std::map<std::string, std::vector<float>>& full) {
  for (int r = 0; r < world; ++r) {
    auto file = PtReader::Open(folder + "/" + OptimStatesFile(r, dtype));
    ASSERT_TRUE(file.ok()) << file.status();
    const Dict& osd = (*file)->root().AsDict().Find("optimizer_state_dict")->AsDict();
    std::vector<float> want;
    if (stage == 3) {
      // Each parameter on its own: ceil(numel / world) elements per rank, the last rank's padded.
      EXPECT_EQ(osd.Find("partition_count")->AsInt(), world);
      for (const std::string& name : order) {
        const std::vector<float>& p = full.at(name);
        const int64_t n = static_cast<int64_t>(p.size()), piece = (n + world - 1) / world;
        for (int64_t i = piece * r; i < piece * (r + 1); ++i) want.push_back(i < n ? p[i] : 0.0f);
      }
      const List& flats = osd.Find("fp32_flat_groups")->AsList();
      ASSERT_EQ(flats.size(), 1u);
      EXPECT_EQ(ReadFloats(**file, flats[0].AsTensor()), want) << "rank " << r;
    } else {
      // The group back to back, padded at the end to a multiple of 2 x world,
      // split evenly; the last rank's partition saved without the padding
      // (DeepSpeed's partition[:len - group_paddings], as in the fixture
      // zero2_fp32_w3_padded).
      std::vector<float> flat;
      for (const std::string& name : order) flat.insert(flat.end(), full.at(name).begin(), full.at(name).end());
      const int64_t numel = static_cast<int64_t>(flat.size());
      flat.resize(static_cast<size_t>(plan::PaddedNumel(numel, world)), 0.0f);
      const size_t part = flat.size() / world;
      const size_t end = r == world - 1 ? static_cast<size_t>(numel) : part * (r + 1);
      want.assign(flat.begin() + part * r, flat.begin() + end);
      const List& flats = osd.Find("single_partition_of_fp32_groups")->AsList();
      ASSERT_EQ(flats.size(), 1u);
      EXPECT_EQ(ReadFloats(**file, flats[0].AsTensor()), want) << "rank " << r;
      EXPECT_EQ(osd.Find("group_paddings")->AsList()[0].AsInt(),
                r == world - 1 ? static_cast<int64_t>(flat.size()) - numel : 0);
    }
  }
}

TEST_P(DeepSpeedWriter, ToOtherWorldSizesConsolidatesAsDeepSpeedsZeroToFp32) {
  const auto full = ReferenceWeights(FixtureDir());
  auto src = ZeroCheckpoint::Open(FixtureDir());
  ASSERT_TRUE(src.ok()) << src.status();
  const std::vector<std::string> order = (*src)->layout().optimizer_groups.at(0);
  for (int world : {3, 1}) {
    testing::ScratchDir tmp;
    const std::string out = tmp.path() + "/ds";
    auto r = RunZt(
        absl::StrCat("ckpt convert ", Quote(FixtureDir()), " ", Quote(out), " --to deepspeed --world-size ", world));
    ASSERT_EQ(r.code, 0) << r.output;
    auto ck = ZeroCheckpoint::Open(out);
    ASSERT_TRUE(ck.ok()) << ck.status();
    EXPECT_EQ((*ck)->layout().world_size, world);
    EXPECT_EQ((*ck)->layout().stage, GetParam().stage);
    EXPECT_TRUE((*ck)->VerifyAll().ok());
    ExpectDeepSpeedPartitions(out + "/global_step4", order, GetParam().stage, world, (*src)->layout().model_dtype,
                              full);
    ExportOptions options;
    options.tied_copies = true;  // as zero_to_fp32 writes the tied lm_head
    ASSERT_TRUE(ExportSafetensors(**ck, tmp.path() + "/model.safetensors", options).ok());
    auto ours = SafetensorsReader::Open(tmp.path() + "/model.safetensors");
    ASSERT_TRUE(ours.ok()) << ours.status();
    ASSERT_EQ((*ours)->tensors().size(), full.size());
    for (const auto& t : (*ours)->tensors()) {
      std::vector<float> v(t.nbytes / 4);
      ASSERT_TRUE((*ours)->Read(t, v.data()).ok());
      ASSERT_TRUE(full.count(t.name)) << t.name;
      EXPECT_EQ(std::memcmp(v.data(), full.at(t.name).data(), t.nbytes), 0) << t.name << " at " << world << " ranks";
    }
  }
}

// --to universal: DeepSpeed's ds_to_universal layout (one folder per
// parameter). Every fp32.pt must hold DeepSpeed's own zero_to_fp32 weights
// bit for bit (whole, in the parameter's shape at stages 1/2, flat at stage
// 3), the moments the fixture's (read through our reader of the fixture), the
// step the fixture's; tied aliases get no folder; optimizer_state.pt keeps
// what ds_to_universal keeps; latest_universal names the tag. Python's
// unpickler opens every file kind (with stand-ins for deepspeed's classes).
TEST_P(DeepSpeedWriter, UniversalHoldsEveryParameterWholeAsZeroToFp32) {
  const Fixture f = GetParam();
  testing::ScratchDir tmp;
  const std::string dst = tmp.path() + "/universal";
  auto r = RunZt(absl::StrCat("ckpt convert ", Quote(FixtureDir()), " ", Quote(dst), " --to universal"));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_EQ(testing::ReadAll(dst + "/latest_universal"), "global_step4\n");
  EXPECT_FALSE(fs::exists(dst + "/latest"))
      << "a universal folder is not a checkpoint DeepSpeed loads without load_universal";
  const std::string folder = dst + "/global_step4";
  std::vector<std::string> want_files = {"zero"};
  for (int rank = 0; rank < (f.stage == 3 ? 2 : 1); ++rank) want_files.push_back(ModelStatesFile(f.stage, rank));
  std::sort(want_files.begin(), want_files.end());
  EXPECT_EQ(FilesIn(folder), want_files);

  auto ck = ZeroCheckpoint::Open(FixtureDir());
  ASSERT_TRUE(ck.ok()) << ck.status();
  const std::map<std::string, std::vector<float>> full = ReferenceWeights(FixtureDir());
  std::vector<std::string> names;
  for (const SavedGroup& g : (*ck)->layout().groups) {
    for (const SavedParam& p : g.params) {
      SCOPED_TRACE(p.name);
      names.push_back(p.name);
      const std::string dir = folder + "/zero/" + p.name;
      for (const std::string kind : {"fp32", "exp_avg", "exp_avg_sq"}) {
        auto file = PtReader::Open(dir + "/" + kind + ".pt");
        ASSERT_TRUE(file.ok()) << file.status();
        const Value& root = (*file)->root();
        const TensorRef* t = nullptr;
        if (f.stage == 3) {
          ASSERT_TRUE(root.is_tensor()) << kind << ": stage 3 files hold the bare flat tensor";
          t = &root.AsTensor();
          EXPECT_EQ(t->shape, std::vector<int64_t>{p.numel});
        } else {
          ASSERT_TRUE(root.is_dict()) << kind;
          ASSERT_NE(root.AsDict().Find("param"), nullptr);
          t = &root.AsDict().Find("param")->AsTensor();
          EXPECT_EQ(t->shape, p.shape);
          EXPECT_EQ(root.AsDict().Find("cat_dim")->AsInt(), 0);
        }
        ASSERT_EQ(t->dtype, DType::kFloat32);
        const std::vector<float> got = ReadFloats(**file, *t);
        if (kind == "fp32") {
          EXPECT_TRUE(got == full.at(p.name)) << "differs from DeepSpeed's zero_to_fp32 output";
        } else {
          std::vector<float> want(static_cast<size_t>(p.numel));
          ASSERT_TRUE((*ck)->ReadTrainable(p.name, kind, 0, p.numel, want.data()).ok());
          EXPECT_TRUE(got == want) << kind << " differs from the fixture's";
        }
      }
      if (f.stage == 3) {
        EXPECT_FALSE(fs::exists(dir + "/step.pt")) << "stage 3 keeps the step in optimizer_state.pt";
      } else {
        auto step = PtReader::Open(dir + "/step.pt");
        ASSERT_TRUE(step.ok()) << step.status();
        EXPECT_EQ(ReadFloats(**step, (*step)->root().AsTensor()), std::vector<float>{4.0f});
      }
    }
  }
  EXPECT_FALSE(fs::exists(folder + "/zero/lm_head.weight")) << "a tied alias has no folder of its own";
  std::vector<std::string> dirs = FilesIn(folder + "/zero");
  dirs.erase(std::remove(dirs.begin(), dirs.end(), "optimizer_state.pt"), dirs.end());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(dirs, names);

  auto optimizer = PtReader::Open(folder + "/zero/optimizer_state.pt");
  ASSERT_TRUE(optimizer.ok()) << optimizer.status();
  const Dict& osd = (*optimizer)->root().AsDict();
  ASSERT_NE(osd.Find("param_groups"), nullptr);
  EXPECT_DOUBLE_EQ(osd.Find("param_groups")->AsList()[0].AsDict().Find("lr")->AsDouble(), 3e-4);
  if (f.stage == 3) {
    EXPECT_NE(osd.Find("fp32_flat_groups"), nullptr);
    EXPECT_NE(osd.Find("optimizer_state_dict"), nullptr);
  } else {
    for (const char* dropped : {"base_optimizer_state", "single_partition_of_fp32_groups", "param_slice_mappings"}) {
      EXPECT_EQ(osd.Find(dropped), nullptr) << dropped;
    }
    EXPECT_EQ(osd.Find("ds_version")->AsString(), "0.14.5");
  }
  ZT_SKIP_WITHOUT_TORCH_PYTHON();
  const std::string python = *testing::PythonWithTorch();
  const std::string some = folder + "/zero/" + names.front();
  const std::vector<std::string> files = {folder + "/zero/optimizer_state.pt", some + "/fp32.pt"};
  const std::vector<std::string> dumps = Dumps(python, files);
  for (size_t i = 0; i < files.size(); ++i) {
    EXPECT_TRUE(absl::StartsWith(dumps[i], "root: ")) << files[i] << ":\n" << dumps[i];
  }
}

TEST(DeepSpeedWriterErrors, UniversalTakesNoWorldSize) {
  testing::ScratchDir tmp;
  auto r = RunZt(absl::StrCat("ckpt convert ", Quote(kFixtures + "/zero2_fp32"), " ", Quote(tmp.path() + "/u"),
                              " --to universal --world-size 3"));
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(absl::StrContains(r.output, "--world-size does not apply to --to universal")) << r.output;
  EXPECT_FALSE(fs::exists(tmp.path() + "/u/latest_universal"));
}

INSTANTIATE_TEST_SUITE_P(Fixtures, DeepSpeedWriter,
                         ::testing::Values(Fixture{"zero1_fp32", 1}, Fixture{"zero2_fp32", 2}, Fixture{"zero2_bf16", 2},
                                           Fixture{"zero3_fp32", 3}, Fixture{"zero3_bf16", 3}),
                         [](const auto& info) { return std::string(info.param.dir); });

// --- a checkpoint as zerotorch's engine writes it

struct NativeParam {
  std::string name;
  std::vector<int64_t> shape;
};

// Model order a.weight, a.bias, b.weight (plus a tied alias c.weight -> a.weight
// and a buffer b.scale), grouped the engine's way (plan::PlanLayout walks the
// model backwards: group 0 holds the last parameters), 2 ranks, AdamW state.
// `record_order`: the layout records the model order as the engine's
// checkpoints do (optimizer_groups); false is what older zerotorch wrote.
void WriteNativeCheckpoint(const std::string& dir, int stage, DType dtype, bool record_order = true) {
  const std::vector<NativeParam> params = {{"a.weight", {4, 3}}, {"a.bias", {3}}, {"b.weight", {5}}};
  std::vector<plan::ParamInfo> infos;
  for (const NativeParam& p : params) infos.push_back({p.name, p.shape, p.shape.size() == 2 ? 12 : p.shape[0]});
  const int world = 2;
  const plan::Layout planned = plan::PlanLayout(infos, /*bucket_numel=*/10, world);
  SavedLayout layout;
  layout.stage = stage;
  layout.world_size = world;
  layout.model_dtype = dtype;
  layout.shared["c.weight"] = "a.weight";
  if (record_order) layout.optimizer_groups = {{"a.weight", "a.bias", "b.weight"}};
  // Each element's value: a function of (parameter, element, what) so every tensor differs.
  auto value = [](size_t param, int64_t i, int what) {
    return static_cast<float>(std::sin(0.37 * (static_cast<double>(param) * 100 + i) + what) * (what + 1));
  };
  std::vector<std::vector<float>> buffers;  // [group][what] padded buffers
  for (const plan::GroupLayout& g : planned.groups) {
    SavedGroup sg;
    sg.numel = g.numel;
    sg.padded_numel = g.padded_numel;
    for (const plan::ParamSlot& s : g.slots) {
      const NativeParam& p = params[static_cast<size_t>(s.param_index)];
      sg.params.push_back({p.name, p.shape, s.offset, s.numel});
    }
    layout.groups.push_back(sg);
  }
  TrainingState ts;
  ts.global_steps = 3;
  ts.global_samples = 24;
  ts.micro_steps = 3;
  ts.optimizer_type = "AdamW";
  ts.optimizer_step = 3;
  ts.save_id = NewSaveId();
  ts.ds_config = absl::StrCat(
      R"({"train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 1, "gradient_clipping": 1.0,
          "optimizer": {"type": "AdamW", "params": {"lr": 0.001, "betas": [0.9, 0.95], "eps": 1e-8,
          "weight_decay": 0.1}}, "scheduler": {"type": "WarmupLR", "params": {"warmup_min_lr": 0,
          "warmup_max_lr": 0.001, "warmup_num_steps": 10, "warmup_type": "linear"}},
          "zero_optimization": {"stage": )",
      stage, "}", dtype == DType::kBFloat16 ? R"(, "bf16": {"enabled": true})" : "", "}");
  // Full values per what (0 master, 1 exp_avg, 2 exp_avg_sq) per group's padded buffer.
  std::vector<std::array<std::vector<float>, 3>> flat(layout.groups.size());
  std::map<std::string, std::vector<float>> master;
  for (size_t g = 0; g < layout.groups.size(); ++g) {
    for (int what = 0; what < 3; ++what) {
      flat[g][what].assign(static_cast<size_t>(layout.groups[g].padded_numel), 0.0f);
      for (const SavedParam& p : layout.groups[g].params) {
        const size_t index = p.name == "a.weight" ? 0 : p.name == "a.bias" ? 1 : 2;
        for (int64_t i = 0; i < p.numel; ++i) flat[g][what][p.offset + i] = value(index, i, what);
        if (what == 0) master[p.name].assign(flat[g][0].begin() + p.offset, flat[g][0].begin() + p.offset + p.numel);
      }
    }
  }
  // The module: buffers always; stages 0-2 also the parameters (model dtype) and the tied alias.
  std::vector<std::vector<uint16_t>> halves;
  halves.reserve(8);
  static const float kScale[2] = {0.5f, 2.0f};
  Dict module;
  module.ordered = true;
  auto module_tensor = [&](const std::string& name, const std::vector<int64_t>& shape) {
    const std::vector<float>& m = master.at(name);
    TensorRef t;
    t.shape = shape;
    t.dtype = dtype;
    if (dtype == DType::kFloat32) {
      t.data = m.data();
    } else {
      halves.emplace_back(m.size());
      EXPECT_TRUE(ConvertElements(DType::kFloat32, m.data(), dtype, halves.back().data(), m.size()).ok());
      t.data = halves.back().data();
    }
    return t;
  };
  if (stage < 3) {
    for (const NativeParam& p : params) module.Set(p.name, module_tensor(p.name, p.shape));
  }
  TensorRef scale;
  scale.shape = {2};
  scale.data = kScale;
  module.Set("b.scale", scale);
  if (stage < 3) module.Set("c.weight", module_tensor("a.weight", {4, 3}));
  ASSERT_TRUE(MakeDirs(dir + "/step3").ok());
  for (int r = 0; r < world; ++r) {
    RankShards shards;
    for (size_t g = 0; g < layout.groups.size(); ++g) {
      const auto [b, e] = layout.Range(layout.groups[g].padded_numel, r);
      for (int what = 0; what < 3; ++what) {
        TensorRef t;
        t.shape = {e - b};
        t.data = flat[g][what].data() + b;
        if (what == 0) {
          shards.master.push_back(t);
        } else {
          shards.state[what == 1 ? "exp_avg" : "exp_avg_sq"].push_back(t);
        }
      }
    }
    ASSERT_TRUE(WritePtFile(dir + "/step3/" + OptimStatesFile(r, dtype), MakeOptimStates(layout, r, shards, ts)).ok());
    if (stage == 3 || r == 0) {
      ASSERT_TRUE(WritePtFile(dir + "/step3/" + ModelStatesFile(stage, r),
                              MakeModelStates(layout, r, ts, module, {"b.scale"}, shards, Value()))
                      .ok());
    }
  }
  ASSERT_TRUE(WriteFileAtomically(dir + "/latest", "step3\n").ok());
}

class NativeToDeepSpeed : public ::testing::TestWithParam<std::pair<int, DType>> {};

TEST_P(NativeToDeepSpeed, ConsolidatesToTheSameWeights) {
  const auto [stage, dtype] = GetParam();
  testing::ScratchDir tmp;
  const std::string native = tmp.path() + "/native", ds = tmp.path() + "/ds";
  WriteNativeCheckpoint(native, stage, dtype);
  auto src = ZeroCheckpoint::Open(native);
  ASSERT_TRUE(src.ok()) << src.status();
  ASSERT_EQ((*src)->layout().groups.size(), 2u);  // the engine's grouping, not DeepSpeed's
  auto r = RunZt(absl::StrCat("ckpt convert ", Quote(native), " ", Quote(ds), " --to deepspeed --world-size 3"));
  ASSERT_EQ(r.code, 0) << r.output;
  auto out = ZeroCheckpoint::Open(ds);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)->format(), "DeepSpeed 0.14.5");
  // One param group, in the model's parameter order (DeepSpeed's load needs it).
  EXPECT_EQ((*out)->layout().optimizer_groups,
            (std::vector<std::vector<std::string>>{{"a.weight", "a.bias", "b.weight"}}));
  EXPECT_EQ((*out)->layout().shared.at("c.weight"), "a.weight");
  EXPECT_EQ((*out)->training_state().optimizer_step, 3);
  for (const char* what : {"master", "exp_avg", "exp_avg_sq"}) {
    for (const char* name : {"a.weight", "a.bias", "b.weight"}) {
      const int64_t n = std::string(name) == "a.weight" ? 12 : std::string(name) == "a.bias" ? 3 : 5;
      std::vector<float> a(n), b(n);
      ASSERT_TRUE((*src)->ReadTrainable(name, what, 0, n, a.data()).ok());
      ASSERT_TRUE((*out)->ReadTrainable(name, what, 0, n, b.data()).ok());
      EXPECT_EQ(std::memcmp(a.data(), b.data(), n * 4), 0) << name << " " << what;
    }
  }
  ASSERT_TRUE(ExportSafetensors(**src, tmp.path() + "/native.safetensors").ok());
  ASSERT_TRUE(ExportSafetensors(**out, tmp.path() + "/ds.safetensors").ok());
  auto a = SafetensorsReader::Open(tmp.path() + "/native.safetensors");
  auto b = SafetensorsReader::Open(tmp.path() + "/ds.safetensors");
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ((*a)->tensors().size(), (*b)->tensors().size());
  for (const auto& t : (*a)->tensors()) {
    const auto* u = (*b)->Find(t.name);
    ASSERT_NE(u, nullptr) << t.name;
    EXPECT_EQ(u->dtype, t.dtype);
    EXPECT_EQ(u->shape, t.shape);
    std::string x(t.nbytes, '\0'), y(u->nbytes, '\0');
    ASSERT_TRUE((*a)->Read(t, x.data()).ok());
    ASSERT_TRUE((*b)->Read(*u, y.data()).ok());
    EXPECT_TRUE(x == y) << t.name;
  }
  // What DeepSpeed reads beyond the weights, through Python's unpickler.
  ZT_SKIP_WITHOUT_TORCH_PYTHON();
  const std::vector<std::string> dumps =
      Dumps(*testing::PythonWithTorch(),
            {ds + "/step3/" + ModelStatesFile(stage, 0), ds + "/step3/" + OptimStatesFile(0, dtype)});
  const std::string& dump = dumps[0];
  EXPECT_TRUE(absl::StrContains(dump, "root['param_shapes'][0]['a.weight']: torch.Size (4, 3)")) << dump;
  EXPECT_TRUE(absl::StrContains(dump, "root['lr_scheduler']['last_batch_iteration']: builtins.int 2")) << dump;
  EXPECT_TRUE(absl::StrContains(dump, "root['module']['c.weight']: torch.Tensor")) << dump;
  EXPECT_TRUE(absl::StrContains(dump, "root['sparse_tensor_module_names']: builtins.set []")) << dump;
  const std::string& optim = dumps[1];
  // WarmupLR, linear, after 3 steps (last_batch_iteration 2): 0.001 * 2 / 10.
  EXPECT_TRUE(absl::StrContains(optim, "['param_groups'][0]['lr']: builtins.float 0.0002")) << optim;
  EXPECT_TRUE(absl::StrContains(optim, "['param_groups'][0]['betas'][1]: builtins.float 0.95")) << optim;
}

// A stage-3 checkpoint that does not record the model's parameter order
// (older zerotorch) cannot be written in DeepSpeed's format: DeepSpeed would
// load its partitions by position into the wrong parameters without an
// error. Refused, naming why and what to do; nothing is left behind. At
// stages 1/2 the module state dict gives the order.
TEST(NativeToDeepSpeedOrder, AStage3CheckpointWithoutTheModelOrderIsRefused) {
  testing::ScratchDir tmp;
  const std::string native = tmp.path() + "/native", ds = tmp.path() + "/ds";
  WriteNativeCheckpoint(native, 3, DType::kFloat32, /*record_order=*/false);
  auto r = RunZt(absl::StrCat("ckpt convert ", Quote(native), " ", Quote(ds), " --to deepspeed --world-size 2"));
  EXPECT_NE(r.code, 0) << r.output;
  EXPECT_TRUE(absl::StrContains(r.output, "does not record its parameters' order")) << r.output;
  EXPECT_TRUE(absl::StrContains(r.output, "zt train --resume")) << r.output;
  EXPECT_FALSE(std::filesystem::exists(ds + "/latest"));
  const std::string ds2 = tmp.path() + "/ds2", native2 = tmp.path() + "/native2";
  WriteNativeCheckpoint(native2, 2, DType::kFloat32, /*record_order=*/false);
  auto ok = RunZt(absl::StrCat("ckpt convert ", Quote(native2), " ", Quote(ds2), " --to deepspeed --world-size 2"));
  ASSERT_EQ(ok.code, 0) << ok.output;
  auto out = ZeroCheckpoint::Open(ds2);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ((*out)->layout().optimizer_groups,
            (std::vector<std::vector<std::string>>{{"a.weight", "a.bias", "b.weight"}}));
}

INSTANTIATE_TEST_SUITE_P(Stages, NativeToDeepSpeed,
                         ::testing::Values(std::make_pair(1, DType::kFloat32), std::make_pair(2, DType::kBFloat16),
                                           std::make_pair(3, DType::kFloat32), std::make_pair(3, DType::kBFloat16)),
                         [](const auto& info) {
                           return absl::StrCat("stage", info.param.first, "_",
                                               info.param.second == DType::kFloat32 ? "fp32" : "bf16");
                         });

// --- the objects DeepSpeed's files pickle, read back by our reader

TEST(DeepSpeedWriterValues, ObjectsReadBackAsTheReaderMapsDeepSpeedsFiles) {
  testing::ScratchDir tmp;
  Dict module;
  module.ordered = true;
  module.Set("w", Value(int64_t{1}));
  Dict meta;
  meta.ordered = true;
  module.attributes.emplace_back("_metadata", Value(std::move(meta)));
  Object scaler{{"deepspeed.runtime.fp16.loss_scaler", "LossScaler"}, {}};
  scaler.state.Set("cur_scale", 1.0);
  Dict root;
  root.Set("size", Value(Call{{"torch", "Size"}, {Value(Value::Tuple{{Value(2), Value(3)}})}}));
  root.Set("set", Value(Call{{"builtins", "set"}, {Value(List{})}}));
  root.Set("stage", Value(Call{{"builtins", "getattr"},
                               {Value(Global{"deepspeed.runtime.zero.config", "ZeroStageEnum"}), Value("gradients")}}));
  root.Set("scaler", Value(std::move(scaler)));
  root.Set("module", Value(std::move(module)));
  ASSERT_TRUE(WritePtFile(tmp.File("x.pt"), Value(std::move(root))).ok());
  auto back = PtReader::Open(tmp.File("x.pt"));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(testing::Describe((*back)->root()), testing::Describe(Value([] {
              Dict d;
              d.Set("size", Value(Value::Tuple{{Value(2), Value(3)}}));
              d.Set("set", Value(List{}));
              d.Set("stage", Value(2));
              Dict s;
              s.Set("__class__", "deepspeed.runtime.fp16.loss_scaler.LossScaler");
              s.Set("cur_scale", 1.0);
              d.Set("scaler", Value(std::move(s)));
              Dict m;
              m.ordered = true;
              m.Set("w", Value(int64_t{1}));
              d.Set("module", Value(std::move(m)));
              return d;
            }())));
  // A global whose name would break the GLOBAL opcode is refused.
  Dict bad;
  bad.Set("g", Value(Global{"torch\nos", "system"}));
  EXPECT_FALSE(WritePtFile(tmp.File("bad.pt"), Value(std::move(bad))).ok());
}

// --- bad input

TEST(DeepSpeedWriterErrors, UsageErrorsAreNamedWithExitCode2) {
  testing::ScratchDir tmp;
  const std::string src = Quote(kFixtures + "/zero2_fp32");
  auto r = RunZt(absl::StrCat("ckpt convert ", src, " ", Quote(tmp.path() + "/a"), " --to megatron"));
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(absl::StrContains(r.output, "--to must be 'deepspeed', 'universal' or 'zerotorch', got 'megatron'"))
      << r.output;
  r = RunZt(absl::StrCat("ckpt convert ", src, " ", Quote(tmp.path() + "/b")));
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(absl::StrContains(r.output, "--to is required")) << r.output;
  r = RunZt(absl::StrCat("ckpt convert ", src, " ", Quote(tmp.path() + "/c"), " --to deepspeed --world-size 0"));
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(absl::StrContains(r.output, "--world-size must be a positive integer")) << r.output;
  fs::create_directories(tmp.path() + "/full");
  testing::WriteAll(tmp.path() + "/full/keep.txt", "mine");
  r = RunZt(absl::StrCat("ckpt convert ", src, " ", Quote(tmp.path() + "/full"), " --to deepspeed"));
  EXPECT_EQ(r.code, 2) << r.output;
  EXPECT_TRUE(absl::StrContains(r.output, "exists and is not empty")) << r.output;
  EXPECT_EQ(FilesIn(tmp.path() + "/full"), std::vector<std::string>{"keep.txt"});
  EXPECT_FALSE(fs::exists(tmp.path() + "/a") || fs::exists(tmp.path() + "/b") || fs::exists(tmp.path() + "/c"));
  // Not into the source's tag folder (before: written there, exit 0, and
  // deleted with the tag when it was saved again).
  fs::copy(kFixtures + "/zero2_fp32", tmp.path() + "/src", fs::copy_options::recursive);
  const std::vector<std::string> before = FilesIn(tmp.path() + "/src"),
                                 tag_before = FilesIn(tmp.path() + "/src/global_step4");
  for (const std::string inside : {"/src/global_step4/sub", "/src/global_step4/./x/../y"}) {
    r = RunZt(
        absl::StrCat("ckpt convert ", Quote(tmp.path() + "/src"), " ", Quote(tmp.path() + inside), " --to universal"));
    EXPECT_EQ(r.code, 2) << r.output;
    EXPECT_TRUE(absl::StrContains(r.output, "lies inside the source checkpoint")) << r.output;
  }
  EXPECT_EQ(FilesIn(tmp.path() + "/src"), before);
  EXPECT_EQ(FilesIn(tmp.path() + "/src/global_step4"), tag_before);
}

TEST(DeepSpeedWriterErrors, AMissingSourceIsNamed) {
  testing::ScratchDir tmp;
  auto r = RunZt(absl::StrCat("ckpt convert ", Quote(tmp.path() + "/nothing"), " ", Quote(tmp.path() + "/out"),
                              " --to deepspeed"));
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_TRUE(absl::StrContains(r.output, tmp.path() + "/nothing")) << r.output;
  EXPECT_FALSE(fs::exists(tmp.path() + "/out"));
}

TEST(DeepSpeedWriterErrors, AFailureHalfwayLeavesNoCheckpoint) {
  // Rank 1's fp32 partition damaged: rank 0's files are written before the
  // read of rank 1's data fails; none of it may appear under the destination.
  testing::ScratchDir tmp;
  fs::copy(kFixtures + "/zero2_fp32", tmp.path() + "/src", fs::copy_options::recursive);
  const std::string victim = tmp.path() + "/src/global_step4/zero_pp_rank_1_mp_rank_00_optim_states.pt";
  auto file = PtReader::Open(victim);
  ASSERT_TRUE(file.ok()) << file.status();
  const Dict& osd = (*file)->root().AsDict().Find("optimizer_state_dict")->AsDict();
  const TensorRef& t = osd.Find("single_partition_of_fp32_groups")->AsList()[0].AsTensor();
  std::string bytes = testing::ReadAll(victim);
  bytes[t.file_offset + 100] ^= 0x55;
  testing::WriteAll(victim, bytes);
  const std::string out = tmp.path() + "/out";
  auto r = RunZt(absl::StrCat("ckpt convert ", Quote(tmp.path() + "/src"), " ", Quote(out), " --to deepspeed"));
  EXPECT_EQ(r.code, 1) << r.output;
  EXPECT_TRUE(absl::StrContains(r.output, "CRC")) << r.output;
  EXPECT_TRUE(FilesIn(out).empty()) << "left behind: " << absl::StrJoin(FilesIn(out), ", ");
}

}  // namespace
}  // namespace zt::ckpt
