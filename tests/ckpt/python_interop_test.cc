// Interop with PyTorch itself: Python's torch.load (also weights_only=True,
// and zipfile's CRC check) opens .pt files we write, including forced ZIP64
// and a custom archive name; we read what torch.save writes (pickle
// protocols 2 and 4, views, Parameters, OrderedDicts); safetensors files
// cross in both directions through a plain json+struct reader/writer.
// Skipped when no Python with torch is installed.
#include <gtest/gtest.h>

#include <map>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "ckpt/format/pt_file.h"
#include "ckpt/format/pt_file_internal.h"
#include "ckpt/format/safetensors.h"
#include "tests/ckpt/ckpt_test_util.h"

namespace zt::ckpt {
namespace {

using testing::Describe;
using testing::Hex;
using testing::PyLiteral;
using testing::PythonWithTorch;
using testing::ReadAll;
using testing::RunPython;
using testing::ScratchDir;

// Shared by every script: T() builds an expected tensor from hex bytes,
// same() compares trees exactly (types, key order, float bits, tensors).
constexpr char kPrelude[] = R"PY(
import collections, json, math, struct, sys, zipfile
import torch
DT = {'float32': torch.float32, 'float64': torch.float64, 'float16': torch.float16,
      'bfloat16': torch.bfloat16, 'int64': torch.int64, 'int32': torch.int32, 'int16': torch.int16,
      'int8': torch.int8, 'uint8': torch.uint8, 'bool': torch.bool}
ST = {'F32': torch.float32, 'F64': torch.float64, 'F16': torch.float16, 'BF16': torch.bfloat16,
      'I64': torch.int64, 'I32': torch.int32, 'I16': torch.int16, 'I8': torch.int8, 'U8': torch.uint8,
      'BOOL': torch.bool}
def T(dtype, shape, hexbytes):
    b = bytearray.fromhex(hexbytes)
    if len(b) == 0:
        return torch.empty(shape, dtype=DT[dtype])
    return torch.frombuffer(b, dtype=DT[dtype]).reshape(shape).clone()
def fail(path, why):
    print('MISMATCH at %s: %s' % (path, why))
    sys.exit(1)
def same(a, b, path='root'):
    if type(a) is not type(b):
        fail(path, 'type %s vs expected %s' % (type(a).__name__, type(b).__name__))
    if isinstance(a, torch.Tensor):
        if a.dtype != b.dtype or tuple(a.shape) != tuple(b.shape):
            fail(path, '%s %s vs expected %s %s' % (a.dtype, tuple(a.shape), b.dtype, tuple(b.shape)))
        if not torch.equal(a, b):
            fail(path, 'tensor values differ: %s vs %s' % (a, b))
    elif isinstance(a, dict):
        if list(a.keys()) != list(b.keys()):
            fail(path, 'keys %r vs expected %r' % (list(a.keys()), list(b.keys())))
        for k in a:
            same(a[k], b[k], '%s[%r]' % (path, k))
    elif isinstance(a, (list, tuple)):
        if len(a) != len(b):
            fail(path, 'length %d vs expected %d' % (len(a), len(b)))
        for i, (x, y) in enumerate(zip(a, b)):
            same(x, y, '%s[%d]' % (path, i))
    elif isinstance(a, float):
        if not ((math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) == math.copysign(1, b))):
            fail(path, '%r vs expected %r' % (a, b))
    elif a != b:
        fail(path, '%r vs expected %r' % (a, b))
def local_data_offset(f, info):
    f.seek(info.header_offset)
    h = f.read(30)
    name_len, extra_len = struct.unpack('<HH', h[26:30])
    return info.header_offset + 30 + name_len + extra_len
)PY";

TensorRef MakeTensor(DType dtype, std::vector<int64_t> shape, const void* data) {
  TensorRef t;
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.data = data;
  return t;
}

Value Tup(List items) { return Value(Value::Tuple{std::move(items)}); }

Value MakeDict(std::vector<std::pair<Value, Value>> items, bool ordered = false) {
  Dict d;
  d.ordered = ordered;
  for (auto& [k, v] : items) d.Set(std::move(k), std::move(v));
  return Value(std::move(d));
}

