// The first line of a JSONL file, for telling its kind (supervised
// examples, labelled text) before reading it whole.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace zt::data {

// The first non-empty line of `path`, parsed; a discarded value when there
// is none, the file cannot be read, or the line is not JSON.
nlohmann::json FirstJsonlObject(const std::string& path);

}  // namespace zt::data
