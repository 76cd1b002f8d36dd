// Helpers shared by the config tests: parse a string, read a file, show all
// errors of a result in a failure message.
#pragma once

#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>

#include "config/config.h"

namespace zt::testing {

inline ParseResult Parse(const std::string& json, int world_size = 1,
                         std::map<std::string, std::string> auto_values = {},
                         std::optional<int64_t> hidden_size = std::nullopt) {
  ParseOptions options;
  options.world_size = world_size;
  options.auto_values = std::move(auto_values);
  options.hidden_size = hidden_size;
  return ParseConfig(json, options);
}

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

// Every error of `result`, one per line, for failure messages.
inline std::string ErrorsText(const ParseResult& result) {
  std::string out;
  for (const ConfigError& e : result.errors) out += "  [" + e.path + "] " + e.message + "\n";
  return out.empty() ? "  (no errors)\n" : out;
}

}  // namespace zt::testing
