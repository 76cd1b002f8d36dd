// The Jinja engine's values and their text: Python's str() and repr(),
// transformers' tojson, UTF-8 and Python whitespace helpers, and Template's
// entry points (the lexer and parser are in jinja_parse.cc, the renderer in
// jinja_render.cc).
#include "template/jinja.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "template/jinja_internal.h"

namespace zt::data::jinja {

// ---------------------------------------------------------------- values

Value Value::MakeList(std::vector<Value> items) {
  auto l = std::make_shared<List>();
  l->items = std::move(items);
  return Value(std::move(l));
}

Value Value::MakeDict(std::vector<std::pair<std::string, Value>> items) {
  auto d = std::make_shared<Dict>();
  d->items = std::move(items);
  return Value(std::move(d));
}

const Value* Dict::Find(absl::string_view key) const {
  for (const auto& [k, v] : items) {
    if (k == key) return &v;
  }
  return nullptr;
}

// ------------------------------------------------------------ UTF-8 helpers

namespace internal {

std::vector<uint32_t> Decode(absl::string_view s, std::vector<uint8_t>* widths) {
  std::vector<uint32_t> out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    int n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
    if (i + n > s.size()) n = 1;
    uint32_t cp = n == 1 ? c : n == 2 ? c & 0x1f : n == 3 ? c & 0x0f : c & 0x07;
    for (int k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3f);
    out.push_back(cp);
    if (widths) widths->push_back(static_cast<uint8_t>(n));
    i += n;
  }
  return out;
}

void AppendUtf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xc0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xe0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  } else {
    out->push_back(static_cast<char>(0xf0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3f)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  }
}

std::string Encode(const std::vector<uint32_t>& cps, size_t begin, size_t end) {
  std::string out;
  for (size_t i = begin; i < end; ++i) AppendUtf8(cps[i], &out);
  return out;
}

// Python's str.isspace(): what str.strip() and str.split() remove, and what
// the lexer's \s matches.
bool IsPySpace(uint32_t c) {
  return (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x20) || c == 0x85 || c == 0xa0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f || c == 0x205f || c == 0x3000;
}

// Python's str.strip/lstrip/rstrip: `chars` none -> whitespace.
std::string Strip(absl::string_view s, const std::string* chars, bool left, bool right) {
  std::vector<uint8_t> widths;
  const std::vector<uint32_t> cps = Decode(s, &widths);
  std::vector<uint32_t> set;
  if (chars) set = Decode(*chars);
  auto strip = [&](uint32_t c) { return chars ? std::find(set.begin(), set.end(), c) != set.end() : IsPySpace(c); };
  // Cut the original bytes (re-encoding would rewrite invalid UTF-8).
  size_t b = 0, e = cps.size(), b_byte = 0, e_byte = s.size();
  if (left) {
    while (b < e && strip(cps[b])) b_byte += widths[b++];
  }
  if (right) {
    while (e > b && strip(cps[e - 1])) e_byte -= widths[--e];
  }
  return std::string(s.substr(b_byte, e_byte - b_byte));
}

absl::Status ErrorAt(int line, int col, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("template line ", line, ", column ", col, ": ", what));
}

}  // namespace internal

namespace {

using internal::AppendUtf8;
using internal::Decode;

constexpr char kRaisedUrl[] = "zerotorch/jinja/raise_exception";

// ------------------------------------------------------------- formatting

std::string FloatRepr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  // The shortest digits that read back as `d`, as Python's repr picks them.
  char buf[64];
  int prec = 1;
  for (; prec <= 17; ++prec) {
    std::snprintf(buf, sizeof(buf), "%.*e", prec - 1, d);
    if (std::strtod(buf, nullptr) == d) break;
  }
  std::string s = buf;
  const bool neg = s[0] == '-';
  if (neg) s = s.substr(1);
  const size_t epos = s.find('e');
  const int exp = std::atoi(s.c_str() + epos + 1);
  std::string digits;
  for (size_t i = 0; i < epos; ++i) {
    if (s[i] != '.') digits.push_back(s[i]);
  }
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  std::string out;
  if (exp >= 16 || exp < -4) {
    out = digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char e[16];
    std::snprintf(e, sizeof(e), "e%c%02d", exp < 0 ? '-' : '+', std::abs(exp));
    out += e;
  } else if (exp < 0) {
    out = "0." + std::string(-exp - 1, '0') + digits;
  } else {
    const size_t int_len = static_cast<size_t>(exp) + 1;
    if (digits.size() <= int_len) {
      out = digits + std::string(int_len - digits.size(), '0') + ".0";
    } else {
      out = digits.substr(0, int_len) + "." + digits.substr(int_len);
    }
  }
  return neg ? "-" + out : out;
}

std::string StringRepr(const std::string& s) {
  const bool dq = s.find('\'') != std::string::npos && s.find('"') == std::string::npos;
  const char q = dq ? '"' : '\'';
  std::string out(1, q);
  for (uint32_t c : Decode(s)) {
    if (c == static_cast<uint32_t>(q) || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      char b[8];
      std::snprintf(b, sizeof(b), "\\x%02x", c);
      out += b;
    } else {
      AppendUtf8(c, &out);
    }
  }
  out += q;
  return out;
}

