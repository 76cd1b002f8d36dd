// The Jinja2 subset of jinja.h: a lexer that applies the whitespace rules as
// Jinja2's lexer does (newlines normalised, one trailing newline dropped,
// `-`/`+` markers, trim_blocks, lstrip_blocks), a recursive-descent parser
// with Jinja2's operator precedence, and a tree-walking renderer with Python
// semantics for values. Unknown filters, tests and tags fail at parse time.
#include "data/jinja.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <unordered_map>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

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

namespace {

constexpr char kRaisedUrl[] = "zerotorch/jinja/raise_exception";

// ------------------------------------------------------------ UTF-8 helpers

// Code points of `s` (invalid bytes pass through as themselves, as U+FFFD
// would hide them).
std::vector<uint32_t> Decode(absl::string_view s) {
  std::vector<uint32_t> out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    int n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
    if (i + n > s.size()) n = 1;
    uint32_t cp = n == 1 ? c : n == 2 ? c & 0x1f : n == 3 ? c & 0x0f : c & 0x07;
    for (int k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3f);
    out.push_back(cp);
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
  const std::vector<uint32_t> cps = Decode(s);
  std::vector<uint32_t> set;
  if (chars) set = Decode(*chars);
  auto strip = [&](uint32_t c) { return chars ? std::find(set.begin(), set.end(), c) != set.end() : IsPySpace(c); };
  size_t b = 0, e = cps.size();
  if (left) {
    while (b < e && strip(cps[b])) ++b;
  }
  if (right) {
    while (e > b && strip(cps[e - 1])) --e;
  }
  return Encode(cps, b, e);
}

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

// ------------------------------------------------------------------ lexer

namespace {

enum class Tok { kText, kBlockBegin, kBlockEnd, kVarBegin, kVarEnd, kName, kString, kInt, kFloat, kOp, kEof };

struct Token {
  Tok type;
  std::string text;  // text, name, decoded string, number or operator
  int line = 1, col = 1;
};

absl::Status ErrorAt(int line, int col, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("template line ", line, ", column ", col, ": ", what));
}

class Lexer {
 public:
  Lexer(absl::string_view source, const Options& options) : options_(options) {
    // Jinja2 reads \r\n, \r and \n as one newline and drops one trailing
    // newline (keep_trailing_newline=False).
    for (size_t i = 0; i < source.size(); ++i) {
      if (source[i] == '\r') {
        src_ += '\n';
        if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
      } else {
        src_ += source[i];
      }
    }
    if (!src_.empty() && src_.back() == '\n') src_.pop_back();
  }

  absl::StatusOr<std::vector<Token>> Run() {
    bool line_starting = true;
    while (pos_ < src_.size()) {
      size_t t = pos_;
      for (;;) {
        t = src_.find('{', t);
        if (t == std::string::npos || t + 1 >= src_.size()) {
          t = std::string::npos;
          break;
        }
        const char k = src_[t + 1];
        if (k == '{' || k == '%' || k == '#') break;
        ++t;
      }
      std::string text = src_.substr(pos_, t == std::string::npos ? std::string::npos : t - pos_);
      const size_t text_pos = pos_;
      if (t == std::string::npos) {
        Emit(Tok::kText, text, text_pos);
        pos_ = src_.size();
        break;
      }
      const char kind = src_[t + 1];
      const char mark = t + 2 < src_.size() ? src_[t + 2] : '\0';
      if (mark == '-') {
        text = Strip(text, nullptr, false, true);
      } else if (kind != '{' && mark != '+' && options_.lstrip_blocks) {
        const size_t l = text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1;
        if (l > 0 || line_starting) {
          bool blank = true;
          for (uint32_t c : Decode(absl::string_view(text).substr(l))) blank = blank && IsPySpace(c);
          if (blank) text.resize(l);
        }
      }
      if (!text.empty()) Emit(Tok::kText, text, text_pos);
      pos_ = t + 2 + ((mark == '-' || mark == '+') ? 1 : 0);
      absl::Status s = kind == '#' ? Comment(t) : Tag(t, kind);
      if (!s.ok()) return s;
      line_starting = pos_ == 0 || src_[pos_ - 1] == '\n';
    }
    Emit(Tok::kEof, "", pos_);
    return std::move(tokens_);
  }

 private:
  void Position(size_t at, int* line, int* col) const {
    *line = 1 + static_cast<int>(std::count(src_.begin(), src_.begin() + static_cast<long>(at), '\n'));
    const size_t nl = at == 0 ? std::string::npos : src_.rfind('\n', at - 1);
    // Columns count code points, not bytes.
    const size_t from = nl == std::string::npos ? 0 : nl + 1;
    *col = 1;
    for (size_t i = from; i < at; ++i) *col += (static_cast<unsigned char>(src_[i]) & 0xc0) != 0x80;
  }
  void Emit(Tok type, std::string text, size_t at) {
    Token tok{type, std::move(text)};
    Position(at, &tok.line, &tok.col);
    tokens_.push_back(std::move(tok));
  }
  absl::Status Error(size_t at, absl::string_view what) const {
    int line, col;
    Position(at, &line, &col);
    return ErrorAt(line, col, what);
  }

  // After a tag or comment: `-` strips all whitespace that follows, trim_blocks
  // one newline (not after `+`, not after }}).
  void AfterEnd(char end_mark, bool block) {
    if (end_mark == '-') {
      const std::vector<uint32_t> cps = Decode(absl::string_view(src_).substr(pos_));
      size_t n = 0, bytes = 0;
      while (n < cps.size() && IsPySpace(cps[n])) {
        std::string tmp;
        AppendUtf8(cps[n++], &tmp);
        bytes += tmp.size();
      }
      pos_ += bytes;
    } else if (end_mark != '+' && block && options_.trim_blocks && pos_ < src_.size() && src_[pos_] == '\n') {
      ++pos_;
    }
  }

  absl::Status Comment(size_t start) {
    const size_t end = src_.find("#}", pos_);
    if (end == std::string::npos) return Error(start, "the comment {# is never closed with #}");
    const char mark = end > pos_ && (src_[end - 1] == '-' || src_[end - 1] == '+') ? src_[end - 1] : '\0';
    pos_ = end + 2;
    AfterEnd(mark, true);
    return absl::OkStatus();
  }

