// The Jinja engine's renderer: walks the syntax tree with Python's semantics
// for values (truthiness, ==, ordering, and/or giving operands, floor
// division and modulo, code-point strings), Jinja2's getattr/getitem
// fallbacks and default Undefined, loop scopes, and the filters, tests and
// str/dict methods chat templates use (filters and methods are tables of
// one function each, by name).
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "template/jinja_internal.h"
#include "util/limits.h"
#include "util/status.h"

namespace zt::data::jinja {
namespace {

using internal::AppendUtf8;
using internal::Decode;
using internal::Encode;
using internal::ErrorAt;
using internal::IsPySpace;
using internal::KnownFilters;
using internal::KnownTests;
using internal::Strip;

absl::Status ErrNode(const Node& n, absl::string_view what) { return ErrorAt(n.line, n.col, what); }

std::string TypeName(const Value& v) {
  if (v.is_undefined()) return "undefined";
  if (v.is_none()) return "none";
  if (v.is_bool()) return "bool";
  if (v.is_int()) return "int";
  if (v.is_float()) return "float";
  if (v.is_string()) return "str";
  if (v.is_list()) return "list";
  if (v.is_dict()) return "dict";
  if (v.is_namespace()) return "namespace";
  return "function";
}

bool Truthy(const Value& v) {
  if (v.is_undefined() || v.is_none()) return false;
  if (v.is_bool()) return v.as_bool();
  if (v.is_int()) return v.as_int() != 0;
  if (v.is_float()) return v.as_float() != 0;
  if (v.is_string()) return !v.as_string().empty();
  if (v.is_list()) return !v.as_list().items.empty();
  if (v.is_dict()) return !v.as_dict().items.empty();
  return true;
}

double AsDouble(const Value& v) {
  return v.is_float() ? v.as_float() : v.is_int() ? static_cast<double>(v.as_int()) : v.as_bool() ? 1.0 : 0.0;
}
int64_t AsInt(const Value& v) {
  if (v.is_float()) return static_cast<int64_t>(v.as_float());
  return v.is_int() ? v.as_int() : v.is_bool() && v.as_bool() ? 1 : 0;
}
bool IsIntLike(const Value& v) { return v.is_int() || v.is_bool(); }

bool Equal(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (IsIntLike(a) && IsIntLike(b)) return AsInt(a) == AsInt(b);
    return AsDouble(a) == AsDouble(b);
  }
  if (a.is_string() && b.is_string()) return a.as_string() == b.as_string();
  if (a.is_none() && b.is_none()) return true;
  if (a.is_undefined() && b.is_undefined()) return true;
  if (a.is_list() && b.is_list()) {
    const auto &x = a.as_list().items, &y = b.as_list().items;
    if (x.size() != y.size()) return false;
    for (size_t i = 0; i < x.size(); ++i) {
      if (!Equal(x[i], y[i])) return false;
    }
    return true;
  }
  if (a.is_dict() && b.is_dict()) {
    if (a.as_dict().items.size() != b.as_dict().items.size()) return false;
    for (const auto& [k, v] : a.as_dict().items) {
      const Value* o = b.as_dict().Find(k);
      if (!o || !Equal(v, *o)) return false;
    }
    return true;
  }
  if (a.is_namespace() && b.is_namespace()) return &a.as_namespace() == &b.as_namespace();
  return false;
}

// Python's a < b for numbers, strings (code point order, which UTF-8 byte
// order keeps) and lists.
absl::StatusOr<bool> Less(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (IsIntLike(a) && IsIntLike(b)) return AsInt(a) < AsInt(b);
    return AsDouble(a) < AsDouble(b);
  }
  if (a.is_string() && b.is_string()) return a.as_string() < b.as_string();
  if (a.is_list() && b.is_list()) {
    const auto &x = a.as_list().items, &y = b.as_list().items;
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (Equal(x[i], y[i])) continue;
      return Less(x[i], y[i]);
    }
    return x.size() < y.size();
  }
  return absl::InvalidArgumentError(absl::StrCat("'<' is not supported between ", TypeName(a), " and ", TypeName(b)));
}

// The items a for loop or a filter walks: list items, dict keys, string
// characters; undefined is empty.
absl::StatusOr<std::vector<Value>> Iterate(const Value& v) {
  std::vector<Value> out;
  if (v.is_undefined()) return out;
  if (v.is_list()) return v.as_list().items;
  if (v.is_dict()) {
    for (const auto& kv : v.as_dict().items) out.push_back(Value(kv.first));
    return out;
  }
  if (v.is_string()) {
    const auto cps = Decode(v.as_string());
    for (size_t i = 0; i < cps.size(); ++i) out.push_back(Value(Encode(cps, i, i + 1)));
    return out;
  }
  return absl::InvalidArgumentError(absl::StrCat("a ", TypeName(v), " is not iterable"));
}

absl::StatusOr<int64_t> Length(const Value& v) {
  if (v.is_undefined()) return 0;
  if (v.is_string()) return static_cast<int64_t>(Decode(v.as_string()).size());
  if (v.is_list()) return static_cast<int64_t>(v.as_list().items.size());
  if (v.is_dict()) return static_cast<int64_t>(v.as_dict().items.size());
  return absl::InvalidArgumentError(absl::StrCat("a ", TypeName(v), " has no length"));
}

absl::StatusOr<bool> Contains(const Value& container, const Value& item) {
  if (container.is_string()) {
    if (!item.is_string()) {
      return absl::InvalidArgumentError(absl::StrCat("'in <string>' needs a string on the left, not ", TypeName(item)));
    }
    return container.as_string().find(item.as_string()) != std::string::npos;
  }
  if (container.is_dict()) return item.is_string() && container.as_dict().Find(item.as_string()) != nullptr;
  if (container.is_list()) {
    for (const Value& e : container.as_list().items) {
      if (Equal(e, item)) return true;
    }
    return false;
  }
  if (container.is_undefined()) return false;
  return absl::InvalidArgumentError(
      absl::StrCat("'in' needs a string, list or dict on the right, not ", TypeName(container)));
}

absl::StatusOr<std::string> Str(const Value& v) { return ToPyString(v); }

Value MakeFunction(std::string name,
                   std::function<absl::StatusOr<Value>(const std::vector<Value>&, const Kwargs&)> fn) {
  auto f = std::make_shared<Function>();
  f->name = std::move(name);
  f->call = std::move(fn);
  return Value(std::move(f));
}

// Argument `i` or keyword `name`, else `fallback`.
Value Arg(const std::vector<Value>& args, const Kwargs& kwargs, size_t i, const char* name, Value fallback = Value()) {
  if (i < args.size()) return args[i];
  for (const auto& [k, v] : kwargs) {
    if (k == name) return v;
  }
  return fallback;
}

// Python's str.split(sep=None, maxsplit=-1).
std::vector<Value> Split(const std::string& s, const Value& sep, int64_t maxsplit) {
  std::vector<Value> out;
  if (sep.is_none() || sep.is_undefined()) {
    const auto cps = Decode(s);
    size_t i = 0;
    while (i < cps.size()) {
      while (i < cps.size() && IsPySpace(cps[i])) ++i;
      if (i >= cps.size()) break;
      if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) {
        size_t e = cps.size();
        while (e > i && IsPySpace(cps[e - 1])) --e;
        out.push_back(Value(Encode(cps, i, e)));
        break;
      }
      size_t j = i;
      while (j < cps.size() && !IsPySpace(cps[j])) ++j;
      out.push_back(Value(Encode(cps, i, j)));
      i = j;
    }
    return out;
  }
  const std::string& d = sep.as_string();
  size_t start = 0;
  for (;;) {
    const size_t at = s.find(d, start);
    if (at == std::string::npos || (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit)) break;
    out.push_back(Value(s.substr(start, at - start)));
    start = at + d.size();
  }
  out.push_back(Value(s.substr(start)));
  return out;
}