absl::StatusOr<std::string> Repr(const Value& v) {
  if (v.is_string()) return StringRepr(v.as_string());
  if (v.is_list()) {
    std::vector<std::string> parts;
    for (const Value& e : v.as_list().items) {
      auto r = Repr(e);
      if (!r.ok()) return r.status();
      parts.push_back(*r);
    }
    return absl::StrCat("[", absl::StrJoin(parts, ", "), "]");
  }
  if (v.is_dict()) {
    std::vector<std::string> parts;
    for (const auto& [k, e] : v.as_dict().items) {
      auto r = Repr(e);
      if (!r.ok()) return r.status();
      parts.push_back(absl::StrCat(StringRepr(k), ": ", *r));
    }
    return absl::StrCat("{", absl::StrJoin(parts, ", "), "}");
  }
  if (v.is_undefined()) return absl::InvalidArgumentError(absl::StrCat(v.undefined_hint(), " inside a list or dict"));
  return ToPyString(v);
}

void JsonString(const std::string& s, std::string* out) {
  *out += '"';
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': *out += "\\\""; break;
      case '\\': *out += "\\\\"; break;
      case '\n': *out += "\\n"; break;
      case '\r': *out += "\\r"; break;
      case '\t': *out += "\\t"; break;
      case '\b': *out += "\\b"; break;
      case '\f': *out += "\\f"; break;
      default:
        if (c < 0x20) {
          char b[8];
          std::snprintf(b, sizeof(b), "\\u%04x", c);
          *out += b;
        } else {
          *out += ch;
        }
    }
  }
  *out += '"';
}

absl::Status Json(const Value& v, int indent, int level, std::string* out) {
  if (v.is_none()) {
    *out += "null";
  } else if (v.is_bool()) {
    *out += v.as_bool() ? "true" : "false";
  } else if (v.is_int()) {
    *out += std::to_string(v.as_int());
  } else if (v.is_float()) {
    const double d = v.as_float();
    *out += std::isnan(d) ? "NaN" : std::isinf(d) ? (d > 0 ? "Infinity" : "-Infinity") : FloatRepr(d);
  } else if (v.is_string()) {
    JsonString(v.as_string(), out);
  } else if (v.is_list() || v.is_dict()) {
    const bool list = v.is_list();
    const size_t n = list ? v.as_list().items.size() : v.as_dict().items.size();
    *out += list ? '[' : '{';
    if (n == 0) {
      *out += list ? ']' : '}';
      return absl::OkStatus();
    }
    const std::string nl = indent >= 0 ? "\n" + std::string(static_cast<size_t>(indent * (level + 1)), ' ') : "";
    for (size_t i = 0; i < n; ++i) {
      if (i > 0) *out += indent >= 0 ? "," : ", ";
      *out += nl;
      if (list) {
        if (auto s = Json(v.as_list().items[i], indent, level + 1, out); !s.ok()) return s;
      } else {
        JsonString(v.as_dict().items[i].first, out);
        *out += ": ";
        if (auto s = Json(v.as_dict().items[i].second, indent, level + 1, out); !s.ok()) return s;
      }
    }
    if (indent >= 0) *out += "\n" + std::string(static_cast<size_t>(indent * level), ' ');
    *out += list ? ']' : '}';
  } else if (v.is_undefined()) {
    return absl::InvalidArgumentError(absl::StrCat("tojson: ", v.undefined_hint()));
  } else {
    return absl::InvalidArgumentError("tojson: a namespace or function is not JSON serializable");
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status RaisedByTemplate(absl::string_view message) {
  absl::Status s = absl::InvalidArgumentError(message);
  s.SetPayload(kRaisedUrl, absl::Cord("1"));
  return s;
}

bool IsRaisedByTemplate(const absl::Status& status) { return status.GetPayload(kRaisedUrl).has_value(); }

absl::StatusOr<std::string> ToPyString(const Value& v) {
  if (v.is_undefined()) return std::string();
  if (v.is_none()) return std::string("None");
  if (v.is_bool()) return std::string(v.as_bool() ? "True" : "False");
  if (v.is_int()) return std::to_string(v.as_int());
  if (v.is_float()) return FloatRepr(v.as_float());
  if (v.is_string()) return v.as_string();
  if (v.is_list() || v.is_dict()) return Repr(v);
  if (v.is_namespace()) return absl::InvalidArgumentError("a namespace cannot be rendered as text");
  return absl::InvalidArgumentError(absl::StrCat("the function ", v.as_function().name, " cannot be rendered as text"));
}

absl::StatusOr<std::string> ToJson(const Value& v, int indent) {
  std::string out;
  if (auto s = Json(v, indent, 0, &out); !s.ok()) return s;
  return out;
}

absl::StatusOr<Template> Template::Parse(absl::string_view source, const Options& options) {
  auto root = internal::ParseTemplate(source, options);
  if (!root.ok()) return root.status();
  return Template(std::shared_ptr<const Node>(std::move(*root)));
}

absl::StatusOr<std::string> Template::Render(const std::vector<std::pair<std::string, Value>>& variables) const {
  std::string out;
  if (auto s = internal::RenderTemplate(*root_, variables, &out); !s.ok()) return s;
  return out;
}

}  // namespace zt::data::jinja