  absl::Status Tag(size_t start, char kind) {
    const bool block = kind == '%';
    Emit(block ? Tok::kBlockBegin : Tok::kVarBegin, "", start);
    int depth = 0;
    for (;;) {
      while (pos_ < src_.size() && std::isspace(static_cast<unsigned char>(src_[pos_]))) ++pos_;
      if (pos_ >= src_.size()) {
        return Error(start, block ? "the tag {% is never closed with %}" : "the expression {{ is never closed with }}");
      }
      const absl::string_view rest = absl::string_view(src_).substr(pos_);
      const std::string close = block ? "%}" : "}}";
      if (depth == 0) {
        char mark = '\0';
        if ((rest[0] == '-' || rest[0] == '+') && rest.substr(1, 2) == close) mark = rest[0];
        if (mark != '\0' || rest.substr(0, 2) == close) {
          Emit(block ? Tok::kBlockEnd : Tok::kVarEnd, block ? "%}" : "}}", pos_);
          pos_ += mark != '\0' ? 3 : 2;
          AfterEnd(mark, block);
          return absl::OkStatus();
        }
      }
      const char c = rest[0];
      if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
        size_t n = 1;
        while (n < rest.size() && (std::isalnum(static_cast<unsigned char>(rest[n])) || rest[n] == '_')) ++n;
        Emit(Tok::kName, std::string(rest.substr(0, n)), pos_);
        pos_ += n;
      } else if (std::isdigit(static_cast<unsigned char>(c))) {
        size_t n = 0;
        while (n < rest.size() && (std::isdigit(static_cast<unsigned char>(rest[n])) || rest[n] == '_')) ++n;
        bool is_float = false;
        if (n + 1 < rest.size() && rest[n] == '.' && std::isdigit(static_cast<unsigned char>(rest[n + 1]))) {
          is_float = true;
          ++n;
          while (n < rest.size() && (std::isdigit(static_cast<unsigned char>(rest[n])) || rest[n] == '_')) ++n;
        }
        if (n < rest.size() && (rest[n] == 'e' || rest[n] == 'E')) {
          size_t m = n + 1;
          if (m < rest.size() && (rest[m] == '+' || rest[m] == '-')) ++m;
          if (m < rest.size() && std::isdigit(static_cast<unsigned char>(rest[m]))) {
            is_float = true;
            n = m;
            while (n < rest.size() && std::isdigit(static_cast<unsigned char>(rest[n]))) ++n;
          }
        }
        std::string num;
        for (char ch : rest.substr(0, n)) {
          if (ch != '_') num += ch;
        }
        Emit(is_float ? Tok::kFloat : Tok::kInt, num, pos_);
        pos_ += n;
      } else if (c == '\'' || c == '"') {
        auto s = String(start);
        if (!s.ok()) return s;
      } else {
        static const char* kOps[] = {"//", "**", "==", "!=", ">=", "<=", "+", "-", "*", "/", "%", "~", "<",
                                     ">",  "=",  ".",  ",",  ":",  "|",  "(", ")", "[", "]", "{", "}"};
        const char* op = nullptr;
        for (const char* o : kOps) {
          if (rest.substr(0, std::strlen(o)) == o) {
            op = o;
            break;
          }
        }
        if (!op) return Error(pos_, absl::StrCat("unexpected character '", std::string(1, c), "'"));
        const std::string o = op;
        if (o == "(" || o == "[" || o == "{") ++depth;
        if (o == ")" || o == "]" || o == "}") --depth;
        if (depth < 0) return Error(pos_, absl::StrCat("unbalanced '", o, "'"));
        Emit(Tok::kOp, o, pos_);
        pos_ += o.size();
      }
    }
  }

  // A quoted string with Python's escapes (Jinja2 decodes them as
  // unicode-escape); an unknown escape keeps its backslash.
  absl::Status String(size_t tag_start) {
    const size_t start = pos_;
    const char q = src_[pos_++];
    std::string out;
    while (pos_ < src_.size() && src_[pos_] != q) {
      char c = src_[pos_++];
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ >= src_.size()) break;
      c = src_[pos_++];
      auto hex = [&](int n) -> absl::Status {
        if (pos_ + n > src_.size()) return Error(pos_, "truncated escape in a string");
        uint32_t cp = 0;
        for (int k = 0; k < n; ++k) {
          const char h = src_[pos_ + k];
          if (!std::isxdigit(static_cast<unsigned char>(h))) return Error(pos_, "bad hex escape in a string");
          cp = cp * 16 + static_cast<uint32_t>(
                             std::isdigit(static_cast<unsigned char>(h)) ? h - '0' : std::tolower(h) - 'a' + 10);
        }
        pos_ += n;
        AppendUtf8(cp, &out);
        return absl::OkStatus();
      };
      switch (c) {
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'r': out += '\r'; break;
        case '\\': out += '\\'; break;
        case '\'': out += '\''; break;
        case '"': out += '"'; break;
        case 'a': out += '\a'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'v': out += '\v'; break;
        case '\n': break;
        case 'x':
          if (auto s = hex(2); !s.ok()) return s;
          break;
        case 'u':
          if (auto s = hex(4); !s.ok()) return s;
          break;
        case 'U':
          if (auto s = hex(8); !s.ok()) return s;
          break;
        default:
          if (c >= '0' && c <= '7') {
            uint32_t cp = static_cast<uint32_t>(c - '0');
            for (int k = 0; k < 2 && pos_ < src_.size() && src_[pos_] >= '0' && src_[pos_] <= '7'; ++k) {
              cp = cp * 8 + static_cast<uint32_t>(src_[pos_++] - '0');
            }
            AppendUtf8(cp, &out);
          } else if (c == 'N') {
            return Error(pos_ - 2, "\\N{...} escapes in strings are not supported");
          } else {
            out += '\\';
            out += c;
          }
      }
    }
    if (pos_ >= src_.size()) return Error(start, "the string is never closed");
    ++pos_;
    (void)tag_start;
    Emit(Tok::kString, out, start);
    return absl::OkStatus();
  }

  const Options options_;
  std::string src_;
  size_t pos_ = 0;
  std::vector<Token> tokens_;
};

}  // namespace

