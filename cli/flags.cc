// Implementation of cli/flags.h.
#include "cli/flags.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "util/status.h"
#include "util/strings.h"

namespace zt::cli {

void Flags::Int(const std::string& name, long long default_value, const std::string& help) {
  specs_[name] = {Kind::kInt, help, std::to_string(default_value)};
  order_.push_back(name);
  values_[name] = std::to_string(default_value);
}

void Flags::Double(const std::string& name, double default_value, const std::string& help) {
  specs_[name] = {Kind::kDouble, help, absl::StrFormat("%g", default_value)};
  order_.push_back(name);
  values_[name] = absl::StrFormat("%.17g", default_value);
}

void Flags::String(const std::string& name, const std::string& default_value, const std::string& help) {
  specs_[name] = {Kind::kString, help, default_value};
  order_.push_back(name);
  values_[name] = default_value;
}

void Flags::Bool(const std::string& name, const std::string& help) {
  specs_[name] = {Kind::kBool, help, ""};
  order_.push_back(name);
}

void Flags::Repeated(const std::string& name, const std::string& help) {
  specs_[name] = {Kind::kRepeated, help, ""};
  order_.push_back(name);
}

std::optional<int> Flags::ParseCommandLine(const std::vector<std::string>& args, const std::string& synopsis,
                                           const std::string& description) {
  if (absl::Status st = Parse(args); !st.ok()) {
    std::fprintf(stderr, "%s\n", std::string(st.message()).c_str());
    return 2;
  }
  if (help_requested()) {
    std::printf("%s%s", Usage(synopsis).c_str(), description.c_str());
    return 0;
  }
  return std::nullopt;
}

absl::Status Flags::Parse(const std::vector<std::string>& args) {
  std::vector<std::string> names(order_.begin(), order_.end());
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") {
      rest_.assign(args.begin() + static_cast<long>(i) + 1, args.end());
      break;
    }
    if (arg == "-h" || arg == "--help") {
      help_requested_ = true;
      continue;
    }
    if (arg.size() < 3 || arg.compare(0, 2, "--") != 0) {
      positional_.push_back(arg);
      continue;
    }
    std::string name = arg.substr(2);
    std::string value;
    bool has_value = false;
    if (auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      has_value = true;
    }
    // Accept --world_size as well as --world-size.
    for (char& c : name)
      if (c == '_') c = '-';
    auto it = specs_.find(name);
    if (it == specs_.end()) {
      // The names users bring from Hugging Face Trainer and DeepSpeed's
      // launcher, where this command has the option under another name.
      static const std::pair<const char*, const char*> kForeign[] = {
          {"learning-rate", "lr"},
          {"per-device-train-batch-size", "micro-batch"},
          {"train-micro-batch-size-per-gpu", "micro-batch"},
          {"gradient-accumulation-steps", "grad-accum"},
          {"max-steps", "steps"},
          {"deepspeed", "config"},
          {"deepspeed-config", "config"},
          {"save-steps", "save-interval"},
          {"eval-steps", "eval-interval"},
          {"model-name-or-path", "init-from"},
          {"resume-from-checkpoint", "resume"},
          {"bf16", "precision"},
          {"fp16", "precision"},
          {"num-gpus", "nproc"},
      };
      for (const auto& [foreign, ours] : kForeign) {
        if (name != foreign || specs_.count(ours) == 0) continue;
        const std::string value_hint = std::string(ours) == "precision" ? absl::StrCat(" ", name) : "";
        return absl::InvalidArgumentError(absl::StrCat(command_, ": unknown option --", name,
                                                       " (a Hugging Face Trainer or DeepSpeed name; here it is --",
                                                       ours, value_hint, "); see ", command_, " --help"));
      }
      std::string hint = NearestName(name, names);
      return absl::InvalidArgumentError(absl::StrCat(command_, ": unknown option --", name,
                                                     hint.empty() ? "" : absl::StrCat(" (did you mean --", hint, "?)"),
                                                     "; see ", command_, " --help"));
    }
    const Spec& spec = it->second;
    given_.insert(name);
    if (spec.kind == Kind::kBool) {
      if (has_value && value != "true" && value != "false" && value != "1" && value != "0") {
        return absl::InvalidArgumentError(
            absl::StrCat(command_, ": --", name, " takes no value or true/false, got '", value, "'"));
      }
      values_[name] = (!has_value || value == "true" || value == "1") ? "1" : "0";
      continue;
    }
    if (!has_value) {
      if (i + 1 >= args.size()) {
        return absl::InvalidArgumentError(absl::StrCat(command_, ": --", name, " needs a value"));
      }
      value = args[++i];
    }
    if (spec.kind == Kind::kInt) {
      char* end = nullptr;
      errno = 0;
      (void)std::strtoll(value.c_str(), &end, 10);
      if (value.empty() || *end != '\0' || errno != 0) {
        return absl::InvalidArgumentError(absl::StrCat(command_, ": --", name, " needs an integer, got '", value, "'"));
      }
    } else if (spec.kind == Kind::kDouble) {
      char* end = nullptr;
      const double v = std::strtod(value.c_str(), &end);
      if (value.empty() || *end != '\0') {
        return absl::InvalidArgumentError(absl::StrCat(command_, ": --", name, " needs a number, got '", value, "'"));
      }
      // inf, nan and 1e400 parse, but no setting means them (they reached
      // the config as JSON null before).
      if (!std::isfinite(v)) {
        return absl::InvalidArgumentError(
            absl::StrCat(command_, ": --", name, " needs a finite number, got '", value, "'"));
      }
    }
    if (spec.kind == Kind::kRepeated) {
      repeated_[name].push_back(value);
    } else {
      values_[name] = value;
    }
  }
  return absl::OkStatus();
}