const std::vector<DType>& AllDTypes() {
  static const std::vector<DType> all = {DType::kFloat32, DType::kFloat64, DType::kFloat16, DType::kBFloat16,
                                         DType::kInt64,   DType::kInt32,   DType::kInt16,   DType::kInt8,
                                         DType::kUInt8,   DType::kBool};
  return all;
}

// Bytes that are valid for every dtype (no NaN payloads: torch.equal
// must hold): small integers as the dtype's own values.
std::vector<unsigned char> ValuesOf(DType dtype, int64_t numel, int seed) {
  std::vector<unsigned char> out(static_cast<size_t>(numel) * DTypeSize(dtype));
  for (int64_t i = 0; i < numel; ++i) {
    const int v = static_cast<int>((i * 7 + seed) % 100) - 50;
    unsigned char* p = out.data() + i * DTypeSize(dtype);
    switch (dtype) {
      case DType::kFloat32: {
        float f = v * 0.5f;
        std::memcpy(p, &f, 4);
        break;
      }
      case DType::kFloat64: {
        double d = v * 0.25;
        std::memcpy(p, &d, 8);
        break;
      }
      case DType::kFloat16: {
        float f = static_cast<float>(v);
        uint32_t b;
        std::memcpy(&b, &f, 4);
        // |v| <= 50: exact in half; build it from the float's fields.
        uint16_t h = 0;
        if (v != 0) {
          const int exp = static_cast<int>((b >> 23) & 0xFF) - 127 + 15;
          h = static_cast<uint16_t>(((b >> 16) & 0x8000) | (exp << 10) | ((b >> 13) & 0x3FF));
        }
        std::memcpy(p, &h, 2);
        break;
      }
      case DType::kBFloat16: {
        float f = static_cast<float>(v);
        uint32_t b;
        std::memcpy(&b, &f, 4);
        uint16_t h = static_cast<uint16_t>(b >> 16);
        std::memcpy(p, &h, 2);
        break;
      }
      case DType::kInt64: {
        int64_t x = v * 1000000007LL;
        std::memcpy(p, &x, 8);
        break;
      }
      case DType::kInt32: {
        int32_t x = v * 100003;
        std::memcpy(p, &x, 4);
        break;
      }
      case DType::kInt16: {
        int16_t x = static_cast<int16_t>(v * 301);
        std::memcpy(p, &x, 2);
        break;
      }
      case DType::kInt8: {
        int8_t x = static_cast<int8_t>(v);
        std::memcpy(p, &x, 1);
        break;
      }
      case DType::kUInt8: {
        *p = static_cast<unsigned char>(v + 100);
        break;
      }
      case DType::kBool: {
        *p = static_cast<unsigned char>(v & 1);
        break;
      }
    }
  }
  return out;
}

