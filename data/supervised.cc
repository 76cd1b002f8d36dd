// Implementation of data/supervised.h.
#include "data/supervised.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string_view>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "data/jsonl.h"
#include "util/status.h"

namespace zt::data {
namespace {

absl::StatusOr<std::vector<int32_t>> EncodeAt(const HfTokenizer& tokenizer, const std::string& text, bool specials,
                                              const std::string& where) {
  auto ids = tokenizer.Encode(text, specials);
  if (!ids.ok()) return absl::Status(ids.status().code(), absl::StrCat(where, ": ", ids.status().message()));
  return ids;
}

// A conversation: a list of {"role", "content", further string keys}.
absl::StatusOr<std::vector<ChatMessage>> Messages(const nlohmann::json& j, const std::string& where, const char* key) {
  if (!j.is_array())
    return absl::InvalidArgumentError(absl::StrCat(where, ": \"", key, "\" must be a list of messages"));
  std::vector<ChatMessage> messages;
  for (size_t i = 0; i < j.size(); ++i) {
    const nlohmann::json& m = j[i];
    const std::string at = absl::StrCat(where, ": ", key, "[", i, "]");
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string() || !m.contains("content") ||
        !m["content"].is_string()) {
      return absl::InvalidArgumentError(
          absl::StrCat(at,
                       ": a message is {\"role\": string, \"content\": string} (content lists of images or "
                       "tool calls are not supported)"));
    }
    ChatMessage msg{m["role"].get<std::string>(), m["content"].get<std::string>(), {}};
    for (const auto& [k, v] : m.items()) {
      if (k == "role" || k == "content") continue;
      if (!v.is_string()) {
        return absl::InvalidArgumentError(
            absl::StrCat(at, ": \"", k, "\" is not a string; only string message fields are rendered"));
      }
      msg.fields.emplace_back(k, v.get<std::string>());
    }
    messages.push_back(std::move(msg));
  }
  if (messages.empty()) return absl::InvalidArgumentError(absl::StrCat(where, ": \"", key, "\" is empty"));
  return messages;
}

// The conversation rendered by the template and encoded as
// apply_chat_template(tokenize=True) encodes it: no special tokens added.
absl::StatusOr<std::vector<int32_t>> EncodeChat(const HfTokenizer& tokenizer, const ChatTemplate& chat,
                                                const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                                                const std::string& where) {
  absl::StatusOr<std::string> text = chat.Render(messages, add_generation_prompt);
  if (!text.ok()) return absl::Status(text.status().code(), absl::StrCat(where, ": ", text.status().message()));
  return EncodeAt(tokenizer, *text, false, where);
}

}  // namespace

bool IsSupervisedJsonl(const std::string& path) {
  if (!absl::EndsWith(path, ".jsonl")) return false;
  return FirstJsonlObject(path).is_object();
}

absl::StatusOr<int64_t> CountJsonlExamples(const std::string& path) {
  int64_t n = 0;
  ZT_RETURN_IF_ERROR(ForEachJsonlLine(path, [&](int64_t, std::string_view) {
    ++n;
    return true;
  }));
  return n;
}

