// Values of the key table: checking a JSON value against its row, moving it
// in and out of the typed zt::Config field, and describing types and
// defaults in words for messages and the reference.
#include <cctype>
#include <climits>
#include <cmath>
#include <cstdlib>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "config/schema.h"
#include "util/strings.h"

namespace zt::config_internal {
namespace {

absl::Status Invalid(std::string message) { return absl::InvalidArgumentError(std::move(message)); }

bool IsIntegral(const KeySpec& spec) { return spec.kind == Kind::kInt; }

// Bounds print as users write them: 0 and 1, not 0.0 and 1.0.
std::string Bound(const KeySpec& spec, double v) {
  if (IsIntegral(spec) || (std::floor(v) == v && std::fabs(v) < 1e15)) {
    return ShortNumber(Json(static_cast<int64_t>(v)));
  }
  return ShortNumber(Json(v));
}

// ">= 1", "> 0", "in 0..3", "in [0, 1)"; "" when unbounded.
std::string RangeText(const KeySpec& spec) {
  if (spec.min && spec.max) {
    if (IsIntegral(spec) && !spec.min_exclusive && !spec.max_exclusive) {
      return absl::StrCat("in ", Bound(spec, *spec.min), "..", Bound(spec, *spec.max));
    }
    return absl::StrCat("in ", spec.min_exclusive ? "(" : "[", Bound(spec, *spec.min), ", ", Bound(spec, *spec.max),
                        spec.max_exclusive ? ")" : "]");
  }
  if (spec.min) return absl::StrCat(spec.min_exclusive ? "> " : ">= ", Bound(spec, *spec.min));
  if (spec.max) return absl::StrCat(spec.max_exclusive ? "< " : "<= ", Bound(spec, *spec.max));
  return "";
}

bool InRange(const KeySpec& spec, double v) {
  if (spec.min && (spec.min_exclusive ? !(v > *spec.min) : !(v >= *spec.min))) return false;
  if (spec.max && (spec.max_exclusive ? !(v < *spec.max) : !(v <= *spec.max))) return false;
  return true;
}

absl::Status RangeError(const KeySpec& spec, const Json& value) {
  return Invalid(absl::StrCat("must be ", RangeText(spec), ", got ", ShowValue(value)));
}

// A number written as a string ("5e8") is a common slip worth naming.
std::string QuotedNumberHint(const Json& value) {
  if (!value.is_string()) return "";
  const std::string& s = value.get_ref<const std::string&>();
  char* end = nullptr;
  if (!s.empty()) (void)std::strtod(s.c_str(), &end);
  if (!s.empty() && end != nullptr && *end == '\0') return " (remove the quotes)";
  if (s == "true" || s == "false") return " (write true or false without quotes)";
  return "";
}

absl::StatusOr<int64_t> ToInt(const KeySpec& spec, const Json& value) {
  if (value.is_number_integer() && !value.is_number_unsigned()) return value.get<int64_t>();
  if (value.is_number_unsigned()) {
    uint64_t u = value.get<uint64_t>();
    if (u > static_cast<uint64_t>(INT64_MAX)) return Invalid(absl::StrCat("is too large: ", value.dump()));
    return static_cast<int64_t>(u);
  }
  if (value.is_number_float()) {
    double d = value.get<double>();
    if (std::floor(d) != d) {
      return Invalid(absl::StrCat("must be an integer, got ", ShowValue(value)));
    }
    // 2^63 itself does not fit; everything below it that is integral does.
    if (std::fabs(d) >= 9223372036854775808.0) return Invalid(absl::StrCat("is too large: ", ShowValue(value)));
    return static_cast<int64_t>(d);
  }
  return Invalid(absl::StrCat("must be ", Expectation(spec), ", got ", DescribeType(value), QuotedNumberHint(value)));
}

absl::StatusOr<double> ToDouble(const KeySpec& spec, const Json& value) {
  if (value.is_number()) return value.get<double>();
  return Invalid(absl::StrCat("must be ", Expectation(spec), ", got ", DescribeType(value), QuotedNumberHint(value)));
}

}  // namespace

std::string ShortNumber(const Json& value) {
  if (value.is_number_integer()) {
    int64_t v = value.get<int64_t>();
    if (v >= 100000 && v != INT64_MAX) {
      int exponent = 0;
      int64_t mantissa = v;
      while (mantissa % 10 == 0) {
        mantissa /= 10;
        ++exponent;
      }
      if (mantissa < 10) return absl::StrCat(mantissa, "e", exponent);
    }
    return absl::StrCat(v);
  }
  return value.dump();
}

std::string Expectation(const KeySpec& spec) {
  std::string range = RangeText(spec);
  std::string text;
  switch (spec.kind) {
    case Kind::kBool: text = "true or false"; break;
    case Kind::kInt: text = range.empty() ? "an integer" : absl::StrCat("an integer ", range); break;
    case Kind::kFloat: text = range.empty() ? "a number" : absl::StrCat("a number ", range); break;
    case Kind::kString: text = "a string"; break;
    case Kind::kEnum: {
      std::vector<std::string> names;
      for (const EnumChoice& c : spec.choices) names.push_back(absl::StrCat("\"", c.name, "\""));
      text = absl::StrCat("one of ", absl::StrJoin(names, ", "));
      break;
    }
    case Kind::kFloatPair:
      text = range.empty() ? "a list of two numbers" : absl::StrCat("a list of two numbers, each ", range);
      break;
    case Kind::kObject: text = "an object"; break;
  }
  if (spec.nullable) absl::StrAppend(&text, ", or null");
  return text;
}

std::string TypeColumn(const KeySpec& spec) {
  std::string range = RangeText(spec);
  std::string text;
  switch (spec.kind) {
    case Kind::kBool: text = "bool"; break;
    case Kind::kInt: text = range.empty() ? "int" : absl::StrCat("int, ", range); break;
    case Kind::kFloat: text = range.empty() ? "float" : absl::StrCat("float, ", range); break;
    case Kind::kString: text = "string"; break;
    case Kind::kEnum: {
      std::vector<std::string> names;
      for (const EnumChoice& c : spec.choices) names.push_back(absl::StrCat("`", c.name, "`"));
      text = absl::StrJoin(names, ", ");
      break;
    }
    case Kind::kFloatPair:
      text = range.empty() ? "[float, float]" : absl::StrCat("[float, float], each ", range);
      break;
    case Kind::kObject: text = "object"; break;
  }
  if (spec.nullable) absl::StrAppend(&text, ", or null");
  return text;
}

std::string DefaultColumn(const KeySpec& spec) {
  if (!spec.default_text.empty()) return spec.default_text;
  if (spec.derive != nullptr) return spec.derive_text;
  if (spec.required) return "required";
  if (spec.default_value.is_null()) return "null";
  if (spec.default_value.is_array()) {
    std::vector<std::string> parts;
    for (const Json& e : spec.default_value) parts.push_back(ShortNumber(e));
    return absl::StrCat("[", absl::StrJoin(parts, ", "), "]");
  }
  return ShortNumber(spec.default_value);
}

absl::StatusOr<Json> CheckValue(const KeySpec& spec, const Json& value) {
  if (value.is_null()) {
    if (spec.nullable) return Json(nullptr);
    std::string hint;
    if (!spec.required && (!spec.default_value.is_null() || spec.derive != nullptr)) {
      hint = absl::StrCat("; remove the key to get the default (", DefaultColumn(spec), ")");
    }
    return Invalid(absl::StrCat("must be ", Expectation(spec), ", got null", hint));
  }
  switch (spec.kind) {
    case Kind::kBool:
      if (value.is_boolean()) return value;
      return Invalid(absl::StrCat("must be true or false, got ", DescribeType(value), QuotedNumberHint(value)));
    case Kind::kInt: {
      absl::StatusOr<int64_t> v = ToInt(spec, value);
      if (!v.ok()) return v.status();
      if (!InRange(spec, static_cast<double>(*v))) return RangeError(spec, value);
      if (std::holds_alternative<FieldRef<int>>(spec.field) && (*v > INT_MAX || *v < INT_MIN)) {
        return Invalid(absl::StrCat("is too large: ", ShowValue(value), " (at most ", INT_MAX, ")"));
      }
      return Json(*v);
    }
    case Kind::kFloat: {
      absl::StatusOr<double> v = ToDouble(spec, value);
      if (!v.ok()) return v.status();
      if (!InRange(spec, *v)) return RangeError(spec, value);
      return Json(*v);
    }
    case Kind::kString:
      if (value.is_string()) return value;
      return Invalid(absl::StrCat("must be ", Expectation(spec), ", got ", DescribeType(value)));
    case Kind::kEnum: {
      if (value.is_string()) {
        const std::string& s = value.get_ref<const std::string&>();
        std::vector<std::string> names;
        for (const EnumChoice& c : spec.choices) {
          if (absl::EqualsIgnoreCase(c.name, s)) return Json(c.name);
          names.push_back(c.name);
        }
        std::string near = NearestName(s, names);
        return Invalid(absl::StrCat("must be ", Expectation(spec), ", got ", ShowValue(value),
                                    near.empty() ? "" : absl::StrCat(" (did you mean \"", near, "\"?)")));
      }
      return Invalid(absl::StrCat("must be ", Expectation(spec), ", got ", DescribeType(value)));
    }
    case Kind::kFloatPair: {
      if (!value.is_array() || value.size() != 2 || !value[0].is_number() || !value[1].is_number()) {
        return Invalid(absl::StrCat("must be ", Expectation(spec), " such as [0.9, 0.999], got ", DescribeType(value)));
      }
      for (size_t i = 0; i < 2; ++i) {
        if (!InRange(spec, value[i].get<double>())) {
          return Invalid(absl::StrCat("element ", i, " must be ", RangeText(spec), ", got ", ShowValue(value[i])));
        }
      }
      return Json::array({value[0].get<double>(), value[1].get<double>()});
    }
    case Kind::kObject:
      if (value.is_object()) return value;
      return Invalid(absl::StrCat("must be an object ({...}), got ", DescribeType(value)));
  }
  return Invalid("unknown kind");
}

void SetField(const KeySpec& spec, Config& config, const Json& value) {
  const Binding& f = spec.field;
  if (auto* b = std::get_if<FieldRef<bool>>(&f)) {
    (*b)(config) = value.get<bool>();
  } else if (auto* i = std::get_if<FieldRef<int>>(&f)) {
    (*i)(config) = static_cast<int>(value.get<int64_t>());
  } else if (auto* l = std::get_if<FieldRef<int64_t>>(&f)) {
    (*l)(config) = value.get<int64_t>();
  } else if (auto* d = std::get_if<FieldRef<double>>(&f)) {
    (*d)(config) = value.get<double>();
  } else if (auto* s = std::get_if<FieldRef<std::string>>(&f)) {
    (*s)(config) = value.is_null() ? std::string() : value.get<std::string>();
  } else if (auto* p = std::get_if<FieldRef<std::array<double, 2>>>(&f)) {
    (*p)(config) = {value[0].get<double>(), value[1].get<double>()};
  } else if (auto* o = std::get_if<FieldRef<std::optional<int64_t>>>(&f)) {
    if (value.is_null()) {
      (*o)(config).reset();
    } else {
      (*o)(config) = value.get<int64_t>();
    }
  } else if (auto* e = std::get_if<EnumRef>(&f)) {
    int v = -1;
    if (!value.is_null()) {
      for (const EnumChoice& c : spec.choices) {
        if (c.name == value.get<std::string>()) v = c.value;
      }
    }
    e->set(config, v);
  }
}

Json GetField(const KeySpec& spec, const Config& config) {
  // The accessors take Config& so one pointer serves reads and writes; reads
  // do not modify.
  Config& c = const_cast<Config&>(config);
  const Binding& f = spec.field;
  if (auto* b = std::get_if<FieldRef<bool>>(&f)) return (*b)(c);
  if (auto* i = std::get_if<FieldRef<int>>(&f)) return static_cast<int64_t>((*i)(c));
  if (auto* l = std::get_if<FieldRef<int64_t>>(&f)) return (*l)(c);
  if (auto* d = std::get_if<FieldRef<double>>(&f)) return (*d)(c);
  if (auto* s = std::get_if<FieldRef<std::string>>(&f)) {
    const std::string& v = (*s)(c);
    if (v.empty() && spec.nullable) return nullptr;
    return v;
  }
  if (auto* p = std::get_if<FieldRef<std::array<double, 2>>>(&f)) {
    const auto& v = (*p)(c);
    return Json::array({v[0], v[1]});
  }
  if (auto* o = std::get_if<FieldRef<std::optional<int64_t>>>(&f)) {
    const auto& v = (*o)(c);
    return v ? Json(*v) : Json(nullptr);
  }
  if (auto* e = std::get_if<EnumRef>(&f)) {
    int v = e->get(config);
    for (const EnumChoice& choice : spec.choices) {
      if (choice.value == v) return choice.name;
    }
    return nullptr;
  }
  return nullptr;
}

}  // namespace zt::config_internal