TEST(PythonInterop, TorchLoadOpensWhatWeWrite) {
  ZT_SKIP_WITHOUT_TORCH_PYTHON();
  ScratchDir dir;
  std::vector<std::vector<unsigned char>> buffers;
  Dict tensors;
  int seed = 0;
  for (DType d : AllDTypes()) {
    for (const std::vector<int64_t>& shape :
         {std::vector<int64_t>{3, 4}, std::vector<int64_t>{}, std::vector<int64_t>{0, 2}}) {
      TensorRef t = MakeTensor(d, shape, nullptr);
      buffers.push_back(ValuesOf(d, t.numel(), ++seed));
      t.data = buffers.back().empty() ? nullptr : buffers.back().data();
      tensors.Set(absl::StrCat(std::string(DTypeName(d)), "_", seed), Value(t));
    }
  }
  std::vector<unsigned char> shared = ValuesOf(DType::kFloat32, 6, 99);
  TensorRef shared_ref = MakeTensor(DType::kFloat32, {2, 3}, shared.data());
  Value root = MakeDict({
      {"tensors", Value(std::move(tensors))},
      {"shared_a", shared_ref},
      {"shared_b", shared_ref},
      {"scalars", Value(List{Value(), true, false, 0, 255, 65536, -1, int64_t{1} << 40,
                             std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(), 0.1, -0.0,
                             1e-310, std::numeric_limits<double>::infinity(), std::nan("")})},
      {"strings", Value(List{"", "plain", "h\xC3\xA9llo \xE2\x9C\x93 \xF0\x9D\x84\x9E"})},
      {"tuples", Value(List{Tup({}), Tup({1}), Tup({1, "two"}), Tup({1, 2, 3}), Tup({1, 2, 3, 4, List{}})})},
      {"ordered", MakeDict({{"z", 1}, {"a", MakeDict({{"inner", 2.5}}, true)}}, true)},
      {"int_keys", MakeDict({{0, "zero"}, {-7, "neg"}, {int64_t{1} << 35, "big"}})},
      {"step", 1234},
  });
  const std::string plain = dir.File("ours.pt");
  const std::string zip64 = dir.File("ours_zip64.pt");
  const std::string named = dir.File("ours_named.pt");
  ASSERT_TRUE(WritePtFile(plain, root).ok());
  ZipWriterOptions force_zip64;
  force_zip64.zip64_threshold = 0;
  ASSERT_TRUE(WritePtFileWithZipOptions(zip64, root, {}, force_zip64).ok());
  ASSERT_TRUE(WritePtFile(named, root, PtWriteOptions{"my_model"}).ok());
  // torch 1.13's weights_only unpickler lacks BINFLOAT (it refuses torch.save's
  // own floats too), so weights_only=True is checked on a float-free tree.
  const Value weights = MakeDict(
      {{"state_dict", root.AsDict().Find("tensors")->AsDict()},
       {"shared_a", shared_ref},
       {"shared_b", shared_ref},
       {"meta",
        MakeDict({{"step", 7}, {"names", Tup({"a", "b"})}, {"none", Value()}, {"flags", List{true, false}}}, true)},
       {"int_keys", *root.AsDict().Find("int_keys")}});
  const std::string weights_path = dir.File("ours_weights.pt");
  ASSERT_TRUE(WritePtFile(weights_path, weights).ok());

  std::string script = absl::StrCat(kPrelude, "expected = ", PyLiteral(root), "\n", R"PY(
import inspect
weights_only = 'weights_only' in inspect.signature(torch.load).parameters
def check_file(path, expected, modes):
    with zipfile.ZipFile(path) as z:
        bad = z.testzip()
        if bad is not None:
            fail(path, 'zipfile CRC check failed for ' + bad)
        with open(path, 'rb') as f:
            for info in z.infolist():
                if '/data/' in info.filename and local_data_offset(f, info) % 64 != 0:
                    fail(path, info.filename + ' is not 64-byte aligned')
    for wo in modes:
        got = torch.load(path, weights_only=wo) if wo else torch.load(path)
        same(got, expected, path + (' (weights_only)' if wo else ''))
        if got['shared_a'].data_ptr() != got['shared_b'].data_ptr():
            fail(path, 'shared_a and shared_b should share a storage')
for path in PATHS:
    check_file(path, expected, [False])
check_file(WEIGHTS, expected_weights, [False, True] if weights_only else [False])
print('OK', torch.__version__, 'weights_only' if weights_only else '')
)PY");
  script =
      absl::StrCat("PATHS = ['", plain, "', '", zip64, "', '", named, "']\nWEIGHTS = '", weights_path, "'\n", script);
  script = absl::StrCat(script.substr(0, script.find("import inspect")), "expected_weights = ", PyLiteral(weights),
                        "\n", script.substr(script.find("import inspect")));
  std::string output;
  int rc = RunPython(*PythonWithTorch(), dir, script, &output);
  EXPECT_EQ(rc, 0) << output;
  EXPECT_TRUE(absl::StartsWith(output, "OK")) << output;
}

