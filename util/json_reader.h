// JSON text from an untrusted file -> insertion-ordered JSON, in time and
// memory linear in the text and bounded: nesting deeper than max_depth, an
// object with more than max_object_keys keys, a key twice in one object
// (nlohmann's parser keeps the last silently, and its ordered_json looks
// each key up linearly, so a million-key object took hours) are refused,
// naming `where`, the key path and the limit. LibTorch-free (nlohmann's
// header only).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace zt {

struct JsonReadLimits {
  int max_depth = 64;
  int64_t max_object_keys = int64_t{1} << 22;
  // Appended to the max_object_keys error ("the limit is N (ZT_MAX_X raises it)").
  std::string object_keys_note;
  bool allow_comments = false;
};

// DataLossError "<where>: ..." for anything refused; the parse error names
// the byte offset.
absl::StatusOr<nlohmann::ordered_json> ReadJsonText(std::string_view text, std::string_view where,
                                                    const JsonReadLimits& limits = {});

}  // namespace zt