// ------------------------------------------------------------------- AST

enum class Kind {
  // expressions
  kLiteral,
  kName,
  kAttr,
  kItem,
  kSlice,
  kCall,
  kFilter,
  kTest,
  kNeg,
  kPos,
  kNot,
  kBinary,
  kAnd,
  kOr,
  kCond,
  kListLit,
  kDictLit,
  // statements
  kText,
  kOutput,
  kIf,
  kFor,
  kSet,
  kBreak,
  kContinue,
  kBody
};

struct Node {
  Kind kind;
  int line = 0, col = 0;
  std::string name;  // name, attribute, filter/test, operator, set target
  std::string attr;  // namespace attribute of a set target
  Value value;       // literal / text
  bool negated = false;
  std::vector<std::unique_ptr<Node>> kids;  // operands / arguments / body
  std::vector<std::string> kw;              // keyword names of the trailing kids (calls, filters)
  std::vector<std::string> targets;         // for-loop names
  // if: kids = [cond, body, cond, body, ..., else-body?]; for: kids = [iter,
  // body, else-body, filter-or-null]
};

namespace {

using NodePtr = std::unique_ptr<Node>;

const std::set<std::string>& KnownFilters() {
  static const std::set<std::string> k = {
      "trim",    "length", "count",   "tojson", "string",     "upper",      "lower",   "title", "capitalize", "first",
      "last",    "join",   "default", "d",      "items",      "list",       "replace", "int",   "float",      "safe",
      "reverse", "map",    "select",  "reject", "selectattr", "rejectattr", "abs",     "unique"};
  return k;
}
const std::set<std::string>& KnownTests() {
  static const std::set<std::string> k = {
      "defined",  "undefined", "none", "string", "number",   "integer", "float", "mapping",     "iterable",
      "sequence", "boolean",   "true", "false",  "callable", "even",    "odd",   "divisibleby", "equalto",
      "eq",       "==",        "ne",   "!=",     "gt",       ">",       "ge",    ">=",          "lt",
      "<",        "le",        "<=",   "in",     "sameas",   "lower",   "upper"};
  return k;
}

class Parser {
 public:
  explicit Parser(std::vector<Token> toks) : t_(std::move(toks)) {}

  absl::StatusOr<NodePtr> Template() {
    auto body = Body({});
    if (!body.ok()) return body.status();
    if (!end_tag_.empty()) return Err(end_tok_, absl::StrCat("unexpected {% ", end_tag_, " %}"));
    return std::move(*body);
  }

 private:
  const Token& Cur() const { return t_[i_]; }
  bool IsOp(const char* op) const { return Cur().type == Tok::kOp && Cur().text == op; }
  bool IsName(const char* n) const { return Cur().type == Tok::kName && Cur().text == n; }
  absl::Status Err(const Token& at, absl::string_view what) const { return ErrorAt(at.line, at.col, what); }
  NodePtr Make(Kind k, const Token& at) {
    auto n = std::make_unique<Node>();
    n->kind = k;
    n->line = at.line;
    n->col = at.col;
    return n;
  }
  absl::Status Expect(Tok type, const char* text, absl::string_view context) {
    if (Cur().type != type || (text && Cur().text != text)) {
      const std::string got = Cur().type == Tok::kBlockEnd ? "%}" : Cur().type == Tok::kVarEnd ? "}}" : Cur().text;
      return Err(Cur(), absl::StrCat("expected ", text ? text : "a name", " ", context, ", found '", got, "'"));
    }
    ++i_;
    return absl::OkStatus();
  }

  // Statements until one of `ends` ({% endif %} ...); the tag found is left
  // in end_tag_ with the parser after its name.
  absl::StatusOr<NodePtr> Body(const std::vector<std::string>& ends) {
    auto body = Make(Kind::kBody, Cur());
    end_tag_.clear();
    while (Cur().type != Tok::kEof) {
      const Token& tok = Cur();
      if (tok.type == Tok::kText) {
        auto n = Make(Kind::kText, tok);
        n->value = Value(tok.text);
        body->kids.push_back(std::move(n));
        ++i_;
      } else if (tok.type == Tok::kVarBegin) {
        ++i_;
        auto e = Tuple();
        if (!e.ok()) return e.status();
        if (auto s = Expect(Tok::kVarEnd, "}}", "to close {{"); !s.ok()) return s;
        auto n = Make(Kind::kOutput, tok);
        n->kids.push_back(std::move(*e));
        body->kids.push_back(std::move(n));
      } else {
        ++i_;
        if (Cur().type != Tok::kName) return Err(Cur(), "expected a tag name after {%");
        const Token& name = Cur();
        if (std::find(ends.begin(), ends.end(), name.text) != ends.end()) {
          end_tag_ = name.text;
          end_tok_ = name;
          ++i_;
          return body;
        }
        ++i_;
        absl::StatusOr<NodePtr> st = Statement(name);
        if (!st.ok()) return st.status();
        if (*st) body->kids.push_back(std::move(*st));
      }
    }
    end_tag_.clear();
    if (!ends.empty()) {
      return Err(Cur(),
                 absl::StrCat("the template ends inside a block: expected {% ", absl::StrJoin(ends, " or "), " %}"));
    }
    return body;
  }

  absl::StatusOr<NodePtr> Statement(const Token& name) {
    const std::string& n = name.text;
    if (n == "if") return If(name);
    if (n == "for") return For(name);
    if (n == "set") return Set(name);
    if (n == "break" || n == "continue") {
      if (loop_depth_ == 0) return Err(name, absl::StrCat("{% ", n, " %} outside a for loop"));
      if (auto s = Expect(Tok::kBlockEnd, "%}", "after " + n); !s.ok()) return s;
      return Make(n == "break" ? Kind::kBreak : Kind::kContinue, name);
    }
    if (n == "generation") {
      // transformers' AssistantTracker marks assistant text; rendering it is
      // rendering its body.
      if (auto s = Expect(Tok::kBlockEnd, "%}", "after generation"); !s.ok()) return s;
      auto body = Body({"endgeneration"});
      if (!body.ok()) return body.status();
      if (auto s = Expect(Tok::kBlockEnd, "%}", "after endgeneration"); !s.ok()) return s;
      return std::move(*body);
    }
    return Err(name, absl::StrCat("the tag {% ", n,
                                  " %} is not supported (supported: if, for, set, break, continue, generation)"));
  }