std::string Replace(const std::string& s, const std::string& from, const std::string& to, int64_t count) {
  if (from.empty()) {
    // Python inserts `to` between characters and at both ends.
    const auto cps = Decode(s);
    std::string out;
    int64_t n = 0;
    for (size_t i = 0; i <= cps.size(); ++i) {
      if (count < 0 || n < count) {
        out += to;
        ++n;
      }
      if (i < cps.size()) AppendUtf8(cps[i], &out);
    }
    return out;
  }
  std::string out;
  size_t start = 0;
  int64_t n = 0;
  for (;;) {
    const size_t at = s.find(from, start);
    if (at == std::string::npos || (count >= 0 && n >= count)) break;
    out += s.substr(start, at - start) + to;
    start = at + from.size();
    ++n;
  }
  return out + s.substr(start);
}

// ASCII case mapping: Python maps every cased letter; a string with
// non-ASCII letters is refused rather than mapped differently.
absl::StatusOr<std::string> AsciiCase(const std::string& s, int mode) {  // 0 lower, 1 upper, 2 capitalize, 3 title
  for (char c : s) {
    if (static_cast<unsigned char>(c) >= 0x80) {
      return absl::InvalidArgumentError(
          "upper/lower/title/capitalize of non-ASCII text is not supported (Python's Unicode case mapping)");
    }
  }
  std::string out = s;
  bool word_start = true;
  for (size_t i = 0; i < out.size(); ++i) {
    const char c = out[i];
    if (mode == 0) {
      out[i] = static_cast<char>(std::tolower(c));
    } else if (mode == 1) {
      out[i] = static_cast<char>(std::toupper(c));
    } else if (mode == 2) {
      out[i] = static_cast<char>(i == 0 ? std::toupper(c) : std::tolower(c));
    } else {
      // Jinja2's title: words start after whitespace, - ( { [ <.
      out[i] = static_cast<char>(word_start ? std::toupper(c) : std::tolower(c));
      word_start =
          std::isspace(static_cast<unsigned char>(c)) || c == '-' || c == '(' || c == '{' || c == '[' || c == '<';
    }
  }
  return out;
}

// The bound methods of str and dict that templates call: each made from
// `self` by one function of the tables in Method (one per method, or per
// family that differs only in a flag read from the method's name).
using MethodFn = Value (*)(const Value& self, const std::string& name);

Value BindStrip(const Value& self, const std::string& name) {  // strip, lstrip, rstrip
  const std::string s = self.as_string();
  const bool l = name != "rstrip", r = name != "lstrip";
  return MakeFunction("str." + name, [s, l, r](const std::vector<Value>& a, const Kwargs& kw) -> absl::StatusOr<Value> {
    const Value chars = Arg(a, kw, 0, "chars", Value::None());
    if (!chars.is_none() && !chars.is_string()) return absl::InvalidArgumentError("strip: chars must be a string");
    return Value(Strip(s, chars.is_string() ? &chars.as_string() : nullptr, l, r));
  });
}

Value BindStartsOrEndsWith(const Value& self, const std::string& name) {  // startswith, endswith
  const std::string s = self.as_string();
  const bool start = name == "startswith";
  return MakeFunction(
      "str." + name, [s, start](const std::vector<Value>& a, const Kwargs& kw) -> absl::StatusOr<Value> {
        const Value p = Arg(a, kw, 0, "prefix");
        std::vector<Value> options = p.is_list() ? p.as_list().items : std::vector<Value>{p};
        for (const Value& o : options) {
          if (!o.is_string())
            return absl::InvalidArgumentError("startswith/endswith: needs a string or tuple of strings");
          const std::string& x = o.as_string();
          if (x.size() <= s.size() &&
              (start ? s.compare(0, x.size(), x) == 0 : s.compare(s.size() - x.size(), x.size(), x) == 0)) {
            return Value(true);
          }
        }
        return Value(false);
      });
}

Value BindSplit(const Value& self, const std::string&) {
  const std::string s = self.as_string();
  return MakeFunction("str.split", [s](const std::vector<Value>& a, const Kwargs& kw) -> absl::StatusOr<Value> {
    const Value sep = Arg(a, kw, 0, "sep", Value::None());
    const Value max = Arg(a, kw, 1, "maxsplit", Value(-1));
    if (sep.is_string() && sep.as_string().empty()) return absl::InvalidArgumentError("split: empty separator");
    if (!sep.is_none() && !sep.is_string()) return absl::InvalidArgumentError("split: sep must be a string");
    return Value::MakeList(Split(s, sep, AsInt(max)));
  });
}

Value BindReplace(const Value& self, const std::string&) {
  const std::string s = self.as_string();
  return MakeFunction("str.replace", [s](const std::vector<Value>& a, const Kwargs& kw) -> absl::StatusOr<Value> {
    const Value from = Arg(a, kw, 0, "old"), to = Arg(a, kw, 1, "new"), n = Arg(a, kw, 2, "count", Value(-1));
    if (!from.is_string() || !to.is_string()) return absl::InvalidArgumentError("replace: needs two strings");
    return Value(Replace(s, from.as_string(), to.as_string(), AsInt(n)));
  });
}

Value BindCase(const Value& self, const std::string& name) {  // upper, lower, title, capitalize
  const std::string s = self.as_string();
  const int mode = name == "lower" ? 0 : name == "upper" ? 1 : name == "capitalize" ? 2 : 3;
  return MakeFunction("str." + name, [s, mode](const std::vector<Value>&, const Kwargs&) -> absl::StatusOr<Value> {
    auto r = AsciiCase(s, mode);
    if (!r.ok()) return r.status();
    return Value(*r);
  });
}

Value BindJoin(const Value& self, const std::string&) {
  const std::string s = self.as_string();
  return MakeFunction("str.join", [s](const std::vector<Value>& a, const Kwargs& kw) -> absl::StatusOr<Value> {
    auto items = Iterate(Arg(a, kw, 0, "iterable"));
    if (!items.ok()) return items.status();
    std::string out;
    for (size_t i = 0; i < items->size(); ++i) {
      if (!(*items)[i].is_string()) return absl::InvalidArgumentError("str.join: every item must be a string");
      if (i) out += s;
      out += (*items)[i].as_string();
    }
    return Value(out);
  });
}

Value BindFormat(const Value&, const std::string&) {
  return MakeFunction("str.format", [](const std::vector<Value>&, const Kwargs&) -> absl::StatusOr<Value> {
    return absl::InvalidArgumentError("str.format is not supported; use ~ or + to build strings");
  });
}

Value BindGet(const Value& self, const std::string&) {
  const Value d = self;
  return MakeFunction("dict.get", [d](const std::vector<Value>& a, const Kwargs& kw) -> absl::StatusOr<Value> {
    const Value key = Arg(a, kw, 0, "key");
    const Value* v = key.is_string() ? d.as_dict().Find(key.as_string()) : nullptr;
    return v ? *v : Arg(a, kw, 1, "default", Value::None());
  });
}

