// Internals shared by the Jinja engine's files (not part of its API): the
// syntax tree jinja_parse.cc builds and jinja_render.cc walks, the position
// prefix of errors, and UTF-8 and Python-whitespace helpers (jinja.cc).
#pragma once

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "template/jinja.h"

namespace zt::data::jinja {

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

namespace internal {

// Code points of `s`. A byte that is not valid UTF-8 decodes as the code
// point of its value (and so re-encodes as two bytes when sliced); contents
// from JSON are valid UTF-8.
// With `widths`, also each code point's length in bytes.
std::vector<uint32_t> Decode(absl::string_view s, std::vector<uint8_t>* widths = nullptr);
void AppendUtf8(uint32_t cp, std::string* out);
// UTF-8 of cps[begin, end).
std::string Encode(const std::vector<uint32_t>& cps, size_t begin, size_t end);
// Python's str.isspace(): what str.strip() and str.split() remove, and what
// Jinja2's lexer's \s matches.
bool IsPySpace(uint32_t c);
// Python's str.strip/lstrip/rstrip: `chars` null -> whitespace.
std::string Strip(absl::string_view s, const std::string* chars, bool left, bool right);

// InvalidArgument "template line L, column C: what".
absl::Status ErrorAt(int line, int col, absl::string_view what);

// The filter and test names the renderer implements; the parser refuses
// others. KnownFilters is the names of jinja_render.cc's filter table;
// KnownTests is listed in jinja_parse.cc.
const std::set<std::string>& KnownFilters();
const std::set<std::string>& KnownTests();

// jinja_parse.cc: lex (with the whitespace rules) and parse `source`.
absl::StatusOr<std::unique_ptr<Node>> ParseTemplate(absl::string_view source, const Options& options);

// jinja_render.cc: render `root` with `variables` over the globals.
absl::Status RenderTemplate(const Node& root, const std::vector<std::pair<std::string, Value>>& variables,
                            std::string* out);

}  // namespace internal
}  // namespace zt::data::jinja
