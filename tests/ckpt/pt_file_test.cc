// ckpt/format/pt_file.h without Python: Value trees of every kind and tensors of
// every dtype round-trip through WritePtFile/PtReader; shared storages,
// partial reads, 64-byte alignment, forced ZIP64, a custom archive name;
// corrupted, truncated and foreign files fail with messages that name the
// file and the record.
#include "ckpt/format/pt_file.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>

#include "absl/strings/match.h"
#include "ckpt/format/crc32.h"
#include "ckpt/format/pt_file_internal.h"
#include "ckpt/format/zip.h"
#include "tests/ckpt/ckpt_test_util.h"

namespace zt::ckpt {
namespace {

using testing::Describe;
using testing::ReadAll;
using testing::ScratchDir;
using testing::WriteAll;

TensorRef MakeTensor(DType dtype, std::vector<int64_t> shape, const void* data) {
  TensorRef t;
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.data = data;
  return t;
}

// A string literal's bytes, embedded NULs included.
template <size_t N>
std::string Bytes(const char (&s)[N]) {
  return std::string(s, N - 1);
}

// A pickled float tensor of shape (2,) over a 2-element storage: record
// `key` (one character), storage offset pickled as `offset` (an integer
// opcode with its operand), as torch.save writes it.
std::string TensorPickle(const std::string& key, const std::string& offset) {
  return Bytes(
             "\x80\x02"
             "ctorch._utils\n_rebuild_tensor_v2\n("
             "(X\x07\x00\x00\x00storage"
             "ctorch\nFloatStorage\n"
             "X\x01\x00\x00\x00") +
         key +
         Bytes(
             "X\x03\x00\x00\x00"
             "cpuK\x02tQ") +
         offset + Bytes("K\x02\x85K\x01\x85\x89}tR.");
}

Value Tup(List items) { return Value(Value::Tuple{std::move(items)}); }

Value MakeDict(std::vector<std::pair<Value, Value>> items, bool ordered = false) {
  Dict d;
  d.ordered = ordered;
  for (auto& [k, v] : items) d.Set(std::move(k), std::move(v));
  return Value(std::move(d));
}

std::unique_ptr<PtReader> WriteAndOpen(const std::string& path, const Value& v, const PtWriteOptions& options = {}) {
  absl::Status st = WritePtFile(path, v, options);
  EXPECT_TRUE(st.ok()) << st;
  auto reader = PtReader::Open(path);
  EXPECT_TRUE(reader.ok()) << reader.status();
  return reader.ok() ? std::move(reader).value() : nullptr;
}

struct ValueCase {
  std::string name;
  Value value;
};

std::vector<ValueCase> ValueCases() {
  const double inf = std::numeric_limits<double>::infinity();
  List big_list;
  for (int i = 0; i < 2500; ++i) big_list.push_back(Value(i * 7 - 3000));  // crosses APPENDS batches
  Dict big_dict;
  for (int i = 0; i < 1500; ++i) big_dict.Set(Value("key" + std::to_string(i)), Value(i));
  return {
      {"None", Value()},
      {"True", Value(true)},
      {"False", Value(false)},
      {"IntBoundaries", Value(List{0,
                                   1,
                                   255,
                                   256,
                                   65535,
                                   65536,
                                   -1,
                                   -128,
                                   -129,
                                   -256,
                                   -32769,
                                   int64_t{INT32_MAX},
                                   int64_t{INT32_MIN},
                                   int64_t{INT32_MAX} + 1,
                                   int64_t{INT32_MIN} - 1,
                                   int64_t{1} << 40,
                                   -(int64_t{1} << 40),
                                   int64_t{0x7FFFFFFFFF},
                                   int64_t{0x8000000000},
                                   int64_t{-0x8000000000},
                                   std::numeric_limits<int64_t>::max(),
                                   std::numeric_limits<int64_t>::min()})},
      {"Floats", Value(List{0.0, -0.0, 1.5, -2.25, 1e300, 5e-324, 3.141592653589793, inf, -inf, std::nan("")})},
      {"Strings", Value(List{"", "abc", "h\xC3\xA9llo \xE2\x9C\x93 \xF0\x9D\x84\x9E", std::string("nul\0in", 6),
                             std::string(70000, 'x')})},
      {"EmptyContainers", Value(List{List{}, Tup({}), Dict{}, MakeDict({}, true)})},
      {"Tuples", Value(List{Tup({1}), Tup({1, "a"}), Tup({1, 2.5, "c"}), Tup({1, 2, 3, 4, Value()})})},
      {"Nested", MakeDict({{"model", MakeDict({{"layers", List{MakeDict({{"w", 1}}), Tup({List{true, false}})}}})},
                           {"list", List{List{List{List{}}}}},
                           {"none", Value()}})},
      {"OrderedDict", MakeDict({{"z", 1}, {"a", 2}, {"m", MakeDict({{"x", 1.0}}, true)}}, true)},
      {"IntKeys", MakeDict({{0, "zero"}, {-5, "minus five"}, {int64_t{1} << 40, "big"}, {"mixed", 1}})},
      {"BigList", Value(std::move(big_list))},
      {"BigDict", Value(std::move(big_dict))},
  };
}

class ValueRoundTrip : public ::testing::TestWithParam<ValueCase> {};

TEST_P(ValueRoundTrip, ReadEqualsWritten) {
  ScratchDir dir;
  const Value& v = GetParam().value;
  auto reader = WriteAndOpen(dir.File("v.pt"), v);
  ASSERT_NE(reader, nullptr);
  EXPECT_EQ(Describe(reader->root(), reader.get()), Describe(v));
  EXPECT_TRUE(reader->VerifyAll().ok());
}

INSTANTIATE_TEST_SUITE_P(AllKinds, ValueRoundTrip, ::testing::ValuesIn(ValueCases()),
                         [](const auto& info) { return info.param.name; });

TEST(Value, AccessorsAndDictHelpers) {
  Value d = MakeDict({{"a", 1}, {7, 2.5}});
  EXPECT_TRUE(d.is_dict());
  EXPECT_EQ(d.AsDict().Find("a")->AsInt(), 1);
  EXPECT_EQ(d.AsDict().Find(int64_t{7})->AsDouble(), 2.5);
  EXPECT_EQ(d.AsDict().Find("b"), nullptr);
  d.AsDict().Set("a", "replaced");
  EXPECT_EQ(d.AsDict().items.size(), 2u);
  EXPECT_EQ(d.AsDict().Find("a")->AsString(), "replaced");
  EXPECT_EQ(Value(3).AsDouble(), 3.0);
  EXPECT_EQ(Tup({1, 2}).AsList().size(), 2u);
  EXPECT_STREQ(Tup({}).TypeName(), "tuple");
  EXPECT_STREQ(Value().TypeName(), "None");
  EXPECT_DEATH(Value("s").AsInt(), "holds str, not int");
}

TEST(DType, NamesRoundTrip) {
  for (DType d : {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16, DType::kInt64, DType::kInt32,
                  DType::kInt16, DType::kInt8, DType::kUInt8, DType::kBool}) {
    EXPECT_EQ(DTypeFromTorchStorageName(TorchStorageName(d)), d);
    EXPECT_EQ(DTypeFromSafetensorsName(SafetensorsName(d)), d);
  }
  EXPECT_EQ(DTypeSize(DType::kBFloat16), 2u);
  EXPECT_EQ(TorchStorageName(DType::kInt8), "CharStorage");
  EXPECT_EQ(SafetensorsName(DType::kBool), "BOOL");
  EXPECT_FALSE(DTypeFromTorchStorageName("ComplexFloatStorage").has_value());
}

// Deterministic bytes for a tensor (valid for every dtype: bool gets 0/1).
std::vector<unsigned char> Pattern(DType dtype, int64_t numel, int seed) {
  std::vector<unsigned char> b(static_cast<size_t>(numel) * DTypeSize(dtype));
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<unsigned char>((i * 37 + seed * 11 + 5) & 0xFF);
  if (dtype == DType::kBool) {
    for (auto& x : b) x &= 1;
  }
  return b;
}

TEST(PtFile, TensorsOfEveryDtypeAndShape) {
  ScratchDir dir;
  const std::vector<DType> dtypes = {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16, DType::kInt64,
                                     DType::kInt32,   DType::kInt16,   DType::kInt8,    DType::kUInt8,    DType::kBool};
  const std::vector<std::vector<int64_t>> shapes = {{}, {1}, {7}, {3, 5}, {2, 1, 4}, {0}, {3, 0}, {0, 2, 3}};
  std::vector<std::vector<unsigned char>> buffers;
  Dict root;
  root.ordered = true;
  int seed = 0;
  for (DType d : dtypes) {
    for (const auto& shape : shapes) {
      TensorRef t;
      t.dtype = d;
      t.shape = shape;
      buffers.push_back(Pattern(d, t.numel(), ++seed));
      t.data = buffers.back().empty() ? nullptr : buffers.back().data();
      root.Set(absl::StrCat(std::string(DTypeName(d)), "_", seed), Value(t));
    }
  }
  const Value v(root);
  auto reader = WriteAndOpen(dir.File("t.pt"), v);
  ASSERT_NE(reader, nullptr);
  EXPECT_EQ(Describe(reader->root(), reader.get()), Describe(v));
  ASSERT_TRUE(reader->root().is_dict());
  for (const auto& [key, value] : reader->root().AsDict().items) {
    const TensorRef& t = value.AsTensor();
    SCOPED_TRACE(key.AsString());
    EXPECT_TRUE(t.contiguous());
    EXPECT_EQ(t.storage_offset, 0);
    EXPECT_EQ(t.storage_nbytes, t.nbytes());
    EXPECT_EQ(t.file_offset % 64, 0u) << "records must be 64-byte aligned";
    EXPECT_TRUE(absl::StartsWith(t.record, "archive/data/")) << t.record;
    std::vector<unsigned char> bytes(t.nbytes());
    ASSERT_TRUE(reader->Read(t, bytes.data()).ok());
    EXPECT_EQ(t.crc32, Crc32(0, bytes.data(), bytes.size()));
    // Strides are PyTorch's contiguous strides (empty dims count as 1).
    int64_t s = 1;
    for (size_t i = t.shape.size(); i-- > 0;) {
      EXPECT_EQ(t.stride[i], s);
      s *= std::max<int64_t>(t.shape[i], 1);
    }
  }
  EXPECT_TRUE(reader->VerifyAll().ok());
}

TEST(PtFile, SharedStoragesAreWrittenOnce) {
  ScratchDir dir;
  std::vector<float> a(12), b(12);
  for (int i = 0; i < 12; ++i) a[i] = static_cast<float>(i), b[i] = static_cast<float>(-i);
  TensorRef ta = MakeTensor(DType::kFloat32, {3, 4}, a.data());
  TensorRef ta_flat = MakeTensor(DType::kFloat32, {12}, a.data());  // same memory, other shape: its own storage
  TensorRef tb = MakeTensor(DType::kFloat32, {3, 4}, b.data());
  Value v(List{ta, tb, ta, MakeDict({{"again", ta}, {"flat", ta_flat}})});
  auto reader = WriteAndOpen(dir.File("s.pt"), v);
  ASSERT_NE(reader, nullptr);
  const List& items = reader->root().AsList();
  EXPECT_EQ(items[0].AsTensor().record, items[2].AsTensor().record);
  EXPECT_EQ(items[0].AsTensor().record, items[3].AsDict().Find("again")->AsTensor().record);
  EXPECT_NE(items[0].AsTensor().record, items[1].AsTensor().record);
  EXPECT_NE(items[0].AsTensor().record, items[3].AsDict().Find("flat")->AsTensor().record);
  EXPECT_EQ(Describe(reader->root(), reader.get()), Describe(v));
}

TEST(PtFile, ReadElementsPartialRanges) {
  ScratchDir dir;
  std::vector<int32_t> data(1000);
  for (int i = 0; i < 1000; ++i) data[i] = i * 3 - 7;
  auto reader = WriteAndOpen(dir.File("p.pt"), Value(MakeTensor(DType::kInt32, {10, 100}, data.data())));
  ASSERT_NE(reader, nullptr);
  const TensorRef& t = reader->root().AsTensor();
  struct Range {
    int64_t begin, end;
  };
  for (Range r :
       {Range{0, 0}, Range{0, 1}, Range{3, 7}, Range{999, 1000}, Range{0, 1000}, Range{1000, 1000}, Range{123, 877}}) {
    std::vector<int32_t> out(static_cast<size_t>(r.end - r.begin) + 1, 12345);
    ASSERT_TRUE(reader->ReadElements(t, r.begin, r.end, out.data()).ok()) << r.begin << ".." << r.end;
    for (int64_t i = r.begin; i < r.end; ++i) ASSERT_EQ(out[i - r.begin], data[i]);
    EXPECT_EQ(out.back(), 12345) << "wrote past the range";
  }
  int32_t sink[4];
  for (Range r : {Range{-1, 2}, Range{5, 4}, Range{999, 1001}}) {
    absl::Status st = reader->ReadElements(t, r.begin, r.end, sink);
    EXPECT_EQ(st.code(), absl::StatusCode::kOutOfRange) << st;
  }
  TensorRef other = t;
  other.record = "archive/data/99";
  EXPECT_FALSE(reader->ReadElements(other, 0, 1, sink).ok());
}

TEST(PtFile, ViewsIntoAStorageAndNonContiguousViews) {
  // What torch.save writes for t[1] of a 4x5 tensor, and for t.t(): views of
  // one storage. Built through the reader's own TensorRef (same record).
  ScratchDir dir;
  std::vector<float> data(20);
  for (int i = 0; i < 20; ++i) data[i] = static_cast<float>(i);
  auto reader = WriteAndOpen(dir.File("v.pt"), Value(MakeTensor(DType::kFloat32, {4, 5}, data.data())));
  ASSERT_NE(reader, nullptr);
  TensorRef row = reader->root().AsTensor();
  row.shape = {5};
  row.stride = {1};
  row.storage_offset = 5;
  EXPECT_FALSE(row.contiguous());  // not from offset 0, but row-major: readable
  float out[5];
  ASSERT_TRUE(reader->Read(row, out).ok());
  EXPECT_EQ(out[0], 5.0f);
  EXPECT_EQ(out[4], 9.0f);
  ASSERT_TRUE(reader->ReadElements(row, 2, 4, out).ok());
  EXPECT_EQ(out[0], 7.0f);
  TensorRef transposed = reader->root().AsTensor();
  transposed.shape = {5, 4};
  transposed.stride = {1, 5};
  absl::Status st = reader->Read(transposed, out);
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition) << st;
  EXPECT_TRUE(absl::StrContains(st.message(), "not contiguous")) << st;
  row.storage_offset = 16;  // runs past the storage
  st = reader->Read(row, out);
  EXPECT_EQ(st.code(), absl::StatusCode::kOutOfRange) << st;
}

TEST(PtFile, CustomArchiveNameAndForcedZip64) {
  ScratchDir dir;
  std::vector<double> data = {1.0, 2.0, 3.0};
  Value v = MakeDict({{"w", MakeTensor(DType::kFloat64, {3}, data.data())}, {"step", 5}});
  for (uint64_t threshold : {uint64_t{0}, uint64_t{100}, uint64_t{0xFFFFFFFF}}) {
    SCOPED_TRACE(threshold);
    const std::string path = dir.File(absl::StrCat("z", threshold, ".pt"));
    ZipWriterOptions zip;
    zip.zip64_threshold = threshold;
    ASSERT_TRUE(WritePtFileWithZipOptions(path, v, PtWriteOptions{"mymodel"}, zip).ok());
    auto reader = PtReader::Open(path);
    ASSERT_TRUE(reader.ok()) << reader.status();
    EXPECT_EQ(Describe((*reader)->root(), reader->get()), Describe(v));
    EXPECT_EQ((*reader)->root().AsDict().Find("w")->AsTensor().record, "mymodel/data/0");
    EXPECT_EQ((*reader)->root().AsDict().Find("w")->AsTensor().file_offset % 64, 0u);
    EXPECT_TRUE((*reader)->VerifyAll().ok());
    const std::string bytes = ReadAll(path);
    const bool has_zip64_end = bytes.find(std::string("PK\x06\x06", 4)) != std::string::npos;
    EXPECT_EQ(has_zip64_end, threshold != 0xFFFFFFFF) << "ZIP64 end record only when a field reaches the threshold";
  }
  EXPECT_FALSE(WritePtFile(dir.File("bad.pt"), v, PtWriteOptions{"a/b"}).ok());
  EXPECT_FALSE(WritePtFile(dir.File("bad.pt"), v, PtWriteOptions{""}).ok());
}

TEST(PtFile, ReadAheadWritesTheSameBytesAndStopsOnASourceError) {
  // A tensor produced by a source (as zt ckpt convert writes them), over
  // several chunks with an uneven tail: read-ahead on a second thread must
  // give the same file as the one-buffer loop, and a failing source no file.
  ScratchDir dir;
  std::vector<float> data(2501);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<float>(i) * 0.5f;
  auto tensor = [&data](int fail_at_call) {
    TensorRef t;
    t.dtype = DType::kFloat32;
    t.shape = {static_cast<int64_t>(data.size())};
    auto calls = std::make_shared<int>(0);
    t.source = [&data, calls, fail_at_call](uint64_t offset, void* dst, uint64_t n) -> absl::Status {
      if ((*calls)++ == fail_at_call) return absl::DataLossError("source failed");
      std::memcpy(dst, reinterpret_cast<const char*>(data.data()) + offset, n);
      return absl::OkStatus();
    };
    return MakeDict({{"w", Value(std::move(t))}});
  };
  std::string written[2];
  for (bool read_ahead : {false, true}) {
    ZipWriterOptions zip;
    zip.chunk_bytes = 1000;  // 10 full chunks and a 4-byte tail
    zip.read_ahead = read_ahead;
    const std::string path = dir.File(absl::StrCat("r", read_ahead, ".pt"));
    ASSERT_TRUE(WritePtFileWithZipOptions(path, tensor(-1), PtWriteOptions{}, zip).ok());
    written[read_ahead] = ReadAll(path);
    auto reader = PtReader::Open(path);
    ASSERT_TRUE(reader.ok()) << reader.status();
    std::vector<float> out(data.size());
    ASSERT_TRUE((*reader)->Read((*reader)->root().AsDict().Find("w")->AsTensor(), out.data()).ok());
    EXPECT_EQ(out, data);
    const std::string failed = dir.File(absl::StrCat("f", read_ahead, ".pt"));
    absl::Status st = WritePtFileWithZipOptions(failed, tensor(4), PtWriteOptions{}, zip);
    EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss) << st;
    EXPECT_FALSE(std::filesystem::exists(failed));
  }
  EXPECT_EQ(written[0], written[1]);
}

