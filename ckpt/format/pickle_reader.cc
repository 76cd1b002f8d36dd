// UnpickleValue: a small pickle virtual machine for what torch.save writes.
// Objects live as a shared Obj graph while unpickling (so memoized lists and
// dicts mutate in place, as in Python) and become a Value tree at STOP.
//
// Besides containers and tensors it understands what DeepSpeed's checkpoint
// files hold, without executing anything: attributes set on a state dict
// (OrderedDict._metadata, dropped), torch.Size (a tuple), set (a list), the
// ZeroStageEnum (its int value), and a few plain record classes (loss
// scalers, fragment_address) that become dicts with a "__class__" entry.
// Anything else -- another global, bytes -- is an error naming the opcode or
// the global and its offset in the pickle.
#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "ckpt/format/pickle.h"
#include "util/limits.h"
#include "util/status.h"

namespace zt::ckpt {
namespace {

// Classes whose instances are plain records (NEWOBJ with no arguments, then
// BUILD with a dict of attributes): read as dicts, "__class__" first.
constexpr const char* kRecordClasses[] = {
    "deepspeed.runtime.fp16.loss_scaler.LossScaler",
    "deepspeed.runtime.fp16.loss_scaler.DynamicLossScaler",
    "deepspeed.utils.tensor_fragment.fragment_address",
};

bool IsRecordClass(const std::string& name) {
  for (const char* c : kRecordClasses) {
    if (name == c) return true;
  }
  return false;
}

// deepspeed.runtime.zero.config.ZeroStageEnum's members.
std::optional<int64_t> ZeroStageValue(const std::string& member) {
  if (member == "disabled") return 0;
  if (member == "optimizer_states") return 1;
  if (member == "gradients") return 2;
  if (member == "weights" || member == "max_stage") return 3;
  return std::nullopt;
}
constexpr char kZeroStageEnum[] = "deepspeed.runtime.zero.config.ZeroStageEnum";

struct Obj;
using ObjPtr = std::shared_ptr<Obj>;

struct Obj {
  enum class Kind { kNone, kBool, kInt, kFloat, kStr, kList, kTuple, kDict, kGlobal, kStorage, kTensor };
  explicit Obj(Kind k) : kind(k) {}
  // Children are released iteratively: a hostile pickle can chain a million
  // lists into each other in a few megabytes, and the default recursive
  // release of shared_ptrs would overflow the stack.
  ~Obj() {
    std::vector<ObjPtr> work;
    Drain(&work);
    while (!work.empty()) {
      ObjPtr p = std::move(work.back());
      work.pop_back();
      if (p != nullptr && p.use_count() == 1) p->Drain(&work);
    }  // p dies here with no children left
  }
  void Drain(std::vector<ObjPtr>* work) {
    for (ObjPtr& c : items) work->push_back(std::move(c));
    for (auto& [k, v] : dict) {
      work->push_back(std::move(k));
      work->push_back(std::move(v));
    }
    items.clear();
    dict.clear();
  }
  Kind kind;
  bool b = false;
  int64_t i = 0;
  double d = 0;
  std::string s;              // str; "module.name" for a global
  std::vector<ObjPtr> items;  // list, tuple
  std::vector<std::pair<ObjPtr, ObjPtr>> dict;
  std::unordered_map<std::string, size_t> dict_index;  // key ("s<str>" or "i<int>") -> position
  bool ordered = false;
  bool record = false;  // a record class's instance, read as a dict
  TensorRef tensor;     // storage (record fields) or tensor (plus the view)
  int64_t storage_numel = 0;
};

const char* KindName(Obj::Kind k) {
  switch (k) {
    case Obj::Kind::kNone: return "None";
    case Obj::Kind::kBool: return "bool";
    case Obj::Kind::kInt: return "int";
    case Obj::Kind::kFloat: return "float";
    case Obj::Kind::kStr: return "str";
    case Obj::Kind::kList: return "list";
    case Obj::Kind::kTuple: return "tuple";
    case Obj::Kind::kDict: return "dict";
    case Obj::Kind::kGlobal: return "global";
    case Obj::Kind::kStorage: return "storage";
    case Obj::Kind::kTensor: return "tensor";
  }
  return "?";
}

class Unpickler {
 public:
  Unpickler(std::string_view data, const std::string& where, const StorageLoadFn& load)
      : data_(data), where_(where), load_(load) {}
  // Run's result is a Value tree of its own: every container made here is
  // emptied, which breaks any cycle among them.
  ~Unpickler() {
    stack_.clear();
    memo_.clear();
    for (const std::weak_ptr<Obj>& w : containers_) {
      if (ObjPtr p = w.lock()) {
        std::vector<ObjPtr> children;
        p->Drain(&children);
      }
    }
  }
  Unpickler(const Unpickler&) = delete;
  Unpickler& operator=(const Unpickler&) = delete;

