// Implementation of data/tokenize_corpus.h.
#include "data/tokenize_corpus.h"

#include <limits>
#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "data/jsonl.h"
#include "data/text_corpus.h"
#include "util/file_io.h"
#include "util/status.h"

namespace zt::data {
namespace {

absl::Status AddDocument(const HfTokenizer& tokenizer, const std::string& text, int32_t eot, const std::string& where,
                         TokenizedCorpus* out) {
  absl::StatusOr<std::vector<int32_t>> ids = tokenizer.Encode(text);
  if (!ids.ok()) return absl::Status(ids.status().code(), absl::StrCat(where, ": ", ids.status().message()));
  if (eot >= 0) out->tokens.push_back(eot);
  out->tokens.insert(out->tokens.end(), ids->begin(), ids->end());
  ++out->documents;
  out->bytes += static_cast<int64_t>(text.size());
  return absl::OkStatus();
}

absl::Status AddJsonl(const HfTokenizer& tokenizer, const std::string& path, int32_t eot, TokenizedCorpus* out) {
  return ForEachJsonlValue(path, JsonlValues::kAny, [&](JsonlLine& line) -> absl::Status {
    const nlohmann::json& j = line.value;
    if (!j.is_object() || !j.contains("text") || !j["text"].is_string()) {
      return absl::InvalidArgumentError(absl::StrCat(line.where, ": expected an object with a \"text\" string"));
    }
    return AddDocument(tokenizer, j["text"].get<std::string>(), eot, line.where, out);
  });
}

}  // namespace

absl::StatusOr<TokenizedCorpus> TokenizeCorpus(const HfTokenizer& tokenizer, const std::vector<std::string>& inputs,
                                               int32_t eot) {
  TokenizedCorpus out;
  for (const std::string& input : inputs) {
    if (absl::EndsWith(input, ".jsonl")) {
      ZT_RETURN_IF_ERROR(AddJsonl(tokenizer, input, eot, &out));
      continue;
    }
    ZT_ASSIGN_OR_RETURN(std::vector<std::string> files, ListTextCorpusFiles(input));
    for (const std::string& f : files) {
      ZT_ASSIGN_OR_RETURN(std::string text, ReadSmallFile(f, std::numeric_limits<size_t>::max()));
      ZT_RETURN_IF_ERROR(AddDocument(tokenizer, text, eot, f, &out));
    }
  }
  return out;
}

int32_t DefaultEndOfText(const HfTokenizer& tokenizer) {
  // llama2.c's data puts BOS before each story (its pretokenize), and its
  // models end a text there.
  if (tokenizer.is_llama2c()) return Llama2cTokenizer::kBos;
  for (const char* name : {"<|endoftext|>", "<|end_of_text|>", "</s>"}) {
    if (int32_t id = tokenizer.TokenId(name); id >= 0) return id;
  }
  return -1;
}

}  // namespace zt::data