TEST(PtFile, BigRecordVerifiesInChunks) {
  // Larger than the 8 MiB verification chunk: a flipped byte in the second
  // chunk must be found by Read(verify) and VerifyAll, and by a partial view.
  ScratchDir dir;
  const std::string path = dir.File("big.pt");
  std::vector<float> data((9u << 20) / 4);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<float>(i % 1000);
  ASSERT_NE(WriteAndOpen(path, Value(MakeTensor(DType::kFloat32, {static_cast<int64_t>(data.size())}, data.data()))),
            nullptr);
  auto reader = PtReader::Open(path);
  ASSERT_TRUE(reader.ok());
  const TensorRef& t = (*reader)->root().AsTensor();
  std::vector<float> out(data.size());
  ASSERT_TRUE((*reader)->Read(t, out.data()).ok());
  EXPECT_EQ(out, data);

  std::string bytes = ReadAll(path);
  bytes[t.file_offset + (8u << 20) + 123] ^= 0x40;
  WriteAll(path, bytes);
  reader = PtReader::Open(path);
  ASSERT_TRUE(reader.ok()) << "the directory is intact: " << reader.status();
  absl::Status st = (*reader)->Read((*reader)->root().AsTensor(), out.data());
  EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss);
  EXPECT_TRUE(absl::StrContains(st.message(), "checkpoint file '" + path +
                                                  "': record 'archive/data/0' CRC-32 "
                                                  "mismatch (file corrupted?)"))
      << st;
  TensorRef head = (*reader)->root().AsTensor();
  head.shape = {10};
  EXPECT_FALSE((*reader)->Read(head, out.data()).ok()) << "verify covers the whole record, even for a view";
  EXPECT_TRUE((*reader)->Read(head, out.data(), /*verify=*/false).ok());
  EXPECT_FALSE((*reader)->VerifyAll().ok());
}