  absl::StatusOr<NodePtr> If(const Token& at) {
    auto node = Make(Kind::kIf, at);
    for (;;) {
      auto cond = Tuple();
      if (!cond.ok()) return cond.status();
      if (auto s = Expect(Tok::kBlockEnd, "%}", "after the if condition"); !s.ok()) return s;
      auto body = Body({"elif", "else", "endif"});
      if (!body.ok()) return body.status();
      node->kids.push_back(std::move(*cond));
      node->kids.push_back(std::move(*body));
      if (end_tag_ == "elif") continue;
      if (end_tag_ == "else") {
        if (auto s = Expect(Tok::kBlockEnd, "%}", "after else"); !s.ok()) return s;
        auto els = Body({"endif"});
        if (!els.ok()) return els.status();
        node->kids.push_back(std::move(*els));
      }
      break;
    }
    if (auto s = Expect(Tok::kBlockEnd, "%}", "after endif"); !s.ok()) return s;
    return node;
  }

  absl::StatusOr<NodePtr> For(const Token& at) {
    auto node = Make(Kind::kFor, at);
    const bool paren = IsOp("(");
    if (paren) ++i_;
    for (;;) {
      if (Cur().type != Tok::kName) return Err(Cur(), "expected a loop variable name after for");
      node->targets.push_back(Cur().text);
      ++i_;
      if (!IsOp(",")) break;
      ++i_;
    }
    if (paren) {
      if (auto s = Expect(Tok::kOp, ")", "after the loop variables"); !s.ok()) return s;
    }
    if (auto s = Expect(Tok::kName, "in", "after the loop variables"); !s.ok()) return s;
    auto iter = Expr(false);
    if (!iter.ok()) return iter.status();
    NodePtr filter;
    if (IsName("if")) {
      ++i_;
      auto f = Expr(false);
      if (!f.ok()) return f.status();
      filter = std::move(*f);
    }
    if (IsName("recursive")) return Err(Cur(), "recursive for loops are not supported");
    if (auto s = Expect(Tok::kBlockEnd, "%}", "after the for loop header"); !s.ok()) return s;
    ++loop_depth_;
    auto body = Body({"else", "endfor"});
    --loop_depth_;
    if (!body.ok()) return body.status();
    NodePtr els = Make(Kind::kBody, at);
    if (end_tag_ == "else") {
      if (auto s = Expect(Tok::kBlockEnd, "%}", "after else"); !s.ok()) return s;
      auto e = Body({"endfor"});
      if (!e.ok()) return e.status();
      els = std::move(*e);
    }
    if (auto s = Expect(Tok::kBlockEnd, "%}", "after endfor"); !s.ok()) return s;
    node->kids.push_back(std::move(*iter));
    node->kids.push_back(std::move(*body));
    node->kids.push_back(std::move(els));
    node->kids.push_back(std::move(filter));
    return node;
  }

  absl::StatusOr<NodePtr> Set(const Token& at) {
    auto node = Make(Kind::kSet, at);
    if (Cur().type != Tok::kName) return Err(Cur(), "expected a variable name after set");
    node->name = Cur().text;
    ++i_;
    if (IsOp(".")) {
      ++i_;
      if (Cur().type != Tok::kName) return Err(Cur(), "expected an attribute name in set NAME.ATTR");
      node->attr = Cur().text;
      ++i_;
    }
    if (IsOp(",")) return Err(Cur(), "set with several targets (set a, b = ...) is not supported");
    if (Cur().type == Tok::kBlockEnd)
      return Err(Cur(), "block assignments ({% set x %}...{% endset %}) are not supported");
    if (auto s = Expect(Tok::kOp, "=", "in set"); !s.ok()) return s;
    auto e = Tuple();
    if (!e.ok()) return e.status();
    if (auto s = Expect(Tok::kBlockEnd, "%}", "after set"); !s.ok()) return s;
    node->kids.push_back(std::move(*e));
    return node;
  }

  // expr (, expr)* -> a tuple (a list) when there are commas.
  absl::StatusOr<NodePtr> Tuple() {
    const Token& at = Cur();
    auto first = Expr(true);
    if (!first.ok() || !IsOp(",")) return first;
    auto list = Make(Kind::kListLit, at);
    list->kids.push_back(std::move(*first));
    while (IsOp(",")) {
      ++i_;
      if (Cur().type == Tok::kBlockEnd || Cur().type == Tok::kVarEnd) break;
      auto e = Expr(true);
      if (!e.ok()) return e.status();
      list->kids.push_back(std::move(*e));
    }
    return list;
  }

  absl::StatusOr<NodePtr> Expr(bool with_cond) {
    const Token& at = Cur();
    auto e = Or();
    if (!e.ok() || !with_cond) return e;
    while (IsName("if")) {
      ++i_;
      auto test = Or();
      if (!test.ok()) return test.status();
      auto cond = Make(Kind::kCond, at);
      cond->kids.push_back(std::move(*test));
      cond->kids.push_back(std::move(*e));
      if (IsName("else")) {
        ++i_;
        auto other = Expr(true);
        if (!other.ok()) return other.status();
        cond->kids.push_back(std::move(*other));
      }
      e = std::move(cond);
    }
    return e;
  }