// Python saves; the sidecar lists every tensor's dtype, shape, stride,
// offset and contiguous bytes, which we check against what we read.
constexpr char kTorchSaveScript[] = R"PY(
base = torch.arange(20, dtype=torch.float32).reshape(4, 5)
obj = {
    'f32': base, 'row': base[1], 'cols': base[:, 1:3], 'transposed': base.t(),
    'f64': torch.linspace(-1, 1, 7, dtype=torch.float64),
    'f16': torch.tensor([0.5, -2.0, 65504.0], dtype=torch.float16),
    'bf16': torch.tensor([1.0, -3.5, 1e30], dtype=torch.bfloat16),
    'i64': torch.arange(-3, 3, dtype=torch.int64) * (2 ** 40),
    'i32': torch.tensor([-(2 ** 31), 2 ** 31 - 1], dtype=torch.int32),
    'i16': torch.tensor([[-5, 6], [7, -8]], dtype=torch.int16),
    'i8': torch.tensor([-128, 127], dtype=torch.int8),
    'u8': torch.arange(0, 256, 51, dtype=torch.uint8),
    'bool': torch.tensor([True, False, True]),
    'empty': torch.zeros(0, 3), 'scalar': torch.tensor(3.5),
    'param': torch.nn.Parameter(torch.full((2, 2), 0.25)),
    'od': collections.OrderedDict([('z', 1), ('a', [1, (2, 3.5), None])]),
    'nested': {'list': [1, -2, 2 ** 62, -2 ** 63, 1.25, 'h\u00e9llo \u2713', True, False, None, (), (7,)],
               3: 'int key', -1: {'deep': [[[]]]}},
}
path, proto = sys.argv[1], int(sys.argv[2])
torch.save(obj, path, pickle_protocol=proto)
with open(path + '.expect', 'w') as f:
    for k, v in obj.items():
        if isinstance(v, torch.Tensor):
            raw = v.detach().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()
            f.write('%s %s %s %s %d %s\n' % (k, str(v.dtype).replace('torch.', ''),
                    ','.join(map(str, v.shape)), ','.join(map(str, v.stride())), v.storage_offset(), raw.hex()))
print('OK')
)PY";

TEST(PythonInterop, WeReadWhatTorchSaveWrites) {
  ZT_SKIP_WITHOUT_TORCH_PYTHON();
  ScratchDir dir;
  const Value expected_od = MakeDict({{"z", 1}, {"a", List{1, Tup({2, 3.5}), Value()}}}, true);
  const Value expected_nested = MakeDict({
      {"list", List{1, -2, int64_t{1} << 62, std::numeric_limits<int64_t>::min(), 1.25, "h\xC3\xA9llo \xE2\x9C\x93",
                    true, false, Value(), Tup({}), Tup({7})}},
      {3, "int key"},
      {-1, MakeDict({{"deep", List{List{List{}}}}})},
  });
  for (int proto : {2, 4}) {
    SCOPED_TRACE(proto);
    const std::string path = dir.File(absl::StrCat("torch_p", proto, ".pt"));
    std::string output;
    ASSERT_EQ(
        RunPython(*PythonWithTorch(), dir,
                  absl::StrCat(kPrelude, "sys.argv = ['x', '", path, "', '", proto, "']\n", kTorchSaveScript), &output),
        0)
        << output;
    auto reader = PtReader::Open(path);
    ASSERT_TRUE(reader.ok()) << reader.status();
    ASSERT_TRUE((*reader)->VerifyAll().ok());
    const Value& root = (*reader)->root();
    ASSERT_TRUE(root.is_dict());
    EXPECT_FALSE(root.AsDict().ordered);
    EXPECT_EQ(Describe(*root.AsDict().Find("od")), Describe(expected_od));
    EXPECT_EQ(Describe(*root.AsDict().Find("nested")), Describe(expected_nested));

    int checked = 0;
    for (const std::string& line :
         std::vector<std::string>(absl::StrSplit(ReadAll(path + ".expect"), '\n', absl::SkipEmpty()))) {
      std::vector<std::string> f = absl::StrSplit(line, ' ');
      ASSERT_GE(f.size(), 5u) << line;
      if (f.size() == 5) f.push_back("");  // no bytes
      SCOPED_TRACE(f[0]);
      const Value* v = root.AsDict().Find(f[0]);
      ASSERT_NE(v, nullptr);
      ASSERT_TRUE(v->is_tensor()) << v->TypeName();
      const TensorRef& t = v->AsTensor();
      EXPECT_EQ(std::string(DTypeName(t.dtype)), f[1]);
      auto ints = [](const std::string& s) {
        std::vector<int64_t> out;
        for (absl::string_view x : absl::StrSplit(s, ',', absl::SkipEmpty())) out.push_back(std::stoll(std::string(x)));
        return out;
      };
      EXPECT_EQ(t.shape, ints(f[2]));
      EXPECT_EQ(t.stride, ints(f[3]));
      EXPECT_EQ(t.storage_offset, std::stoll(f[4]));
      EXPECT_EQ(t.file_offset % 64, 0u) << "torch aligns records to 64 bytes too";
      std::string bytes(t.nbytes(), '\0');
      absl::Status st = (*reader)->Read(t, bytes.data());
      if (f[0] == "cols" || f[0] == "transposed") {
        EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition) << st;
        EXPECT_EQ(t.record, root.AsDict().Find("f32")->AsTensor().record) << "a view shares its base's storage";
      } else {
        ASSERT_TRUE(st.ok()) << st;
        EXPECT_EQ(Hex(bytes.data(), bytes.size()), f[5]);
      }
      ++checked;
    }
    EXPECT_EQ(checked, 16);
    EXPECT_EQ(root.AsDict().Find("row")->AsTensor().record, root.AsDict().Find("f32")->AsTensor().record);
  }
}