TEST(PtFile, RecordsPast64MiBAreReadInSlicesWithTheSameBytesAndCrc) {
  // Whole-record reads of 64 MiB and more run one slice per thread (up to
  // 4) and combine the slices' CRCs: an odd length, so the last slice is
  // uneven, read back exactly; a flipped byte in the first or the last
  // slice is the record's CRC error.
  ScratchDir dir;
  const std::string path = dir.File("huge.pt");
  std::vector<uint8_t> data((64u << 20) + 4099);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 2654435761u >> 13);
  ASSERT_NE(WriteAndOpen(path, Value(MakeTensor(DType::kUInt8, {static_cast<int64_t>(data.size())}, data.data()))),
            nullptr);
  std::vector<uint8_t> out(data.size());
  {
    auto reader = PtReader::Open(path);
    ASSERT_TRUE(reader.ok());
    ASSERT_TRUE((*reader)->Read((*reader)->root().AsTensor(), out.data()).ok());
    EXPECT_TRUE(out == data);
  }
  const std::string clean = ReadAll(path);
  const uint64_t at = PtReader::Open(path).value()->root().AsTensor().file_offset;
  for (uint64_t flip : {uint64_t{5}, uint64_t{data.size() - 2}}) {
    std::string bytes = clean;
    bytes[at + flip] ^= 0x20;
    WriteAll(path, bytes);
    auto reader = PtReader::Open(path);
    ASSERT_TRUE(reader.ok());
    absl::Status st = (*reader)->Read((*reader)->root().AsTensor(), out.data());
    EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss) << flip << ": " << st;
    EXPECT_TRUE(absl::StrContains(st.message(), "CRC-32 mismatch")) << st;
  }
}

