// Config text -> insertion-ordered JSON, with the checks nlohmann's parser
// leaves to us: duplicate keys (an error naming the path) and syntax errors
// as "line L, column C". `//` and `/* */` comments are accepted.
// Internal to zt_config; the engine sees only config/config.h.
#pragma once

#include <cstddef>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "config/config.h"

namespace zt::config_internal {

// Keeps keys in document order, so errors come out in the order users read.
using Json = nlohmann::ordered_json;

struct JsonDocument {
  Json root;  // null when the text is not valid JSON
  bool syntax_ok = false;
  // Position of every object key in the document, by JSON path
  // ("zero_optimization.stage", "optimizer.params.betas"); first occurrence.
  std::map<std::string, int> key_order;
  // The syntax error (at most one; parsing stops there) or every duplicate key.
  std::vector<ConfigError> errors;
};

JsonDocument ParseJsonText(std::string_view text);

// "a.b" + "c" -> "a.b.c"; "" + "c" -> "c".
std::string JoinPath(std::string_view parent, std::string_view key);

// 1-based line and column of the byte at `offset` (0-based) in `text`.
std::pair<int, int> LineColumn(std::string_view text, size_t offset);

// Compact text of a JSON value for messages: numbers in shortest form
// (3e-05, 500000000), strings quoted, objects/arrays abbreviated when long.
std::string ShowValue(const Json& value);

// "an integer", "a string", "an object", ... for "got <type>" messages.
std::string DescribeType(const Json& value);

}  // namespace zt::config_internal