  absl::StatusOr<Value> Run() {
    while (true) {
      if (pos_ >= data_.size()) return Error("ends without a STOP opcode (truncated?)");
      op_pos_ = pos_;
      const uint8_t op = static_cast<uint8_t>(data_[pos_++]);
      if (op == '.') break;  // STOP
      ZT_RETURN_IF_ERROR(Step(op));
      if (overflow_) {
        return Error(absl::StrCat("more than ", max_stack_,
                                  " objects on the unpickler's stack (a checkpoint holds a few thousand): refused as "
                                  "a file made to exhaust memory; ",
                                  LimitNote(Limit::kPickleStack)));
      }
    }
    if (stack_.size() != 1 || !marks_.empty()) {
      return Error(absl::StrCat("STOP with ", stack_.size(), " objects and ", marks_.size(), " marks on the stack"));
    }
    return ToValue(*stack_.back(), "root", 0);
  }

 private:
  absl::Status Error(absl::string_view what) const {
    return absl::DataLossError(absl::StrCat(where_, ": pickle offset ", op_pos_, ": ", what));
  }
  absl::Status Unsupported(absl::string_view what) const {
    return absl::UnimplementedError(absl::StrCat(
        where_, ": pickle offset ", op_pos_, ": ", what,
        "; zerotorch reads dicts, OrderedDicts, lists, tuples, sets, None, bool, int, float, str, tensors and "
        "DeepSpeed's checkpoint records"));
  }

  // --- reading the byte stream
  absl::Status Need(size_t n) const {
    if (data_.size() - pos_ < n) return Error("truncated operand");
    return absl::OkStatus();
  }
  uint64_t LittleEndian(size_t n) {
    uint64_t v = 0;
    for (size_t k = 0; k < n; ++k) v |= static_cast<uint64_t>(static_cast<uint8_t>(data_[pos_ + k])) << (8 * k);
    pos_ += n;
    return v;
  }
  absl::StatusOr<std::string_view> Line() {
    size_t nl = data_.find('\n', pos_);
    if (nl == std::string_view::npos) return Error("unterminated text operand");
    std::string_view line = data_.substr(pos_, nl - pos_);
    pos_ = nl + 1;
    return line;
  }

  // --- the stack
  // The stack holds what is pushed but not yet gathered into a container:
  // a checkpoint's pickle keeps a few thousand there; millions are a file
  // made to exhaust memory (each entry is an object of ~200 bytes).
  void Push(ObjPtr o) {
    if (stack_.size() >= max_stack_) {
      overflow_ = true;
      return;
    }
    stack_.push_back(std::move(o));
  }
  absl::StatusOr<ObjPtr> Pop() {
    if (stack_.empty() || (!marks_.empty() && stack_.size() <= marks_.back())) return Error("stack underflow");
    ObjPtr o = std::move(stack_.back());
    stack_.pop_back();
    return o;
  }
  absl::StatusOr<ObjPtr> Top() {
    if (stack_.empty() || (!marks_.empty() && stack_.size() <= marks_.back())) return Error("stack underflow");
    return stack_.back();
  }
  // Everything above the last MARK, which is removed.
  absl::StatusOr<std::vector<ObjPtr>> PopMark() {
    if (marks_.empty()) return Error("no MARK to pop to");
    size_t m = marks_.back();
    marks_.pop_back();
    std::vector<ObjPtr> items(std::make_move_iterator(stack_.begin() + static_cast<ptrdiff_t>(m)),
                              std::make_move_iterator(stack_.end()));
    stack_.resize(m);
    return items;
  }