// Each corruption is a function of the file bytes and the expected error.
struct Damage {
  std::string name;
  std::function<void(std::string&)> apply;
  std::string open_error;  // "" when Open succeeds
  std::string verify_error;
};

TEST(PtFile, DamagedFilesFailClearly) {
  ScratchDir dir;
  std::vector<int64_t> data = {1, 2, 3, 4, 5, 6, 7, 8};
  const std::string good = dir.File("good.pt");
  Value v = MakeDict({{"a", MakeTensor(DType::kInt64, {8}, data.data())}, {"b", 1.5}});
  ASSERT_TRUE(WritePtFile(good, v).ok());
  const std::string original = ReadAll(good);
  auto reader = PtReader::Open(good);
  ASSERT_TRUE(reader.ok());
  const uint64_t data_at = (*reader)->root().AsDict().Find("a")->AsTensor().file_offset;
  const size_t pickle_at = original.find("archive/data.pkl") + 16 + 60;  // inside data.pkl's bytes (after padding)

  std::vector<Damage> cases = {
      {"FlipTensorByte", [&](std::string& b) { b[data_at + 3] ^= 1; }, "",
       "record 'archive/data/0' CRC-32 mismatch (file corrupted?)"},
      {"FlipPickleByte", [&](std::string& b) { b[pickle_at] ^= 0x10; },
       "record 'archive/data.pkl' CRC-32 mismatch (file corrupted?)", ""},
      {"CutInHalf", [](std::string& b) { b.resize(b.size() / 2); }, "not a zip file or truncated", ""},
      {"CutLastByte", [](std::string& b) { b.pop_back(); }, "not a zip file or truncated", ""},
      {"CutEndRecord", [](std::string& b) { b.resize(b.size() - 22); }, "not a zip file or truncated", ""},
      {"Empty", [](std::string& b) { b.clear(); }, "not a zip file or truncated", ""},
      {"Text", [](std::string& b) { b = "this is not a checkpoint\n"; }, "not a zip file or truncated", ""},
      {"CutDataKeepDirectory",
       [&](std::string& b) {
         // Move the directory 40 bytes earlier, as if bytes of the data area were lost.
         b.erase(data_at, 40);
       },
       "checkpoint file", ""},
  };
  for (const Damage& d : cases) {
    SCOPED_TRACE(d.name);
    const std::string path = dir.File(d.name + ".pt");
    std::string bytes = original;
    d.apply(bytes);
    WriteAll(path, bytes);
    auto r = PtReader::Open(path);
    if (!d.open_error.empty()) {
      ASSERT_FALSE(r.ok());
      EXPECT_TRUE(absl::StrContains(r.status().message(), d.open_error)) << r.status();
      EXPECT_TRUE(absl::StrContains(r.status().message(), path)) << r.status();
      continue;
    }
    ASSERT_TRUE(r.ok()) << r.status();
    absl::Status st = (*r)->VerifyAll();
    ASSERT_FALSE(st.ok());
    EXPECT_TRUE(absl::StrContains(st.message(), d.verify_error)) << st;
    EXPECT_TRUE(absl::StrContains(st.message(), path)) << st;
    std::vector<int64_t> out(8);
    st = (*r)->Read((*r)->root().AsDict().Find("a")->AsTensor(), out.data());
    EXPECT_TRUE(absl::StrContains(st.message(), d.verify_error)) << st;
  }
  auto missing = PtReader::Open(dir.File("missing.pt"));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
}

