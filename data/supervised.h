// Supervised fine-tuning examples from JSONL, with the loss on the
// completion only (TRL's prompt-completion format):
//
//   {"prompt": "Q: 2+2?\nA:", "completion": " 4"}
//
// Each line becomes one example: the prompt encoded with the tokenizer's
// special tokens (LLaMA's <s>), the completion without them, then the
// end-of-text token, as TRL's SFTTrainer builds them. The prompt's tokens
// take no loss. A line with only "text" is an example whose every token
// takes the loss (so a JSONL file of "text" lines fine-tunes on whole
// documents, one per sample).
//
// Chat lines are rendered with the tokenizer's chat template
// (template/chat_template.h) and encoded without adding special tokens (the
// template writes them), as transformers' apply_chat_template(tokenize=True)
// does, with no end-of-text appended (the template ends the turns), as TRL's
// SFTTrainer builds conversational examples:
//   {"messages": [{"role": "user", "content": ...}, ...]}  loss on every token
//   {"prompt": [messages], "completion": [messages]}       loss on the completion:
// the prompt rendered with add_generation_prompt, then the whole
// conversation; the completion is what the whole adds after the prompt's
// tokens (TRL's conversational prompt-completion).
//
// Samples are one example each, right-padded to the sequence length (the
// padding takes no loss; causal attention means no position before it sees
// it), or cut at the sequence length (an example whose completion starts
// past the cut keeps no loss at all, counted in `no_loss`).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "template/chat_template.h"
#include "tokenizer/hf_tokenizer.h"

namespace zt::data {

// Targets that take no loss (PyTorch's cross_entropy ignore_index default).
constexpr int64_t kIgnoreTarget = -100;

struct SupervisedExample {
  std::vector<int32_t> ids;  // prompt, completion, end-of-text
  int64_t loss_from = 0;     // ids[loss_from..] are predicted with loss
};

struct SupervisedSet {
  std::vector<SupervisedExample> examples;
  int64_t prompt_completion = 0;  // lines with prompt/completion (strings or conversations)
  int64_t chats = 0;              // lines rendered with the chat template (messages or conversations)
  int64_t messages = 0;           // "messages" lines (loss on every token)
};

// Whether `path` is a .jsonl file whose first line is a JSON object: the
// examples of this format (prompt/completion or text lines; "messages" is
// refused when read), never raw text to be cut into byte-token windows.
bool IsSupervisedJsonl(const std::string& path);

// Non-empty lines of `path`: its examples, without tokenizing.
absl::StatusOr<int64_t> CountJsonlExamples(const std::string& path);

// Every line of `path` encoded. `eot`: the end-of-text id (-1: none).
// `chat`: the tokenizer's chat template, or why there is none (null: none
// given). Errors name the file and line: malformed JSON, a line without
// prompt+completion, text or messages, a message that is not
// {"role", "content"} strings, a chat line without a template (with why),
// a template that raises (its own message), text that fails to encode.
absl::StatusOr<SupervisedSet> ReadSupervisedJsonl(const HfTokenizer& tokenizer, const std::string& path, int32_t eot,
                                                  const absl::StatusOr<ChatTemplate>* chat = nullptr);

// One sample of `seq_len` positions: input[t] = ids[t], target[t] =
// ids[t + 1] where that token takes loss, else kIgnoreTarget; past the end,
// input `pad` and target kIgnoreTarget. Returns the targets that take loss.
int64_t SupervisedWindow(const SupervisedExample& e, int64_t seq_len, int32_t pad, int64_t* input, int64_t* target);

}  // namespace zt::data
