// Implementation of train/job/data_checks.h.
#include "train/job/data_checks.h"

#include <filesystem>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "data/classify.h"
#include "data/idx.h"
#include "data/image_dataset.h"
#include "data/supervised.h"
#include "data/text_corpus.h"
#include "data/token_dataset.h"
#include "data/token_file.h"
#include "tokenizer/byte_tokenizer.h"
#include "tokenizer/hf_tokenizer.h"
#include "util/status.h"

namespace zt::train {

// Examples split off for evaluation from one file: the last
// floor(n * eval_fraction), none with a separate --eval-data.
int64_t EvalExamples(int64_t n, const TrainOptions& o) {
  return o.eval_data.empty() ? static_cast<int64_t>(static_cast<double>(n) * o.eval_fraction) : 0;
}

// The tokenizer folder for JSONL examples: --tokenizer, else the model
// folder zt train starts from (--init-from, --model). Checked by the
// launcher too, before any rank starts.
absl::StatusOr<std::string> SupervisedTokenizerDir(const TrainOptions& o, const std::string& data_path) {
  if (!o.tokenizer.empty()) return o.tokenizer;
  for (const std::string& dir : {o.init_from, o.model}) {
    if (!dir.empty() && std::filesystem::is_directory(dir)) return dir;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--data ", data_path,
                   " holds JSONL examples, which are tokenized with the model's own tokenizer: pass "
                   "--tokenizer DIR (a folder with tokenizer.json, or GPT-2's vocab.json + merges.txt)"));
}

// A --tokenizer's files are found before any rank starts, so that a wrong
// path or a folder without tokenizer files is one error, not one per rank
// (the ranks read and check the files themselves).
absl::Status CheckTokenizerFound(const std::string& dir) {
  absl::StatusOr<data::HfTokenizer::Files> files = data::HfTokenizer::Locate(dir);
  if (files.ok()) return absl::OkStatus();
  return absl::Status(files.status().code(), absl::StrCat("--tokenizer: ", files.status().message()));
}

absl::StatusOr<std::string> SampleTokenizerPath(const TrainOptions& o) {
  if (!o.tokenizer.empty()) return o.tokenizer;
  for (const std::string& dir : {o.init_from, o.model}) {
    if (!dir.empty() && std::filesystem::is_directory(dir) && data::HfTokenizer::Locate(dir).ok()) return dir;
  }
  const std::string path = o.data.empty() ? data::kDefaultTextCorpus : o.data;
  if (!IsTokenFile(path) && !data::IsSupervisedJsonl(path)) return std::string();
  return absl::InvalidArgumentError(absl::StrCat(
      "--sample-prompts: no tokenizer to encode the prompts with (", path,
      " is token ids or JSONL and the model folder holds none); pass --tokenizer (the one the data was made with)"));
}

// --tokenizer with data that no tokenizer reads is refused, not ignored
// (unless --sample-prompts encodes with it).
absl::Status CheckNoTokenizerFor(const TrainOptions& o, const std::string& path, const char* what) {
  if (o.tokenizer.empty() || !o.sample_prompts.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "--tokenizer ", o.tokenizer, " tokenizes JSONL --data (prompt/completion, text, messages, text/label); ", path,
      " is ", what, ": drop --tokenizer, or turn text into tokens first with zt tokenize --tokenizer ", o.tokenizer,
      " --out FILE.bin and train on FILE.bin"));
}

// --task against what the model computes.
absl::Status CheckTask(const TrainOptions& o, const models::ModelInfo& model) {
  const char* own = model.task == models::Task::kLanguageModel            ? "causal-lm"
                    : model.task == models::Task::kSequenceClassification ? "classify"
                                                                          : "image";
  if (o.task == "auto" || o.task == own) return absl::OkStatus();
  const char* models = o.task == std::string("classify")    ? "a bert-* model or a BERT folder"
                       : o.task == std::string("causal-lm") ? "a gpt2-* or llama-* model or an HF decoder folder"
                                                            : "mnist-cnn";
  return absl::InvalidArgumentError(absl::StrCat("--task ", o.task, " needs ", models, "; ", model.name, " is a ", own,
                                                 " model (drop --task or pick another --model)"));
}

// Sequence classifiers read labelled JSONL only; there is no default set.
absl::Status CheckClassifyData(const TrainOptions& o, const models::ModelInfo& model) {
  if (!o.data.empty() && data::IsClassifyJsonl(o.data)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      model.name, " classifies texts: pass --data FILE.jsonl with one {\"text\": ..., \"label\": ...} per line",
      o.data.empty() ? "" : absl::StrCat(" (", o.data, " is not such a file)")));
}

bool IsTokenFile(const std::string& path) {
  return absl::EndsWith(path, ".bin") && std::filesystem::is_regular_file(path);
}

// Text is tokenized by bytes: the model's vocabulary must hold all 256.
absl::Status CheckByteVocabulary(int64_t vocab) {
  if (vocab >= data::kByteVocabSize) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("text data is tokenized by bytes (256 ids) but the model's vocabulary has ", vocab,
                   " entries; pass --model-set vocab=256 or give a pre-tokenized .bin file"));
}

// Image directories carry their own test set.
absl::Status CheckNoEvalDataForImages(const TrainOptions& o) {
  if (o.eval_data.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(
      "--eval-data is for token data; an image directory already holds its test set (t10k-*-ubyte)");
}

// The model takes images of its own size only.
absl::Status CheckImageSize(const models::ModelInfo& model, int64_t rows, int64_t cols) {
  if (rows == model.image_size && cols == model.image_size) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrFormat("%s takes %dx%d images; the data has %dx%d", model.name,
                                                    model.image_size, model.image_size, rows, cols));
}