  // Containers are remembered: a pickle can make one hold itself (APPEND of
  // a memoized list onto itself), a cycle shared_ptrs would never free.
  ObjPtr Make(Obj::Kind k) {
    ObjPtr o = std::make_shared<Obj>(k);
    if (k == Obj::Kind::kList || k == Obj::Kind::kDict || k == Obj::Kind::kTuple) containers_.push_back(o);
    return o;
  }
  ObjPtr MakeInt(int64_t v) {
    ObjPtr o = Make(Obj::Kind::kInt);
    o->i = v;
    return o;
  }
  ObjPtr MakeStr(std::string s) {
    ObjPtr o = Make(Obj::Kind::kStr);
    o->s = std::move(s);
    return o;
  }
  ObjPtr MakeTuple(std::vector<ObjPtr> items) {
    ObjPtr o = Make(Obj::Kind::kTuple);
    o->items = std::move(items);
    return o;
  }

  absl::Status PushLong(size_t n) {
    ZT_RETURN_IF_ERROR(Need(n));
    if (n > 8) {
      // Python ints beyond 64 bits fit nothing in Value; a sign-extension
      // byte may still make a 9-byte encoding of a 64-bit value.
      bool fits = true;
      const uint8_t sign = (static_cast<uint8_t>(data_[pos_ + 7]) & 0x80) ? 0xFF : 0x00;
      for (size_t k = 8; k < n; ++k) fits &= static_cast<uint8_t>(data_[pos_ + k]) == sign;
      if (!fits) return Unsupported(absl::StrCat("an integer of ", n, " bytes does not fit in 64 bits"));
    }
    const size_t used = std::min<size_t>(n, 8);
    uint64_t u = LittleEndian(used);
    pos_ += n - used;
    if (used > 0 && used < 8 && (u >> (8 * used - 1)) & 1) u |= ~uint64_t{0} << (8 * used);  // sign-extend
    Push(MakeInt(static_cast<int64_t>(u)));
    return absl::OkStatus();
  }

  absl::Status PushString(size_t n) {
    ZT_RETURN_IF_ERROR(Need(n));
    Push(MakeStr(std::string(data_.substr(pos_, n))));
    pos_ += n;
    return absl::OkStatus();
  }

  absl::Status PushGlobal(std::string module, std::string name) {
    if (module == "__builtin__") module = "builtins";  // protocol 2 spells Python 3's builtins so
    ObjPtr g = Make(Obj::Kind::kGlobal);
    g->s = absl::StrCat(module, ".", name);
    Push(std::move(g));
    return absl::OkStatus();
  }

  absl::Status Memo(uint64_t index) {
    ZT_ASSIGN_OR_RETURN(ObjPtr top, Top());
    memo_[index] = std::move(top);
    return absl::OkStatus();
  }
  absl::Status Get(uint64_t index) {
    auto it = memo_.find(index);
    if (it == memo_.end()) return Error(absl::StrCat("memo key ", index, " was never stored"));
    Push(it->second);
    return absl::OkStatus();
  }

  absl::Status SetItems(const ObjPtr& dict, std::vector<ObjPtr>& kv) {
    if (dict->kind != Obj::Kind::kDict) return Error(absl::StrCat("SETITEM(S) on a ", KindName(dict->kind)));
    if (kv.size() % 2 != 0) return Error("SETITEMS with an odd number of items");
    for (size_t k = 0; k < kv.size(); k += 2) {
      const ObjPtr& key = kv[k];
      if (key->kind != Obj::Kind::kStr && key->kind != Obj::Kind::kInt) {
        return Unsupported(absl::StrCat("a dict key of type ", KindName(key->kind)));
      }
      // Python semantics: a repeated key replaces the value in place.
      std::string index_key = key->kind == Obj::Kind::kStr ? absl::StrCat("s", key->s) : absl::StrCat("i", key->i);
      auto [it, inserted] = dict->dict_index.emplace(std::move(index_key), dict->dict.size());
      if (inserted) {
        dict->dict.emplace_back(key, kv[k + 1]);
      } else {
        dict->dict[it->second].second = kv[k + 1];
      }
    }
    return absl::OkStatus();
  }

  absl::Status Appends(const ObjPtr& list, std::vector<ObjPtr>& items) {
    if (list->kind != Obj::Kind::kList) return Error(absl::StrCat("APPEND(S) on a ", KindName(list->kind)));
    for (ObjPtr& o : items) list->items.push_back(std::move(o));
    return absl::OkStatus();
  }