  absl::StatusOr<NodePtr> Or() {
    auto l = And();
    while (l.ok() && IsName("or")) {
      const Token& at = Cur();
      ++i_;
      auto r = And();
      if (!r.ok()) return r.status();
      auto n = Make(Kind::kOr, at);
      n->kids.push_back(std::move(*l));
      n->kids.push_back(std::move(*r));
      l = std::move(n);
    }
    return l;
  }
  absl::StatusOr<NodePtr> And() {
    auto l = Not();
    while (l.ok() && IsName("and")) {
      const Token& at = Cur();
      ++i_;
      auto r = Not();
      if (!r.ok()) return r.status();
      auto n = Make(Kind::kAnd, at);
      n->kids.push_back(std::move(*l));
      n->kids.push_back(std::move(*r));
      l = std::move(n);
    }
    return l;
  }
  absl::StatusOr<NodePtr> Not() {
    if (IsName("not")) {
      const Token& at = Cur();
      ++i_;
      auto e = Not();
      if (!e.ok()) return e.status();
      auto n = Make(Kind::kNot, at);
      n->kids.push_back(std::move(*e));
      return n;
    }
    return Compare();
  }
  absl::StatusOr<NodePtr> Compare() {
    auto l = Binary(0);
    if (!l.ok()) return l;
    for (;;) {
      const Token& at = Cur();
      std::string op;
      if (Cur().type == Tok::kOp && (Cur().text == "==" || Cur().text == "!=" || Cur().text == "<" ||
                                     Cur().text == ">" || Cur().text == "<=" || Cur().text == ">=")) {
        op = Cur().text;
        ++i_;
      } else if (IsName("in")) {
        op = "in";
        ++i_;
      } else if (IsName("not") && t_[i_ + 1].type == Tok::kName && t_[i_ + 1].text == "in") {
        op = "not in";
        i_ += 2;
      } else {
        return l;
      }
      auto r = Binary(0);
      if (!r.ok()) return r.status();
      auto n = Make(Kind::kBinary, at);
      n->name = op;
      n->kids.push_back(std::move(*l));
      n->kids.push_back(std::move(*r));
      l = std::move(n);
    }
  }

  // Jinja2's levels below comparison: + -, then ~, then * / // %, then **.
  absl::StatusOr<NodePtr> Binary(int level) {
    static const std::vector<std::vector<std::string>> kLevels = {{"+", "-"}, {"~"}, {"*", "/", "//", "%"}, {"**"}};
    if (level == static_cast<int>(kLevels.size())) return Unary(true);
    auto l = Binary(level + 1);
    while (l.ok() && Cur().type == Tok::kOp &&
           std::find(kLevels[level].begin(), kLevels[level].end(), Cur().text) != kLevels[level].end()) {
      const Token& at = Cur();
      ++i_;
      auto r = Binary(level + 1);
      if (!r.ok()) return r.status();
      auto n = Make(Kind::kBinary, at);
      n->name = at.text;
      n->kids.push_back(std::move(*l));
      n->kids.push_back(std::move(*r));
      l = std::move(n);
    }
    return l;
  }

  absl::StatusOr<NodePtr> Unary(bool with_filter) {
    const Token& at = Cur();
    absl::StatusOr<NodePtr> node;
    if (IsOp("-") || IsOp("+")) {
      ++i_;
      auto e = Unary(false);
      if (!e.ok()) return e.status();
      auto n = Make(at.text == "-" ? Kind::kNeg : Kind::kPos, at);
      n->kids.push_back(std::move(*e));
      node = std::move(n);
    } else {
      node = Primary();
      if (!node.ok()) return node;
      node = Postfix(std::move(*node));
    }
    if (!node.ok() || !with_filter) return node;
    return FilterExpr(std::move(*node));
  }

  absl::StatusOr<NodePtr> Primary() {
    const Token& at = Cur();
    if (at.type == Tok::kName) {
      ++i_;
      if (at.text == "true" || at.text == "True") return Lit(at, Value(true));
      if (at.text == "false" || at.text == "False") return Lit(at, Value(false));
      if (at.text == "none" || at.text == "None") return Lit(at, Value::None());
      auto n = Make(Kind::kName, at);
      n->name = at.text;
      return n;
    }
    if (at.type == Tok::kString) {
      std::string s;
      while (Cur().type == Tok::kString) s += t_[i_++].text;
      return Lit(at, Value(s));
    }
    if (at.type == Tok::kInt) {
      ++i_;
      errno = 0;
      const long long v = std::strtoll(at.text.c_str(), nullptr, 10);
      if (errno == ERANGE) return Err(at, "integer literal out of the 64-bit range");
      return Lit(at, Value(static_cast<int64_t>(v)));
    }
    if (at.type == Tok::kFloat) {
      ++i_;
      return Lit(at, Value(std::strtod(at.text.c_str(), nullptr)));
    }
    if (IsOp("(")) {
      ++i_;
      if (IsOp(")")) {
        ++i_;
        return Make(Kind::kListLit, at);
      }
      auto e = Tuple();
      if (!e.ok()) return e;
      if (auto s = Expect(Tok::kOp, ")", "to close ("); !s.ok()) return s;
      return e;
    }
    if (IsOp("[")) {
      ++i_;
      auto n = Make(Kind::kListLit, at);
      while (!IsOp("]")) {
        auto e = Expr(true);
        if (!e.ok()) return e;
        n->kids.push_back(std::move(*e));
        if (!IsOp(",")) break;
        ++i_;
      }
      if (auto s = Expect(Tok::kOp, "]", "to close the list"); !s.ok()) return s;
      return n;
    }
    if (IsOp("{")) {
      ++i_;
      auto n = Make(Kind::kDictLit, at);
      while (!IsOp("}")) {
        auto k = Expr(true);
        if (!k.ok()) return k;
        if (auto s = Expect(Tok::kOp, ":", "between a dict key and value"); !s.ok()) return s;
        auto v = Expr(true);
        if (!v.ok()) return v;
        n->kids.push_back(std::move(*k));
        n->kids.push_back(std::move(*v));
        if (!IsOp(",")) break;
        ++i_;
      }
      if (auto s = Expect(Tok::kOp, "}", "to close the dict"); !s.ok()) return s;
      return n;
    }
    const std::string got = at.type == Tok::kBlockEnd ? "%}" : at.type == Tok::kVarEnd ? "}}" : at.text;
    return Err(at, absl::StrCat("expected an expression, found '", got, "'"));
  }

  NodePtr Lit(const Token& at, Value v) {
    auto n = Make(Kind::kLiteral, at);
    n->value = std::move(v);
    return n;
  }