// Builds a zip with the given data.pkl bytes (and optionally a storage record).
std::string ZipWithPickle(const ScratchDir& dir, const std::string& name, const std::string& pickle,
                          const std::string& pickle_record = "archive/data.pkl") {
  const std::string path = dir.File(name);
  auto file = AtomicFile::Create(path);
  EXPECT_TRUE(file.ok());
  ZipWriter zip(&*file);
  EXPECT_TRUE(zip.AddRecord(pickle_record, pickle.data(), pickle.size()).ok());
  std::string storage(8, '\0');
  EXPECT_TRUE(zip.AddRecord("archive/data/0", storage.data(), storage.size()).ok());
  EXPECT_TRUE(zip.Finish().ok());
  EXPECT_TRUE(file->Commit().ok());
  return path;
}

TEST(PtFile, ForeignPicklesAreRefusedByName) {
  ScratchDir dir;
  struct Case {
    std::string name;
    std::string pickle;
    std::string error;
  };
  std::vector<Case> cases = {
      {"Global",
       Bytes("\x80\x02"
             "cos\nsystem\nX\x02\x00\x00\x00"
             "ls\x85R."),
       "global 'os.system'"},
      {"GlobalInTree",
       Bytes("\x80\x02"
             "cbuiltins\nset\n."),
       "object 'builtins.set' at root"},
      {"Bytes",
       Bytes("\x80\x03"
             "C\x02"
             "ab."),
       "opcode 0x43"},
      {"HugeInt",
       Bytes("\x80\x02\x8a\x09"
             "\x01\x02\x03\x04\x05\x06\x07\x08\x09."),
       "does not fit in 64 bits"},
      {"NoStop", Bytes("\x80\x02}"), "without a STOP"},
      {"Underflow", Bytes("\x80\x02s."), "stack underflow"},
      {"MissingStorage", TensorPickle("7", Bytes("K\x00")), "record 'archive/data/7' is missing"},
      {"UnknownClass",
       Bytes("\x80\x02"
             "cfoo\nBar\n)\x81."),
       "global 'foo.Bar' is not supported"},
      {"GetattrOfAnotherClass",
       Bytes("\x80\x02"
             "c__builtin__\ngetattr\n"
             "cfoo\nEnum\n"
             "X\x01\x00\x00\x00"
             "a\x86R."),
       "global 'foo.Enum.a' is not supported"},
      {"AttributeOnADict",
       Bytes("\x80\x02}}X\x01\x00\x00\x00"
             "xK\x01sb."),
       "attribute 'x' set on a dict"},
      {"RecordWithArguments",
       Bytes("\x80\x02"
             "cdeepspeed.utils.tensor_fragment\nfragment_address\nK\x01\x85\x81."),
       "created with arguments"},
      {"ViewOutsideStorage", TensorPickle("0", Bytes("K\x01")), "lies outside its storage"},
      // Found by the fuzzer: a negative offset overflowed the view's bound
      // check (signed arithmetic) before it was refused.
      {"NegativeOffset", TensorPickle("0", Bytes("J\xc0\x23\x01\x80")), "negative tensor storage offset -2147408960"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string path = ZipWithPickle(dir, c.name + ".pt", c.pickle);
    auto r = PtReader::Open(path);
    ASSERT_FALSE(r.ok());
    EXPECT_TRUE(absl::StrContains(r.status().message(), c.error)) << r.status();
    EXPECT_TRUE(absl::StrContains(r.status().message(), path)) << r.status();
  }
  // A well-formed file of the same shape loads (the cases above differ only where they say).
  const std::string ok_pickle = TensorPickle("0", Bytes("K\x00"));
  auto ok = PtReader::Open(ZipWithPickle(dir, "ok.pt", ok_pickle));
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ((*ok)->root().AsTensor().shape, std::vector<int64_t>{2});

  auto no_pickle = PtReader::Open(ZipWithPickle(dir, "nopkl.pt", ok_pickle, "archive/other.pkl"));
  ASSERT_FALSE(no_pickle.ok());
  EXPECT_TRUE(absl::StrContains(no_pickle.status().message(), "without '<archive>/data.pkl'")) << no_pickle.status();
}

// Pickles made to exhaust the reader: each is refused with an error naming
// the limit, with no crash and without building what the file describes.
TEST(PtFile, HostilePicklesAreRefusedWithinBounds) {
  ScratchDir dir;
  // A million lists, each appended to the one below: the nesting limit, and
  // the graph torn down without recursing a million deep.
  {
    const int n = 1000000;
    std::string p = "\x80\x02";
    p.append(n, ']');
    p.append(n - 1, 'a');
    p += '.';
    auto r = PtReader::Open(ZipWithPickle(dir, "deep.pt", p));
    ASSERT_FALSE(r.ok());
    EXPECT_TRUE(absl::StrContains(r.status().message(), "nested deeper than 1000")) << r.status();
  }
  // "Billion laughs": 40 lists, each holding the one before twice through
  // the memo, about 400 bytes, expand to 2^40 values.
  {
    std::string p = "\x80\x02]q";
    p += '\0';  // BINPUT 0 (a literal would end at the NUL)
    for (int i = 1; i <= 40; ++i) {
      p += "0](h";
      p += static_cast<char>(i - 1);
      p += 'h';
      p += static_cast<char>(i - 1);
      p += "eq";
      p += static_cast<char>(i);
    }
    p += '.';
    ASSERT_LT(p.size(), 420u);
    auto r = PtReader::Open(ZipWithPickle(dir, "laughs.pt", p));
    ASSERT_FALSE(r.ok());
    EXPECT_TRUE(absl::StrContains(r.status().message(), "expands to more than 4194304 values")) << r.status();
  }
  // Three million NONEs on the stack (a few megabytes of file).
  {
    std::string p = "\x80\x02";
    p.append(3000000, 'N');
    p += '.';
    auto r = PtReader::Open(ZipWithPickle(dir, "nones.pt", p));
    ASSERT_FALSE(r.ok());
    EXPECT_TRUE(absl::StrContains(r.status().message(), "objects on the unpickler's stack")) << r.status();
  }
}

// What DeepSpeed's files pickle besides containers, read without running
// anything: a state dict's _metadata attribute (dropped), torch.Size, set,
// ZeroStageEnum by name and by value, and record objects (as dicts).
TEST(PtFile, DeepSpeedObjectsAreReadAsPlainValues) {
  ScratchDir dir;
  const std::string pickle = Bytes(
      "\x80\x02}("
      // 'sd': OrderedDict() with _metadata set by BUILD
      "X\x02\x00\x00\x00"
      "sd"
      "ccollections\nOrderedDict\n)R}X\x09\x00\x00\x00"
      "_metadata}sb"
      // 'shape': torch.Size((2, 3))
      "X\x05\x00\x00\x00"
      "shape"
      "ctorch\nSize\nK\x02K\x03\x86\x85R"
      // 'names': set(['a'])
      "X\x05\x00\x00\x00"
      "names"
      "c__builtin__\nset\n]X\x01\x00\x00\x00"
      "aa\x85R"
      // 'stage': getattr(ZeroStageEnum, 'weights'); 'stage1': ZeroStageEnum(1)
      "X\x05\x00\x00\x00"
      "stage"
      "c__builtin__\ngetattr\n"
      "cdeepspeed.runtime.zero.config\nZeroStageEnum\n"
      "X\x07\x00\x00\x00"
      "weights\x86R"
      "X\x06\x00\x00\x00"
      "stage1"
      "cdeepspeed.runtime.zero.config\nZeroStageEnum\nK\x01\x85R"
      // 'scaler': LossScaler with cur_scale 1.0
      "X\x06\x00\x00\x00"
      "scaler"
      "cdeepspeed.runtime.fp16.loss_scaler\nLossScaler\n)\x81}"
      "X\x09\x00\x00\x00"
      "cur_scaleG?\xf0\x00\x00\x00\x00\x00\x00sb"
      "u.");
  auto r = PtReader::Open(ZipWithPickle(dir, "ds.pt", pickle));
  ASSERT_TRUE(r.ok()) << r.status();
  const Dict& d = (*r)->root().AsDict();
  EXPECT_TRUE(d.Find("sd")->AsDict().items.empty());
  EXPECT_TRUE(d.Find("sd")->AsDict().ordered);
  ASSERT_TRUE(d.Find("shape")->is_tuple());
  EXPECT_EQ(d.Find("shape")->AsList().size(), 2u);
  EXPECT_EQ(d.Find("shape")->AsList()[1].AsInt(), 3);
  ASSERT_TRUE(d.Find("names")->is_list());
  EXPECT_EQ(d.Find("names")->AsList()[0].AsString(), "a");
  EXPECT_EQ(d.Find("stage")->AsInt(), 3);
  EXPECT_EQ(d.Find("stage1")->AsInt(), 1);
  const Dict& scaler = d.Find("scaler")->AsDict();
  EXPECT_EQ(scaler.Find("__class__")->AsString(), "deepspeed.runtime.fp16.loss_scaler.LossScaler");
  EXPECT_EQ(scaler.Find("cur_scale")->AsDouble(), 1.0);
}

TEST(PtFile, InvalidTreesAreRefusedAndLeaveNoFile) {
  ScratchDir dir;
  const std::string path = dir.File("bad.pt");
  TensorRef no_data = MakeTensor(DType::kFloat32, {4}, nullptr);
  Dict bool_key;
  bool_key.items.emplace_back(Value(true), Value(1));
  struct Case {
    std::string name;
    Value value;
    std::string error;
  };
  std::vector<Case> cases = {
      {"NoData", MakeDict({{"w", no_data}}), "tensor at root['w']: float32 [4] has neither data nor a source"},
      {"BadUtf8", Value(List{1, std::string("\xff\xfe")}), "string at root[1] is not valid UTF-8"},
      {"BoolKey", MakeDict({{"x", Value(std::move(bool_key))}}), "dict at root['x'] has a bool key"},
      {"NegativeShape", Value(MakeTensor(DType::kFloat32, {-1}, nullptr)), "negative size"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    absl::Status st = WritePtFile(path, c.value);
    ASSERT_FALSE(st.ok());
    EXPECT_TRUE(absl::StrContains(st.message(), c.error)) << st;
    EXPECT_TRUE(dir.List().empty());
  }
}

}  // namespace
}  // namespace zt::ckpt