  // The persistent id torch.save writes: ('storage', torch.<Type>Storage, key, location, numel).
  absl::Status PersistentLoad(const ObjPtr& pid) {
    const auto& t = pid->items;
    if (pid->kind != Obj::Kind::kTuple || t.size() != 5 || t[0]->kind != Obj::Kind::kStr || t[0]->s != "storage" ||
        t[1]->kind != Obj::Kind::kGlobal || t[2]->kind != Obj::Kind::kStr || t[3]->kind != Obj::Kind::kStr ||
        t[4]->kind != Obj::Kind::kInt) {
      return Unsupported("a persistent id that is not ('storage', type, key, location, numel)");
    }
    const std::string& type = t[1]->s;
    std::optional<DType> dtype;
    if (type.substr(0, 6) == "torch.") {
      const std::string name = type.substr(6);
      dtype = name == "UntypedStorage" ? std::optional<DType>(DType::kUInt8) : DTypeFromTorchStorageName(name);
    }
    if (!dtype) return Unsupported(absl::StrCat("storage type '", type, "'"));
    if (t[4]->i < 0) return Error("negative storage size");
    PickledStorage s{t[2]->s, *dtype, t[4]->i, t[3]->s};
    auto loaded = load_(s);
    if (!loaded.ok()) {
      return absl::Status(loaded.status().code(),
                          absl::StrCat(where_, ": storage '", s.key, "': ", loaded.status().message()));
    }
    ObjPtr o = Make(Obj::Kind::kStorage);
    o->tensor = std::move(loaded).value();
    o->storage_numel = s.numel;
    Push(std::move(o));
    return absl::OkStatus();
  }

  absl::StatusOr<std::vector<int64_t>> IntTuple(const ObjPtr& o, const char* what) {
    if (o->kind != Obj::Kind::kTuple && o->kind != Obj::Kind::kList) {
      return Error(absl::StrCat(what, " is a ", KindName(o->kind), ", not a tuple"));
    }
    std::vector<int64_t> v;
    for (const ObjPtr& x : o->items) {
      if (x->kind != Obj::Kind::kInt) return Error(absl::StrCat(what, " holds a ", KindName(x->kind)));
      v.push_back(x->i);
    }
    return v;
  }

  // _rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad, backward_hooks[, metadata])
  absl::StatusOr<ObjPtr> RebuildTensor(const std::vector<ObjPtr>& args) {
    if (args.size() < 4 || args[0]->kind != Obj::Kind::kStorage || args[1]->kind != Obj::Kind::kInt) {
      return Error("_rebuild_tensor_v2 called with unexpected arguments");
    }
    ObjPtr t = Make(Obj::Kind::kTensor);
    t->tensor = args[0]->tensor;
    t->tensor.storage_offset = args[1]->i;
    ZT_ASSIGN_OR_RETURN(t->tensor.shape, IntTuple(args[2], "tensor size"));
    ZT_ASSIGN_OR_RETURN(t->tensor.stride, IntTuple(args[3], "tensor stride"));
    const TensorRef& r = t->tensor;
    if (r.shape.size() != r.stride.size()) return Error("tensor size and stride differ in length");
    // The view must stay inside its storage: offset + sum((size-1)*stride) < numel.
    // A negative offset is refused first: the overflow test below assumes last >= 0.
    if (r.storage_offset < 0) {
      return Error(absl::StrCat("negative tensor storage offset ", r.storage_offset, " into storage '", r.record, "'"));
    }
    int64_t last = r.storage_offset;
    bool empty = false;
    for (size_t k = 0; k < r.shape.size(); ++k) {
      if (r.shape[k] < 0 || r.stride[k] < 0) return Error("negative tensor size or stride");
      if (r.shape[k] == 0) empty = true;
      if (r.shape[k] > 0 && r.stride[k] > 0 && (r.shape[k] - 1) > (INT64_MAX - last) / r.stride[k]) {
        return Error("tensor view overflows");
      }
      if (r.shape[k] > 0) last += (r.shape[k] - 1) * r.stride[k];
    }
    if (!empty && last >= args[0]->storage_numel) {
      return Error(absl::StrCat("tensor view (offset ", r.storage_offset, ", last element ", last,
                                ") lies outside its storage '", r.record, "' of ", args[0]->storage_numel,
                                " elements"));
    }
    return t;
  }

