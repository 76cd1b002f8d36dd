// The Jinja engine's lexer and parser. The lexer applies the whitespace
// rules as Jinja2's lexer does (newlines normalised, one trailing newline
// dropped, `-`/`+` markers, trim_blocks, lstrip_blocks) and finds a tag's end
// by lexing its expression (so '%}' inside a string or braces does not end
// it); the parser is recursive descent with Jinja2's operator precedence.
// Unknown tags, filters and tests fail here, with their line and column.
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "template/jinja_internal.h"
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

enum class Tok { kText, kBlockBegin, kBlockEnd, kVarBegin, kVarEnd, kName, kString, kInt, kFloat, kOp, kEof };

struct Token {
  Tok type;
  std::string text;  // text, name, decoded string, number or operator
  int line = 1, col = 1;
};

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
  // Line and column (in code points) of byte `at`. Tokens come in order, so
  // the scan continues from the previous position (from the start only when
  // asked for an earlier one): linear in the template, where a scan from the
  // start for every token was quadratic (100,000 tokens took seconds).
  void Position(size_t at, int* line, int* col) const {
    if (at < mark_at_) {
      mark_at_ = 0;
      mark_line_ = 1;
      mark_col_ = 1;
    }
    for (size_t i = mark_at_; i < at; ++i) {
      if (src_[i] == '\n') {
        ++mark_line_;
        mark_col_ = 1;
      } else {
        mark_col_ += (static_cast<unsigned char>(src_[i]) & 0xc0) != 0x80;
      }
    }
    mark_at_ = at;
    *line = mark_line_;
    *col = mark_col_;
  }
  mutable size_t mark_at_ = 0;
  mutable int mark_line_ = 1, mark_col_ = 1;
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

using NodePtr = std::unique_ptr<Node>;

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
  // A binary operator's node at `at`: `name` (the operator, for kBinary) over l and r.
  NodePtr Pair(Kind k, const Token& at, NodePtr l, NodePtr r, std::string name = {}) {
    auto n = Make(k, at);
    n->name = std::move(name);
    n->kids.push_back(std::move(l));
    n->kids.push_back(std::move(r));
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
    ZT_RETURN_IF_ERROR(Enter());
    Leave leave{&nesting_};
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
    ZT_RETURN_IF_ERROR(Enter());
    Leave leave{&nesting_};
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
      l = Pair(Kind::kOr, at, std::move(*l), std::move(*r));
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
      l = Pair(Kind::kAnd, at, std::move(*l), std::move(*r));
    }
    return l;
  }
  absl::StatusOr<NodePtr> Not() {
    ZT_RETURN_IF_ERROR(Enter());
    Leave leave{&nesting_};
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
      l = Pair(Kind::kBinary, at, std::move(*l), std::move(*r), op);
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
      l = Pair(Kind::kBinary, at, std::move(*l), std::move(*r), at.text);
    }
    return l;
  }

  absl::StatusOr<NodePtr> Unary(bool with_filter) {
    ZT_RETURN_IF_ERROR(Enter());
    Leave leave{&nesting_};
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

  // Nesting of blocks and expressions, which the parser (and the renderer
  // after it) walks recursively: real chat templates nest a few levels;
  // thousands of nested ifs or parentheses would overflow the stack.
  static constexpr int kMaxNesting = 200;
  struct Leave {
    int* n;
    ~Leave() { --*n; }
  };
  absl::Status Enter() {
    if (++nesting_ > kMaxNesting) {
      return Err(Cur(), absl::StrCat("blocks and expressions nested deeper than ", kMaxNesting));
    }
    return absl::OkStatus();
  }
  int nesting_ = 0;

  std::vector<Token> t_;
  size_t i_ = 0;
  int loop_depth_ = 0;
  std::string end_tag_;
  Token end_tok_{Tok::kEof, ""};
};

}  // namespace

namespace internal {

const std::set<std::string>& KnownTests() {
  static const std::set<std::string> k = {
      "defined",  "undefined", "none", "string", "number",   "integer", "float", "mapping",     "iterable",
      "sequence", "boolean",   "true", "false",  "callable", "even",    "odd",   "divisibleby", "equalto",
      "eq",       "==",        "ne",   "!=",     "gt",       ">",       "ge",    ">=",          "lt",
      "<",        "le",        "<=",   "in",     "sameas",   "lower",   "upper"};
  return k;
}

absl::StatusOr<std::unique_ptr<Node>> ParseTemplate(absl::string_view source, const Options& options) {
  Lexer lexer(source, options);
  auto toks = lexer.Run();
  if (!toks.ok()) return toks.status();
  Parser parser(std::move(*toks));
  return parser.Template();
}

}  // namespace internal
}  // namespace zt::data::jinja
