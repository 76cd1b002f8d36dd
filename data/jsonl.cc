// Implementation of data/jsonl.h.
#include "data/jsonl.h"

#include <fstream>

namespace zt::data {

nlohmann::json FirstJsonlObject(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line == "\r") continue;
    return nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  }
  return nlohmann::json(nlohmann::json::value_t::discarded);
}

}  // namespace zt::data