  absl::Status Reduce() {
    ZT_ASSIGN_OR_RETURN(ObjPtr args, Pop());
    ZT_ASSIGN_OR_RETURN(ObjPtr callable, Pop());
    if (callable->kind != Obj::Kind::kGlobal) return Error(absl::StrCat("REDUCE on a ", KindName(callable->kind)));
    if (args->kind != Obj::Kind::kTuple) return Error("REDUCE arguments are not a tuple");
    const std::string& fn = callable->s;
    if (fn == "collections.OrderedDict") {
      if (!args->items.empty()) return Unsupported("collections.OrderedDict called with arguments");
      ObjPtr d = Make(Obj::Kind::kDict);
      d->ordered = true;
      Push(std::move(d));
    } else if (fn == "torch._utils._rebuild_tensor_v2") {
      ZT_ASSIGN_OR_RETURN(ObjPtr t, RebuildTensor(args->items));
      Push(std::move(t));
    } else if (fn == "torch._utils._rebuild_parameter" || fn == "torch._utils._rebuild_parameter_with_state") {
      // nn.Parameter(data, requires_grad, hooks[, state]): keep the data.
      if (args->items.empty() || args->items[0]->kind != Obj::Kind::kTensor) {
        return Error(absl::StrCat(fn, " called with unexpected arguments"));
      }
      Push(args->items[0]);
    } else if (fn == "torch.Size") {
      // torch.Size((2, 3)): a tuple of ints.
      if (args->items.size() != 1) return Error("torch.Size called with unexpected arguments");
      ZT_ASSIGN_OR_RETURN(std::vector<int64_t> dims, IntTuple(args->items[0], "torch.Size"));
      std::vector<ObjPtr> items;
      for (int64_t d : dims) items.push_back(MakeInt(d));
      Push(MakeTuple(std::move(items)));
    } else if (fn == "builtins.set" || fn == "builtins.frozenset") {
      // set([...]): its items as a list (in the pickled order).
      ObjPtr l = Make(Obj::Kind::kList);
      if (args->items.size() > 1) return Error(absl::StrCat(fn, " called with unexpected arguments"));
      if (!args->items.empty()) {
        const ObjPtr& src = args->items[0];
        if (src->kind != Obj::Kind::kList && src->kind != Obj::Kind::kTuple) {
          return Error(absl::StrCat(fn, " of a ", KindName(src->kind)));
        }
        l->items = src->items;
      }
      Push(std::move(l));
    } else if (fn == "builtins.getattr") {
      // getattr(ZeroStageEnum, 'optimizer_states'): how Python pickles an enum member by name.
      if (args->items.size() != 2 || args->items[0]->kind != Obj::Kind::kGlobal ||
          args->items[1]->kind != Obj::Kind::kStr) {
        return Unsupported("getattr with arguments other than (class, name)");
      }
      const std::string& cls = args->items[0]->s;
      const std::optional<int64_t> v = cls == kZeroStageEnum ? ZeroStageValue(args->items[1]->s) : std::nullopt;
      if (!v) return Unsupported(absl::StrCat("global '", cls, ".", args->items[1]->s, "' is not supported"));
      Push(MakeInt(*v));
    } else if (fn == kZeroStageEnum) {
      // ZeroStageEnum(1): the member by value.
      if (args->items.size() != 1 || args->items[0]->kind != Obj::Kind::kInt) {
        return Error("ZeroStageEnum called with unexpected arguments");
      }
      Push(args->items[0]);
    } else {
      return Unsupported(absl::StrCat("global '", fn, "' is not supported"));
    }
    return absl::OkStatus();
  }

  // NEWOBJ: cls.__new__(cls, *args). Only the record classes, without arguments.
  absl::Status NewObj() {
    ZT_ASSIGN_OR_RETURN(ObjPtr args, Pop());
    ZT_ASSIGN_OR_RETURN(ObjPtr cls, Pop());
    if (cls->kind != Obj::Kind::kGlobal) return Error(absl::StrCat("NEWOBJ on a ", KindName(cls->kind)));
    if (!IsRecordClass(cls->s)) return Unsupported(absl::StrCat("global '", cls->s, "' is not supported"));
    if (args->kind != Obj::Kind::kTuple || !args->items.empty()) {
      return Unsupported(absl::StrCat("'", cls->s, "' created with arguments"));
    }
    ObjPtr d = Make(Obj::Kind::kDict);
    d->record = true;
    std::vector<ObjPtr> kv{MakeStr("__class__"), MakeStr(cls->s)};
    ZT_RETURN_IF_ERROR(SetItems(d, kv));
    Push(std::move(d));
    return absl::OkStatus();
  }