long long Flags::GetInt(const std::string& name) const {
  ZT_CHECK_MSG(specs_.count(name) && specs_.at(name).kind == Kind::kInt, "flag %s", name.c_str());
  return std::strtoll(values_.at(name).c_str(), nullptr, 10);
}

double Flags::GetDouble(const std::string& name) const {
  ZT_CHECK_MSG(specs_.count(name) && specs_.at(name).kind == Kind::kDouble, "flag %s", name.c_str());
  return std::strtod(values_.at(name).c_str(), nullptr);
}

const std::string& Flags::GetString(const std::string& name) const {
  ZT_CHECK_MSG(specs_.count(name) && specs_.at(name).kind == Kind::kString, "flag %s", name.c_str());
  return values_.at(name);
}

bool Flags::GetBool(const std::string& name) const {
  ZT_CHECK_MSG(specs_.count(name) && specs_.at(name).kind == Kind::kBool, "flag %s", name.c_str());
  auto it = values_.find(name);
  return it != values_.end() && it->second == "1";
}

const std::vector<std::string>& Flags::GetRepeated(const std::string& name) const {
  static const std::vector<std::string> kEmpty;
  ZT_CHECK_MSG(specs_.count(name) && specs_.at(name).kind == Kind::kRepeated, "flag %s", name.c_str());
  auto it = repeated_.find(name);
  return it == repeated_.end() ? kEmpty : it->second;
}

bool Flags::WasSet(const std::string& name) const { return given_.count(name) > 0; }

void Flags::DefaultFromConfig(const std::string& name) {
  ZT_CHECK_MSG(specs_.count(name) > 0, "flag %s", name.c_str());
  specs_[name].default_text = "the config's";
  specs_[name].default_is_text = true;
}

std::string Flags::Usage(const std::string& synopsis) const {
  std::string out = absl::StrCat("usage: ", command_, " ", synopsis, "\n\noptions:\n");
  for (const std::string& name : order_) {
    const Spec& s = specs_.at(name);
    std::string left = absl::StrCat("  --", name);
    // What the value is: a count, a number, KEY=VALUE, or text.
    const char* placeholder = s.kind == Kind::kInt        ? " N"
                              : s.kind == Kind::kDouble   ? " X"
                              : s.kind == Kind::kRepeated ? " KEY=VALUE"
                                                          : " VALUE";
    if (s.kind != Kind::kBool) absl::StrAppend(&left, placeholder);
    absl::StrAppend(&out, absl::StrFormat("%-28s %s", left, s.help));
    // A help text that states its own default wins over the value's.
    const bool says_default = s.help.find("(default") != std::string::npos;
    if (s.default_is_text) {
      absl::StrAppend(&out, " (default: ", s.default_text, ")");
    } else if (!s.default_text.empty() && !says_default) {
      absl::StrAppend(&out, " (default ", s.default_text, ")");
    }
    absl::StrAppend(&out, "\n");
  }
  return out;
}

absl::StatusOr<std::map<std::string, int64_t>> ParseModelSets(const std::vector<std::string>& model_sets) {
  std::map<std::string, int64_t> out;
  for (const std::string& kv : model_sets) {
    const size_t eq = kv.find('=');
    int64_t v = 0;
    if (eq == std::string::npos || eq == 0 || !absl::SimpleAtoi(kv.substr(eq + 1), &v)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--model-set ", kv, ": expected KEY=INTEGER, e.g. --model-set n_layer=6"));
    }
    out[kv.substr(0, eq)] = v;
  }
  return out;
}

}  // namespace zt::cli
