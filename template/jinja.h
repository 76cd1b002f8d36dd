// A Jinja2 subset, enough for the chat templates of Hugging Face tokenizers,
// rendered as Python's Jinja2 renders them (what transformers uses), not as
// the JavaScript ports do. Text, {{ }}, {% if/elif/else %}, {% for %} (loop.*,
// unpacking, an `if` filter, else), {% set %} (names, namespace attributes),
// break/continue, {% generation %} (rendered as its body), comments, the `-`
// and `+` whitespace markers with trim_blocks/lstrip_blocks, Python values and
// operators, and the filters, tests and str/dict methods listed in
// docs/data.md. Macros, call/filter blocks, include/import/extends, raw and
// str.format are refused with InvalidArgument naming the construct and its
// line:column, never rendered differently. No LibTorch.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace zt::data::jinja {

class Value;
struct List;
struct Dict;
struct Namespace;
struct Function;

// Jinja2's default Undefined: renders as "", is falsy, iterates as empty, has
// length 0; attribute or item access on it, arithmetic and tojson fail with
// `hint` ("'x' is undefined").
struct Undefined {
  std::string hint;
};
struct NoneValue {};

// A Python value as a template sees it. Lists, dicts and namespaces are shared
// by reference (as in Python); lists and dicts are never mutated once built
// (transformers renders in an immutable sandbox), namespaces are, by
// `{% set ns.attr = ... %}`. Strings are UTF-8; indexing, slicing and length
// count code points, as Python's str does.
class Value {
 public:
  Value() = default;  // undefined
  Value(Undefined u) : v_(std::move(u)) {}
  Value(NoneValue) : v_(NoneValue{}) {}
  Value(bool b) : v_(b) {}
  Value(int i) : v_(static_cast<int64_t>(i)) {}
  Value(int64_t i) : v_(i) {}
  Value(double d) : v_(d) {}
  Value(std::string s) : v_(std::move(s)) {}
  Value(const char* s) : v_(std::string(s)) {}
  Value(std::shared_ptr<List> l) : v_(std::move(l)) {}
  Value(std::shared_ptr<Dict> d) : v_(std::move(d)) {}
  Value(std::shared_ptr<Namespace> n) : v_(std::move(n)) {}
  Value(std::shared_ptr<Function> f) : v_(std::move(f)) {}

  static Value None() { return Value(NoneValue{}); }
  static Value MakeList(std::vector<Value> items);
  static Value MakeDict(std::vector<std::pair<std::string, Value>> items);

  bool is_undefined() const { return std::holds_alternative<Undefined>(v_); }
  bool is_none() const { return std::holds_alternative<NoneValue>(v_); }
  bool is_bool() const { return std::holds_alternative<bool>(v_); }
  bool is_int() const { return std::holds_alternative<int64_t>(v_); }
  bool is_float() const { return std::holds_alternative<double>(v_); }
  bool is_string() const { return std::holds_alternative<std::string>(v_); }
  bool is_list() const { return std::holds_alternative<std::shared_ptr<List>>(v_); }
  bool is_dict() const { return std::holds_alternative<std::shared_ptr<Dict>>(v_); }
  bool is_namespace() const { return std::holds_alternative<std::shared_ptr<Namespace>>(v_); }
  bool is_function() const { return std::holds_alternative<std::shared_ptr<Function>>(v_); }
  // Python numbers: bool, int and float (bool is an int in Python).
  bool is_number() const { return is_bool() || is_int() || is_float(); }

  const std::string& undefined_hint() const { return std::get<Undefined>(v_).hint; }
  bool as_bool() const { return std::get<bool>(v_); }
  int64_t as_int() const { return std::get<int64_t>(v_); }
  double as_float() const { return std::get<double>(v_); }
  const std::string& as_string() const { return std::get<std::string>(v_); }
  const List& as_list() const { return *std::get<std::shared_ptr<List>>(v_); }
  const Dict& as_dict() const { return *std::get<std::shared_ptr<Dict>>(v_); }
  Namespace& as_namespace() const { return *std::get<std::shared_ptr<Namespace>>(v_); }
  const Function& as_function() const { return *std::get<std::shared_ptr<Function>>(v_); }

 private:
  std::variant<Undefined, NoneValue, bool, int64_t, double, std::string, std::shared_ptr<List>, std::shared_ptr<Dict>,
               std::shared_ptr<Namespace>, std::shared_ptr<Function>>
      v_;
};

struct List {
  std::vector<Value> items;
};
// Keys in insertion order, as a Python dict keeps them (iteration, items()
// and tojson show that order). Only string keys.
struct Dict {
  std::vector<std::pair<std::string, Value>> items;
  const Value* Find(absl::string_view key) const;
};
struct Namespace {
  Dict attrs;
};
using Kwargs = std::vector<std::pair<std::string, Value>>;
// A callable: a global (range, namespace, dict, raise_exception) or a bound
// method (str.strip, dict.get, ...).
struct Function {
  std::string name;
  std::function<absl::StatusOr<Value>(const std::vector<Value>& args, const Kwargs& kwargs)> call;
};

struct Options {
  bool trim_blocks = false;    // drop the first newline after a block tag or comment
  bool lstrip_blocks = false;  // drop spaces and tabs before a block tag or comment alone at a line's start
};

// What raise_exception(message) in a template should return: an
// InvalidArgument error whose message is exactly `message`, marked so that
// IsRaisedByTemplate tells it from the engine's own errors.
absl::Status RaisedByTemplate(absl::string_view message);
bool IsRaisedByTemplate(const absl::Status& status);

struct Node;

// A parsed template; immutable, so one can render on many threads at once.
//
//   auto t = Template::Parse("{% for m in messages %}{{ m.content }}{% endfor %}", {true, true});
//   auto text = t->Render({{"messages", messages}});
class Template {
 public:
  // Errors: InvalidArgument naming the construct and its "line L, column C"
  // for what is malformed or outside the supported subset.
  static absl::StatusOr<Template> Parse(absl::string_view source, const Options& options = {});

  // Renders with `variables` on top of the globals range, namespace and dict.
  // Errors: InvalidArgument with the line and column for type errors,
  // undefined values used where Jinja2 fails on them, and calls of what is not
  // callable; a raise_exception error passes through unchanged.
  absl::StatusOr<std::string> Render(const std::vector<std::pair<std::string, Value>>& variables) const;

 private:
  explicit Template(std::shared_ptr<const Node> root) : root_(std::move(root)) {}
  std::shared_ptr<const Node> root_;
};

// Python's str() of a value (what {{ }} writes): None -> "None", True ->
// "True", floats as repr, lists and dicts as repr; undefined -> "".
absl::StatusOr<std::string> ToPyString(const Value& v);

// transformers' tojson: json.dumps(v, ensure_ascii=False, indent=indent)
// (indent < 0: none), keys in insertion order.
absl::StatusOr<std::string> ToJson(const Value& v, int indent = -1);

}  // namespace zt::data::jinja