  absl::Status Build() {
    ZT_ASSIGN_OR_RETURN(ObjPtr state, Pop());
    ZT_ASSIGN_OR_RETURN(ObjPtr target, Top());
    // Harmless state: none, or an empty dict (e.g. an OrderedDict's or a
    // tensor's empty __dict__). Anything else would be lost silently.
    const bool harmless =
        state->kind == Obj::Kind::kNone || (state->kind == Obj::Kind::kDict && state->dict.empty()) ||
        (state->kind == Obj::Kind::kTuple && std::all_of(state->items.begin(), state->items.end(), [](const ObjPtr& s) {
           return s->kind == Obj::Kind::kNone || (s->kind == Obj::Kind::kDict && s->dict.empty());
         }));
    if (harmless && (target->kind == Obj::Kind::kDict || target->kind == Obj::Kind::kTensor)) return absl::OkStatus();
    if (target->kind == Obj::Kind::kDict && state->kind == Obj::Kind::kDict) {
      if (target->record) {
        // A record's attributes become its entries.
        std::vector<ObjPtr> kv;
        for (const auto& [k, v] : state->dict) {
          kv.push_back(k);
          kv.push_back(v);
        }
        return SetItems(target, kv);
      }
      // Attributes set on a dict: a state dict's `_metadata` (module
      // versions, which nothing here needs) is dropped; others are refused.
      for (const auto& [k, v] : state->dict) {
        if (k->kind != Obj::Kind::kStr || k->s != "_metadata") {
          return Unsupported(
              absl::StrCat("an attribute '", k->kind == Obj::Kind::kStr ? k->s : "?", "' set on a dict"));
        }
      }
      return absl::OkStatus();
    }
    return Unsupported(absl::StrCat("BUILD with ", KindName(state->kind), " state on a ", KindName(target->kind)));
  }

