// Labelled text for sequence classification (`zt train --task classify`),
// from JSONL, one example per line:
//
//   {"text": "a gripping, funny film", "label": 1}
//   {"text": "two hours I will not get back", "label": "negative"}
//
// A label is a class id (an integer 0..classes-1) or a class name (a
// string); one file uses one kind. Names become ids in the sorted order of
// the training file's distinct names, and a separate eval file is mapped
// with the training file's list. Each example is encoded as Hugging Face's tokenizer(text,
// truncation=True, max_length=seq_len) encodes it: the text without special
// tokens, cut so that the post-processor's tokens ([CLS] ... [SEP]) still
// fit, and those added around it. Samples are right-padded with an attention
// mask that is 0 on the padding. LibTorch-free.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tokenizer/hf_tokenizer.h"

namespace zt::data {

struct ClassifyExample {
  std::vector<int32_t> ids;  // the text's tokens, not yet cut (SpecialTokens adds the rest)
  int64_t label = 0;
};

struct ClassifySet {
  std::vector<ClassifyExample> examples;
  // Class names when the file's labels are strings (index = class id);
  // empty for integer labels.
  std::vector<std::string> label_names;
};

// The tokens the tokenizer's post-processor puts before and after a text
// (BERT: [CLS] and [SEP]; none for GPT-2), found by encoding a probe text
// with and without special tokens.
struct SpecialTokens {
  std::vector<int32_t> prefix, suffix;
};
absl::StatusOr<SpecialTokens> FindSpecialTokens(const HfTokenizer& tokenizer);

// Whether the first non-empty line of the .jsonl file `path` is an object
// with a "label": classification data, not supervised LM examples.
bool IsClassifyJsonl(const std::string& path);

// Every line of `path` encoded. `label_names`: the names string labels must
// come from (index = id; empty: the file's own sorted distinct names).
// `num_classes`: integer labels must be below it, and so must the number of
// names. Errors name the file and line (malformed JSON, a missing or empty
// "text", a label of another kind or out of range, an unknown name) or the
// number of classes (more names than the model has classes: pass
// --model-set num_labels=N).
absl::StatusOr<ClassifySet> ReadClassifyJsonl(const HfTokenizer& tokenizer, const std::string& path,
                                              const std::vector<std::string>& label_names, int64_t num_classes);

// One sample of `seq_len` positions: prefix, the text cut to fit, suffix,
// then `pad`; mask 1 on the tokens and 0 on the padding. Returns whether the
// text was cut.
bool ClassifyWindow(const ClassifyExample& e, const SpecialTokens& specials, int64_t seq_len, int32_t pad,
                    int64_t* input, int64_t* mask);

}  // namespace zt::data