Value BindItemsKeysOrValues(const Value& self, const std::string& name) {  // items, keys, values
  const Value d = self;
  const int which = name == "items" ? 0 : name == "keys" ? 1 : 2;
  return MakeFunction("dict." + name, [d, which](const std::vector<Value>&, const Kwargs&) -> absl::StatusOr<Value> {
    std::vector<Value> out;
    for (const auto& [k, v] : d.as_dict().items) {
      out.push_back(which == 0 ? Value::MakeList({Value(k), v}) : which == 1 ? Value(k) : v);
    }
    return Value::MakeList(std::move(out));
  });
}

// `name` of str or dict bound to `self`; undefined for any other name or
// type (as Jinja2's getattr gives).
Value Method(const Value& self, const std::string& name) {
  using Table = absl::flat_hash_map<absl::string_view, MethodFn>;
  static const Table kStr = {
      {"strip", &BindStrip},
      {"lstrip", &BindStrip},
      {"rstrip", &BindStrip},
      {"startswith", &BindStartsOrEndsWith},
      {"endswith", &BindStartsOrEndsWith},
      {"split", &BindSplit},
      {"replace", &BindReplace},
      {"upper", &BindCase},
      {"lower", &BindCase},
      {"title", &BindCase},
      {"capitalize", &BindCase},
      {"join", &BindJoin},
      {"format", &BindFormat},
  };
  static const Table kDict = {
      {"get", &BindGet},
      {"items", &BindItemsKeysOrValues},
      {"keys", &BindItemsKeysOrValues},
      {"values", &BindItemsKeysOrValues},
  };
  const Table* table = self.is_string() ? &kStr : self.is_dict() ? &kDict : nullptr;
  if (table == nullptr) return Value();
  const auto it = table->find(name);
  return it == table->end() ? Value() : it->second(self, name);
}

bool IsMethodName(const Value& self, const std::string& name) {
  static const std::set<std::string> kDict = {"get",    "items",      "keys",  "values", "pop",     "popitem",
                                              "update", "setdefault", "clear", "copy",   "fromkeys"};
  return self.is_dict() && kDict.count(name);
}

// Jinja2's getattr: the attribute (a method), else the item.
Value GetAttr(const Value& obj, const std::string& name) {
  if (obj.is_namespace()) {
    const Value* v = obj.as_namespace().attrs.Find(name);
    return v ? *v : Value(Undefined{absl::StrCat("'namespace' has no attribute '", name, "'")});
  }
  if (IsMethodName(obj, name)) return Method(obj, name);  // mutating ones: undefined (immutable sandbox)
  if (obj.is_dict()) {
    const Value* v = obj.as_dict().Find(name);
    return v ? *v : Value(Undefined{absl::StrCat("'dict object' has no attribute '", name, "'")});
  }
  Value m = Method(obj, name);
  if (m.is_undefined())
    return Value(Undefined{absl::StrCat("'", TypeName(obj), " object' has no attribute '", name, "'")});
  return m;
}

// Python's index normalisation for item access; -1 when out of range.
int64_t Index(int64_t i, int64_t n) {
  if (i < 0) i += n;
  return i < 0 || i >= n ? -1 : i;
}

// Jinja2's getitem: the item, else (for a string key) the attribute.
Value GetItem(const Value& obj, const Value& key) {
  if (obj.is_dict()) {
    if (key.is_string()) {
      if (const Value* v = obj.as_dict().Find(key.as_string())) return *v;
      if (IsMethodName(obj, key.as_string())) return Method(obj, key.as_string());
    }
    return Value(Undefined{key.is_string() ? absl::StrCat("'dict object' has no attribute '", key.as_string(), "'")
                                           : std::string("'dict object' has no such key")});
  }
  if ((obj.is_list() || obj.is_string()) && IsIntLike(key)) {
    if (obj.is_list()) {
      const auto& items = obj.as_list().items;
      const int64_t i = Index(AsInt(key), static_cast<int64_t>(items.size()));
      if (i >= 0) return items[static_cast<size_t>(i)];
      return Value(Undefined{"'list object' has no element"});
    }
    const auto cps = Decode(obj.as_string());
    const int64_t i = Index(AsInt(key), static_cast<int64_t>(cps.size()));
    if (i >= 0) return Value(Encode(cps, static_cast<size_t>(i), static_cast<size_t>(i) + 1));
    return Value(Undefined{"'str object' has no element"});
  }
  if (key.is_string()) return GetAttr(obj, key.as_string());
  return Value(Undefined{absl::StrCat("'", TypeName(obj), " object' has no element")});
}

// Python's slice indices for length n.
std::vector<size_t> SliceIndices(int64_t n, const Value& a, const Value& b, const Value& c, absl::Status* err) {
  const int64_t step = c.is_none() || c.is_undefined() ? 1 : AsInt(c);
  std::vector<size_t> out;
  if (step == 0) {
    *err = absl::InvalidArgumentError("slice step cannot be zero");
    return out;
  }
  auto norm = [&](const Value& v, int64_t def) -> int64_t {
    if (v.is_none() || v.is_undefined()) return def;
    int64_t i = AsInt(v);
    if (i < 0) i += n;
    if (step > 0) return std::clamp<int64_t>(i, 0, n);
    return std::clamp<int64_t>(i, -1, n - 1);
  };
  const int64_t start = norm(a, step > 0 ? 0 : n - 1), stop = norm(b, step > 0 ? n : -1);
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) out.push_back(static_cast<size_t>(i));
  return out;
}

// One call of a filter: the value left of `|` and the arguments.
struct FilterCall {
  const Value& v;
  const std::vector<Value>& args;
  const Kwargs& kwargs;
};
using FilterFn = absl::StatusOr<Value> (*)(const FilterCall& call);
using FilterTable = absl::flat_hash_map<absl::string_view, FilterFn>;

