// PickleValue: a protocol-2 pickler for Value trees. No memo: every object
// is written once (tensors repeat two short GLOBALs), which keeps the output
// a plain function of the tree and costs nothing that matters in size.
#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "ckpt/format/pickle.h"
#include "util/status.h"

namespace zt::ckpt {
namespace {

constexpr size_t kBatch = 1000;  // items per APPENDS/SETITEMS, as Python batches

// Opcodes (pickletools names).
constexpr char kMark = '(';
constexpr char kStop = '.';
constexpr char kBinInt = 'J';
constexpr char kBinInt1 = 'K';
constexpr char kBinInt2 = 'M';
constexpr char kNone = 'N';
constexpr char kBinPersId = 'Q';
constexpr char kReduce = 'R';
constexpr char kBinUnicode = 'X';
constexpr char kAppends = 'e';
constexpr char kGlobal = 'c';
constexpr char kEmptyDict = '}';
constexpr char kEmptyList = ']';
constexpr char kTuple = 't';
constexpr char kEmptyTuple = ')';
constexpr char kSetItems = 'u';
constexpr char kBinFloat = 'G';
constexpr char kProto = '\x80';
constexpr char kTuple1 = '\x85';
constexpr char kNewTrue = '\x88';
constexpr char kNewFalse = '\x89';
constexpr char kLong1 = '\x8a';
constexpr char kNewObj = '\x81';
constexpr char kBuild = 'b';

// Strict UTF-8 (no overlongs, no surrogates): Python refuses anything else.
bool ValidUtf8(const std::string& s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  size_t n = s.size(), i = 0;
  while (i < n) {
    unsigned char c = p[i];
    size_t len;
    uint32_t cp;
    if (c < 0x80) {
      ++i;
      continue;
    }
    if ((c & 0xE0) == 0xC0) {
      len = 2;
      cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3;
      cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4;
      cp = c & 0x07;
    } else
      return false;
    if (i + len > n) return false;
    for (size_t k = 1; k < len; ++k) {
      if ((p[i + k] & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (p[i + k] & 0x3F);
    }
    if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
        (cp >= 0xD800 && cp <= 0xDFFF)) {
      return false;
    }
    i += len;
  }
  return true;
}

class Pickler {
 public:
  explicit Pickler(const StorageKeyFn& storage_key) : storage_key_(storage_key) {}

  absl::StatusOr<std::string> Run(const Value& root) {
    out_.push_back(kProto);
    out_.push_back('\x02');
    ZT_RETURN_IF_ERROR(Write(root, "root", 0));
    out_.push_back(kStop);
    return std::move(out_);
  }

 private:
  void U8(uint8_t v) { out_.push_back(static_cast<char>(v)); }
  void U32(uint32_t v) {
    for (int i = 0; i < 4; ++i) out_.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
  }

  void Int(int64_t v) {
    if (v >= 0 && v < 0x100) {
      out_.push_back(kBinInt1);
      U8(static_cast<uint8_t>(v));
    } else if (v >= 0 && v < 0x10000) {
      out_.push_back(kBinInt2);
      U8(static_cast<uint8_t>(v & 0xFF));
      U8(static_cast<uint8_t>(v >> 8));
    } else if (v >= INT32_MIN && v <= INT32_MAX) {
      out_.push_back(kBinInt);
      U32(static_cast<uint32_t>(static_cast<int32_t>(v)));
    } else {
      // LONG1: the shortest little-endian two's complement encoding.
      uint64_t u = static_cast<uint64_t>(v);
      int n = 8;
      while (n > 1) {
        uint8_t top = static_cast<uint8_t>(u >> (8 * (n - 1)));
        uint8_t next_sign = static_cast<uint8_t>((u >> (8 * (n - 2))) & 0x80);
        if ((top == 0x00 && next_sign == 0) || (top == 0xFF && next_sign != 0)) {
          --n;
        } else {
          break;
        }
      }
      out_.push_back(kLong1);
      U8(static_cast<uint8_t>(n));
      for (int i = 0; i < n; ++i) U8(static_cast<uint8_t>((u >> (8 * i)) & 0xFF));
    }
  }

  void Str(const std::string& s) {
    out_.push_back(kBinUnicode);
    U32(static_cast<uint32_t>(s.size()));
    out_ += s;
  }

  void Global(const std::string& module, const std::string& name) {
    out_.push_back(kGlobal);
    // Protocol 2 names Python 3's builtins as Python 2 did (as Python's own
    // pickler does with fix_imports); every unpickler maps it back.
    out_ += module == "builtins" ? "__builtin__" : module;
    out_.push_back('\n');
    out_ += name;
    out_.push_back('\n');
  }

  // A global's module and name must be plain identifiers: a newline would end
  // the GLOBAL opcode's operand early and change what Python looks up.
  static absl::Status CheckGlobal(const ckpt::Global& g, const std::string& path) {
    auto bad = [](const std::string& s) { return s.empty() || s.find_first_of("\n\r ") != std::string::npos; };
    if (bad(g.module) || bad(g.name)) {
      return absl::InvalidArgumentError(
          absl::StrCat("global at ", path, " ('", g.module, "', '", g.name, "') is not a module and a name"));
    }
    return absl::OkStatus();
  }

  // Items of `dict` as SETITEMS batches.
  absl::Status Items(const Dict& dict, const std::string& path, int depth) {
    for (size_t begin = 0; begin < dict.items.size(); begin += kBatch) {
      out_.push_back(kMark);
      for (size_t i = begin; i < std::min(dict.items.size(), begin + kBatch); ++i) {
        const auto& [key, value] = dict.items[i];
        std::string key_text;
        if (key.is_string()) {
          key_text = absl::StrCat("'", key.AsString(), "'");
        } else if (key.is_int()) {
          key_text = absl::StrCat(key.AsInt());
        } else {
          return absl::InvalidArgumentError(
              absl::StrCat("dict at ", path, " has a ", key.TypeName(), " key; keys must be str or int"));
        }
        ZT_RETURN_IF_ERROR(Write(key, path, depth + 1));
        ZT_RETURN_IF_ERROR(Write(value, absl::StrCat(path, "[", key_text, "]"), depth + 1));
      }
      out_.push_back(kSetItems);
    }
    return absl::OkStatus();
  }

  void IntTuple(const std::vector<int64_t>& v) {
    if (v.empty()) {
      out_.push_back(kEmptyTuple);
      return;
    }
    out_.push_back(kMark);
    for (int64_t x : v) Int(x);
    out_.push_back(kTuple);
  }

  absl::Status Write(const Value& v, const std::string& path, int depth) {
    if (depth > kPickleMaxDepth) {
      return absl::InvalidArgumentError(absl::StrCat("value at ", path, " is nested more than ", kPickleMaxDepth,
                                                     " levels deep (does a dict contain itself?)"));
    }
    const Value::Data& d = v.data();
    if (v.is_none()) {
      out_.push_back(kNone);
    } else if (v.is_bool()) {
      out_.push_back(v.AsBool() ? kNewTrue : kNewFalse);
    } else if (v.is_int()) {
      Int(v.AsInt());
    } else if (v.is_double()) {
      Float(v.AsDouble());
    } else if (v.is_string()) {
      return String(v.AsString(), path);
    } else if (v.is_list()) {
      return WriteList(std::get<List>(d), path, depth);
    } else if (v.is_tuple()) {
      return WriteTuple(std::get<Value::Tuple>(d).items, path, depth);
    } else if (v.is_dict()) {
      return WriteDict(v.AsDict(), path, depth);
    } else if (v.is_global()) {
      ZT_RETURN_IF_ERROR(CheckGlobal(v.AsGlobal(), path));
      Global(v.AsGlobal().module, v.AsGlobal().name);
    } else if (v.is_call()) {
      const Call& call = v.AsCall();
      ZT_RETURN_IF_ERROR(CheckGlobal(call.callable, path));
      Global(call.callable.module, call.callable.name);
      ZT_RETURN_IF_ERROR(Write(Value(Value::Tuple{call.args}), absl::StrCat(path, ".args"), depth + 1));
      out_.push_back(kReduce);
    } else if (v.is_object()) {
      return WriteObject(v.AsObject(), path, depth);
    } else if (v.is_tensor()) {
      return Tensor(v.AsTensor(), path);
    }
    return absl::OkStatus();
  }

  // BINFLOAT: a big-endian IEEE double.
  void Float(double x) {
    uint64_t bits;
    std::memcpy(&bits, &x, 8);
    out_.push_back(kBinFloat);
    for (int i = 7; i >= 0; --i) U8(static_cast<uint8_t>((bits >> (8 * i)) & 0xFF));
  }

  absl::Status String(const std::string& s, const std::string& path) {
    if (!ValidUtf8(s)) {
      return absl::InvalidArgumentError(absl::StrCat("string at ", path,
                                                     " is not valid UTF-8; Python could "
                                                     "not load it"));
    }
    if (s.size() > 0xFFFFFFFFu) {
      return absl::InvalidArgumentError(absl::StrCat("string at ", path, " is longer than 4 GiB"));
    }
    Str(s);
    return absl::OkStatus();
  }

  absl::Status WriteList(const List& items, const std::string& path, int depth) {
    out_.push_back(kEmptyList);
    for (size_t begin = 0; begin < items.size(); begin += kBatch) {
      out_.push_back(kMark);
      for (size_t i = begin; i < std::min(items.size(), begin + kBatch); ++i) {
        ZT_RETURN_IF_ERROR(Write(items[i], absl::StrCat(path, "[", i, "]"), depth + 1));
      }
      out_.push_back(kAppends);
    }
    return absl::OkStatus();
  }

  absl::Status WriteTuple(const List& items, const std::string& path, int depth) {
    if (items.empty()) {
      out_.push_back(kEmptyTuple);
      return absl::OkStatus();
    }
    const bool short_tuple = items.size() <= 3;
    if (!short_tuple) out_.push_back(kMark);
    for (size_t i = 0; i < items.size(); ++i) {
      ZT_RETURN_IF_ERROR(Write(items[i], absl::StrCat(path, "[", i, "]"), depth + 1));
    }
    out_.push_back(short_tuple ? static_cast<char>(kTuple1 + items.size() - 1) : kTuple);
    return absl::OkStatus();
  }

  absl::Status WriteDict(const Dict& dict, const std::string& path, int depth) {
    if (dict.ordered) {
      Global("collections", "OrderedDict");
      out_.push_back(kEmptyTuple);
      out_.push_back(kReduce);
    } else {
      out_.push_back(kEmptyDict);
    }
    ZT_RETURN_IF_ERROR(Items(dict, path, depth));
    if (!dict.attributes.empty()) {
      // As Python pickles a dict subclass with a __dict__: items, then BUILD.
      Dict state;
      for (const auto& [name, value] : dict.attributes) state.items.emplace_back(Value(name), value);
      ZT_RETURN_IF_ERROR(Write(Value(std::move(state)), absl::StrCat(path, ".__dict__"), depth + 1));
      out_.push_back(kBuild);
    }
    return absl::OkStatus();
  }

  absl::Status WriteObject(const Object& object, const std::string& path, int depth) {
    ZT_RETURN_IF_ERROR(CheckGlobal(object.cls, path));
    for (const auto& [key, value] : object.state.items) {
      if (!key.is_string()) {
        return absl::InvalidArgumentError(
            absl::StrCat("object at ", path, " has a ", key.TypeName(), " attribute name; names must be str"));
      }
    }
    Global(object.cls.module, object.cls.name);
    out_.push_back(kEmptyTuple);
    out_.push_back(kNewObj);
    out_.push_back(kEmptyDict);
    ZT_RETURN_IF_ERROR(Items(object.state, path, depth));
    out_.push_back(kBuild);
    return absl::OkStatus();
  }

  absl::Status Tensor(const TensorRef& t, const std::string& path) {
    auto key = storage_key_(t);
    if (!key.ok()) {
      return absl::Status(key.status().code(), absl::StrCat("tensor at ", path, ": ", key.status().message()));
    }
    std::string storage = std::string(TorchStorageName(t.dtype));
    Global("torch._utils", "_rebuild_tensor_v2");
    out_.push_back(kMark);
    {  // persistent id -> the storage
      out_.push_back(kMark);
      Str("storage");
      Global("torch", storage.c_str());
      Str(*key);
      Str("cpu");
      Int(t.numel());
      out_.push_back(kTuple);
      out_.push_back(kBinPersId);
    }
    Int(0);  // storage_offset
    IntTuple(t.shape);
    std::vector<int64_t> stride(t.shape.size());
    int64_t s = 1;
    for (size_t i = t.shape.size(); i-- > 0;) {
      stride[i] = s;
      s *= std::max<int64_t>(t.shape[i], 1);  // PyTorch's contiguous strides skip empty dims
    }
    IntTuple(stride);
    out_.push_back(kNewFalse);             // requires_grad
    Global("collections", "OrderedDict");  // backward hooks: empty
    out_.push_back(kEmptyTuple);
    out_.push_back(kReduce);
    out_.push_back(kTuple);
    out_.push_back(kReduce);
    return absl::OkStatus();
  }

  const StorageKeyFn& storage_key_;
  std::string out_;
};

}  // namespace

absl::StatusOr<std::string> PickleValue(const Value& root, const StorageKeyFn& storage_key) {
  Pickler pickler(storage_key);
  return pickler.Run(root);
}

}  // namespace zt::ckpt
