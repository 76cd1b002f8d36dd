// Implementation of config/json_text.h on nlohmann's callback parser: the
// callback sees every key as it is read, which is where duplicates show.
#include "config/json_text.h"

#include <cctype>
#include <set>

#include "absl/strings/str_cat.h"

namespace zt::config_internal {
namespace {

// One open object or array while parsing.
struct Frame {
  bool is_array = false;
  std::string path;
  std::set<std::string> keys;  // objects: keys seen so far
  std::string key;             // objects: the key whose value comes next
  size_t index = 0;            // arrays: index of the next element
};

std::string ChildPath(const Frame& parent) {
  if (parent.is_array) return absl::StrCat(parent.path, "[", parent.index, "]");
  return JoinPath(parent.path, parent.key);
}

// nlohmann's message is "[json.exception.parse_error.101] parse error at line
// 2, column 5: syntax error while parsing ..."; keep the part after the
// position, which we compute ourselves.
std::string SyntaxMessage(const std::string& what) {
  size_t at = what.find("parse error");
  if (at != std::string::npos) {
    size_t colon = what.find(": ", at);
    if (colon != std::string::npos) return what.substr(colon + 2);
  }
  size_t bracket = what.find("] ");
  return bracket == std::string::npos ? what : what.substr(bracket + 2);
}

// nlohmann reports the position of the last character it read; users look
// for where the offending token starts ("steps_per_print" after a missing
// comma, "tru" in {"enabled": tru}).
size_t TokenStart(std::string_view text, size_t offset, const std::string& what) {
  if (offset >= text.size()) return offset;
  auto in_token = [](char ch) {
    return std::isalnum(static_cast<unsigned char>(ch)) || ch == '.' || ch == '-' || ch == '+';
  };
  const bool lexer_error = what.find("last read: '") != std::string::npos;
  if (lexer_error) {
    // Inside a string the offending character itself is the place to look.
    if (what.find("invalid string") != std::string::npos) return offset;
    // A bad literal or number: back up to where it began.
    size_t i = offset;
    while (i > 0 && in_token(text[i - 1])) --i;
    return i;
  }
  const char c = text[offset];
  if (c == '"') {
    for (size_t i = offset; i > 0;) {
      --i;
      if (text[i] == '"' && (i == 0 || text[i - 1] != '\\')) return i;
    }
    return offset;
  }
  if (!in_token(c)) return offset;
  size_t i = offset;
  while (i > 0 && in_token(text[i - 1])) --i;
  return i;
}

// The most common hand-editing mistake gets a plain-words hint.
std::string TrailingCommaHint(std::string_view text, size_t offset) {
  if (offset >= text.size() || (text[offset] != '}' && text[offset] != ']')) return "";
  size_t i = offset;
  while (i > 0) {
    char c = text[--i];
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') continue;
    if (c == ',') return " (JSON allows no comma after the last element)";
    break;
  }
  return "";
}

// Offset of the first bracket nested deeper than `limit`, or npos. Configs
// are a few levels deep; a pathological file must not exhaust memory or the
// stack in the (recursive) JSON value code.
size_t TooDeep(std::string_view text, int limit) {
  int depth = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '"') {  // skip strings, honouring escapes
      for (++i; i < text.size() && text[i] != '"'; ++i) {
        if (text[i] == '\\') ++i;
      }
    } else if (c == '/' && i + 1 < text.size() && text[i + 1] == '/') {
      while (i < text.size() && text[i] != '\n') ++i;
    } else if (c == '/' && i + 1 < text.size() && text[i + 1] == '*') {
      size_t end = text.find("*/", i + 2);
      i = end == std::string_view::npos ? text.size() : end + 1;
    } else if (c == '{' || c == '[') {
      if (++depth > limit) return i;
    } else if (c == '}' || c == ']') {
      --depth;
    }
  }
  return std::string_view::npos;
}

constexpr int kMaxDepth = 64;

}  // namespace

std::string JoinPath(std::string_view parent, std::string_view key) {
  if (parent.empty()) return std::string(key);
  std::string out(parent);
  out.push_back('.');
  out.append(key);
  return out;
}

std::pair<int, int> LineColumn(std::string_view text, size_t offset) {
  if (offset > text.size()) offset = text.size();
  int line = 1;
  size_t line_start = 0;
  for (size_t i = 0; i < offset; ++i) {
    if (text[i] == '\n') {
      ++line;
      line_start = i + 1;
    }
  }
  return {line, static_cast<int>(offset - line_start) + 1};
}

