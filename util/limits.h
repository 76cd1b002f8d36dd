// The resource limits zerotorch applies to what untrusted files make it
// build (pickles, safetensors headers and indexes, tokenizers, chat
// templates): each a named constant with a default far above any real
// model's and an environment variable that raises it (ZT_MAX_...), so a
// file made to exhaust memory or time is a named error, and a real file
// that needs more is one setting away. The defaults and their reasons are
// listed in docs/security.md. LibTorch-free.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace zt {

enum class Limit {
  kPickleValues,         // values one pickle expands to (memo-shared ones counted each time)
  kPickleStack,          // objects on the unpickler's stack at once
  kSafetensorsTensors,   // tensors in one safetensors header, entries in one index's weight_map
  kTokenizerVocab,       // tokens in a tokenizer's vocabulary; ids must be below it
  kTokenizerMerges,      // BPE merge rules
  kTemplateSteps,        // statements and expressions one chat-template render evaluates
  kTemplateOutputBytes,  // text one render writes
};

struct LimitInfo {
  Limit limit;
  const char* env;  // "ZT_MAX_PICKLE_VALUES"
  int64_t default_value;
  const char* what;  // "values a pickle expands to"
};

// Every limit, in the order of the enum.
const std::vector<LimitInfo>& AllLimits();

// The limit in force: the environment variable's value where it is set to a
// whole number at least the default's 1/1024th (a typo such as "0" would
// otherwise refuse every file), else the default. An unusable value is
// logged once as a warning; zt refuses it at start (CheckLimitEnvironment).
int64_t LimitValue(Limit limit);

// "the limit is 1048576 (ZT_MAX_SAFETENSORS_TENSORS raises it)": for the end
// of the error that a limit was exceeded.
std::string LimitNote(Limit limit);

// Every ZT_MAX_* variable in the environment is a known limit set to a
// usable value; otherwise InvalidArgument naming the variable and the known
// names.
absl::Status CheckLimitEnvironment();

}  // namespace zt