class Renderer {
 public:
  explicit Renderer(const std::vector<std::pair<std::string, Value>>& variables) {
    scopes_.emplace_back();
    auto& g = scopes_.back();
    g["range"] = MakeFunction("range", [](const std::vector<Value>& a, const Kwargs&) -> absl::StatusOr<Value> {
      if (a.empty() || a.size() > 3) return absl::InvalidArgumentError("range takes 1 to 3 integers");
      for (const Value& v : a) {
        if (!IsIntLike(v)) return absl::InvalidArgumentError("range takes integers");
      }
      const int64_t start = a.size() == 1 ? 0 : AsInt(a[0]), stop = a.size() == 1 ? AsInt(a[0]) : AsInt(a[1]);
      const int64_t step = a.size() == 3 ? AsInt(a[2]) : 1;
      if (step == 0) return absl::InvalidArgumentError("range step cannot be zero");
      std::vector<Value> out;
      for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
        if (out.size() > 100000) return absl::InvalidArgumentError("range longer than 100000 items");
        out.push_back(Value(i));
      }
      return Value::MakeList(std::move(out));
    });
    g["namespace"] =
        MakeFunction("namespace", [](const std::vector<Value>& a, const Kwargs& kw) -> absl::StatusOr<Value> {
          auto ns = std::make_shared<Namespace>();
          for (const Value& v : a) {
            if (!v.is_dict()) return absl::InvalidArgumentError("namespace() takes a dict or keyword arguments");
            ns->attrs.items = v.as_dict().items;
          }
          for (const auto& kv : kw) ns->attrs.items.push_back(kv);
          return Value(ns);
        });
    g["dict"] = MakeFunction("dict", [](const std::vector<Value>& a, const Kwargs& kw) -> absl::StatusOr<Value> {
      if (!a.empty()) return absl::InvalidArgumentError("dict() takes keyword arguments only");
      return Value::MakeDict(kw);
    });
    for (const auto& [k, v] : variables) g[k] = v;
  }

  // Every filter by name: the one list of them (KnownFilters gives its names).
  static const FilterTable& Filters();

  absl::Status Exec(const Node& n, std::string* out) {
    ZT_RETURN_IF_ERROR(Step(n));
    if (out->size() > max_output_bytes_) {
      return ErrNode(n, absl::StrCat("the rendered text passed ", max_output_bytes_,
                                     " bytes: refused (a chat template renders a few kilobytes per conversation); ",
                                     LimitNote(Limit::kTemplateOutputBytes)));
    }
    switch (n.kind) {
      case Kind::kBody:
        for (const auto& k : n.kids) {
          if (auto s = Exec(*k, out); !s.ok()) return s;
          if (flow_ != Flow::kNormal) break;
        }
        return absl::OkStatus();
      case Kind::kText: *out += n.value.as_string(); return absl::OkStatus();
      case Kind::kOutput: {
        auto v = Eval(*n.kids[0]);
        if (!v.ok()) return v.status();
        auto s = Str(*v);
        if (!s.ok()) return ErrNode(n, s.status().message());
        *out += *s;
        return absl::OkStatus();
      }
      case Kind::kIf: {
        size_t i = 0;
        for (; i + 1 < n.kids.size(); i += 2) {
          auto c = Eval(*n.kids[i]);
          if (!c.ok()) return c.status();
          if (Truthy(*c)) return Exec(*n.kids[i + 1], out);
        }
        if (i < n.kids.size()) return Exec(*n.kids[i], out);
        return absl::OkStatus();
      }
      case Kind::kFor: return For(n, out);
      case Kind::kSet: {
        auto v = Eval(*n.kids[0]);
        if (!v.ok()) return v.status();
        if (n.attr.empty()) {
          scopes_.back()[n.name] = *v;
          return absl::OkStatus();
        }
        const Value ns = Lookup(n.name);
        if (!ns.is_namespace()) {
          return ErrNode(n, absl::StrCat("set ", n.name, ".", n.attr, ": '", n.name, "' is not a namespace"));
        }
        auto& attrs = ns.as_namespace().attrs.items;
        for (auto& kv : attrs) {
          if (kv.first == n.attr) {
            kv.second = *v;
            return absl::OkStatus();
          }
        }
        attrs.emplace_back(n.attr, *v);
        return absl::OkStatus();
      }
      case Kind::kBreak: flow_ = Flow::kBreak; return absl::OkStatus();
      case Kind::kContinue: flow_ = Flow::kContinue; return absl::OkStatus();
      default: return ErrNode(n, "internal: an expression where a statement belongs");
    }
  }

 private:
  enum class Flow { kNormal, kBreak, kContinue };

  Value Lookup(const std::string& name) const {
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
      auto f = it->find(name);
      if (f != it->end()) return f->second;
    }
    return Value(Undefined{absl::StrCat("'", name, "' is undefined")});
  }

  absl::Status For(const Node& n, std::string* out) {
    auto seq = Eval(*n.kids[0]);
    if (!seq.ok()) return seq.status();
    auto items = Iterate(*seq);
    if (!items.ok()) return ErrNode(*n.kids[0], items.status().message());
    // Each iteration is a scope: what the body sets does not outlive it.
    auto bind = [&](const Value& item) -> absl::Status {
      if (n.targets.size() == 1) {
        scopes_.back()[n.targets[0]] = item;
        return absl::OkStatus();
      }
      auto parts = Iterate(item);
      if (!parts.ok() || parts->size() != n.targets.size()) {
        return ErrNode(n,
                       absl::StrCat("cannot unpack a ", TypeName(item), " into ", n.targets.size(), " loop variables"));
      }
      for (size_t i = 0; i < parts->size(); ++i) scopes_.back()[n.targets[i]] = (*parts)[i];
      return absl::OkStatus();
    };
    std::vector<Value> kept;
    if (const Node* filter = n.kids[3].get()) {
      for (const Value& item : *items) {
        scopes_.emplace_back();
        absl::Status s = bind(item);
        absl::StatusOr<Value> keep = s.ok() ? Eval(*filter) : absl::StatusOr<Value>(s);
        scopes_.pop_back();
        if (!keep.ok()) return keep.status();
        if (Truthy(*keep)) kept.push_back(item);
      }
    } else {
      kept = std::move(*items);
    }
    const int64_t len = static_cast<int64_t>(kept.size());
    for (int64_t i = 0; i < len; ++i) {
      scopes_.emplace_back();
      const size_t idx = static_cast<size_t>(i);
      scopes_.back()["loop"] = Value::MakeDict({
          {"index", Value(i + 1)},
          {"index0", Value(i)},
          {"revindex", Value(len - i)},
          {"revindex0", Value(len - i - 1)},
          {"first", Value(i == 0)},
          {"last", Value(i == len - 1)},
          {"length", Value(len)},
          {"depth", Value(1)},
          {"depth0", Value(0)},
          {"previtem", i > 0 ? kept[idx - 1] : Value(Undefined{"there is no previous item"})},
          {"nextitem", i + 1 < len ? kept[idx + 1] : Value(Undefined{"there is no next item"})},
      });
      absl::Status s = bind(kept[idx]);
      if (s.ok()) s = Exec(*n.kids[1], out);
      scopes_.pop_back();
      if (!s.ok()) return s;
      const Flow f = flow_;
      flow_ = Flow::kNormal;
      if (f == Flow::kBreak) break;
    }
    if (len == 0) return Exec(*n.kids[2], out);
    return absl::OkStatus();
  }

  absl::StatusOr<std::vector<Value>> EvalAll(const Node& n, size_t from, Kwargs* kwargs) {
    std::vector<Value> args;
    const size_t first_kw = n.kids.size() - n.kw.size();
    for (size_t i = from; i < n.kids.size(); ++i) {
      auto v = Eval(*n.kids[i]);
      if (!v.ok()) return v.status();
      if (i >= first_kw) {
        kwargs->emplace_back(n.kw[i - first_kw], *v);
      } else {
        args.push_back(*v);
      }
    }
    return args;
  }

  absl::StatusOr<Value> Eval(const Node& n) {
    ZT_RETURN_IF_ERROR(Step(n));
    switch (n.kind) {
      case Kind::kLiteral: return n.value;
      case Kind::kName: return Lookup(n.name);
      case Kind::kListLit:
      case Kind::kDictLit: {
        std::vector<Value> items;
        for (const auto& k : n.kids) {
          auto v = Eval(*k);
          if (!v.ok()) return v;
          items.push_back(*v);
        }
        if (n.kind == Kind::kListLit) return Value::MakeList(std::move(items));
        std::vector<std::pair<std::string, Value>> kv;
        for (size_t i = 0; i < items.size(); i += 2) {
          if (!items[i].is_string()) return ErrNode(n, "dict keys must be strings");
          bool replaced = false;
          for (auto& e : kv) {
            if (e.first == items[i].as_string()) {
              e.second = items[i + 1];
              replaced = true;
            }
          }
          if (!replaced) kv.emplace_back(items[i].as_string(), items[i + 1]);
        }
        return Value::MakeDict(std::move(kv));
      }
      case Kind::kAttr:
      case Kind::kItem: {
        auto obj = Eval(*n.kids[0]);
        if (!obj.ok()) return obj;
        if (obj->is_undefined()) return ErrNode(n, obj->undefined_hint());
        if (n.kind == Kind::kAttr) return GetAttr(*obj, n.name);
        auto key = Eval(*n.kids[1]);
        if (!key.ok()) return key;
        return GetItem(*obj, *key);
      }
      case Kind::kSlice: {
        auto obj = Eval(*n.kids[0]);
        if (!obj.ok()) return obj;
        if (obj->is_undefined()) return ErrNode(n, obj->undefined_hint());
        Value parts[3];
        for (int i = 0; i < 3; ++i) {
          if (!n.kids[1 + i]) continue;
          auto v = Eval(*n.kids[1 + i]);
          if (!v.ok()) return v;
          if (!IsIntLike(*v) && !v->is_none()) return ErrNode(n, "slice indices must be integers or none");
          parts[i] = *v;
        }
        absl::Status err;
        if (obj->is_list()) {
          const auto& items = obj->as_list().items;
          std::vector<Value> out;
          for (size_t i : SliceIndices(static_cast<int64_t>(items.size()), parts[0], parts[1], parts[2], &err)) {
            out.push_back(items[i]);
          }
          if (!err.ok()) return ErrNode(n, err.message());
          return Value::MakeList(std::move(out));
        }
        if (obj->is_string()) {
          const auto cps = Decode(obj->as_string());
          std::string out;
          for (size_t i : SliceIndices(static_cast<int64_t>(cps.size()), parts[0], parts[1], parts[2], &err)) {
            AppendUtf8(cps[i], &out);
          }
          if (!err.ok()) return ErrNode(n, err.message());
          return Value(out);
        }
        return ErrNode(n, absl::StrCat("a ", TypeName(*obj), " cannot be sliced"));
      }
      case Kind::kCall: {
        auto fn = Eval(*n.kids[0]);
        if (!fn.ok()) return fn;
        Kwargs kwargs;
        auto args = EvalAll(n, 1, &kwargs);
        if (!args.ok()) return args.status();
        if (fn->is_undefined()) return ErrNode(n, absl::StrCat(fn->undefined_hint(), ", so it cannot be called"));
        if (!fn->is_function()) return ErrNode(n, absl::StrCat("a ", TypeName(*fn), " is not callable"));
        auto r = fn->as_function().call(*args, kwargs);
        if (!r.ok() && !IsRaisedByTemplate(r.status())) return ErrNode(n, r.status().message());
        return r;
      }
      case Kind::kFilter: {
        auto v = Eval(*n.kids[0]);
        if (!v.ok()) return v;
        Kwargs kwargs;
        auto args = EvalAll(n, 1, &kwargs);
        if (!args.ok()) return args.status();
        auto r = Filter(n.name, *v, *args, kwargs);
        if (!r.ok()) return ErrNode(n, absl::StrCat("filter ", n.name, ": ", r.status().message()));
        return r;
      }
      case Kind::kTest: {
        auto v = Eval(*n.kids[0]);
        if (!v.ok()) return v;
        Kwargs kwargs;
        auto args = EvalAll(n, 1, &kwargs);
        if (!args.ok()) return args.status();
        auto r = Test(n.name, *v, *args);
        if (!r.ok()) return ErrNode(n, absl::StrCat("test ", n.name, ": ", r.status().message()));
        return Value(*r != n.negated);
      }
      case Kind::kNeg:
      case Kind::kPos: {
        auto v = Eval(*n.kids[0]);
        if (!v.ok()) return v;
        if (!v->is_number())
          return ErrNode(n, absl::StrCat("unary ", n.kind == Kind::kNeg ? "-" : "+", " of a ", TypeName(*v)));
        if (n.kind == Kind::kPos) return IsIntLike(*v) ? Value(AsInt(*v)) : *v;
        return IsIntLike(*v) ? Value(-AsInt(*v)) : Value(-v->as_float());
      }
      case Kind::kNot: {
        auto v = Eval(*n.kids[0]);
        if (!v.ok()) return v;
        return Value(!Truthy(*v));
      }
      case Kind::kAnd:
      case Kind::kOr: {
        // Python's and/or give an operand, not a bool.
        auto l = Eval(*n.kids[0]);
        if (!l.ok()) return l;
        if (Truthy(*l) == (n.kind == Kind::kOr)) return l;
        return Eval(*n.kids[1]);
      }
      case Kind::kCond: {
        auto c = Eval(*n.kids[0]);
        if (!c.ok()) return c;
        if (Truthy(*c)) return Eval(*n.kids[1]);
        if (n.kids.size() > 2) return Eval(*n.kids[2]);
        return Value(Undefined{"the inline if has no else"});
      }
      case Kind::kBinary: {
        auto l = Eval(*n.kids[0]);
        if (!l.ok()) return l;
        auto r = Eval(*n.kids[1]);
        if (!r.ok()) return r;
        auto v = BinaryOp(n.name, *l, *r);
        if (!v.ok()) return ErrNode(n, v.status().message());
        return v;
      }
      default: return ErrNode(n, "internal: a statement where an expression belongs");
    }
  }

  static constexpr uint64_t kMaxBuiltBytes = uint64_t{64} << 20;  // one string
  static constexpr uint64_t kMaxBuiltItems = uint64_t{1} << 22;   // one list

  static absl::Status TooLarge(const char* what, uint64_t n, uint64_t limit) {
    return absl::InvalidArgumentError(
        absl::StrCat("a ", what, " of ", n, what[0] == 's' ? " bytes" : " items", " passes the limit of ", limit));
  }

  static absl::StatusOr<Value> BinaryOp(const std::string& op, const Value& l, const Value& r) {
    if (op == "==") return Value(Equal(l, r));
    if (op == "!=") return Value(!Equal(l, r));
    if (op == "<") return LessOrError(l, r, false, false);
    if (op == ">") return LessOrError(r, l, false, true);
    if (op == "<=") return LessOrError(r, l, true, true);
    if (op == ">=") return LessOrError(l, r, true, false);
    if (op == "in" || op == "not in") {
      auto c = Contains(r, l);
      if (!c.ok()) return c.status();
      return Value(*c == (op == "in"));
    }
    if (op == "~") {
      auto a = Str(l);
      if (!a.ok()) return a.status();
      auto b = Str(r);
      if (!b.ok()) return b.status();
      if (a->size() + b->size() > kMaxBuiltBytes) return TooLarge("string", a->size() + b->size(), kMaxBuiltBytes);
      return Value(*a + *b);
    }
    for (const Value* v : {&l, &r}) {
      if (v->is_undefined()) return absl::InvalidArgumentError(absl::StrCat(v->undefined_hint(), " (in ", op, ")"));
    }
    if (op == "+") {
      if (l.is_string() && r.is_string()) {
        const uint64_t n = l.as_string().size() + r.as_string().size();
        if (n > kMaxBuiltBytes) return TooLarge("string", n, kMaxBuiltBytes);
        return Value(l.as_string() + r.as_string());
      }
      if (l.is_list() && r.is_list()) {
        const uint64_t n = l.as_list().items.size() + r.as_list().items.size();
        if (n > kMaxBuiltItems) return TooLarge("list", n, kMaxBuiltItems);
        std::vector<Value> items = l.as_list().items;
        items.insert(items.end(), r.as_list().items.begin(), r.as_list().items.end());
        return Value::MakeList(std::move(items));
      }
    }
    if (op == "*") {
      const bool ls = l.is_string() || l.is_list();
      if ((ls && IsIntLike(r)) || ((r.is_string() || r.is_list()) && IsIntLike(l))) {
        const Value& seq = ls ? l : r;
        const int64_t times = AsInt(ls ? r : l);
        const uint64_t unit = seq.is_string() ? seq.as_string().size() : seq.as_list().items.size();
        if (times > 0 && unit > 0 &&
            unit > (seq.is_string() ? kMaxBuiltBytes : kMaxBuiltItems) / static_cast<uint64_t>(times)) {
          return absl::InvalidArgumentError(
              absl::StrCat("repeating a ", TypeName(seq), " of ", unit, seq.is_string() ? " bytes " : " items ", times,
                           " times passes the limit of ", seq.is_string() ? kMaxBuiltBytes : kMaxBuiltItems,
                           seq.is_string() ? " bytes" : " items"));
        }
        if (seq.is_string()) {
          std::string out;
          for (int64_t i = 0; i < times; ++i) out += seq.as_string();
          return Value(out);
        }
        std::vector<Value> out;
        for (int64_t i = 0; i < times; ++i)
          out.insert(out.end(), seq.as_list().items.begin(), seq.as_list().items.end());
        return Value::MakeList(std::move(out));
      }
    }
    if (op == "%" && l.is_string())
      return absl::InvalidArgumentError("printf-style string formatting (%) is not supported");
    if (!l.is_number() || !r.is_number()) {
      return absl::InvalidArgumentError(
          absl::StrCat("unsupported operand types for ", op, ": ", TypeName(l), " and ", TypeName(r)));
    }
    const bool ints = IsIntLike(l) && IsIntLike(r);
    const int64_t a = AsInt(l), b = AsInt(r);
    const double x = AsDouble(l), y = AsDouble(r);
    // Integers are 64-bit here (Python's are unbounded): a result that does
    // not fit is an error, never a wrapped value.
    const auto overflow = [&]() {
      return absl::InvalidArgumentError(
          absl::StrCat("integer overflow in ", a, " ", op, " ", b, " (template integers are 64-bit)"));
    };
    int64_t res = 0;
    if (op == "+") {
      if (!ints) return Value(x + y);
      if (__builtin_add_overflow(a, b, &res)) return overflow();
      return Value(res);
    }
    if (op == "-") {
      if (!ints) return Value(x - y);
      if (__builtin_sub_overflow(a, b, &res)) return overflow();
      return Value(res);
    }
    if (op == "*") {
      if (!ints) return Value(x * y);
      if (__builtin_mul_overflow(a, b, &res)) return overflow();
      return Value(res);
    }
    if (op == "**") {
      if (ints && b >= 0) {
        // By squaring: 1 ** 10**18 takes 60 steps, not 10^18.
        int64_t p = 1, base = a;
        for (int64_t e = b; e > 0; e >>= 1) {
          if ((e & 1) && __builtin_mul_overflow(p, base, &p)) return overflow();
          // base is squared only when a higher bit still multiplies it in.
          if (e > 1 && __builtin_mul_overflow(base, base, &base)) return overflow();
        }
        return Value(p);
      }
      return Value(std::pow(x, y));
    }
    if ((ints && b == 0) || (!ints && y == 0))
      return absl::InvalidArgumentError(absl::StrCat("division by zero in ", op));
    if (op == "/") return Value(x / y);
    if (ints && a == std::numeric_limits<int64_t>::min() && b == -1) return overflow();  // would trap (SIGFPE)
    if (op == "//") {
      if (ints) return Value(a / b - ((a % b != 0) && ((a < 0) != (b < 0)) ? 1 : 0));
      return Value(std::floor(x / y));
    }
    if (op == "%") {
      if (ints) {
        int64_t m = a % b;
        if (m != 0 && ((m < 0) != (b < 0))) m += b;
        return Value(m);
      }
      double m = std::fmod(x, y);
      if (m != 0 && ((m < 0) != (y < 0))) m += y;
      return Value(m);
    }
    return absl::InvalidArgumentError(absl::StrCat("unknown operator ", op));
  }

  // a < b (or <=), swapped back for the message.
  static absl::StatusOr<Value> LessOrError(const Value& a, const Value& b, bool or_equal, bool swapped) {
    auto lt = Less(a, b);
    if (!lt.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("ordering is not supported between ", TypeName(swapped ? b : a),
                                                     " and ", TypeName(swapped ? a : b)));
    }
    return Value(*lt || (or_equal && Equal(a, b)));
  }

  static absl::StatusOr<bool> Test(const std::string& name, const Value& v, const std::vector<Value>& args) {
    auto arg = [&]() -> absl::StatusOr<Value> {
      if (args.empty()) return absl::InvalidArgumentError("needs an argument");
      return args[0];
    };
    if (name == "defined") return !v.is_undefined();
    if (name == "undefined") return v.is_undefined();
    if (name == "none") return v.is_none();
    if (name == "string") return v.is_string();
    if (name == "number") return v.is_number();
    if (name == "integer") return v.is_int();
    if (name == "float") return v.is_float();
    if (name == "boolean") return v.is_bool();
    if (name == "true") return v.is_bool() && v.as_bool();
    if (name == "false") return v.is_bool() && !v.as_bool();
    if (name == "mapping") return v.is_dict();
    // Jinja2's Undefined iterates (as empty) and has __len__/__getitem__.
    if (name == "iterable" || name == "sequence")
      return v.is_string() || v.is_list() || v.is_dict() || v.is_undefined();
    if (name == "callable") return v.is_function();
    if (name == "lower" || name == "upper") {
      if (!v.is_string()) return false;
      auto c = AsciiCase(v.as_string(), name == "lower" ? 0 : 1);
      if (!c.ok()) return c.status();
      bool cased = false;
      for (char ch : v.as_string()) cased = cased || std::isalpha(static_cast<unsigned char>(ch));
      return cased && *c == v.as_string();
    }
    if (name == "even" || name == "odd" || name == "divisibleby") {
      if (!IsIntLike(v)) return absl::InvalidArgumentError(absl::StrCat("needs an integer, got a ", TypeName(v)));
      int64_t d = 2;
      if (name == "divisibleby") {
        auto a = arg();
        if (!a.ok()) return a.status();
        if (!IsIntLike(*a) || AsInt(*a) == 0) return absl::InvalidArgumentError("needs a non-zero integer");
        d = AsInt(*a);
      }
      const bool divisible = AsInt(v) % d == 0;
      return name == "odd" ? !divisible : divisible;
    }
    auto a = arg();
    if (!a.ok()) return a.status();
    if (name == "in") {
      auto c = Contains(*a, v);
      return c;
    }
    if (name == "sameas") {
      if (v.is_list() || v.is_dict() || v.is_namespace() || a->is_list() || a->is_dict() || a->is_namespace()) {
        return absl::InvalidArgumentError("sameas compares only none, booleans and numbers here");
      }
      return v.is_bool() == a->is_bool() && v.is_none() == a->is_none() && Equal(v, *a);
    }
    const std::string op = name == "equalto" || name == "eq" || name == "==" ? "=="
                           : name == "ne" || name == "!="                    ? "!="
                           : name == "gt" || name == ">"                     ? ">"
                           : name == "ge" || name == ">="                    ? ">="
                           : name == "lt" || name == "<"                     ? "<"
                                                                             : "<=";
    auto r = BinaryOp(op, v, *a);
    if (!r.ok()) return r.status();
    return r->as_bool();
  }

  // select/reject/selectattr/rejectattr: the items whose test (named by the
  // first argument; none: truthiness) passes, or fails.
  static absl::StatusOr<Value> Select(const std::string& name, const Value& v, const std::vector<Value>& args) {
    const bool attr = name == "selectattr" || name == "rejectattr";
    const bool keep_if = name == "select" || name == "selectattr";
    auto items = Iterate(v);
    if (!items.ok()) return items.status();
    size_t next = 0;
    Value attribute;
    if (attr) {
      if (args.empty() || !args[0].is_string()) return absl::InvalidArgumentError("needs an attribute name");
      attribute = args[next++];
    }
    std::string test;
    if (next < args.size()) {
      if (!args[next].is_string()) return absl::InvalidArgumentError("the test must be named by a string");
      test = args[next++].as_string();
      if (!KnownTests().count(test))
        return absl::InvalidArgumentError(absl::StrCat("the test '", test, "' is not supported"));
    }
    const std::vector<Value> rest(args.begin() + static_cast<long>(next), args.end());
    std::vector<Value> out;
    for (const Value& item : *items) {
      Value x = item;
      if (attr) {
        for (const Value& part : Split(attribute.as_string(), Value("."), -1)) {
          if (x.is_undefined()) break;
          x = GetItem(x, part);
        }
      }
      bool pass;
      if (test.empty()) {
        pass = Truthy(x);
      } else {
        auto t = Test(test, x, rest);
        if (!t.ok()) return t.status();
        pass = *t;
      }
      if (pass == keep_if) out.push_back(item);
    }
    return Value::MakeList(std::move(out));
  }

  // The filters, one function each (an alias shares its name's), found by
  // name in Filters(). Each takes the value left of `|` and the arguments.
  static absl::StatusOr<Value> FilterDefault(const FilterCall& c) {  // default, d
    const Value fallback = Arg(c.args, c.kwargs, 0, "default_value", Value(""));
    const bool boolean = Truthy(Arg(c.args, c.kwargs, 1, "boolean", Value(false)));
    return (c.v.is_undefined() || (boolean && !Truthy(c.v))) ? fallback : c.v;
  }

  static absl::StatusOr<Value> FilterLength(const FilterCall& c) {  // length, count
    auto n = Length(c.v);
    if (!n.ok()) return n.status();
    return Value(*n);
  }

  static absl::StatusOr<Value> FilterToJson(const FilterCall& c) {
    for (const auto& [k, x] : c.kwargs) {
      if (k != "indent" && !(k == "ensure_ascii" && x.is_bool() && !x.as_bool()) &&
          !(k == "sort_keys" && x.is_bool() && !x.as_bool())) {
        return absl::InvalidArgumentError(absl::StrCat("the argument ", k, " is not supported (only indent)"));
      }
    }
    const Value indent = Arg(c.args, c.kwargs, 0, "indent", Value::None());
    if (!indent.is_none() && !IsIntLike(indent)) return absl::InvalidArgumentError("indent must be an integer");
    auto j = ToJson(c.v, indent.is_none() ? -1 : static_cast<int>(std::max<int64_t>(0, AsInt(indent))));
    if (!j.ok()) return j.status();
    return Value(*j);
  }

  static absl::StatusOr<Value> FilterSafe(const FilterCall& c) { return c.v; }

  static absl::StatusOr<Value> FilterList(const FilterCall& c) {
    auto items = Iterate(c.v);
    if (!items.ok()) return items.status();
    return Value::MakeList(std::move(*items));
  }

  static absl::StatusOr<Value> FilterReverse(const FilterCall& c) {
    if (c.v.is_string()) {
      auto cps = Decode(c.v.as_string());
      std::reverse(cps.begin(), cps.end());
      return Value(Encode(cps, 0, cps.size()));
    }
    auto items = Iterate(c.v);
    if (!items.ok()) return items.status();
    std::reverse(items->begin(), items->end());
    return Value::MakeList(std::move(*items));
  }

  static absl::StatusOr<Value> FirstOrLast(const FilterCall& c, bool first) {
    auto items = Iterate(c.v);
    if (!items.ok()) return items.status();
    if (items->empty()) {
      return Value(Undefined{absl::StrCat("no ", first ? "first" : "last", " item of an empty sequence")});
    }
    return first ? items->front() : items->back();
  }
  static absl::StatusOr<Value> FilterFirst(const FilterCall& c) { return FirstOrLast(c, true); }
  static absl::StatusOr<Value> FilterLast(const FilterCall& c) { return FirstOrLast(c, false); }

  static absl::StatusOr<Value> FilterItems(const FilterCall& c) {
    if (c.v.is_undefined()) return Value::MakeList({});
    if (!c.v.is_dict()) return absl::InvalidArgumentError(absl::StrCat("needs a dict, got a ", TypeName(c.v)));
    return Method(c.v, "items").as_function().call({}, {});
  }

  static absl::StatusOr<Value> FilterJoin(const FilterCall& c) {
    auto items = Iterate(c.v);
    if (!items.ok()) return items.status();
    const Value sep = Arg(c.args, c.kwargs, 0, "d", Value(""));
    const Value attribute = Arg(c.args, c.kwargs, 1, "attribute", Value::None());
    std::string out;
    for (size_t i = 0; i < items->size(); ++i) {
      Value x = (*items)[i];
      if (attribute.is_string()) x = GetItem(x, attribute);
      auto s = Str(x);
      if (!s.ok()) return s.status();
      if (i) out += sep.is_string() ? sep.as_string() : "";
      out += *s;
    }
    return Value(out);
  }

  static absl::StatusOr<Value> FilterMap(const FilterCall& c) {
    auto items = Iterate(c.v);
    if (!items.ok()) return items.status();
    const Value attribute = Arg({}, c.kwargs, 99, "attribute", Value::None());
    std::vector<Value> out;
    if (attribute.is_string()) {
      const Value fallback = Arg({}, c.kwargs, 99, "default");
      for (const Value& item : *items) {
        Value x = item;
        for (const Value& part : Split(attribute.as_string(), Value("."), -1)) {
          if (x.is_undefined()) break;
          x = GetItem(x, part);
        }
        out.push_back(x.is_undefined() && !fallback.is_undefined() ? fallback : x);
      }
      return Value::MakeList(std::move(out));
    }
    if (c.args.empty() || !c.args[0].is_string()) {
      return absl::InvalidArgumentError("needs attribute= or a filter name");
    }
    const std::string filter = c.args[0].as_string();
    if (!KnownFilters().count(filter) || filter == "map") {
      return absl::InvalidArgumentError(absl::StrCat("the filter '", filter, "' is not supported"));
    }
    const std::vector<Value> rest(c.args.begin() + 1, c.args.end());
    for (const Value& item : *items) {
      auto x = Filter(filter, item, rest, {});
      if (!x.ok()) return x.status();
      out.push_back(*x);
    }
    return Value::MakeList(std::move(out));
  }

  static absl::StatusOr<Value> FilterSelect(const FilterCall& c) { return Select("select", c.v, c.args); }
  static absl::StatusOr<Value> FilterReject(const FilterCall& c) { return Select("reject", c.v, c.args); }
  static absl::StatusOr<Value> FilterSelectAttr(const FilterCall& c) { return Select("selectattr", c.v, c.args); }
  static absl::StatusOr<Value> FilterRejectAttr(const FilterCall& c) { return Select("rejectattr", c.v, c.args); }

  static absl::StatusOr<Value> FilterUnique(const FilterCall& c) {
    auto items = Iterate(c.v);
    if (!items.ok()) return items.status();
    std::vector<Value> out;
    for (const Value& x : *items) {
      bool seen = false;
      for (const Value& y : out) seen = seen || Equal(x, y);
      if (!seen) out.push_back(x);
    }
    return Value::MakeList(std::move(out));
  }

  static absl::StatusOr<Value> FilterAbs(const FilterCall& c) {
    if (!c.v.is_number()) return absl::InvalidArgumentError(absl::StrCat("needs a number, got a ", TypeName(c.v)));
    return IsIntLike(c.v) ? Value(static_cast<int64_t>(std::llabs(AsInt(c.v)))) : Value(std::fabs(c.v.as_float()));
  }

  static absl::StatusOr<Value> FilterInt(const FilterCall& c) {
    const Value fallback = Arg(c.args, c.kwargs, 0, "default", Value(0));
    if (IsIntLike(c.v)) return Value(AsInt(c.v));
    if (c.v.is_number()) return Value(static_cast<int64_t>(AsDouble(c.v)));
    if (c.v.is_string()) {
      const std::string s = Strip(c.v.as_string(), nullptr, true, true);
      char* end = nullptr;
      errno = 0;
      const long long i = std::strtoll(s.c_str(), &end, 10);
      if (!s.empty() && *end == '\0' && errno == 0) return Value(static_cast<int64_t>(i));
      const double d = std::strtod(s.c_str(), &end);  // Jinja2 tries int(float(s)) too
      if (!s.empty() && *end == '\0' && std::isfinite(d)) return Value(static_cast<int64_t>(d));
    }
    return fallback;
  }

  static absl::StatusOr<Value> FilterFloat(const FilterCall& c) {
    const Value fallback = Arg(c.args, c.kwargs, 0, "default", Value(0.0));
    if (c.v.is_number()) return Value(AsDouble(c.v));
    if (c.v.is_string()) {
      const std::string s = Strip(c.v.as_string(), nullptr, true, true);
      char* end = nullptr;
      const double d = std::strtod(s.c_str(), &end);
      if (!s.empty() && *end == '\0') return Value(d);
    }
    return fallback;
  }

  // The string filters work on the value as text (str()).
  static absl::StatusOr<Value> FilterString(const FilterCall& c) {
    auto s = Str(c.v);
    if (!s.ok()) return s.status();
    return Value(*s);
  }

  static absl::StatusOr<Value> FilterTrim(const FilterCall& c) {
    auto s = Str(c.v);
    if (!s.ok()) return s.status();
    const Value chars = Arg(c.args, c.kwargs, 0, "chars", Value::None());
    if (!chars.is_none() && !chars.is_string()) return absl::InvalidArgumentError("chars must be a string");
    return Value(Strip(*s, chars.is_string() ? &chars.as_string() : nullptr, true, true));
  }

  static absl::StatusOr<Value> CaseFilter(const FilterCall& c, int mode) {  // as AsciiCase
    auto s = Str(c.v);
    if (!s.ok()) return s.status();
    auto cased = AsciiCase(*s, mode);
    if (!cased.ok()) return cased.status();
    return Value(*cased);
  }
  static absl::StatusOr<Value> FilterLower(const FilterCall& c) { return CaseFilter(c, 0); }
  static absl::StatusOr<Value> FilterUpper(const FilterCall& c) { return CaseFilter(c, 1); }
  static absl::StatusOr<Value> FilterCapitalize(const FilterCall& c) { return CaseFilter(c, 2); }
  static absl::StatusOr<Value> FilterTitle(const FilterCall& c) { return CaseFilter(c, 3); }

  static absl::StatusOr<Value> FilterReplace(const FilterCall& c) {
    auto s = Str(c.v);
    if (!s.ok()) return s.status();
    const Value from = Arg(c.args, c.kwargs, 0, "old"), to = Arg(c.args, c.kwargs, 1, "new");
    const Value n = Arg(c.args, c.kwargs, 2, "count", Value::None());
    if (!from.is_string() || !to.is_string()) return absl::InvalidArgumentError("needs two strings");
    return Value(Replace(*s, from.as_string(), to.as_string(), n.is_none() ? -1 : AsInt(n)));
  }

  // The filter `name` (one KnownFilters() lists: the parser and map refuse
  // others) applied to `v`.
  static absl::StatusOr<Value> Filter(const std::string& name, const Value& v, const std::vector<Value>& args,
                                      const Kwargs& kwargs) {
    const FilterTable& filters = Filters();
    const auto it = filters.find(name);
    if (it == filters.end()) return absl::InvalidArgumentError("not implemented");
    return it->second(FilterCall{v, args, kwargs});
  }

  // Bounds on what one render may do, so a template is an error rather
  // than a hang or an out-of-memory kill: statements and expressions
  // evaluated (two nested range(100000) loops are 10^10), and the text and
  // the strings and lists built (Jinja2's sandbox bounds range() at 100,000
  // items, as here, but not these). Real chat templates stay far below.
  // The two a long real conversation could approach are settable
  // (ZT_MAX_TEMPLATE_STEPS, ZT_MAX_TEMPLATE_OUTPUT_BYTES), read once per render.
  absl::Status Step(const Node& n) {
    if (++steps_ > max_steps_) {
      return ErrNode(n, absl::StrCat("the template evaluated more than ", max_steps_,
                                     " statements and expressions: refused (loops over loops?); ",
                                     LimitNote(Limit::kTemplateSteps)));
    }
    return absl::OkStatus();
  }
  int64_t steps_ = 0;
  const int64_t max_steps_ = LimitValue(Limit::kTemplateSteps);
  const size_t max_output_bytes_ = static_cast<size_t>(LimitValue(Limit::kTemplateOutputBytes));

  std::vector<std::unordered_map<std::string, Value>> scopes_;
  Flow flow_ = Flow::kNormal;
};