absl::StatusOr<SupervisedSet> ReadSupervisedJsonl(const HfTokenizer& tokenizer, const std::string& path, int32_t eot,
                                                  const absl::StatusOr<ChatTemplate>* chat) {
  SupervisedSet set;
  ZT_RETURN_IF_ERROR(ForEachJsonlValue(path, JsonlValues::kObjects, [&](JsonlLine& line) -> absl::Status {
    const std::string& where = line.where;
    const nlohmann::json& j = line.value;
    const bool conversation = j.contains("messages") || (j.contains("prompt") && j["prompt"].is_array());
    const ChatTemplate* tmpl = nullptr;
    if (conversation) {
      if (chat == nullptr || !chat->ok()) {
        // Absent, or present and broken (a parse error is not "none").
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": a conversation is rendered with the tokenizer's chat template, ",
                         chat == nullptr ? std::string("and there is none: no tokenizer_config.json was given")
                                         : absl::StrCat("which could not be used: ", chat->status().message()),
                         "; use a tokenizer folder whose tokenizer_config.json has \"chat_template\", or write "
                         "{\"prompt\": string, \"completion\": string} lines"));
      }
      tmpl = &**chat;
      ++set.chats;
    }
    if (j.contains("label")) {
      return absl::InvalidArgumentError(
          absl::StrCat(where,
                       ": a \"label\" makes this classification data, which trains a sequence classifier "
                       "(--task classify with a bert-* model), not a language model"));
    }
    SupervisedExample e;
    const bool pc = j.contains("prompt") || j.contains("completion");
    if (j.contains("messages")) {
      ZT_ASSIGN_OR_RETURN(std::vector<ChatMessage> messages, Messages(j["messages"], where, "messages"));
      ZT_ASSIGN_OR_RETURN(e.ids, EncodeChat(tokenizer, *tmpl, messages, false, where));
      e.loss_from = 1;  // every token after the first is predicted
      ++set.messages;
    } else if (conversation) {
      if (!j.contains("completion")) {
        return absl::InvalidArgumentError(absl::StrCat(where, ": a conversational \"prompt\" needs a \"completion\""));
      }
      ZT_ASSIGN_OR_RETURN(std::vector<ChatMessage> prompt, Messages(j["prompt"], where, "prompt"));
      ZT_ASSIGN_OR_RETURN(std::vector<ChatMessage> completion, Messages(j["completion"], where, "completion"));
      ZT_ASSIGN_OR_RETURN(std::vector<int32_t> prompt_ids, EncodeChat(tokenizer, *tmpl, prompt, true, where));
      std::vector<ChatMessage> whole = prompt;
      whole.insert(whole.end(), completion.begin(), completion.end());
      ZT_ASSIGN_OR_RETURN(e.ids, EncodeChat(tokenizer, *tmpl, whole, false, where));
      // TRL takes the completion as what follows the prompt's tokens; a
      // template that renders the prompt differently inside the whole
      // conversation would make that cut wrong, so it is refused.
      if (e.ids.size() <= prompt_ids.size() || !std::equal(prompt_ids.begin(), prompt_ids.end(), e.ids.begin())) {
        return absl::InvalidArgumentError(
            absl::StrCat(where,
                         ": the chat template renders the prompt differently alone (with the generation prompt) and "
                         "inside the whole conversation, so the completion's tokens cannot be told apart; write "
                         "{\"messages\": [...]} (loss on every token) instead"));
      }
      e.loss_from = static_cast<int64_t>(prompt_ids.size());
      ++set.prompt_completion;
    } else if (pc) {
      if (!j.contains("prompt") || !j["prompt"].is_string() || !j.contains("completion") ||
          !j["completion"].is_string()) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": expected \"prompt\" and \"completion\" strings (or a \"text\" string)"));
      }
      ZT_ASSIGN_OR_RETURN(e.ids, EncodeAt(tokenizer, j["prompt"].get<std::string>(), true, where));
      e.loss_from = static_cast<int64_t>(e.ids.size());
      ZT_ASSIGN_OR_RETURN(std::vector<int32_t> completion,
                          EncodeAt(tokenizer, j["completion"].get<std::string>(), false, where));
      if (completion.empty() && eot < 0) {
        return absl::InvalidArgumentError(absl::StrCat(where, ": the completion is empty"));
      }
      e.ids.insert(e.ids.end(), completion.begin(), completion.end());
      ++set.prompt_completion;
    } else {
      if (!j.contains("text") || !j["text"].is_string()) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": expected \"prompt\" and \"completion\" strings, or a \"text\" string"));
      }
      ZT_ASSIGN_OR_RETURN(e.ids, EncodeAt(tokenizer, j["text"].get<std::string>(), true, where));
      e.loss_from = 1;  // every token after the first is predicted
    }
    // Conversations end with the template's own end of turn.
    if (eot >= 0 && !conversation) e.ids.push_back(eot);
    // The first token is never a target: a completion-only loss starts at
    // the token after the prompt's last, which must exist.
    e.loss_from = std::max<int64_t>(e.loss_from, 1);
    if (static_cast<int64_t>(e.ids.size()) <= e.loss_from) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": nothing to predict (one token in all)"));
    }
    set.examples.push_back(std::move(e));
    return absl::OkStatus();
  }));
  if (set.examples.empty()) return absl::InvalidArgumentError(absl::StrCat("'", path, "' holds no examples"));
  return set;
}

int64_t SupervisedWindow(const SupervisedExample& e, int64_t seq_len, int32_t pad, int64_t* input, int64_t* target) {
  const int64_t n = static_cast<int64_t>(e.ids.size());
  int64_t with_loss = 0;
  for (int64_t t = 0; t < seq_len; ++t) {
    input[t] = t < n ? e.ids[static_cast<size_t>(t)] : pad;
    // Position t predicts token t + 1.
    const bool loss = t + 1 < n && t + 1 >= e.loss_from;
    target[t] = loss ? e.ids[static_cast<size_t>(t + 1)] : kIgnoreTarget;
    with_loss += loss;
  }
  return with_loss;
}

}  // namespace zt::data
