// JSONL files (one JSON value a line) as the data readers read them: the
// non-empty lines in order, each parsed with util/json_reader.h's bounds,
// every error naming the file and line ("PATH line N: ..."); and the first
// line alone, for telling a file's kind (supervised examples, labelled text)
// before reading it whole.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace zt::data {

// Calls `fn(number, text)` for each line of `path` that is not empty (a lone
// "\r" counts as empty), in order, `number` counting from 1 over every line,
// until `fn` returns false. NotFoundError "cannot read 'PATH'" when the file
// cannot be opened.
absl::Status ForEachJsonlLine(const std::string& path,
                              const std::function<bool(int64_t number, std::string_view text)>& fn);

// What every line of a JSONL file holds.
enum class JsonlValues {
  // A JSON object; any other line is "PATH line N: not a JSON object".
  kObjects,
  // A JSON value of any type, its shape checked by the caller; a line that
  // is not JSON is "PATH line N: not valid JSON".
  kAny,
};

// One non-empty line, parsed.
struct JsonlLine {
  int64_t number;        // from 1, counting empty lines too
  std::string where;     // "PATH line N": the prefix of every error about this line
  nlohmann::json value;  // keys sorted, as nlohmann::json keeps them
};

// Calls `fn` with each non-empty line of `path` parsed, in order, and
// returns the first error: the file's (as ForEachJsonlLine), a line's that
// is not what `kind` asks for, a line's that util/json_reader.h refuses (a
// key twice in one object, nesting deeper than 64, too many keys: its own
// message after "PATH line N: "), or the first one `fn` returns. All but
// NotFound are InvalidArgument.
absl::Status ForEachJsonlValue(const std::string& path, JsonlValues kind,
                               const std::function<absl::Status(JsonlLine& line)>& fn);

// The first non-empty line of `path`, parsed without the bounds above (a
// line the full read would refuse still tells the kind, so the read names
// the fault); a discarded value when there is none, the file cannot be
// read, or the line is not JSON.
nlohmann::json FirstJsonlObject(const std::string& path);

}  // namespace zt::data