const FilterTable& Renderer::Filters() {
  static const FilterTable k = {
      {"abs", &FilterAbs},
      {"capitalize", &FilterCapitalize},
      {"count", &FilterLength},
      {"d", &FilterDefault},
      {"default", &FilterDefault},
      {"first", &FilterFirst},
      {"float", &FilterFloat},
      {"int", &FilterInt},
      {"items", &FilterItems},
      {"join", &FilterJoin},
      {"last", &FilterLast},
      {"length", &FilterLength},
      {"list", &FilterList},
      {"lower", &FilterLower},
      {"map", &FilterMap},
      {"reject", &FilterReject},
      {"rejectattr", &FilterRejectAttr},
      {"replace", &FilterReplace},
      {"reverse", &FilterReverse},
      {"safe", &FilterSafe},
      {"select", &FilterSelect},
      {"selectattr", &FilterSelectAttr},
      {"string", &FilterString},
      {"title", &FilterTitle},
      {"tojson", &FilterToJson},
      {"trim", &FilterTrim},
      {"unique", &FilterUnique},
      {"upper", &FilterUpper},
  };
  return k;
}

}  // namespace

namespace internal {

const std::set<std::string>& KnownFilters() {
  static const std::set<std::string> k = [] {
    std::set<std::string> names;
    for (const auto& [name, fn] : Renderer::Filters()) names.emplace(name);
    return names;
  }();
  return k;
}

absl::Status RenderTemplate(const Node& root, const std::vector<std::pair<std::string, Value>>& variables,
                            std::string* out) {
  Renderer r(variables);
  return r.Exec(root, out);
}

}  // namespace internal
}  // namespace zt::data::jinja
