// Text documents -> one token stream for a token file (`zt tokenize`): the
// inputs' documents encoded with a Hugging Face tokenizer, each preceded by
// the end-of-text token as llm.c's preprocessing writes them, so a training
// window that crosses a document boundary sees the separator the model was
// pretrained with.
//
// Inputs: a text file (one document), a directory (each text file in it one
// document, as data/text_corpus.h lists them), or a .jsonl file (each line
// an object whose "text" string is one document; other keys are ignored).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tokenizer/hf_tokenizer.h"

namespace zt::data {

struct TokenizedCorpus {
  std::vector<int32_t> tokens;
  int64_t documents = 0;
  int64_t bytes = 0;  // of text encoded
};

// `eot`: the separator's id, or -1 for none. Errors name the input (and the
// JSONL line): missing files, malformed JSON, a line without a "text"
// string, text that is not UTF-8.
absl::StatusOr<TokenizedCorpus> TokenizeCorpus(const HfTokenizer& tokenizer, const std::vector<std::string>& inputs,
                                               int32_t eot);

// The tokenizer's end-of-text token: the first of <|endoftext|>,
// <|end_of_text|>, </s> it has (a llama2.c tokenizer: BOS, as llama2.c
// separates its stories); -1 when none.
int32_t DefaultEndOfText(const HfTokenizer& tokenizer);

}  // namespace zt::data
