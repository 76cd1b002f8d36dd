// ckpt/format/safetensors.h without Python: streaming writes in arbitrary pieces,
// shard planning and the index, the multi-file model view, and the strict
// header checks (each malformed header fails naming the tensor and field).
#include "ckpt/format/safetensors.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "tests/ckpt/ckpt_test_util.h"
#include "util/status.h"

namespace zt::ckpt {
namespace {

using testing::ReadAll;
using testing::ScratchDir;
using testing::WriteAll;

SafetensorsEntry Entry(std::string name, DType dtype, std::vector<int64_t> shape) {
  SafetensorsEntry e;
  e.name = std::move(name);
  e.dtype = dtype;
  e.shape = std::move(shape);
  return e;
}

// The concatenated bytes of `entries`, deterministic.
std::string Payload(const std::vector<SafetensorsEntry>& entries) {
  std::string bytes;
  for (const auto& e : entries) {
    for (uint64_t i = 0; i < e.nbytes(); ++i) bytes.push_back(static_cast<char>((i * 13 + e.name.size()) & 0x7F));
  }
  return bytes;
}

absl::Status WriteInPieces(const std::string& path, const std::vector<SafetensorsEntry>& entries, size_t piece,
                           const std::map<std::string, std::string>& metadata = {}) {
  ZT_ASSIGN_OR_RETURN(auto w, SafetensorsWriter::Create(path, entries, metadata));
  const std::string bytes = Payload(entries);
  for (size_t at = 0; at < bytes.size(); at += piece) {
    ZT_RETURN_IF_ERROR(w->Write(bytes.data() + at, std::min(piece, bytes.size() - at)));
  }
  return w->Finish();
}

std::vector<SafetensorsEntry> AllDtypes() {
  return {Entry("a.f32", DType::kFloat32, {3, 4}),   Entry("b.f64", DType::kFloat64, {5}),
          Entry("c.f16", DType::kFloat16, {2, 3}),   Entry("d.bf16", DType::kBFloat16, {7}),
          Entry("e.empty", DType::kFloat32, {0, 4}), Entry("f.i64", DType::kInt64, {2}),
          Entry("g.i32", DType::kInt32, {3}),        Entry("h.i16", DType::kInt16, {1, 1}),
          Entry("i.i8", DType::kInt8, {9}),          Entry("j.u8", DType::kUInt8, {10}),
          Entry("k.bool", DType::kBool, {4}),        Entry("l.scalar", DType::kFloat32, {})};
}

TEST(Safetensors, RoundTripInAnyPieceSize) {
  ScratchDir dir;
  const auto entries = AllDtypes();
  const std::string payload = Payload(entries);
  for (size_t piece : {size_t{1}, size_t{5}, size_t{64}, payload.size()}) {
    SCOPED_TRACE(piece);
    const std::string path = dir.File("m.safetensors");
    ASSERT_TRUE(WriteInPieces(path, entries, piece, {{"format", "pt"}, {"step", "10"}}).ok());
    auto r = SafetensorsReader::Open(path);
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_EQ((*r)->tensors().size(), entries.size());
    EXPECT_EQ((*r)->metadata(), (std::map<std::string, std::string>{{"format", "pt"}, {"step", "10"}}));
    const std::string file = ReadAll(path);
    uint64_t header_len;
    std::memcpy(&header_len, file.data(), 8);
    EXPECT_EQ((8 + header_len) % 8, 0u) << "data must start 8-byte aligned";
    size_t at = 0;
    for (size_t i = 0; i < entries.size(); ++i) {
      const auto& t = (*r)->tensors()[i];
      EXPECT_EQ(t.name, entries[i].name) << "header order is declaration order";
      EXPECT_EQ(t.dtype, entries[i].dtype);
      EXPECT_EQ(t.shape, entries[i].shape);
      EXPECT_EQ(t.nbytes, entries[i].nbytes());
      EXPECT_EQ(t.file_offset, 8 + header_len + at);
      std::string got(t.nbytes, '\0');
      ASSERT_TRUE((*r)->Read(t, got.data()).ok());
      EXPECT_EQ(got, payload.substr(at, t.nbytes));
      if (t.nbytes >= 4) {
        char part[2];
        ASSERT_TRUE((*r)->ReadBytes(t, 1, 3, part).ok());
        EXPECT_EQ(std::string(part, 2), payload.substr(at + 1, 2));
      }
      at += t.nbytes;
    }
    EXPECT_EQ((*r)->Find("g.i32"), &(*r)->tensors()[6]);
    EXPECT_EQ((*r)->Find("nope"), nullptr);
    const auto& a = *(*r)->Find("a.f32");
    char sink[8];
    EXPECT_EQ((*r)->ReadBytes(a, 40, 49, sink).code(), absl::StatusCode::kOutOfRange);
  }
}

TEST(Safetensors, WriterRefusesWrongByteCountsAndNames) {
  ScratchDir dir;
  const std::string path = dir.File("w.safetensors");
  const std::vector<SafetensorsEntry> entries = {Entry("x", DType::kFloat32, {2}), Entry("y", DType::kInt8, {3})};
  {
    auto w = SafetensorsWriter::Create(path, entries);
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE((*w)->Write("12345678", 8).ok());
    ASSERT_TRUE((*w)->Write("ab", 2).ok());
    absl::Status st = (*w)->Finish();
    ASSERT_FALSE(st.ok());
    EXPECT_TRUE(absl::StrContains(st.message(), "tensor 'y' got 2 of its 3 bytes")) << st;
  }
  EXPECT_TRUE(dir.List().empty()) << "an unfinished file must not appear";
  {
    auto w = SafetensorsWriter::Create(path, entries);
    ASSERT_TRUE(w.ok());
    absl::Status st = (*w)->Write("0123456789abc", 13);
    ASSERT_FALSE(st.ok());
    EXPECT_TRUE(absl::StrContains(st.message(), "past the last declared tensor")) << st;
  }
  auto dup = SafetensorsWriter::Create(path, {Entry("x", DType::kFloat32, {1}), Entry("x", DType::kFloat32, {1})});
  ASSERT_FALSE(dup.ok());
  EXPECT_TRUE(absl::StrContains(dup.status().message(), "tensor 'x': declared twice")) << dup.status();
  EXPECT_FALSE(SafetensorsWriter::Create(path, {Entry("__metadata__", DType::kFloat32, {1})}).ok());
  EXPECT_FALSE(SafetensorsWriter::Create(path, {Entry("neg", DType::kFloat32, {-2})}).ok());
  EXPECT_TRUE(dir.List().empty());
}

TEST(ShardPlan, GreedyInOrder) {
  struct Case {
    std::string name;
    std::vector<uint64_t> sizes;  // bytes per tensor (uint8)
    uint64_t max;
    std::vector<std::vector<int>> groups;  // tensor indices per shard
  };
  const std::vector<Case> cases = {
      {"AllFit", {10, 20, 30}, 100, {{0, 1, 2}}},
      {"ExactFit", {50, 50, 50}, 100, {{0, 1}, {2}}},
      {"Greedy", {60, 30, 20, 90, 5}, 100, {{0, 1}, {2}, {3, 4}}},
      {"OversizedAlone", {10, 500, 10}, 100, {{0}, {1}, {2}}},
      {"OversizedFirst", {500, 10, 10}, 100, {{0}, {1, 2}}},
      {"EmptyTensorsJoin", {100, 0, 0}, 100, {{0, 1, 2}}},
      {"Nothing", {}, 100, {{}}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    std::vector<SafetensorsEntry> entries;
    for (size_t i = 0; i < c.sizes.size(); ++i) {
      entries.push_back(Entry("t" + std::to_string(i), DType::kUInt8, {static_cast<int64_t>(c.sizes[i])}));
    }
    ShardPlan plan = PlanShards(entries, c.max, "model");
    ASSERT_EQ(plan.shards.size(), c.groups.size());
    EXPECT_EQ(plan.needs_index(), c.groups.size() > 1);
    for (size_t s = 0; s < plan.shards.size(); ++s) {
      std::vector<int> got;
      for (const auto& e : plan.shards[s].entries) got.push_back(std::stoi(e.name.substr(1)));
      EXPECT_EQ(got, c.groups[s]) << "shard " << s;
      if (plan.shards.size() == 1) {
        EXPECT_EQ(plan.shards[s].file, "model.safetensors");
      } else {
        char want[64];
        std::snprintf(want, sizeof(want), "model-%05zu-of-%05zu.safetensors", s + 1, plan.shards.size());
        EXPECT_EQ(plan.shards[s].file, want);
      }
    }
  }
}

TEST(SafetensorsModel, ShardedWithIndexSingleFileAndDirectory) {
  ScratchDir dir;
  const auto entries = AllDtypes();
  const std::string payload = Payload(entries);
  ShardPlan plan = PlanShards(entries, 40, "model");
  ASSERT_GT(plan.shards.size(), 2u);
  for (const auto& shard : plan.shards) ASSERT_TRUE(WriteInPieces(dir.File(shard.file), shard.entries, 7).ok());
  ASSERT_TRUE(WriteIndex(dir.path(), plan).ok());
  auto index = nlohmann::json::parse(ReadAll(dir.File("model.safetensors.index.json")));
  uint64_t total = 0;
  for (const auto& e : entries) total += e.nbytes();
  EXPECT_EQ(index["metadata"]["total_size"].get<uint64_t>(), total);
  EXPECT_EQ(index["weight_map"]["a.f32"], plan.shards[0].file);
  EXPECT_EQ(index["weight_map"].size(), entries.size());

  for (const std::string& open : {dir.path(), dir.File("model.safetensors.index.json")}) {
    SCOPED_TRACE(open);
    auto m = SafetensorsModel::Open(open);
    ASSERT_TRUE(m.ok()) << m.status();
    std::vector<std::string> names;
    for (const auto& e : entries) names.push_back(e.name);
    std::sort(names.begin(), names.end());
    EXPECT_EQ((*m)->names(), names);
    size_t at = 0;
    for (const auto& e : entries) {
      auto [reader, t] = (*m)->Find(e.name);
      ASSERT_NE(t, nullptr) << e.name;
      std::string got(t->nbytes, '\0');
      ASSERT_TRUE(reader->Read(*t, got.data()).ok());
      EXPECT_EQ(got, payload.substr(at, e.nbytes())) << e.name;
      at += e.nbytes();
    }
    EXPECT_EQ((*m)->Find("missing").second, nullptr);
  }

  // A single file, opened directly and through its directory.
  ScratchDir single;
  ASSERT_TRUE(WriteInPieces(single.File("model.safetensors"), entries, 1000).ok());
  for (const std::string& open : {single.path(), single.File("model.safetensors")}) {
    auto m = SafetensorsModel::Open(open);
    ASSERT_TRUE(m.ok()) << m.status();
    EXPECT_EQ((*m)->names().size(), entries.size());
  }

  // What is missing is named.
  ScratchDir empty;
  auto none = SafetensorsModel::Open(empty.path());
  ASSERT_FALSE(none.ok());
  EXPECT_TRUE(
      absl::StrContains(none.status().message(), "holds neither model.safetensors nor model.safetensors.index.json"))
      << none.status();
  std::remove(dir.File(plan.shards[1].file).c_str());
  auto lost_shard = SafetensorsModel::Open(dir.path());
  ASSERT_FALSE(lost_shard.ok());
  EXPECT_TRUE(absl::StrContains(lost_shard.status().message(), "lists shard '" + plan.shards[1].file + "'"))
      << lost_shard.status();
  WriteAll(dir.File("model.safetensors.index.json"), R"({"weight_map": {"ghost": ")" + plan.shards[0].file + R"("}})");
  auto ghost = SafetensorsModel::Open(dir.path());
  ASSERT_FALSE(ghost.ok());
  EXPECT_TRUE(absl::StrContains(ghost.status().message(), "maps 'ghost' to")) << ghost.status();
  auto nothing = SafetensorsModel::Open(dir.File("does-not-exist"));
  ASSERT_FALSE(nothing.ok());
  EXPECT_EQ(nothing.status().code(), absl::StatusCode::kNotFound);
}

// A model folder is untrusted input: the shard names its index gives must be
// files of the folder. Traversal ("../", absolute paths) is refused before
// anything is opened; symlinks may point inside the folder or, in a Hugging
// Face cache snapshot, into the repository's blobs/, and nowhere else; a
// FIFO given as a shard is refused at once rather than blocking in open().
TEST(SafetensorsModel, ShardNamesStayInsideTheFolder) {
  ScratchDir root;
  const auto entries = AllDtypes();
  const std::string model = root.File("model"), outside = root.File("outside");
  ASSERT_EQ(::mkdir(model.c_str(), 0755), 0);
  ASSERT_EQ(::mkdir(outside.c_str(), 0755), 0);
  ASSERT_TRUE(WriteInPieces(outside + "/evil.safetensors", entries, 1000).ok());
  auto index_naming = [&](const std::string& shard) {
    WriteAll(model + "/model.safetensors.index.json", R"({"weight_map": {"a.f32": ")" + shard + R"("}})");
    return SafetensorsModel::Open(model);
  };
  for (const std::string bad : {"../outside/evil.safetensors", "/etc/passwd", "..", "sub/model.safetensors"}) {
    SCOPED_TRACE(bad);
    auto m = index_naming(bad);
    ASSERT_FALSE(m.ok());
    EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument) << m.status();
    EXPECT_TRUE(absl::StrContains(m.status().message(), "weight_map['a.f32']")) << m.status();
    EXPECT_TRUE(absl::StrContains(m.status().message(), "not a plain file name")) << m.status();
  }
  // A symlink out of the folder: refused, naming where it points.
  ASSERT_EQ(::symlink((outside + "/evil.safetensors").c_str(), (model + "/link.safetensors").c_str()), 0);
  auto out = index_naming("link.safetensors");
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kPermissionDenied) << out.status();
  EXPECT_TRUE(absl::StrContains(out.status().message(), "outside")) << out.status();
  // A symlink inside the folder is fine.
  ASSERT_TRUE(WriteInPieces(model + "/real.safetensors", entries, 1000).ok());
  ASSERT_EQ(::symlink("real.safetensors", (model + "/alias.safetensors").c_str()), 0);
  EXPECT_TRUE(index_naming("alias.safetensors").ok());
  // A FIFO: refused at once (the test would hang in open() otherwise).
  ASSERT_EQ(::mkfifo((model + "/pipe.safetensors").c_str(), 0600), 0);
  auto fifo = index_naming("pipe.safetensors");
  ASSERT_FALSE(fifo.ok());
  EXPECT_TRUE(absl::StrContains(fifo.status().message(), "not a regular file")) << fifo.status();