JsonDocument ParseJsonText(std::string_view text) {
  JsonDocument doc;
  if (size_t deep = TooDeep(text, kMaxDepth); deep != std::string_view::npos) {
    auto [line, column] = LineColumn(text, deep);
    doc.errors.push_back({"", absl::StrCat("malformed JSON at line ", line, ", column ", column, ": nested more than ",
                                           kMaxDepth, " levels deep")});
    return doc;
  }
  std::vector<Frame> stack;
  int next_order = 0;
  auto callback = [&](int /*depth*/, Json::parse_event_t event, Json& parsed) -> bool {
    switch (event) {
      case Json::parse_event_t::object_start:
      case Json::parse_event_t::array_start: {
        Frame frame;
        frame.is_array = event == Json::parse_event_t::array_start;
        frame.path = stack.empty() ? "" : ChildPath(stack.back());
        stack.push_back(std::move(frame));
        break;
      }
      case Json::parse_event_t::key: {
        Frame& frame = stack.back();
        frame.key = parsed.get<std::string>();
        std::string path = JoinPath(frame.path, frame.key);
        if (!frame.keys.insert(frame.key).second) {
          doc.errors.push_back(
              {path, absl::StrCat("duplicate key \"", frame.key, "\": the ",
                                  frame.path.empty() ? "top level" : absl::StrCat("\"", frame.path, "\" object"),
                                  " already has it; keep one (DeepSpeed rejects duplicates too)")});
        } else {
          doc.key_order.emplace(path, next_order++);
        }
        break;
      }
      case Json::parse_event_t::object_end:
      case Json::parse_event_t::array_end:
        stack.pop_back();
        if (!stack.empty() && stack.back().is_array) ++stack.back().index;
        break;
      case Json::parse_event_t::value:
        if (!stack.empty() && stack.back().is_array) ++stack.back().index;
        break;
    }
    return true;
  };
  try {
    doc.root = Json::parse(text.begin(), text.end(), callback, /*allow_exceptions=*/true,
                           /*ignore_comments=*/true);
    doc.syntax_ok = true;
  } catch (const Json::parse_error& e) {
    // e.byte counts characters read, so the offending one is at e.byte - 1.
    size_t offset = e.byte == 0 ? 0 : e.byte - 1;
    auto [line, column] = LineColumn(text, TokenStart(text, offset, e.what()));
    doc.errors.clear();  // duplicates before a syntax error are noise
    doc.key_order.clear();
    doc.root = nullptr;
    doc.errors.push_back({"", absl::StrCat("malformed JSON at line ", line, ", column ", column, ": ",
                                           SyntaxMessage(e.what()), TrailingCommaHint(text, offset))});
  } catch (const Json::exception& e) {
    // A number past double's range ("1e999"): nlohmann's out_of_range 406,
    // which carries no position (it aborted zt before; found by fuzzing).
    // Its message quotes the number, so the number's first place is named.
    const std::string what = e.what();
    const size_t q = what.find("parsing '");
    std::string number = q == std::string::npos ? "" : what.substr(q + 9);
    if (!number.empty() && number.back() == '\'') number.pop_back();
    const size_t at = number.empty() ? std::string_view::npos : text.find(number);
    doc.errors.clear();
    doc.key_order.clear();
    doc.root = nullptr;
    if (at != std::string_view::npos) {
      auto [line, column] = LineColumn(text, at);
      doc.errors.push_back(
          {"", absl::StrCat("malformed JSON at line ", line, ", column ", column, ": the number ",
                            number.size() > 40 ? number.substr(0, 40) + "..." : number, " does not fit in a double")});
    } else {
      doc.errors.push_back({"", absl::StrCat("malformed JSON: ", what)});
    }
  }
  return doc;
}

std::string ShowValue(const Json& value) {
  std::string text = value.dump();
  if (text.size() > 60) text = absl::StrCat(text.substr(0, 57), "...");
  return text;
}

std::string DescribeType(const Json& value) {
  switch (value.type()) {
    case Json::value_t::null: return "null";
    case Json::value_t::boolean: return absl::StrCat("the boolean ", value.dump());
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned: return absl::StrCat("the integer ", value.dump());
    case Json::value_t::number_float: return absl::StrCat("the number ", value.dump());
    case Json::value_t::string: return absl::StrCat("the string ", ShowValue(value));
    case Json::value_t::array: return absl::StrCat("an array ", ShowValue(value));
    case Json::value_t::object: return "an object";
    default: return "an unsupported JSON value";
  }
}

}  // namespace zt::config_internal
