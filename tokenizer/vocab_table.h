// The id -> token table of a vocabulary (token -> id), shared by the BPE
// and WordPiece models. LibTorch-free.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"

namespace zt::data {

// tokens[id] for every id the vocabulary uses (unused ids hold ""). Refused
// (InvalidArgument naming the tokens): an id outside [0, the vocabulary
// limit) -- the table has max id + 1 entries, so a 3 KB file could ask for
// gigabytes -- and two tokens on one id, which would encode one of them as
// the other.
absl::StatusOr<std::vector<std::string>> TokensById(const absl::flat_hash_map<std::string, int32_t>& vocab);

}  // namespace zt::data
