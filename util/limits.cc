#include "util/limits.h"

#include <algorithm>
#include <cstdlib>
#include <mutex>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "util/log.h"

extern char** environ;

namespace zt {
namespace {

// Why each default: docs/security.md ("Limits") gives the real files each
// was measured against.
const std::vector<LimitInfo> kLimits = {
    {Limit::kPickleValues, "ZT_MAX_PICKLE_VALUES", int64_t{1} << 22, "values a pickle expands to"},
    {Limit::kPickleStack, "ZT_MAX_PICKLE_STACK", int64_t{1} << 21, "objects on the unpickler's stack"},
    {Limit::kSafetensorsTensors, "ZT_MAX_SAFETENSORS_TENSORS", int64_t{1} << 20,
     "tensors in a safetensors header or index"},
    {Limit::kTokenizerVocab, "ZT_MAX_TOKENIZER_VOCAB", int64_t{1} << 22, "tokens in a tokenizer's vocabulary"},
    {Limit::kTokenizerMerges, "ZT_MAX_TOKENIZER_MERGES", int64_t{1} << 22, "merge rules in a BPE tokenizer"},
    {Limit::kTemplateSteps, "ZT_MAX_TEMPLATE_STEPS", 2000000,
     "statements and expressions one chat-template render evaluates"},
    {Limit::kTemplateOutputBytes, "ZT_MAX_TEMPLATE_OUTPUT_BYTES", int64_t{64} << 20,
     "bytes one chat-template render writes"},
};

// Empty when `text` is usable for `info`, else why not.
std::string Unusable(const LimitInfo& info, const char* text, int64_t* value) {
  int64_t v = 0;
  if (!absl::SimpleAtoi(text, &v)) return "is not a whole number";
  const int64_t floor = std::max<int64_t>(1, info.default_value / 1024);
  if (v < floor) return absl::StrCat("is below ", floor, " (the default is ", info.default_value, ")");
  *value = v;
  return "";
}

}  // namespace

const std::vector<LimitInfo>& AllLimits() { return kLimits; }

int64_t LimitValue(Limit limit) {
  const LimitInfo& info = kLimits[static_cast<size_t>(limit)];
  const char* text = std::getenv(info.env);
  if (text == nullptr) return info.default_value;
  int64_t value = 0;
  const std::string why = Unusable(info, text, &value);
  if (why.empty()) return value;
  static std::once_flag warned[16];
  std::call_once(warned[static_cast<size_t>(limit)], [&] {
    ZT_LOG(WARNING) << info.env << "='" << text << "' " << why << "; using the default " << info.default_value;
  });
  return info.default_value;
}

std::string LimitNote(Limit limit) {
  const LimitInfo& info = kLimits[static_cast<size_t>(limit)];
  return absl::StrCat("the limit is ", LimitValue(limit), " (", info.env, " raises it)");
}

absl::Status CheckLimitEnvironment() {
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string_view entry(*e);
    if (entry.substr(0, 7) != "ZT_MAX_") continue;
    const size_t eq = entry.find('=');
    const std::string_view name = entry.substr(0, eq);
    const LimitInfo* info = nullptr;
    for (const LimitInfo& l : kLimits) {
      if (name == l.env) info = &l;
    }
    if (info == nullptr) {
      std::vector<std::string> names;
      for (const LimitInfo& l : kLimits) names.emplace_back(l.env);
      return absl::InvalidArgumentError(absl::StrCat("environment variable ", std::string(name),
                                                     " is not a limit zerotorch knows; the limits are ",
                                                     absl::StrJoin(names, ", ")));
    }
    int64_t value = 0;
    const std::string text(eq == std::string_view::npos ? "" : entry.substr(eq + 1));
    const std::string why = Unusable(*info, text.c_str(), &value);
    if (!why.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("environment variable ", std::string(name), "='", text, "' ", why,
                                                     "; set it to the number of ", info->what, " to allow"));
    }
  }
  return absl::OkStatus();
}

}  // namespace zt
