// `zt generate`: text from a causal language model (GPT-2, the LLaMA
// family) on this process: a model folder, a zt train export or checkpoint
// (any stage, any world size), a LoRA adapter on its base, or a llama2.c
// file (generate/model_source.h), with its tokenizer or the one given
// (tokenizer.json, vocab + merges, llama2.c's tokenizer.bin). Incremental
// over a KV cache; greedy by default, or sampled (--temperature, --top-k,
// --top-p, --seed). The continuation goes to stdout as it is generated, a
// summary (tokens/s) to stderr. Exit codes: 0 success, 2 bad input, 1 a
// failure while running.
#include <torch/torch.h>

#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "apps/commands.h"
#include "cli/flags.h"
#include "generate/generator.h"
#include "generate/model_source.h"
#include "tokenizer/hf_tokenizer.h"

namespace zt::cli {
namespace {

constexpr const char* kSynopsis =
    "--model PATH [--tokenizer PATH] (--prompt TEXT | --prompt-ids I,J,...) [--max-new-tokens N] [--temperature T "
    "--top-k K --top-p P --seed S] [--stop TEXT]... [--output text|json]";
constexpr const char* kHelp =
    "\nGenerates a continuation of the prompt with a causal language model and prints it to stdout as it\n"
    "comes. --model is a Hugging Face model folder or a zt train export (config.json + safetensors), a\n"
    "training checkpoint (its save folder or one tag's folder; --tag picks one, --arch names the model when\n"
    "no config.json is near it), a PEFT LoRA adapter folder (on --base or its base_model_name_or_path), or a\n"
    "llama2.c model file. The tokenizer is the model folder's unless --tokenizer names one (tokenizer.json,\n"
    "a folder with it or with vocab.json + merges.txt, or llama2.c's tokenizer.bin). Greedy by default; a\n"
    "temperature above 0 samples (with --top-k, --top-p and --seed). Generation ends after --max-new-tokens,\n"
    "at the model's end-of-text token (config.json's eos_token_id; llama2.c models also at BOS, as run.c),\n"
    "after a --stop text (left out), or at the model's last position. See docs/generate.md.\n";

int Fail(const absl::Status& st) {
  std::fprintf(stderr, "zt generate: %s\n", std::string(st.message()).c_str());
  const auto c = st.code();
  return c == absl::StatusCode::kInvalidArgument || c == absl::StatusCode::kNotFound ||
                 c == absl::StatusCode::kAlreadyExists || c == absl::StatusCode::kFailedPrecondition
             ? 2
             : 1;
}

absl::StatusOr<std::vector<int32_t>> ParseIds(const std::string& text) {
  std::vector<int32_t> ids;
  for (absl::string_view piece : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    int32_t id = 0;
    if (!absl::SimpleAtoi(piece, &id)) {
      return absl::InvalidArgumentError(absl::StrCat("--prompt-ids: '", piece, "' is not a token id"));
    }
    ids.push_back(id);
  }
  return ids;
}

}  // namespace

int RunGenerateCommand(const std::vector<std::string>& args) {
  Flags flags("zt generate");
  flags.String("model", "", "model folder, export, checkpoint, LoRA adapter folder or llama2.c file");
  flags.String("tokenizer", "", "tokenizer.json, a folder with one (or vocab + merges), or llama2.c's tokenizer.bin");
  flags.String("prompt", "", "the text to continue (encoded with the tokenizer's special tokens, e.g. BOS)");
  flags.String("prompt-ids", "", "the prompt as token ids, comma-separated, instead of --prompt");
  flags.Int("max-new-tokens", 128, "most tokens to generate");
  flags.Double("temperature", 0.0, "0: greedy; above 0: sample from softmax(logits / T)");
  flags.Int("top-k", 0, "sample among the K most likely tokens only (0: all)");
  flags.Double("top-p", 1.0, "sample among the most likely tokens whose probability reaches P (1: all)");
  flags.Int("seed", 1, "the sampler's seed (the same seed, the same text)");
  flags.Repeated("stop", "end the text before this string (may be given several times)");
  flags.String("output", "text", "text: the continuation as it comes; json: one object with ids, text and timings");
  flags.String("tag", "", "the checkpoint tag (default: the one `latest` names)");
  flags.String("arch", "", "a checkpoint's model (a preset name or a model folder) when no config.json is near it");
  flags.String("base", "", "a LoRA adapter's base model (default: its adapter_config.json's)");
  flags.Int("threads", 0, "intra-op threads (0: LibTorch's default)");
  flags.Bool("no-cache", "a full forward over the whole sequence per token (the reference path; slow)");
  flags.Bool("echo", "print the prompt's text before the continuation");
  if (std::optional<int> done = flags.ParseCommandLine(args, kSynopsis, kHelp)) return *done;
  const std::string output = flags.GetString("output");
  if (flags.GetString("model").empty()) {
    std::fprintf(stderr, "zt generate: give --model\n\n%s", flags.Usage(kSynopsis).c_str());
    return 2;
  }
  if (flags.GetString("prompt").empty() == flags.GetString("prompt-ids").empty()) {
    std::fprintf(stderr, "zt generate: give one of --prompt and --prompt-ids\n");
    return 2;
  }
  if (output != "text" && output != "json") {
    return Fail(absl::InvalidArgumentError(absl::StrCat("--output must be text or json, got '", output, "'")));
  }
  if (flags.GetInt("threads") < 0) return Fail(absl::InvalidArgumentError("--threads must be >= 0"));
  if (flags.GetInt("threads") > 0) torch::set_num_threads(static_cast<int>(flags.GetInt("threads")));

  const auto t0 = std::chrono::steady_clock::now();
  generate::ModelSourceOptions so;
  so.tag = flags.GetString("tag");
  so.arch = flags.GetString("arch");
  so.base = flags.GetString("base");
  absl::StatusOr<generate::GenerationModel> g = generate::OpenGenerationModel(flags.GetString("model"), so);
  if (!g.ok()) return Fail(g.status());
  const double load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  std::unique_ptr<data::HfTokenizer> tokenizer;
  const std::string tok_path = flags.WasSet("tokenizer") ? flags.GetString("tokenizer") : g->tokenizer_dir;
  if (!tok_path.empty()) {
    absl::StatusOr<std::unique_ptr<data::HfTokenizer>> t = data::HfTokenizer::Load(tok_path);
    if (!t.ok()) {
      return Fail(absl::Status(
          t.status().code(),
          absl::StrCat(flags.WasSet("tokenizer") ? "--tokenizer: " : "the model's tokenizer: ", t.status().message())));
    }
    tokenizer = std::move(*t);
    if (tokenizer->vocab_size() > g->model->info().vocab_size) {
      return Fail(absl::InvalidArgumentError(absl::StrCat("the tokenizer ", tok_path, " has ", tokenizer->vocab_size(),
                                                          " ids, more than the model's ", g->model->info().vocab_size,
                                                          "; it is another model's")));
    }
  } else if (!flags.GetString("prompt").empty() || output == "text") {
    return Fail(absl::InvalidArgumentError(
        absl::StrCat("no tokenizer: ", flags.GetString("model"),
                     " holds none; pass --tokenizer (for a llama2.c model, its tokenizer.bin)")));
  }
  std::vector<int32_t> prompt;
  if (!flags.GetString("prompt").empty()) {
    absl::StatusOr<std::vector<int32_t>> ids = tokenizer->Encode(flags.GetString("prompt"), true);
    if (!ids.ok()) return Fail(ids.status());
    prompt = std::move(*ids);
  } else {
    absl::StatusOr<std::vector<int32_t>> ids = ParseIds(flags.GetString("prompt-ids"));
    if (!ids.ok()) return Fail(ids.status());
    prompt = std::move(*ids);
  }

  generate::GenerateOptions o;
  o.max_new_tokens = flags.GetInt("max-new-tokens");
  o.sampling.temperature = flags.GetDouble("temperature");
  o.sampling.top_k = flags.GetInt("top-k");
  o.sampling.top_p = flags.GetDouble("top-p");
  o.sampling.seed = static_cast<uint64_t>(flags.GetInt("seed"));
  o.stop = flags.GetRepeated("stop");
  o.stop_ids = g->eos_ids;
  if (tokenizer != nullptr && tokenizer->is_llama2c()) o.stop_ids.push_back(data::Llama2cTokenizer::kBos);
  o.use_cache = !flags.GetBool("no-cache");
  if (tokenizer != nullptr) o.vocab_limit = tokenizer->vocab_size();

  const bool stream = output == "text";
  if (stream && flags.GetBool("echo") && tokenizer != nullptr) {
    absl::StatusOr<std::string> text = tokenizer->Decode(prompt, /*skip_special_tokens=*/true);
    if (text.ok()) std::fputs(text->c_str(), stdout);
  }
  absl::StatusOr<generate::GenerateResult> r = generate::Generate(
      *g->model, prompt, o, generate::DecodeWith(tokenizer.get()), [stream](const std::string& piece) {
        if (!stream) return;
        std::fputs(piece.c_str(), stdout);
        std::fflush(stdout);
      });
  if (!r.ok()) return Fail(r.status());
  const double per_second = r->decode_seconds > 0 ? static_cast<double>(r->decode_steps) / r->decode_seconds : 0.0;
  if (stream) {
    std::fputs("\n", stdout);
    std::fflush(stdout);  // before the summary on stderr
  } else {
    nlohmann::ordered_json j;
    j["model"] = g->description;
    j["prompt_ids"] = prompt;
    j["ids"] = r->ids;
    if (tokenizer != nullptr) j["text"] = r->text;
    j["finish"] = r->finish;
    j["load_seconds"] = load_seconds;
    j["prompt_seconds"] = r->prompt_seconds;
    j["decode_seconds"] = r->decode_seconds;
    j["decode_steps"] = r->decode_steps;
    j["tokens_per_second"] = per_second;
    j["kv_cache"] = o.use_cache;
    std::printf("%s\n", j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    std::fflush(stdout);
  }
  std::fprintf(stderr,
               "zt generate: %zu tokens (finish: %s); prompt %zu tokens in %.3f s, then %.1f tokens/s%s; model: %s "
               "(loaded in %.2f s)%s\n",
               r->ids.size(), r->finish.c_str(), prompt.size(), r->prompt_seconds, per_second,
               o.use_cache ? "" : " without the KV cache", g->description.c_str(), load_seconds,
               tokenizer != nullptr ? absl::StrCat("; tokenizer: ", tokenizer->Describe()).c_str() : "");
  return 0;
}

}  // namespace zt::cli
