#include "util/json_reader.h"

#include <memory>
#include <unordered_set>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace zt {
namespace {

using Json = nlohmann::ordered_json;

// A DOM builder for nlohmann's SAX parser (which is itself iterative). Each
// open container is a frame; only the innermost one grows, so the pointers
// to its ancestors (elements of their parents' vectors) stay valid.
class Builder {
 public:
  Builder(std::string where, const JsonReadLimits& limits) : where_(std::move(where)), limits_(limits) {}

  bool null() { return Put(Json()); }
  bool boolean(bool v) { return Put(Json(v)); }
  bool number_integer(Json::number_integer_t v) { return Put(Json(v)); }
  bool number_unsigned(Json::number_unsigned_t v) { return Put(Json(v)); }
  bool number_float(Json::number_float_t v, const Json::string_t&) { return Put(Json(v)); }
  bool string(Json::string_t& v) { return Put(Json(std::move(v))); }
  bool binary(Json::binary_t& v) { return Put(Json::binary(std::move(v))); }
  bool start_object(std::size_t) { return Open(Json::object()); }
  bool start_array(std::size_t) { return Open(Json::array()); }
  bool end_object() { return Close(); }
  bool end_array() { return Close(); }
  bool key(Json::string_t& k) {
    Frame& f = stack_.back();
    if (!f.keys.insert(k).second) {
      return Fail(absl::StrCat("key \"", k, "\" appears twice in ", Where(), "; keep one"));
    }
    if (static_cast<int64_t>(f.keys.size()) > limits_.max_object_keys) {
      return Fail(absl::StrCat(Where(), " has more than ", limits_.max_object_keys, " keys",
                               limits_.object_keys_note.empty() ? "" : "; ", limits_.object_keys_note));
    }
    f.key = std::move(k);
    return true;
  }
  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& e) {
    std::string what = e.what();
    // "[json.exception.parse_error.101] parse error at line 1, column 5: ..." -> the part after ": ".
    if (const size_t colon = what.find(": "); colon != std::string::npos) what = what.substr(colon + 2);
    return Fail(absl::StrCat("not valid JSON at byte ", position, ": ", what));
  }

  absl::StatusOr<Json> Take(bool parsed) {
    if (!error_.empty() || !parsed) {
      return absl::DataLossError(absl::StrCat(where_, ": ", error_.empty() ? std::string("not valid JSON") : error_));
    }
    return std::move(root_);
  }

 private:
  struct Frame {
    Json* value;
    std::unordered_set<std::string> keys;  // objects only
    std::string key;                       // the key the next value goes under
  };

  // The innermost open container: "the top-level object", "the object at
  // 'weight_map'", "the object at 'a'.'b'[3]" ("the array at ..." for one).
  std::string Where() const {
    if (stack_.size() <= 1)
      return stack_.empty() || stack_.back().value->is_object() ? "the top-level object" : "the top-level array";
    std::string path;
    for (size_t i = 0; i + 1 < stack_.size(); ++i) {
      const Frame& f = stack_[i];
      if (f.value->is_array()) {
        absl::StrAppend(&path, "[", f.value->size() - 1, "]");
      } else {
        absl::StrAppend(&path, path.empty() ? "" : ".", "'", f.key, "'");
      }
    }
    // A path hundreds of levels deep says no more past its start and end.
    if (path.size() > 240) path = absl::StrCat(path.substr(0, 160), "...", path.substr(path.size() - 60));
    return absl::StrCat(stack_.back().value->is_array() ? "the array at " : "the object at ", path);
  }

  Json* Insert(Json&& v) {
    if (stack_.empty()) {
      root_ = std::move(v);
      return &root_;
    }
    Frame& f = stack_.back();
    if (f.value->is_array()) {
      auto& array = f.value->get_ref<Json::array_t&>();
      array.push_back(std::move(v));
      return &array.back();
    }
    // ordered_map's own emplace looks the key up linearly; the key is known
    // new (Frame::keys), so append to its vector directly.
    auto& object = f.value->get_ref<Json::object_t&>();
    object.Json::object_t::Container::emplace_back(f.key, std::move(v));  // f.key stays for Where()
    return &object.back().second;
  }
  bool Put(Json&& v) {
    Insert(std::move(v));
    return true;
  }
  bool Open(Json&& v) {
    if (static_cast<int>(stack_.size()) >= limits_.max_depth) {
      return Fail(
          absl::StrCat("arrays and objects nested deeper than ", limits_.max_depth, " levels (in ", Where(), ")"));
    }
    Json* slot = Insert(std::move(v));
    stack_.push_back(Frame{slot, {}, {}});
    return true;
  }
  bool Close() {
    stack_.pop_back();
    return true;
  }
  bool Fail(std::string message) {
    if (error_.empty()) error_ = std::move(message);
    return false;
  }

  std::string where_;
  const JsonReadLimits& limits_;
  Json root_;
  std::vector<Frame> stack_;
  std::string error_;
};

}  // namespace

absl::StatusOr<nlohmann::ordered_json> ReadJsonText(std::string_view text, std::string_view where,
                                                    const JsonReadLimits& limits) {
  Builder builder(std::string(where), limits);
  bool parsed = false;
  try {
    parsed = Json::sax_parse(text.begin(), text.end(), &builder, Json::input_format_t::json, /*strict=*/true,
                             limits.allow_comments);
  } catch (const Json::exception& e) {
    return absl::DataLossError(absl::StrCat(std::string(where), ": not valid JSON (", e.what(), ")"));
  }
  return builder.Take(parsed);
}

}  // namespace zt
