// Hugging Face chat templates: tokenizer_config.json's "chat_template" (a
// Jinja string, or a list of {"name", "template"} of which "default" is used)
// rendered as transformers' apply_chat_template(messages, tokenize=False,
// add_generation_prompt=...) renders it: Jinja2 with trim_blocks and
// lstrip_blocks, the special token strings and raise_exception as globals,
// tools and documents none. Only plain-string message fields; no tools, no
// multimodal content lists. No LibTorch.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "template/jinja.h"

namespace zt::data {

// One chat turn. `fields` are further string keys the template may read as
// message[key] or message.key (e.g. "reasoning_content", "name"), after role
// and content, in this order.
struct ChatMessage {
  std::string role;
  std::string content;
  std::vector<std::pair<std::string, std::string>> fields;
};

class ChatTemplate {
 public:
  // `path`: a tokenizer folder (holding tokenizer_config.json) or the
  // tokenizer_config.json itself. Errors: NotFound when the file is missing;
  // InvalidArgument naming the file and key when it is not JSON, has no
  // chat_template (the tokenizer has none), has a template list without
  // "default", a special token that is neither a string nor {"content": ...},
  // or a template outside the supported Jinja subset (with line and column).
  static absl::StatusOr<ChatTemplate> Load(const std::string& path);

  // The prompt text for `messages`; with `add_generation_prompt` the template
  // adds what opens the assistant's reply. Errors: InvalidArgument naming the
  // file; where the template calls raise_exception (e.g. roles out of
  // order), the message ends with the template's own text and
  // jinja::IsRaisedByTemplate(status) is true.
  absl::StatusOr<std::string> Render(const std::vector<ChatMessage>& messages, bool add_generation_prompt) const;

  const std::string& source() const { return source_; }
  const std::string& config_path() const { return config_path_; }
  // bos_token, eos_token, unk_token, sep_token, pad_token, cls_token,
  // mask_token: those the config sets, as strings.
  const std::vector<std::pair<std::string, std::string>>& special_tokens() const { return special_tokens_; }

 private:
  ChatTemplate(std::string config_path, std::string source, jinja::Template tmpl,
               std::vector<std::pair<std::string, std::string>> special_tokens)
      : config_path_(std::move(config_path)),
        source_(std::move(source)),
        template_(std::move(tmpl)),
        special_tokens_(std::move(special_tokens)) {}

  std::string config_path_;
  std::string source_;
  jinja::Template template_;
  std::vector<std::pair<std::string, std::string>> special_tokens_;
};

}  // namespace zt::data
