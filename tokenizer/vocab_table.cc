#include "tokenizer/vocab_table.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "util/limits.h"

namespace zt::data {

absl::StatusOr<std::vector<std::string>> TokensById(const absl::flat_hash_map<std::string, int32_t>& vocab) {
  const int64_t id_limit = LimitValue(Limit::kTokenizerVocab);
  int32_t max_id = -1;
  for (const auto& [token, id] : vocab) {
    if (id < 0 || id >= id_limit) {
      return absl::InvalidArgumentError(absl::StrCat("vocabulary entry '", token, "' has id ", id, "; ids lie in [0, ",
                                                     id_limit, "): ", LimitNote(Limit::kTokenizerVocab)));
    }
    max_id = std::max(max_id, id);
  }
  std::vector<std::string> tokens(static_cast<size_t>(max_id + 1));
  std::vector<const std::string*> owner(tokens.size(), nullptr);
  for (const auto& [token, id] : vocab) {
    if (const std::string* first = owner[static_cast<size_t>(id)]; first != nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("vocabulary entries '", std::min(*first, token), "' and '",
                                                     std::max(*first, token), "' both have id ", id));
    }
    owner[static_cast<size_t>(id)] = &token;
    tokens[static_cast<size_t>(id)] = token;
  }
  return tokens;
}

}  // namespace zt::data
