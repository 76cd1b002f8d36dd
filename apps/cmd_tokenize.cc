// `zt tokenize`: text -> a token file for `zt train --data`, with a model's
// own Hugging Face tokenizer (tokenizer/hf_tokenizer.h). Writes llm.c's format
// (header + uint16, or uint32 for vocabularies above 65536 ids), each
// document preceded by the end-of-text token. Exit codes: 0 success, 2 bad
// input, 1 I/O failure.
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "apps/commands.h"
#include "cli/flags.h"
#include "data/token_file.h"
#include "data/tokenize_corpus.h"
#include "tokenizer/hf_tokenizer.h"
#include "util/strings.h"

namespace zt::cli {
namespace {

constexpr const char* kSynopsis =
    "--tokenizer PATH --out FILE.bin [--eot TOKEN|none] [--dtype auto|uint16|uint32] INPUT...";
constexpr const char* kHelp =
    "\nEncodes INPUT (text files, directories of text files: one document per file; .jsonl files: one document\n"
    "per line's \"text\") with the tokenizer at PATH (a tokenizer.json, or a model folder holding tokenizer.json or\n"
    "vocab.json + merges.txt) and writes them as one llm.c token file, each document preceded by the end-of-text\n"
    "token (default: the tokenizer's <|endoftext|>, <|end_of_text|> or </s>). Train on it with\n"
    "`zt train --data FILE.bin --model-set vocab=N`, N at least the tokenizer's vocabulary. See docs/data.md.\n";

int Fail(const absl::Status& st) {
  std::fprintf(stderr, "zt tokenize: %s\n", std::string(st.message()).c_str());
  return st.code() == absl::StatusCode::kInvalidArgument || st.code() == absl::StatusCode::kNotFound ? 2 : 1;
}

}  // namespace

int RunTokenizeCommand(const std::vector<std::string>& args) {
  Flags flags("zt tokenize");
  flags.String("tokenizer", "", "tokenizer.json, or a folder with tokenizer.json or vocab.json + merges.txt");
  flags.String("out", "", "the token file to write (llm.c format)");
  flags.String("eot", "", "the token before each document; \"none\": no separator (default: the tokenizer's own)");
  flags.String("dtype", "auto", "token width: auto (uint16 when every id fits), uint16, uint32");
  if (std::optional<int> done = flags.ParseCommandLine(args, kSynopsis, kHelp)) return *done;
  if (flags.GetString("tokenizer").empty() || flags.GetString("out").empty() || flags.positional().empty()) {
    std::fprintf(stderr, "zt tokenize: give --tokenizer, --out and at least one INPUT\n\n%s",
                 flags.Usage(kSynopsis).c_str());
    return 2;
  }
  const auto t0 = std::chrono::steady_clock::now();
  absl::StatusOr<std::unique_ptr<data::HfTokenizer>> tok = data::HfTokenizer::Load(flags.GetString("tokenizer"));
  if (!tok.ok()) return Fail(tok.status());
  int32_t eot = data::DefaultEndOfText(**tok);
  const std::string eot_name = flags.GetString("eot");
  if (eot_name == "none") {
    eot = -1;
  } else if (!eot_name.empty()) {
    eot = (*tok)->TokenId(eot_name);
    if (eot < 0)
      return Fail(absl::InvalidArgumentError(absl::StrCat("--eot: '", eot_name, "' is not a token of this tokenizer")));
  }
  absl::StatusOr<data::TokenDType> dtype = data::ParseTokenDType(flags.GetString("dtype"));
  if (!dtype.ok()) return Fail(absl::InvalidArgumentError(absl::StrCat("--dtype: ", dtype.status().message())));
  if (*dtype == data::TokenDType::kAuto) {
    *dtype = (*tok)->vocab_size() <= 65536 ? data::TokenDType::kUInt16 : data::TokenDType::kUInt32;
  }
  absl::StatusOr<data::TokenizedCorpus> corpus = data::TokenizeCorpus(**tok, flags.positional(), eot);
  if (!corpus.ok()) return Fail(corpus.status());
  absl::Status st = data::WriteTokenFile(flags.GetString("out"), corpus->tokens, *dtype, /*llmc_header=*/true);
  if (!st.ok()) return Fail(st);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf(
      "zt tokenize: %s tokens from %lld documents (%s of text) -> %s (%s, llm.c header; vocabulary %d) in %.1f s\n",
      HumanCount(static_cast<double>(corpus->tokens.size())).c_str(), static_cast<long long>(corpus->documents),
      HumanBytes(static_cast<double>(corpus->bytes)).c_str(), flags.GetString("out").c_str(),
      data::TokenDTypeName(*dtype), (*tok)->vocab_size(), secs);
  std::printf("tokenizer: %s\n", (*tok)->Describe().c_str());
  return 0;
}

}  // namespace zt::cli
