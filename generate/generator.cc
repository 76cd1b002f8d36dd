// Implementation of generate/generator.h.
#include "generate/generator.h"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>

#include "absl/strings/str_cat.h"
#include "generate/sampling/text_stream.h"
#include "util/error.h"
#include "util/status.h"

namespace zt::generate {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

// The generated text: the decoding of prompt + new ids after the prompt's
// own decoding, which is how its first token reads after the prompt (a
// SentencePiece space, a byte-level character split across tokens). Where
// a decoder does not extend the prompt's text that way, the new ids alone.
absl::StatusOr<std::string> Continuation(const Decoder& decode, const std::vector<int32_t>& prompt,
                                         const std::string& prompt_text, const std::vector<int32_t>& ids) {
  std::vector<int32_t> all = prompt;
  all.insert(all.end(), ids.begin(), ids.end());
  ZT_ASSIGN_OR_RETURN(std::string text, decode(all));
  if (text.compare(0, prompt_text.size(), prompt_text) == 0) return text.substr(prompt_text.size());
  return decode(ids);
}

}  // namespace

Decoder DecodeWith(const data::HfTokenizer* tokenizer) {
  if (tokenizer == nullptr) return {};
  return [tokenizer](const std::vector<int32_t>& ids) { return tokenizer->Decode(ids, /*skip_special_tokens=*/true); };
}

absl::StatusOr<GenerateResult> Generate(models::Model& model, const std::vector<int32_t>& prompt,
                                        const GenerateOptions& o, const Decoder& decode,
                                        const std::function<void(const std::string&)>& on_text) {
  const models::ModelInfo& info = model.info();
  if (info.task != models::Task::kLanguageModel) {
    return absl::InvalidArgumentError(
        absl::StrCat("model ", info.name, " is not a language model; it cannot generate"));
  }
  if (prompt.empty()) return absl::InvalidArgumentError("the prompt has no tokens; give --prompt text or ids");
  if (static_cast<int64_t>(prompt.size()) > info.max_seq_len) {
    return absl::InvalidArgumentError(absl::StrCat("the prompt's ", prompt.size(), " tokens pass the model's ",
                                                   info.max_seq_len, " positions; shorten it"));
  }
  for (int32_t id : prompt) {
    if (id < 0 || id >= info.vocab_size) {
      return absl::InvalidArgumentError(
          absl::StrCat("prompt token id ", id, " is outside the model's vocabulary 0..", info.vocab_size - 1));
    }
  }
  if (o.max_new_tokens < 0) {
    return absl::InvalidArgumentError(absl::StrCat("--max-new-tokens ", o.max_new_tokens, " must be >= 0"));
  }
  if (!o.stop.empty() && !decode) return absl::InvalidArgumentError("stop strings need a tokenizer to read the text");
  ZT_ASSIGN_OR_RETURN(Sampler sampler, Sampler::Create(o.sampling));
  std::string prompt_text;
  if (decode) {
    ZT_ASSIGN_OR_RETURN(prompt_text, decode(prompt));
  }

  torch::NoGradGuard no_grad;
  model.module()->eval();
  GenerateResult r;
  r.finish = "length";
  TextStream stream(o.stop);
  models::KvCache cache;
  std::vector<int32_t> sequence = prompt;
  const auto longs = torch::TensorOptions().dtype(torch::kLong);
  try {
    // Logits of the last position of `sequence`, as float32 on the CPU.
    auto last_logits = [&](bool first) {
      torch::Tensor logits;
      if (!o.use_cache) {
        std::vector<int64_t> all(sequence.begin(), sequence.end());
        logits = model.Forward(torch::tensor(all, longs).unsqueeze(0));
      } else if (first) {
        std::vector<int64_t> all(sequence.begin(), sequence.end());
        logits = model.ForwardCached(torch::tensor(all, longs).unsqueeze(0), cache);
      } else {
        logits = model.ForwardCached(torch::full({1, 1}, static_cast<int64_t>(sequence.back()), longs), cache);
      }
      return logits.select(1, logits.size(1) - 1).squeeze(0).to(torch::kFloat).contiguous();
    };
    const auto t0 = Clock::now();
    auto t_prompt = t0;
    for (int64_t step = 0; step < o.max_new_tokens; ++step) {
      if (static_cast<int64_t>(sequence.size()) >= info.max_seq_len) {
        r.finish = "positions";
        break;
      }
      const torch::Tensor logits = last_logits(step == 0);
      if (step == 0) {
        t_prompt = Clock::now();
      } else {
        ++r.decode_steps;
      }
      const int64_t n = o.vocab_limit > 0 ? std::min<int64_t>(o.vocab_limit, logits.numel()) : logits.numel();
      int32_t next = sampler.Next(absl::MakeConstSpan(logits.data_ptr<float>(), static_cast<size_t>(n)));
      if (o.agree) next = o.agree(next);
      if (std::find(o.stop_ids.begin(), o.stop_ids.end(), next) != o.stop_ids.end()) {
        r.finish = "stop_id";
        break;
      }
      r.ids.push_back(next);
      sequence.push_back(next);
      if (decode) {
        ZT_ASSIGN_OR_RETURN(const std::string text, Continuation(decode, prompt, prompt_text, r.ids));
        const std::string piece = stream.Push(text);
        if (on_text && !piece.empty()) on_text(piece);
        if (stream.stopped()) {
          r.finish = "stop_text";
          break;
        }
      }
    }
    const auto t1 = Clock::now();
    r.prompt_seconds = r.ids.empty() && r.finish != "stop_id" ? 0.0 : Seconds(t0, t_prompt);
    r.decode_seconds = Seconds(t_prompt, t1);
  } catch (const Error& e) {
    return e.status();
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat("generation failed: ", e.what_without_backtrace()));
  }
  if (decode) {
    const std::string rest = stream.Finish();
    if (on_text && !rest.empty()) on_text(rest);
    r.text = stream.text();
  }
  return r;
}

}  // namespace zt::generate