TEST(PythonInterop, SafetensorsBothWays) {
  ZT_SKIP_WITHOUT_TORCH_PYTHON();
  ScratchDir dir;
  // Ours -> Python: sharded, with an index; Python reads with json + struct.
  std::vector<SafetensorsEntry> entries;
  std::vector<std::vector<unsigned char>> data;
  Dict expected;
  int seed = 0;
  for (DType d : AllDTypes()) {
    for (const std::vector<int64_t>& shape : {std::vector<int64_t>{5, 3}, std::vector<int64_t>{0}}) {
      SafetensorsEntry e;
      e.name = absl::StrCat("layer.", seed++, ".", std::string(DTypeName(d)));
      e.dtype = d;
      e.shape = shape;
      data.push_back(ValuesOf(d, static_cast<int64_t>(e.nbytes() / DTypeSize(d)), seed));
      entries.push_back(e);
      expected.Set(e.name, Value(MakeTensor(d, shape, data.back().data())));
    }
  }
  ShardPlan plan = PlanShards(entries, 100, "model");
  ASSERT_GT(plan.shards.size(), 1u);
  size_t next = 0;
  for (const auto& shard : plan.shards) {
    auto w = SafetensorsWriter::Create(dir.File(shard.file), shard.entries, {{"format", "pt"}});
    ASSERT_TRUE(w.ok()) << w.status();
    for (size_t i = 0; i < shard.entries.size(); ++i, ++next) {
      ASSERT_TRUE((*w)->Write(data[next].data(), data[next].size()).ok());
    }
    ASSERT_TRUE((*w)->Finish().ok());
  }
  ASSERT_TRUE(WriteIndex(dir.path(), plan).ok());
  const std::string read_script = absl::StrCat(kPrelude, "expected = ", PyLiteral(Value(std::move(expected))), "\n",
                                               "DIR = '", dir.path(), "'\n", R"PY(
import os
def read_file(path):
    with open(path, 'rb') as f:
        n, = struct.unpack('<Q', f.read(8))
        header = json.loads(f.read(n))
        data = f.read()
    if (8 + n) % 8:
        fail(path, 'data area not 8-byte aligned')
    meta = header.pop('__metadata__', {})
    out = {}
    for name, info in header.items():
        b, e = info['data_offsets']
        raw = bytearray(data[b:e])
        dt = ST[info['dtype']]
        out[name] = (torch.frombuffer(raw, dtype=dt).reshape(info['shape']).clone() if raw
                     else torch.empty(info['shape'], dtype=dt))
    return meta, out
index = json.load(open(os.path.join(DIR, 'model.safetensors.index.json')))
got = {}
for shard in sorted(set(index['weight_map'].values())):
    meta, tensors = read_file(os.path.join(DIR, shard))
    if meta != {'format': 'pt'}:
        fail(shard, 'metadata %r' % meta)
    for name, t in tensors.items():
        if index['weight_map'][name] != shard:
            fail(name, 'index says %s, found in %s' % (index['weight_map'][name], shard))
        got[name] = t
got = dict((k, got[k]) for k in expected)
same(got, expected)
total = sum(t.numel() * t.element_size() for t in got.values())
if index['metadata']['total_size'] != total:
    fail('index', 'total_size %d vs %d' % (index['metadata']['total_size'], total))
print('OK')
)PY");
  std::string output;
  EXPECT_EQ(RunPython(*PythonWithTorch(), dir, read_script, &output), 0) << output;

  // Python -> ours: a file written by hand the way the reference library
  // does (sorted keys, space padding, metadata).
  ScratchDir py;
  const std::string path = py.File("py.safetensors");
  const std::string write_script = absl::StrCat(kPrelude, "PATH = '", path, "'\n", R"PY(
tensors = {
    'w.f32': torch.arange(12, dtype=torch.float32).reshape(3, 4) / 3,
    'w.bf16': torch.tensor([1.5, -2.0], dtype=torch.bfloat16),
    'w.f16': torch.tensor([[0.25]], dtype=torch.float16),
    'w.i64': torch.tensor([-(2 ** 63), 2 ** 63 - 1]),
    'w.bool': torch.tensor([True, False]),
    'w.u8': torch.tensor([], dtype=torch.uint8),
    'w.i8': torch.tensor([-1, 2, -3], dtype=torch.int8),
}
names = {torch.float32: 'F32', torch.bfloat16: 'BF16', torch.float16: 'F16', torch.int64: 'I64',
         torch.bool: 'BOOL', torch.uint8: 'U8', torch.int8: 'I8'}
header, blobs, at = {'__metadata__': {'format': 'pt', 'source': 'python'}}, [], 0
for name in sorted(tensors):
    t = tensors[name]
    raw = t.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()
    header[name] = {'dtype': names[t.dtype], 'shape': list(t.shape), 'data_offsets': [at, at + len(raw)]}
    blobs.append(raw)
    at += len(raw)
text = json.dumps(header, separators=(',', ':')).encode()
text += b' ' * ((8 - len(text) % 8) % 8)
with open(PATH, 'wb') as f:
    f.write(struct.pack('<Q', len(text)) + text + b''.join(blobs))
with open(PATH + '.expect', 'w') as f:
    for name in sorted(tensors):
        t = tensors[name]
        f.write('%s %s %s %s\n' % (name, names[t.dtype], ','.join(map(str, t.shape)),
                                   t.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes().hex()))
print('OK')
)PY");
  ASSERT_EQ(RunPython(*PythonWithTorch(), py, write_script, &output), 0) << output;
  auto model = SafetensorsModel::Open(path);
  ASSERT_TRUE(model.ok()) << model.status();
  auto reader = SafetensorsReader::Open(path);
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_EQ((*reader)->metadata(), (std::map<std::string, std::string>{{"format", "pt"}, {"source", "python"}}));
  int checked = 0;
  for (const std::string& line :
       std::vector<std::string>(absl::StrSplit(ReadAll(path + ".expect"), '\n', absl::SkipEmpty()))) {
    std::vector<std::string> f = absl::StrSplit(line, ' ');
    if (f.size() == 3) f.push_back("");
    SCOPED_TRACE(f[0]);
    auto [r, t] = (*model)->Find(f[0]);
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(std::string(SafetensorsName(t->dtype)), f[1]);
    std::string shape;
    for (size_t i = 0; i < t->shape.size(); ++i) absl::StrAppend(&shape, i ? "," : "", t->shape[i]);
    EXPECT_EQ(shape, f[2]);
    std::string bytes(t->nbytes, '\0');
    ASSERT_TRUE(r->Read(*t, bytes.data()).ok());
    EXPECT_EQ(Hex(bytes.data(), bytes.size()), f[3]);
    ++checked;
  }
  EXPECT_EQ(checked, 7);
}

}  // namespace
}  // namespace zt::ckpt
