// Implementation of data/jsonl.h.
#include "data/jsonl.h"

#include <fstream>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "util/json_reader.h"
#include "util/status.h"

namespace zt::data {

absl::Status ForEachJsonlLine(const std::string& path,
                              const std::function<bool(int64_t number, std::string_view text)>& fn) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read '", path, "'"));
  std::string line;
  for (int64_t n = 1; std::getline(in, line); ++n) {
    if (line.empty() || line == "\r") continue;
    if (!fn(n, line)) break;
  }
  return absl::OkStatus();
}

absl::Status ForEachJsonlValue(const std::string& path, JsonlValues kind,
                               const std::function<absl::Status(JsonlLine& line)>& fn) {
  absl::Status status;
  ZT_RETURN_IF_ERROR(ForEachJsonlLine(path, [&](int64_t number, std::string_view text) {
    JsonlLine line{number, absl::StrCat(path, " line ", number), {}};
    const auto refuse = [&](std::string message) {
      status = absl::InvalidArgumentError(std::move(message));
      return false;
    };
    const auto not_kind = [&] {
      return absl::StrCat(line.where, kind == JsonlValues::kObjects ? ": not a JSON object" : ": not valid JSON");
    };
    absl::StatusOr<nlohmann::ordered_json> parsed = ReadJsonText(text, line.where);
    if (!parsed.ok()) {
      // Text that is not JSON is refused as it always was; what only the
      // bounds refuse, in the reader's words (which start with `where`).
      return refuse(nlohmann::json::accept(text) ? std::string(parsed.status().message()) : not_kind());
    }
    if (kind == JsonlValues::kObjects && !parsed->is_object()) return refuse(not_kind());
    line.value = *parsed;  // std::map's sorted keys, as nlohmann::json::parse gave them
    status = fn(line);
    return status.ok();
  }));
  return status;
}

nlohmann::json FirstJsonlObject(const std::string& path) {
  nlohmann::json first(nlohmann::json::value_t::discarded);
  ForEachJsonlLine(path, [&](int64_t, std::string_view text) {
    first = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    return false;
  }).IgnoreError();  // unreadable: discarded
  return first;
}

}  // namespace zt::data