  absl::Status Step(uint8_t op) {
    switch (op) {
      case 0x80:  // PROTO
        ZT_RETURN_IF_ERROR(Need(1));
        if (static_cast<uint8_t>(data_[pos_]) > 5) return Unsupported("pickle protocol above 5");
        ++pos_;
        return absl::OkStatus();
      case 0x95:  // FRAME: just a length hint
        ZT_RETURN_IF_ERROR(Need(8));
        pos_ += 8;
        return absl::OkStatus();
      case '(':  // MARK
        marks_.push_back(stack_.size());
        return absl::OkStatus();
      case '0':  // POP
        return Pop().status();
      case '1':  // POP_MARK
        return PopMark().status();
      case '2': {  // DUP
        ZT_ASSIGN_OR_RETURN(ObjPtr top, Top());
        Push(top);
        return absl::OkStatus();
      }
      case 'N': Push(Make(Obj::Kind::kNone)); return absl::OkStatus();
      case 0x88:
      case 0x89: {  // NEWTRUE, NEWFALSE
        ObjPtr b = Make(Obj::Kind::kBool);
        b->b = op == 0x88;
        Push(std::move(b));
        return absl::OkStatus();
      }
      case 'J':  // BININT
        ZT_RETURN_IF_ERROR(Need(4));
        Push(MakeInt(static_cast<int32_t>(LittleEndian(4))));
        return absl::OkStatus();
      case 'K':  // BININT1
        ZT_RETURN_IF_ERROR(Need(1));
        Push(MakeInt(static_cast<int64_t>(LittleEndian(1))));
        return absl::OkStatus();
      case 'M':  // BININT2
        ZT_RETURN_IF_ERROR(Need(2));
        Push(MakeInt(static_cast<int64_t>(LittleEndian(2))));
        return absl::OkStatus();
      case 0x8a:  // LONG1
        ZT_RETURN_IF_ERROR(Need(1));
        return PushLong(LittleEndian(1));
      case 0x8b: {  // LONG4
        ZT_RETURN_IF_ERROR(Need(4));
        return PushLong(LittleEndian(4));
      }
      case 'G': {  // BINFLOAT, big-endian
        ZT_RETURN_IF_ERROR(Need(8));
        uint64_t bits = 0;
        for (int k = 0; k < 8; ++k) bits = (bits << 8) | static_cast<uint8_t>(data_[pos_ + k]);
        pos_ += 8;
        ObjPtr f = Make(Obj::Kind::kFloat);
        std::memcpy(&f->d, &bits, 8);
        Push(std::move(f));
        return absl::OkStatus();
      }
      case 'X':  // BINUNICODE
      case 'T':  // BINSTRING (Python 2 str; bytes kept as they are)
        ZT_RETURN_IF_ERROR(Need(4));
        return PushString(LittleEndian(4));
      case 0x8c:  // SHORT_BINUNICODE
      case 'U':   // SHORT_BINSTRING
        ZT_RETURN_IF_ERROR(Need(1));
        return PushString(LittleEndian(1));
      case 0x8d:  // BINUNICODE8
        ZT_RETURN_IF_ERROR(Need(8));
        return PushString(LittleEndian(8));
      case '}': Push(Make(Obj::Kind::kDict)); return absl::OkStatus();
      case ']': Push(Make(Obj::Kind::kList)); return absl::OkStatus();
      case ')': Push(MakeTuple({})); return absl::OkStatus();
      case 'd': {  // DICT from MARK
        ZT_ASSIGN_OR_RETURN(std::vector<ObjPtr> kv, PopMark());
        ObjPtr d = Make(Obj::Kind::kDict);
        ZT_RETURN_IF_ERROR(SetItems(d, kv));
        Push(std::move(d));
        return absl::OkStatus();
      }
      case 'l': {  // LIST from MARK
        ZT_ASSIGN_OR_RETURN(std::vector<ObjPtr> items, PopMark());
        ObjPtr l = Make(Obj::Kind::kList);
        l->items = std::move(items);
        Push(std::move(l));
        return absl::OkStatus();
      }
      case 't': {  // TUPLE from MARK
        ZT_ASSIGN_OR_RETURN(std::vector<ObjPtr> items, PopMark());
        Push(MakeTuple(std::move(items)));
        return absl::OkStatus();
      }
      case 0x85:
      case 0x86:
      case 0x87: {  // TUPLE1..3
        const size_t n = op - 0x84;
        std::vector<ObjPtr> items(n);
        for (size_t k = n; k-- > 0;) {
          ZT_ASSIGN_OR_RETURN(items[k], Pop());
        }
        Push(MakeTuple(std::move(items)));
        return absl::OkStatus();
      }
      case 'a': {  // APPEND
        ZT_ASSIGN_OR_RETURN(ObjPtr item, Pop());
        ZT_ASSIGN_OR_RETURN(ObjPtr list, Top());
        std::vector<ObjPtr> items{std::move(item)};
        return Appends(list, items);
      }
      case 'e': {  // APPENDS
        ZT_ASSIGN_OR_RETURN(std::vector<ObjPtr> items, PopMark());
        ZT_ASSIGN_OR_RETURN(ObjPtr list, Top());
        return Appends(list, items);
      }
      case 's': {  // SETITEM
        ZT_ASSIGN_OR_RETURN(ObjPtr value, Pop());
        ZT_ASSIGN_OR_RETURN(ObjPtr key, Pop());
        ZT_ASSIGN_OR_RETURN(ObjPtr dict, Top());
        std::vector<ObjPtr> kv{std::move(key), std::move(value)};
        return SetItems(dict, kv);
      }
      case 'u': {  // SETITEMS
        ZT_ASSIGN_OR_RETURN(std::vector<ObjPtr> kv, PopMark());
        ZT_ASSIGN_OR_RETURN(ObjPtr dict, Top());
        return SetItems(dict, kv);
      }
      case 'q':  // BINPUT
        ZT_RETURN_IF_ERROR(Need(1));
        return Memo(LittleEndian(1));
      case 'r':  // LONG_BINPUT
        ZT_RETURN_IF_ERROR(Need(4));
        return Memo(LittleEndian(4));
      case 0x94:  // MEMOIZE
        return Memo(memo_.size());
      case 'h':  // BINGET
        ZT_RETURN_IF_ERROR(Need(1));
        return Get(LittleEndian(1));
      case 'j':  // LONG_BINGET
        ZT_RETURN_IF_ERROR(Need(4));
        return Get(LittleEndian(4));
      case 'c': {  // GLOBAL "module\nname\n"
        ZT_ASSIGN_OR_RETURN(std::string_view module, Line());
        ZT_ASSIGN_OR_RETURN(std::string_view name, Line());
        return PushGlobal(std::string(module), std::string(name));
      }
      case 0x93: {  // STACK_GLOBAL
        ZT_ASSIGN_OR_RETURN(ObjPtr name, Pop());
        ZT_ASSIGN_OR_RETURN(ObjPtr module, Pop());
        if (name->kind != Obj::Kind::kStr || module->kind != Obj::Kind::kStr) {
          return Error("STACK_GLOBAL operands are not strings");
        }
        return PushGlobal(module->s, name->s);
      }
      case 'R':  // REDUCE
        return Reduce();
      case 'b':  // BUILD
        return Build();
      case 0x81:  // NEWOBJ
        return NewObj();
      case 'Q': {  // BINPERSID
        ZT_ASSIGN_OR_RETURN(ObjPtr pid, Pop());
        return PersistentLoad(pid);
      }
      default: return Unsupported(absl::StrFormat("opcode 0x%02x ('%c')", op, op >= 0x20 && op < 0x7f ? op : '?'));
    }
  }