// --packing applies to JSONL examples of a causal model; token windows are
// full already.
absl::Status CheckPacking(const TrainOptions& o, const models::ModelInfo& model, const std::string& path) {
  if (!o.packing) return absl::OkStatus();
  if (model.task == models::Task::kLanguageModel && data::IsSupervisedJsonl(path) && !data::IsClassifyJsonl(path)) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--packing packs JSONL examples (prompt/completion, text, messages) for a causal language model; ",
                   model.task == models::Task::kLanguageModel
                       ? absl::StrCat(path, " is not such a file (token windows are full already)")
                       : absl::StrCat(model.name, " is not a causal language model"),
                   ": drop --packing"));
}

// The tokens at `path` from its size alone: a .bin token file is mapped,
// not read (the vocabulary check, which reads every token, is the ranks');
// a text corpus counts its files' bytes.
absl::StatusOr<int64_t> CountTokens(const std::string& path, const TrainOptions& o, int64_t vocab) {
  if (IsTokenFile(path)) {
    ZT_ASSIGN_OR_RETURN(data::TokenDType dtype, data::ParseTokenDType(o.token_dtype));
    ZT_ASSIGN_OR_RETURN(data::TokenFile file, data::OpenTokenFile(path, dtype));
    return file.size();
  }
  ZT_RETURN_IF_ERROR(CheckByteVocabulary(vocab));
  return data::CountTextCorpusTokens(path);
}

// The error TokenDataset::Create gives a range too short for one sample.
absl::Status CheckOneSequence(const std::string& name, int64_t tokens, int64_t seq_len) {
  if (data::NumTokenSamples(tokens, seq_len) >= 1) return absl::OkStatus();
  return data::ShorterThanOneSequence(name, tokens, seq_len, "lower --seq-len or use more data");
}

absl::StatusOr<int64_t> CountTrainSamples(const TrainOptions& o, const models::ModelInfo& model, int64_t seq_len) {
  ZT_RETURN_IF_ERROR(CheckTask(o, model));
  if (model.task == models::Task::kImageClassification) {
    const std::string dir = o.data.empty() ? data::kFashionMnistDir : o.data;
    ZT_RETURN_IF_ERROR(CheckNoTokenizerFor(o, dir, "an image directory"));
    ZT_RETURN_IF_ERROR(CheckNoEvalDataForImages(o));
    ZT_ASSIGN_OR_RETURN(data::MnistFiles files, data::ResolveMnistDir(dir));
    ZT_ASSIGN_OR_RETURN(std::vector<int64_t> images, data::ReadIdxDims(files.train_images));
    ZT_ASSIGN_OR_RETURN(std::vector<int64_t> labels, data::ReadIdxDims(files.train_labels));
    if (images.size() != 3 || labels.size() != 1 || images[0] != labels[0]) {
      // The full reader's errors say which; it runs on the ranks anyway.
      ZT_RETURN_IF_ERROR(data::LoadIdxImages(files.train_images, files.train_labels).status());
    }
    if (images[0] > 0) ZT_RETURN_IF_ERROR(CheckImageSize(model, images[1], images[2]));
    return images[0];
  }
  if (model.task != models::Task::kLanguageModel) {
    ZT_RETURN_IF_ERROR(CheckPacking(o, model, o.data));
  }
  if (model.task == models::Task::kSequenceClassification) {
    ZT_RETURN_IF_ERROR(CheckClassifyData(o, model));
    ZT_ASSIGN_OR_RETURN(const std::string tokenizer, SupervisedTokenizerDir(o, o.data));
    if (!o.tokenizer.empty()) ZT_RETURN_IF_ERROR(CheckTokenizerFound(tokenizer));
    ZT_ASSIGN_OR_RETURN(const int64_t n, data::CountJsonlExamples(o.data));
    return n - EvalExamples(n, o);
  }
  const std::string path = o.data.empty() ? data::kDefaultTextCorpus : o.data;
  ZT_RETURN_IF_ERROR(CheckPacking(o, model, path));
  if (data::IsSupervisedJsonl(path)) {
    ZT_ASSIGN_OR_RETURN(const std::string tokenizer, SupervisedTokenizerDir(o, path));
    if (!o.tokenizer.empty()) ZT_RETURN_IF_ERROR(CheckTokenizerFound(tokenizer));
    ZT_ASSIGN_OR_RETURN(const int64_t n, data::CountJsonlExamples(path));
    // Packed, this is an upper bound: how many samples the examples fill
    // needs their tokens, which only the ranks count (and check).
    return n - EvalExamples(n, o);
  }
  ZT_RETURN_IF_ERROR(CheckNoTokenizerFor(
      o, path, IsTokenFile(path) ? "a file of token ids" : "a text corpus, tokenized by bytes (256 ids)"));
  ZT_ASSIGN_OR_RETURN(const int64_t tokens, CountTokens(path, o, model.vocab_size));
  data::TokenRange train{0, tokens};
  if (o.eval_data.empty()) {
    ZT_ASSIGN_OR_RETURN(data::TrainEvalSplit split, data::SplitTrainEval(tokens, o.eval_fraction, seq_len));
    train = split.train;
  } else if (o.eval_interval >= 0) {
    ZT_ASSIGN_OR_RETURN(const int64_t eval_tokens, CountTokens(o.eval_data, o, model.vocab_size));
    ZT_RETURN_IF_ERROR(CheckOneSequence(o.eval_data, eval_tokens, seq_len));
  }
  ZT_RETURN_IF_ERROR(CheckOneSequence(path, train.size(), seq_len));
  return data::NumTokenSamples(train.size(), seq_len);
}

}  // namespace zt::train