  // Call arguments after '(' up to ')': positional kids, then keyword kids
  // with their names in `kw` (aligned to the last kids).
  absl::Status Args(Node* n) {
    while (!IsOp(")")) {
      if (Cur().type == Tok::kName && t_[i_ + 1].type == Tok::kOp && t_[i_ + 1].text == "=") {
        n->kw.push_back(Cur().text);
        i_ += 2;
      } else if (!n->kw.empty()) {
        return Err(Cur(), "a positional argument after a keyword argument");
      } else if (IsOp("*") || IsOp("**")) {
        return Err(Cur(), "*args and **kwargs in calls are not supported");
      }
      auto e = Expr(true);
      if (!e.ok()) return e.status();
      n->kids.push_back(std::move(*e));
      if (!IsOp(",")) break;
      ++i_;
    }
    return Expect(Tok::kOp, ")", "to close the arguments");
  }

  absl::StatusOr<NodePtr> Postfix(NodePtr node) {
    for (;;) {
      const Token& at = Cur();
      if (IsOp(".")) {
        ++i_;
        if (Cur().type == Tok::kInt) {
          auto n = Make(Kind::kItem, at);
          n->kids.push_back(std::move(node));
          n->kids.push_back(Lit(Cur(), Value(static_cast<int64_t>(std::strtoll(Cur().text.c_str(), nullptr, 10)))));
          ++i_;
          node = std::move(n);
          continue;
        }
        if (Cur().type != Tok::kName) return Err(Cur(), "expected an attribute name after '.'");
        auto n = Make(Kind::kAttr, at);
        n->name = Cur().text;
        ++i_;
        n->kids.push_back(std::move(node));
        node = std::move(n);
      } else if (IsOp("[")) {
        ++i_;
        // [a], [a:b], [a:b:c] with any part left out.
        NodePtr parts[3];
        int colons = 0;
        for (;;) {
          if (!IsOp(":") && !IsOp("]")) {
            auto e = Expr(true);
            if (!e.ok()) return e;
            parts[colons] = std::move(*e);
          }
          if (IsOp(":") && colons < 2) {
            ++colons;
            ++i_;
            continue;
          }
          break;
        }
        if (auto s = Expect(Tok::kOp, "]", "to close the subscript"); !s.ok()) return s;
        if (colons == 0) {
          if (!parts[0]) return Err(at, "empty subscript []");
          auto n = Make(Kind::kItem, at);
          n->kids.push_back(std::move(node));
          n->kids.push_back(std::move(parts[0]));
          node = std::move(n);
        } else {
          auto n = Make(Kind::kSlice, at);
          n->kids.push_back(std::move(node));
          for (auto& p : parts) n->kids.push_back(std::move(p));
          node = std::move(n);
        }
      } else if (IsOp("(")) {
        ++i_;
        auto n = Make(Kind::kCall, at);
        n->kids.push_back(std::move(node));
        if (auto s = Args(n.get()); !s.ok()) return s;
        node = std::move(n);
      } else {
        return node;
      }
    }
  }

  absl::StatusOr<NodePtr> FilterExpr(NodePtr node) {
    for (;;) {
      const Token& at = Cur();
      if (IsOp("|")) {
        ++i_;
        if (Cur().type != Tok::kName) return Err(Cur(), "expected a filter name after '|'");
        const Token& name = Cur();
        if (!KnownFilters().count(name.text)) {
          return Err(name, absl::StrCat("the filter '", name.text, "' is not supported"));
        }
        ++i_;
        auto n = Make(Kind::kFilter, name);
        n->name = name.text;
        n->kids.push_back(std::move(node));
        if (IsOp("(")) {
          ++i_;
          if (auto s = Args(n.get()); !s.ok()) return s;
        }
        node = std::move(n);
      } else if (IsName("is")) {
        ++i_;
        auto n = Make(Kind::kTest, at);
        if (IsName("not")) {
          n->negated = true;
          ++i_;
        }
        std::string name;
        if (Cur().type == Tok::kName) {
          name = Cur().text;
        } else if (Cur().type == Tok::kOp) {
          name = Cur().text;  // `is ==`, `is <` ...
        }
        if (!KnownTests().count(name)) {
          return Err(Cur(), absl::StrCat("the test '", name, "' is not supported"));
        }
        ++i_;
        n->name = name;
        n->kids.push_back(std::move(node));
        if (IsOp("(")) {
          ++i_;
          if (auto s = Args(n.get()); !s.ok()) return s;
        } else if ((Cur().type == Tok::kName || Cur().type == Tok::kString || Cur().type == Tok::kInt ||
                    Cur().type == Tok::kFloat || IsOp("[") || IsOp("{")) &&
                   !IsName("else") && !IsName("or") && !IsName("and")) {
          // Jinja2 takes one bare argument: `x is divisibleby 3`.
          auto arg = Primary();
          if (!arg.ok()) return arg;
          auto post = Postfix(std::move(*arg));
          if (!post.ok()) return post;
          n->kids.push_back(std::move(*post));
        }
        node = std::move(n);
      } else if (IsOp("(")) {
        ++i_;
        auto n = Make(Kind::kCall, at);
        n->kids.push_back(std::move(node));
        if (auto s = Args(n.get()); !s.ok()) return s;
        node = std::move(n);
      } else {
        return node;
      }
    }
  }

  std::vector<Token> t_;
  size_t i_ = 0;
  int loop_depth_ = 0;
  std::string end_tag_;
  Token end_tok_{Tok::kEof, ""};
};

}  // namespace

// --------------------------------------------------------------- renderer