  // A Hugging Face cache: models--org--name/snapshots/<rev>/* -> ../../blobs/<hash>.
  const std::string repo = root.File("models--org--tiny");
  for (const std::string& d : {repo, repo + "/blobs", repo + "/snapshots", repo + "/snapshots/abc123"}) {
    ASSERT_EQ(::mkdir(d.c_str(), 0755), 0) << d;
  }
  ASSERT_TRUE(WriteInPieces(repo + "/blobs/0f1e2d", entries, 1000).ok());
  const std::string snap = repo + "/snapshots/abc123";
  ASSERT_EQ(::symlink("../../blobs/0f1e2d", (snap + "/model-00001-of-00001.safetensors").c_str()), 0);
  WriteAll(snap + "/model.safetensors.index.json", R"({"weight_map": {"a.f32": "model-00001-of-00001.safetensors"}})");
  auto cached = SafetensorsModel::Open(snap);
  EXPECT_TRUE(cached.ok()) << cached.status();
  // ...but not out of the repository's cache folder.
  ASSERT_EQ(::symlink((outside + "/evil.safetensors").c_str(), (snap + "/escape.safetensors").c_str()), 0);
  WriteAll(snap + "/model.safetensors.index.json", R"({"weight_map": {"a.f32": "escape.safetensors"}})");
  auto escaped = SafetensorsModel::Open(snap);
  ASSERT_FALSE(escaped.ok());
  EXPECT_EQ(escaped.status().code(), absl::StatusCode::kPermissionDenied) << escaped.status();
}

// A file with the given header text and data bytes (header padded by the caller or not).
std::string Raw(const std::string& header, const std::string& data) {
  std::string s(8, '\0');
  uint64_t n = header.size();
  std::memcpy(s.data(), &n, 8);
  return s + header + data;
}

TEST(SafetensorsReader, StrictHeaderValidation) {
  ScratchDir dir;
  struct Case {
    std::string name;
    std::string file;
    std::string error;  // "" = must open
  };
  const std::string ok_header = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                                R"("b":{"dtype":"U8","shape":[0],"data_offsets":[8,8]}})";
  std::string huge_len(8, '\xff');
  const std::vector<Case> cases = {
      {"Valid", Raw(ok_header, std::string(8, 'x')), ""},
      {"ValidUnpadded", Raw(R"({"a":{"dtype":"I8","shape":[3],"data_offsets":[0,3]}})", "abc"), ""},
      {"TooShort", "abc", "only 3 bytes"},
      {"HeaderLongerThanFile", huge_len + "{}", "header length"},
      {"NotJson", Raw("{not json", ""), "header: not valid JSON at byte"},
      {"DuplicateName",
       Raw(R"({"a":{"dtype":"I8","shape":[1],"data_offsets":[0,1]},"a":{"dtype":"I8","shape":[1],"data_offsets":[1,2]}})",
           "ab"),
       "key \"a\" appears twice in the top-level object"},
      {"NestedShape", Raw(R"({"a":{"dtype":"I8","shape":[[[1]]],"data_offsets":[0,1]}})", "a"),
       "nested deeper than 3 levels (in the array at 'a'.'shape')"},
      {"NotObject", Raw("[1,2]", ""), "header is not a JSON object"},
      {"UnknownDtype", Raw(R"({"a":{"dtype":"C64","shape":[1],"data_offsets":[0,8]}})", std::string(8, 'x')),
       "tensor 'a': dtype 'C64' is not supported"},
      {"NegativeShape", Raw(R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", std::string(4, 'x')),
       "tensor 'a': 'shape' holds something other than a non-negative integer"},
      {"MissingOffsets", Raw(R"({"a":{"dtype":"F32","shape":[1]}})", std::string(4, 'x')),
       "tensor 'a': 'data_offsets' missing"},
      {"UnknownField", Raw(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"x":1}})", std::string(4, 'x')),
       "tensor 'a': unknown field 'x'"},
      {"SizeMismatch", Raw(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", std::string(8, 'x')),
       "tensor 'a': data_offsets [0, 8) hold 8 bytes, but float32 [3] needs 12"},
      {"OffsetsBeyondData", Raw(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", std::string(5, 'x')),
       "lie outside the 5-byte data area"},
      {"Overlap",
       Raw(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
           std::string(8, 'x')),
       "tensor 'b' starts at data offset 4, overlapping"},
      {"Gap",
       Raw(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
           std::string(12, 'x')),
       "tensor 'b' starts at data offset 8, leaving a gap"},
      {"TrailingBytes", Raw(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", std::string(6, 'x')),
       "the tensors end at data offset 4 but the data area has 6 bytes"},
      {"BadMetadata", Raw(R"({"__metadata__":{"k":1}})", ""), "'__metadata__' value 'k' is not a string"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string path = dir.File(c.name + ".safetensors");
    WriteAll(path, c.file);
    auto r = SafetensorsReader::Open(path);
    if (c.error.empty()) {
      EXPECT_TRUE(r.ok()) << r.status();
      continue;
    }
    ASSERT_FALSE(r.ok());
    EXPECT_TRUE(absl::StrContains(r.status().message(), c.error)) << r.status();
    EXPECT_TRUE(absl::StrContains(r.status().message(), path)) << r.status();
  }
}

// What a file made to exhaust time or memory gets: a named error with the
// limit, quickly. (Before: a 100 MB header of nested arrays was killed for
// memory, and 1.65 million header entries or a 3-million-entry index ran
// for minutes: nlohmann's ordered_json inserts each key by a linear search.)
TEST(SafetensorsReader, HostileHeadersMeetNamedLimits) {
  ScratchDir dir;
  // 50 MB of nested arrays: refused at the fourth level, reading nothing more.
  const std::string nested = dir.File("nested.safetensors");
  WriteAll(nested, Raw(R"({"a":{"dtype":"I8","shape":)" + std::string(50u << 20, '['), ""));
  auto r = SafetensorsReader::Open(nested);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(absl::StrContains(r.status().message(), "nested deeper than 3 levels")) << r.status();

  // More tensors than the limit (lowered here to its floor, 1/1024th of the
  // default, so the test stays small): the header and an index are refused
  // naming ZT_MAX_SAFETENSORS_TENSORS; raised again, both open.
  ASSERT_EQ(::setenv("ZT_MAX_SAFETENSORS_TENSORS", "1024", 1), 0);
  std::string header = "{";
  std::string index = R"({"metadata": {"total_size": 0}, "weight_map": {)";
  for (int i = 0; i < 1025; ++i) {
    absl::StrAppend(&header, i ? "," : "", "\"t", i, R"(":{"dtype":"F32","shape":[0],"data_offsets":[0,0]})");
    absl::StrAppend(&index, i ? "," : "", "\"t", i, R"(": "model-1.safetensors")");
  }
  header += "}";
  index += "}}";
  const std::string model = dir.File("many");
  ASSERT_EQ(::mkdir(model.c_str(), 0755), 0);
  WriteAll(model + "/model-1.safetensors", Raw(header, ""));
  WriteAll(model + "/model.safetensors.index.json", index);
  r = SafetensorsReader::Open(model + "/model-1.safetensors");
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(absl::StrContains(r.status().message(),
                                "holds 1025 tensors; the limit is 1024 (ZT_MAX_SAFETENSORS_TENSORS raises it)"))
      << r.status();
  auto m = SafetensorsModel::Open(model);
  ASSERT_FALSE(m.ok());
  EXPECT_TRUE(absl::StrContains(m.status().message(), "the object at 'weight_map' has more than 1024 keys"))
      << m.status();
  ASSERT_EQ(::setenv("ZT_MAX_SAFETENSORS_TENSORS", "2048", 1), 0);
  r = SafetensorsReader::Open(model + "/model-1.safetensors");
  EXPECT_TRUE(r.ok()) << r.status();
  m = SafetensorsModel::Open(model);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ((*m)->names().size(), 1025u);
  ASSERT_EQ(::unsetenv("ZT_MAX_SAFETENSORS_TENSORS"), 0);

  // A name listed twice in an index is refused too (which shard holds it?).
  WriteAll(model + "/model.safetensors.index.json",
           R"({"weight_map": {"t1": "model-1.safetensors", "t1": "model-2.safetensors"}})");
  m = SafetensorsModel::Open(model);
  ASSERT_FALSE(m.ok());
  EXPECT_TRUE(absl::StrContains(m.status().message(), "key \"t1\" appears twice in the object at 'weight_map'"))
      << m.status();
}

}  // namespace
}  // namespace zt::ckpt