  absl::StatusOr<Value> ToValue(const Obj& o, const std::string& path, int depth) {
    if (depth > kPickleMaxDepth)
      return Error(absl::StrCat("objects nested deeper than ", kPickleMaxDepth, " at ", path));
    // The tree a memo-shared graph expands to: a 400-byte pickle can name
    // one list 2^40 times ("billion laughs"). A checkpoint's tree has one
    // node per key, shape entry and tensor: far below the budget.
    if (++values_ > max_values_) {
      return Error(absl::StrCat("expands to more than ", max_values_,
                                " values (objects shared through the memo are counted each time they appear): "
                                "refused as a file made to exhaust memory; ",
                                LimitNote(Limit::kPickleValues)));
    }
    switch (o.kind) {
      case Obj::Kind::kNone: return Value();
      case Obj::Kind::kBool: return Value(o.b);
      case Obj::Kind::kInt: return Value(o.i);
      case Obj::Kind::kFloat: return Value(o.d);
      case Obj::Kind::kStr: return Value(o.s);
      case Obj::Kind::kTensor: return Value(o.tensor);
      case Obj::Kind::kList:
      case Obj::Kind::kTuple: {
        List items;
        items.reserve(o.items.size());
        for (size_t k = 0; k < o.items.size(); ++k) {
          ZT_ASSIGN_OR_RETURN(Value v, ToValue(*o.items[k], absl::StrCat(path, "[", k, "]"), depth + 1));
          items.push_back(std::move(v));
        }
        if (o.kind == Obj::Kind::kList) return Value(std::move(items));
        return Value(Value::Tuple{std::move(items)});
      }
      case Obj::Kind::kDict: {
        Dict d;
        d.ordered = o.ordered;
        d.items.reserve(o.dict.size());
        for (const auto& [k, v] : o.dict) {
          ZT_ASSIGN_OR_RETURN(Value key, ToValue(*k, path, depth + 1));
          std::string sub =
              k->kind == Obj::Kind::kStr ? absl::StrCat(path, "['", k->s, "']") : absl::StrCat(path, "[", k->i, "]");
          ZT_ASSIGN_OR_RETURN(Value value, ToValue(*v, sub, depth + 1));
          d.items.emplace_back(std::move(key), std::move(value));
        }
        return Value(std::move(d));
      }
      case Obj::Kind::kGlobal: return Unsupported(absl::StrCat("object '", o.s, "' at ", path));
      case Obj::Kind::kStorage: return Unsupported(absl::StrCat("a bare storage (not a tensor) at ", path));
    }
    return Error("unknown object");
  }

  std::string_view data_;
  const std::string& where_;
  const StorageLoadFn& load_;
  size_t pos_ = 0;
  size_t op_pos_ = 0;
  std::vector<ObjPtr> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint64_t, ObjPtr> memo_;
  std::vector<std::weak_ptr<Obj>> containers_;  // every list, dict and tuple made (Make)
  bool overflow_ = false;
  int64_t values_ = 0;
  const int64_t max_values_ = LimitValue(Limit::kPickleValues);
  const size_t max_stack_ = static_cast<size_t>(LimitValue(Limit::kPickleStack));
};

}  // namespace

absl::StatusOr<Value> UnpickleValue(std::string_view data, const std::string& where, const StorageLoadFn& load) {
  Unpickler u(data, where, load);
  return u.Run();
}

}  // namespace zt::ckpt