namespace {

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

// The bound methods of str and dict that templates call; nullptr-like
// undefined for anything else (as Jinja2's getattr gives).
Value Method(const Value& self, const std::string& name) {
  if (self.is_string()) {
    const std::string s = self.as_string();
    if (name == "strip" || name == "lstrip" || name == "rstrip") {
      const bool l = name != "rstrip", r = name != "lstrip";
      return MakeFunction("str." + name,
                          [s, l, r](const std::vector<Value>& a, const Kwargs& kw) -> absl::StatusOr<Value> {
                            const Value chars = Arg(a, kw, 0, "chars", Value::None());
                            if (!chars.is_none() && !chars.is_string())
                              return absl::InvalidArgumentError("strip: chars must be a string");
                            return Value(Strip(s, chars.is_string() ? &chars.as_string() : nullptr, l, r));
                          });
    }
    if (name == "startswith" || name == "endswith") {
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
    if (name == "split") {
      return MakeFunction("str.split", [s](const std::vector<Value>& a, const Kwargs& kw) -> absl::StatusOr<Value> {
        const Value sep = Arg(a, kw, 0, "sep", Value::None());
        const Value max = Arg(a, kw, 1, "maxsplit", Value(-1));
        if (sep.is_string() && sep.as_string().empty()) return absl::InvalidArgumentError("split: empty separator");
        if (!sep.is_none() && !sep.is_string()) return absl::InvalidArgumentError("split: sep must be a string");
        return Value::MakeList(Split(s, sep, AsInt(max)));
      });
    }
    if (name == "replace") {
      return MakeFunction("str.replace", [s](const std::vector<Value>& a, const Kwargs& kw) -> absl::StatusOr<Value> {
        const Value from = Arg(a, kw, 0, "old"), to = Arg(a, kw, 1, "new"), n = Arg(a, kw, 2, "count", Value(-1));
        if (!from.is_string() || !to.is_string()) return absl::InvalidArgumentError("replace: needs two strings");
        return Value(Replace(s, from.as_string(), to.as_string(), AsInt(n)));
      });
    }
    if (name == "upper" || name == "lower" || name == "title" || name == "capitalize") {
      const int mode = name == "lower" ? 0 : name == "upper" ? 1 : name == "capitalize" ? 2 : 3;
      return MakeFunction("str." + name, [s, mode](const std::vector<Value>&, const Kwargs&) -> absl::StatusOr<Value> {
        auto r = AsciiCase(s, mode);
        if (!r.ok()) return r.status();
        return Value(*r);
      });
    }
    if (name == "join") {
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
    if (name == "format") {
      return MakeFunction("str.format", [](const std::vector<Value>&, const Kwargs&) -> absl::StatusOr<Value> {
        return absl::InvalidArgumentError("str.format is not supported; use ~ or + to build strings");
      });
    }
  }
  if (self.is_dict()) {
    const Value d = self;
    if (name == "get") {
      return MakeFunction("dict.get", [d](const std::vector<Value>& a, const Kwargs& kw) -> absl::StatusOr<Value> {
        const Value key = Arg(a, kw, 0, "key");
        const Value* v = key.is_string() ? d.as_dict().Find(key.as_string()) : nullptr;
        return v ? *v : Arg(a, kw, 1, "default", Value::None());
      });
    }
    if (name == "items" || name == "keys" || name == "values") {
      const int which = name == "items" ? 0 : name == "keys" ? 1 : 2;
      return MakeFunction("dict." + name,
                          [d, which](const std::vector<Value>&, const Kwargs&) -> absl::StatusOr<Value> {
                            std::vector<Value> out;
                            for (const auto& [k, v] : d.as_dict().items) {
                              out.push_back(which == 0 ? Value::MakeList({Value(k), v}) : which == 1 ? Value(k) : v);
                            }
                            return Value::MakeList(std::move(out));
                          });
    }
  }
  return Value();
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
    return Value(Undefined{"'dict object' has no attribute"});
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

  absl::Status Exec(const Node& n, std::string* out) {
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
      return Value(*a + *b);
    }
    for (const Value* v : {&l, &r}) {
      if (v->is_undefined()) return absl::InvalidArgumentError(absl::StrCat(v->undefined_hint(), " (in ", op, ")"));
    }
    if (op == "+") {
      if (l.is_string() && r.is_string()) return Value(l.as_string() + r.as_string());
      if (l.is_list() && r.is_list()) {
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
    if (op == "+") return ints ? Value(a + b) : Value(x + y);
    if (op == "-") return ints ? Value(a - b) : Value(x - y);
    if (op == "*") return ints ? Value(a * b) : Value(x * y);
    if (op == "**") {
      if (ints && b >= 0) {
        int64_t p = 1;
        for (int64_t i = 0; i < b; ++i) p *= a;
        return Value(p);
      }
      return Value(std::pow(x, y));
    }
    if ((ints && b == 0) || (!ints && y == 0))
      return absl::InvalidArgumentError(absl::StrCat("division by zero in ", op));
    if (op == "/") return Value(x / y);
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

  absl::StatusOr<bool> Test(const std::string& name, const Value& v, const std::vector<Value>& args) {
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
  absl::StatusOr<Value> Select(const std::string& name, const Value& v, const std::vector<Value>& args) {
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

  absl::StatusOr<Value> Filter(const std::string& name, const Value& v, const std::vector<Value>& args,
                               const Kwargs& kwargs) {
    if (name == "default" || name == "d") {
      const Value fallback = Arg(args, kwargs, 0, "default_value", Value(""));
      const bool boolean = Truthy(Arg(args, kwargs, 1, "boolean", Value(false)));
      return (v.is_undefined() || (boolean && !Truthy(v))) ? fallback : v;
    }
    if (name == "length" || name == "count") {
      auto n = Length(v);
      if (!n.ok()) return n.status();
      return Value(*n);
    }
    if (name == "tojson") {
      for (const auto& [k, x] : kwargs) {
        if (k != "indent" && !(k == "ensure_ascii" && x.is_bool() && !x.as_bool()) &&
            !(k == "sort_keys" && x.is_bool() && !x.as_bool())) {
          return absl::InvalidArgumentError(absl::StrCat("the argument ", k, " is not supported (only indent)"));
        }
      }
      const Value indent = Arg(args, kwargs, 0, "indent", Value::None());
      if (!indent.is_none() && !IsIntLike(indent)) return absl::InvalidArgumentError("indent must be an integer");
      auto j = ToJson(v, indent.is_none() ? -1 : static_cast<int>(std::max<int64_t>(0, AsInt(indent))));
      if (!j.ok()) return j.status();
      return Value(*j);
    }
    if (name == "safe") return v;
    if (name == "list") {
      auto items = Iterate(v);
      if (!items.ok()) return items.status();
      return Value::MakeList(std::move(*items));
    }
    if (name == "reverse") {
      if (v.is_string()) {
        auto cps = Decode(v.as_string());
        std::reverse(cps.begin(), cps.end());
        return Value(Encode(cps, 0, cps.size()));
      }
      auto items = Iterate(v);
      if (!items.ok()) return items.status();
      std::reverse(items->begin(), items->end());
      return Value::MakeList(std::move(*items));
    }
    if (name == "first" || name == "last") {
      auto items = Iterate(v);
      if (!items.ok()) return items.status();
      if (items->empty()) return Value(Undefined{absl::StrCat("no ", name, " item of an empty sequence")});
      return name == "first" ? items->front() : items->back();
    }
    if (name == "items") {
      if (v.is_undefined()) return Value::MakeList({});
      if (!v.is_dict()) return absl::InvalidArgumentError(absl::StrCat("needs a dict, got a ", TypeName(v)));
      return Method(v, "items").as_function().call({}, {});
    }
    if (name == "join") {
      auto items = Iterate(v);
      if (!items.ok()) return items.status();
      const Value sep = Arg(args, kwargs, 0, "d", Value(""));
      const Value attribute = Arg(args, kwargs, 1, "attribute", Value::None());
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
    if (name == "map") {
      auto items = Iterate(v);
      if (!items.ok()) return items.status();
      const Value attribute = Arg({}, kwargs, 99, "attribute", Value::None());
      std::vector<Value> out;
      if (attribute.is_string()) {
        const Value fallback = Arg({}, kwargs, 99, "default");
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
      if (args.empty() || !args[0].is_string()) return absl::InvalidArgumentError("needs attribute= or a filter name");
      const std::string filter = args[0].as_string();
      if (!KnownFilters().count(filter) || filter == "map") {
        return absl::InvalidArgumentError(absl::StrCat("the filter '", filter, "' is not supported"));
      }
      const std::vector<Value> rest(args.begin() + 1, args.end());
      for (const Value& item : *items) {
        auto x = Filter(filter, item, rest, {});
        if (!x.ok()) return x.status();
        out.push_back(*x);
      }
      return Value::MakeList(std::move(out));
    }
    if (name == "select" || name == "reject" || name == "selectattr" || name == "rejectattr") {
      return Select(name, v, args);
    }
    if (name == "unique") {
      auto items = Iterate(v);
      if (!items.ok()) return items.status();
      std::vector<Value> out;
      for (const Value& x : *items) {
        bool seen = false;
        for (const Value& y : out) seen = seen || Equal(x, y);
        if (!seen) out.push_back(x);
      }
      return Value::MakeList(std::move(out));
    }
    if (name == "abs") {
      if (!v.is_number()) return absl::InvalidArgumentError(absl::StrCat("needs a number, got a ", TypeName(v)));
      return IsIntLike(v) ? Value(static_cast<int64_t>(std::llabs(AsInt(v)))) : Value(std::fabs(v.as_float()));
    }
    if (name == "int" || name == "float") {
      const Value fallback = Arg(args, kwargs, 0, "default", name == "int" ? Value(0) : Value(0.0));
      if (name == "int" && IsIntLike(v)) return Value(AsInt(v));
      if (v.is_number()) return name == "int" ? Value(static_cast<int64_t>(AsDouble(v))) : Value(AsDouble(v));
      if (v.is_string()) {
        const std::string s = Strip(v.as_string(), nullptr, true, true);
        char* end = nullptr;
        errno = 0;
        if (name == "int") {
          const long long i = std::strtoll(s.c_str(), &end, 10);
          if (!s.empty() && *end == '\0' && errno == 0) return Value(static_cast<int64_t>(i));
          const double d = std::strtod(s.c_str(), &end);  // Jinja2 tries int(float(s)) too
          if (!s.empty() && *end == '\0' && std::isfinite(d)) return Value(static_cast<int64_t>(d));
        } else {
          const double d = std::strtod(s.c_str(), &end);
          if (!s.empty() && *end == '\0') return Value(d);
        }
      }
      return fallback;
    }
    // String filters.
    auto s = Str(v);
    if (!s.ok()) return s.status();
    if (name == "string") return Value(*s);
    if (name == "trim") {
      const Value chars = Arg(args, kwargs, 0, "chars", Value::None());
      if (!chars.is_none() && !chars.is_string()) return absl::InvalidArgumentError("chars must be a string");
      return Value(Strip(*s, chars.is_string() ? &chars.as_string() : nullptr, true, true));
    }
    if (name == "upper" || name == "lower" || name == "title" || name == "capitalize") {
      auto c = AsciiCase(*s, name == "lower" ? 0 : name == "upper" ? 1 : name == "capitalize" ? 2 : 3);
      if (!c.ok()) return c.status();
      return Value(*c);
    }
    if (name == "replace") {
      const Value from = Arg(args, kwargs, 0, "old"), to = Arg(args, kwargs, 1, "new");
      const Value n = Arg(args, kwargs, 2, "count", Value::None());
      if (!from.is_string() || !to.is_string()) return absl::InvalidArgumentError("needs two strings");
      return Value(Replace(*s, from.as_string(), to.as_string(), n.is_none() ? -1 : AsInt(n)));
    }
    return absl::InvalidArgumentError("not implemented");
  }

  std::vector<std::unordered_map<std::string, Value>> scopes_;
  Flow flow_ = Flow::kNormal;
};

}  // namespace

absl::StatusOr<std::string> Template::Render(const std::vector<std::pair<std::string, Value>>& variables) const {
  Renderer r(variables);
  std::string out;
  if (auto s = r.Exec(*root_, &out); !s.ok()) return s;
  return out;
}

absl::StatusOr<Template> Template::Parse(absl::string_view source, const Options& options) {
  Lexer lexer(source, options);
  auto toks = lexer.Run();
  if (!toks.ok()) return toks.status();
  Parser parser(std::move(*toks));
  auto root = parser.Template();
  if (!root.ok()) return root.status();
  return Template(std::shared_ptr<const Node>(std::move(*root)));
}

}  // namespace zt::data::jinja
