#include "train/train_data.h"

#include <torch/torch.h>

#include <memory>
#include <optional>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "data/classify.h"
#include "data/image_dataset.h"
#include "data/packing.h"
#include "data/supervised.h"
#include "data/text_corpus.h"
#include "data/token_dataset.h"
#include "data/token_file.h"
#include "data/tokenize_corpus.h"
#include "template/chat_template.h"
#include "tokenizer/hf_tokenizer.h"
#include "train/job/data_checks.h"
#include "util/status.h"
#include "util/strings.h"

namespace zt::train {
namespace {

// Token windows for language models.
class TokenData final : public TrainData {
 public:
  TokenData(data::TokenDataset train, std::optional<data::TokenDataset> eval, std::string description)
      : train_(std::move(train)), eval_(std::move(eval)), description_(std::move(description)) {}

  int64_t size(Split s) const override { return s == Split::kTrain ? train_.size() : (eval_ ? eval_->size() : 0); }
  int64_t items_per_sample() const override { return train_.seq_len(); }
  const char* items_name() const override { return "tok"; }
  void Batch(Split s, const std::vector<int64_t>& indices, at::Tensor* input, at::Tensor* target,
             at::Tensor* mask) const override {
    *mask = at::Tensor();
    const data::TokenDataset& d = s == Split::kTrain ? train_ : *eval_;
    const int64_t b = static_cast<int64_t>(indices.size());
    *input = at::empty({b, d.seq_len()}, at::kLong);
    *target = at::empty({b, d.seq_len()}, at::kLong);
    d.FillBatch(indices, input->data_ptr<int64_t>(), target->data_ptr<int64_t>());
  }
  std::string Describe() const override { return description_; }

 private:
  data::TokenDataset train_;
  std::optional<data::TokenDataset> eval_;
  std::string description_;
};

// Images and labels for classifiers.
class ImageData final : public TrainData {
 public:
  ImageData(data::ImageDataset train, data::ImageDataset eval, std::string description)
      : train_(std::move(train)), eval_(std::move(eval)), description_(std::move(description)) {}

  int64_t size(Split s) const override { return s == Split::kTrain ? train_.size() : eval_.size(); }
  int64_t items_per_sample() const override { return 1; }
  const char* items_name() const override { return "samples"; }
  void Batch(Split s, const std::vector<int64_t>& indices, at::Tensor* input, at::Tensor* target,
             at::Tensor* mask) const override {
    *mask = at::Tensor();
    const data::ImageDataset& d = s == Split::kTrain ? train_ : eval_;
    const int64_t b = static_cast<int64_t>(indices.size());
    *input = at::empty({b, 1, d.rows(), d.cols()}, at::kFloat);
    *target = at::empty({b}, at::kLong);
    d.FillBatch(indices, input->data_ptr<float>(), target->data_ptr<int64_t>());
  }
  std::string Describe() const override { return description_; }

 private:
  data::ImageDataset train_, eval_;
  std::string description_;
};

// Supervised examples (data/supervised.h), the loss on the completions:
// one per sample, right-padded; or packed (data/packing.h), several per
// sample with their document ids as the attention mask.
class SupervisedData final : public TrainData {
 public:
  // `packed_train` / `packed_eval`: PackExamples' samples when packing.
  SupervisedData(std::vector<data::SupervisedExample> train, std::vector<data::SupervisedExample> eval, int64_t seq_len,
                 int32_t pad, bool packing, std::vector<data::PackedSample> packed_train,
                 std::vector<data::PackedSample> packed_eval, std::string description)
      : train_(std::move(train)),
        eval_(std::move(eval)),
        seq_len_(seq_len),
        pad_(pad),
        packing_(packing),
        packed_train_(std::move(packed_train)),
        packed_eval_(std::move(packed_eval)),
        description_(std::move(description)) {}

  int64_t size(Split s) const override {
    if (packing_) return static_cast<int64_t>((s == Split::kTrain ? packed_train_ : packed_eval_).size());
    return static_cast<int64_t>((s == Split::kTrain ? train_ : eval_).size());
  }
  int64_t items_per_sample() const override { return seq_len_; }
  const char* items_name() const override { return "tok"; }
  void Batch(Split s, const std::vector<int64_t>& indices, at::Tensor* input, at::Tensor* target,
             at::Tensor* mask) const override {
    *mask = at::Tensor();
    const auto& d = s == Split::kTrain ? train_ : eval_;
    const int64_t b = static_cast<int64_t>(indices.size());
    *input = at::empty({b, seq_len_}, at::kLong);
    *target = at::empty({b, seq_len_}, at::kLong);
    if (packing_) {
      const auto& packed = s == Split::kTrain ? packed_train_ : packed_eval_;
      *mask = at::empty({b, seq_len_}, at::kLong);
      for (int64_t i = 0; i < b; ++i) {
        data::PackedWindow(d, packed[static_cast<size_t>(indices[static_cast<size_t>(i)])], seq_len_, pad_,
                           input->data_ptr<int64_t>() + i * seq_len_, target->data_ptr<int64_t>() + i * seq_len_,
                           mask->data_ptr<int64_t>() + i * seq_len_);
      }
      return;
    }
    for (int64_t i = 0; i < b; ++i) {
      data::SupervisedWindow(d[static_cast<size_t>(indices[static_cast<size_t>(i)])], seq_len_, pad_,
                             input->data_ptr<int64_t>() + i * seq_len_, target->data_ptr<int64_t>() + i * seq_len_);
    }
  }
  std::string Describe() const override { return description_; }

 private:
  std::vector<data::SupervisedExample> train_, eval_;
  int64_t seq_len_;
  int32_t pad_;
  bool packing_;
  std::vector<data::PackedSample> packed_train_, packed_eval_;
  std::string description_;
};

absl::StatusOr<std::unique_ptr<data::HfTokenizer>> SupervisedTokenizer(const TrainOptions& o,
                                                                       const std::string& data_path) {
  ZT_ASSIGN_OR_RETURN(const std::string dir, SupervisedTokenizerDir(o, data_path));
  auto tok = data::HfTokenizer::Load(dir);
  if (!tok.ok()) {
    return absl::Status(tok.status().code(),
                        absl::StrCat("the tokenizer for --data ", data_path, ": ", tok.status().message(),
                                     o.tokenizer.empty() ? "; pass --tokenizer DIR" : ""));
  }
  return tok;
}

absl::StatusOr<std::unique_ptr<TrainData>> OpenSupervisedData(const TrainOptions& o, const models::ModelInfo& model,
                                                              int64_t seq_len, const std::string& path) {
  ZT_ASSIGN_OR_RETURN(auto tokenizer, SupervisedTokenizer(o, path));
  if (tokenizer->vocab_size() > model.vocab_size) {
    return absl::InvalidArgumentError(absl::StrCat("the tokenizer has ", tokenizer->vocab_size(), " ids, more than ",
                                                   model.name, "'s vocabulary of ", model.vocab_size));
  }
  const int32_t eot = data::DefaultEndOfText(*tokenizer);
  // Conversations need the folder's chat template; the reader says why it is
  // missing only if the data has any.
  ZT_ASSIGN_OR_RETURN(const std::string tokenizer_dir, SupervisedTokenizerDir(o, path));
  const absl::StatusOr<data::ChatTemplate> chat = data::ChatTemplate::Load(tokenizer_dir);
  ZT_ASSIGN_OR_RETURN(data::SupervisedSet set, data::ReadSupervisedJsonl(*tokenizer, path, eot, &chat));
  std::vector<data::SupervisedExample> train = std::move(set.examples), eval;
  const int64_t n = static_cast<int64_t>(train.size());
  if (!o.eval_data.empty()) {
    if (o.eval_interval >= 0) {
      if (!data::IsSupervisedJsonl(o.eval_data)) {
        return absl::InvalidArgumentError(absl::StrCat("--eval-data ", o.eval_data,
                                                       " must be prompt/completion JSONL "
                                                       "like --data ",
                                                       path));
      }
      ZT_ASSIGN_OR_RETURN(data::SupervisedSet e, data::ReadSupervisedJsonl(*tokenizer, o.eval_data, eot, &chat));
      eval = std::move(e.examples);
    }
  } else {
    const int64_t k = EvalExamples(n, o);
    eval.assign(std::make_move_iterator(train.end() - k), std::make_move_iterator(train.end()));
    train.resize(static_cast<size_t>(n - k));
  }
  // Examples longer than a sample are cut; some then keep no loss.
  int64_t cut = 0, no_loss = 0;
  std::vector<int64_t> in(static_cast<size_t>(seq_len)), tg(static_cast<size_t>(seq_len));
  for (const auto* d : {&train, &eval}) {
    for (const data::SupervisedExample& e : *d) {
      cut += static_cast<int64_t>(e.ids.size()) > seq_len + 1;
      no_loss += data::SupervisedWindow(e, seq_len, 0, in.data(), tg.data()) == 0;
    }
  }
  // "12 prompt/completion (loss on the completion), 30 messages, 4 text".
  std::vector<std::string> kind_parts;
  const int64_t text = n - set.prompt_completion - set.messages;
  if (set.prompt_completion > 0) {
    kind_parts.push_back(absl::StrFormat("%d prompt/completion (loss on the completion)", set.prompt_completion));
  }
  if (set.messages > 0) kind_parts.push_back(absl::StrFormat("%d messages (loss on every token)", set.messages));
  if (text > 0) kind_parts.push_back(absl::StrFormat("%d text (loss on every token)", text));
  const std::string kinds = absl::StrJoin(kind_parts, ", ");
  const std::string chats =
      set.chats == 0 ? ""
                     : absl::StrFormat("; %d rendered with the chat template of %s", set.chats, chat->config_path());
  std::string layout = absl::StrFormat("%d train / %d eval, one per sample of %d tokens, right-padded", train.size(),
                                       eval.size(), seq_len);
  std::vector<data::PackedSample> packed_train, packed_eval;
  if (o.packing) {
    // The samples the packing makes, and how full they are.
    packed_train = data::PackExamples(train, seq_len);
    packed_eval = data::PackExamples(eval, seq_len);
    int64_t tokens = 0;
    for (const auto* d : {&train, &eval}) {
      for (const data::SupervisedExample& e : *d) tokens += data::PackedLength(e, seq_len);
    }
    const int64_t ntrain = static_cast<int64_t>(packed_train.size());
    const int64_t neval = static_cast<int64_t>(packed_eval.size());
    layout = absl::StrFormat(
        "%d train / %d eval, packed into %d / %d samples of %d tokens (%.1f%% tokens, the rest padding), each "
        "example attended and positioned on its own",
        train.size(), eval.size(), ntrain, neval, seq_len,
        100.0 * static_cast<double>(tokens) / static_cast<double>(std::max<int64_t>(1, (ntrain + neval) * seq_len)));
  }
  const std::string description = absl::StrFormat(
      "%s: %d examples (%s%s), %s; tokenizer %s%s", path, n, kinds, chats, layout, tokenizer->Describe(),
      cut > 0 ? absl::StrFormat("; %d examples cut at %d tokens, %d of them keep no loss (raise --seq-len)", cut,
                                seq_len, no_loss)
              : "");
  return std::unique_ptr<TrainData>(
      std::make_unique<SupervisedData>(std::move(train), std::move(eval), seq_len, eot >= 0 ? eot : 0, o.packing,
                                       std::move(packed_train), std::move(packed_eval), description));
}

// Labelled texts for sequence classifiers (data/classify.h): one per
// sample, right-padded, with the attention mask.
class ClassifyData final : public TrainData {
 public:
  ClassifyData(std::vector<data::ClassifyExample> train, std::vector<data::ClassifyExample> eval,
               std::vector<std::string> label_names, data::SpecialTokens specials, int64_t seq_len, int32_t pad,
               std::string description)
      : train_(std::move(train)),
        eval_(std::move(eval)),
        label_names_(std::move(label_names)),
        specials_(std::move(specials)),
        seq_len_(seq_len),
        pad_(pad),
        description_(std::move(description)) {}

  int64_t size(Split s) const override { return static_cast<int64_t>((s == Split::kTrain ? train_ : eval_).size()); }
  int64_t items_per_sample() const override { return 1; }
  const char* items_name() const override { return "samples"; }
  void Batch(Split s, const std::vector<int64_t>& indices, at::Tensor* input, at::Tensor* target,
             at::Tensor* mask) const override {
    const auto& d = s == Split::kTrain ? train_ : eval_;
    const int64_t b = static_cast<int64_t>(indices.size());
    *input = at::empty({b, seq_len_}, at::kLong);
    *mask = at::empty({b, seq_len_}, at::kLong);
    *target = at::empty({b}, at::kLong);
    for (int64_t i = 0; i < b; ++i) {
      const data::ClassifyExample& e = d[static_cast<size_t>(indices[static_cast<size_t>(i)])];
      data::ClassifyWindow(e, specials_, seq_len_, pad_, input->data_ptr<int64_t>() + i * seq_len_,
                           mask->data_ptr<int64_t>() + i * seq_len_);
      target->data_ptr<int64_t>()[i] = e.label;
    }
  }
  std::vector<std::string> label_names() const override { return label_names_; }
  std::string Describe() const override { return description_; }

 private:
  std::vector<data::ClassifyExample> train_, eval_;
  std::vector<std::string> label_names_;
  data::SpecialTokens specials_;
  int64_t seq_len_;
  int32_t pad_;
  std::string description_;
};

// The padding id of a classifier's tokenizer: BERT's [PAD], else <pad>,
// else 0. Masked out, so its value changes no result; it must only be a
// valid id.
int32_t PaddingId(const data::HfTokenizer& tokenizer) {
  for (const char* name : {"[PAD]", "<pad>", "<|endoftext|>"}) {
    if (tokenizer.TokenId(name) >= 0) return tokenizer.TokenId(name);
  }
  return 0;
}

absl::StatusOr<std::unique_ptr<TrainData>> OpenClassifyData(const TrainOptions& o, const models::ModelInfo& model,
                                                            int64_t seq_len) {
  ZT_RETURN_IF_ERROR(CheckClassifyData(o, model));
  const std::string& path = o.data;
  ZT_ASSIGN_OR_RETURN(auto tokenizer, SupervisedTokenizer(o, path));
  if (tokenizer->vocab_size() > model.vocab_size) {
    return absl::InvalidArgumentError(absl::StrCat("the tokenizer has ", tokenizer->vocab_size(), " ids, more than ",
                                                   model.name, "'s vocabulary of ", model.vocab_size));
  }
  ZT_ASSIGN_OR_RETURN(data::SpecialTokens specials, data::FindSpecialTokens(*tokenizer));
  ZT_ASSIGN_OR_RETURN(data::ClassifySet set, data::ReadClassifyJsonl(*tokenizer, path, {}, model.num_classes));
  std::vector<data::ClassifyExample> train = std::move(set.examples), eval;
  const int64_t n = static_cast<int64_t>(train.size());
  if (!o.eval_data.empty()) {
    if (o.eval_interval >= 0) {
      if (!data::IsClassifyJsonl(o.eval_data)) {
        return absl::InvalidArgumentError(
            absl::StrCat("--eval-data ", o.eval_data, " must be text/label JSONL like --data ", path));
      }
      ZT_ASSIGN_OR_RETURN(data::ClassifySet e,
                          data::ReadClassifyJsonl(*tokenizer, o.eval_data, set.label_names, model.num_classes));
      if (e.label_names.empty() != set.label_names.empty()) {
        return absl::InvalidArgumentError(absl::StrCat("--eval-data ", o.eval_data, " and --data ", path,
                                                       " use different kinds of labels (ids and names)"));
      }
      eval = std::move(e.examples);
    }
  } else {
    const int64_t k = EvalExamples(n, o);
    eval.assign(std::make_move_iterator(train.end() - k), std::make_move_iterator(train.end()));
    train.resize(static_cast<size_t>(n - k));
  }
  const int64_t extra = static_cast<int64_t>(specials.prefix.size() + specials.suffix.size());
  if (seq_len <= 0) {
    int64_t longest = 0;
    for (const auto* d : {&train, &eval}) {
      for (const data::ClassifyExample& e : *d) longest = std::max<int64_t>(longest, e.ids.size());
    }
    seq_len = std::min(model.max_seq_len, longest + extra);
  }
  if (seq_len <= extra) {
    return absl::InvalidArgumentError(absl::StrCat("--seq-len ", seq_len, " leaves no room for text besides the ",
                                                   extra, " special tokens; raise it"));
  }
  int64_t cut = 0;
  std::vector<int64_t> counts(static_cast<size_t>(model.num_classes), 0);
  for (const auto* d : {&train, &eval}) {
    for (const data::ClassifyExample& e : *d) cut += static_cast<int64_t>(e.ids.size()) + extra > seq_len;
  }
  for (const data::ClassifyExample& e : train) ++counts[static_cast<size_t>(e.label)];
  std::vector<std::string> per_class;
  for (size_t c = 0; c < counts.size(); ++c) {
    per_class.push_back(
        absl::StrCat(set.label_names.empty() ? std::to_string(c) : set.label_names[c], ": ", counts[c]));
  }
  const std::string description = absl::StrFormat(
      "%s: %d labelled texts, %d train / %d eval, %d classes (train: %s), one per sample of %d tokens, "
      "right-padded with an attention mask; tokenizer %s%s",
      path, n, train.size(), eval.size(), model.num_classes, absl::StrJoin(per_class, ", "), seq_len,
      tokenizer->Describe(),
      cut > 0 ? absl::StrFormat("; %d texts cut at %d tokens (raise --seq-len)", cut, seq_len) : "");
  return std::unique_ptr<TrainData>(std::make_unique<ClassifyData>(std::move(train), std::move(eval),
                                                                   std::move(set.label_names), std::move(specials),
                                                                   seq_len, PaddingId(*tokenizer), description));
}

// A token source from a path: a .bin token file, or text (file or directory).
absl::StatusOr<std::shared_ptr<const data::TokenSource>> OpenTokens(const std::string& path, const TrainOptions& o,
                                                                    int64_t vocab, std::string* what) {
  if (IsTokenFile(path)) {
    ZT_ASSIGN_OR_RETURN(data::TokenDType dtype, data::ParseTokenDType(o.token_dtype));
    ZT_ASSIGN_OR_RETURN(data::TokenFile file, data::OpenTokenFile(path, dtype));
    ZT_RETURN_IF_ERROR(file.CheckVocab(vocab));
    *what = absl::StrCat(path, " (", data::TokenDTypeName(file.dtype()), file.has_llmc_header() ? ", llm.c header" : "",
                         ")");
    return std::shared_ptr<const data::TokenSource>(std::make_shared<data::TokenFile>(std::move(file)));
  }
  ZT_RETURN_IF_ERROR(CheckByteVocabulary(vocab));
  ZT_ASSIGN_OR_RETURN(std::vector<int32_t> tokens, data::LoadTextCorpus(path));
  *what = absl::StrCat(path, " (text, byte tokens)");
  return std::shared_ptr<const data::TokenSource>(std::make_shared<data::InMemoryTokens>(std::move(tokens)));
}

absl::StatusOr<std::unique_ptr<TrainData>> OpenTokenData(const TrainOptions& o, const models::ModelInfo& model,
                                                         int64_t seq_len) {
  const std::string path = o.data.empty() ? data::kDefaultTextCorpus : o.data;
  ZT_RETURN_IF_ERROR(CheckPacking(o, model, path));
  if (data::IsSupervisedJsonl(path)) return OpenSupervisedData(o, model, seq_len, path);
  std::string what;
  ZT_ASSIGN_OR_RETURN(auto source, OpenTokens(path, o, model.vocab_size, &what));
  std::optional<data::TokenDataset> eval;
  std::string description;
  if (!o.eval_data.empty() && o.eval_interval < 0) {
    ZT_ASSIGN_OR_RETURN(data::TokenDataset train, data::TokenDataset::Create(source, seq_len, path));
    description = absl::StrFormat("%s: %s tokens, %d train sequences of %d; eval off (%s not read)", what,
                                  HumanCount(static_cast<double>(source->size())), train.size(), seq_len, o.eval_data);
    return std::unique_ptr<TrainData>(std::make_unique<TokenData>(std::move(train), std::nullopt, description));
  }
  if (!o.eval_data.empty()) {
    ZT_ASSIGN_OR_RETURN(data::TokenDataset train, data::TokenDataset::Create(source, seq_len, path));
    std::string eval_what;
    ZT_ASSIGN_OR_RETURN(auto eval_source, OpenTokens(o.eval_data, o, model.vocab_size, &eval_what));
    ZT_ASSIGN_OR_RETURN(data::TokenDataset e, data::TokenDataset::Create(eval_source, seq_len, o.eval_data));
    description =
        absl::StrFormat("%s: %s tokens, %d train sequences of %d; eval %s: %d sequences", what,
                        HumanCount(static_cast<double>(source->size())), train.size(), seq_len, eval_what, e.size());
    return std::unique_ptr<TrainData>(std::make_unique<TokenData>(std::move(train), std::move(e), description));
  }
  ZT_ASSIGN_OR_RETURN(data::TrainEvalSplit split, data::SplitTrainEval(source->size(), o.eval_fraction, seq_len));
  ZT_ASSIGN_OR_RETURN(data::TokenDataset train, data::TokenDataset::Create(source, split.train, seq_len,
                                                                           absl::StrCat("training split of ", path)));
  if (split.eval.size() > 0) {
    ZT_ASSIGN_OR_RETURN(data::TokenDataset e,
                        data::TokenDataset::Create(source, split.eval, seq_len, absl::StrCat("eval split of ", path)));
    eval = std::move(e);
  }
  description =
      absl::StrFormat("%s: %s tokens, %d train / %d eval sequences of %d tokens", what,
                      HumanCount(static_cast<double>(source->size())), train.size(), eval ? eval->size() : 0, seq_len);
  return std::unique_ptr<TrainData>(std::make_unique<TokenData>(std::move(train), std::move(eval), description));
}

absl::StatusOr<std::unique_ptr<TrainData>> OpenImageData(const TrainOptions& o) {
  const std::string dir = o.data.empty() ? data::kFashionMnistDir : o.data;
  ZT_RETURN_IF_ERROR(CheckNoEvalDataForImages(o));
  ZT_ASSIGN_OR_RETURN(data::MnistFiles files, data::ResolveMnistDir(dir));
  ZT_ASSIGN_OR_RETURN(data::ImageDataset train, data::LoadIdxImages(files.train_images, files.train_labels));
  data::ImageDataset eval;
  std::string description;
  if (o.eval_interval < 0) {
    description = absl::StrFormat("%s: %d train images of %dx%d, 10 classes; eval off (test set not read)", dir,
                                  train.size(), train.rows(), train.cols());
  } else {
    ZT_ASSIGN_OR_RETURN(eval, data::LoadIdxImages(files.test_images, files.test_labels));
    description = absl::StrFormat("%s: %d train / %d test images of %dx%d, 10 classes", dir, train.size(), eval.size(),
                                  train.rows(), train.cols());
  }
  return std::unique_ptr<TrainData>(std::make_unique<ImageData>(std::move(train), std::move(eval), description));
}

}  // namespace

at::Tensor LanguageModelLoss(const at::Tensor& logits, const at::Tensor& target) {
  const at::Tensor flat = target.reshape({-1});
  at::Tensor losses = torch::nn::functional::cross_entropy(
      logits.reshape({-1, logits.size(-1)}), flat,
      torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kNone).ignore_index(data::kIgnoreTarget));
  return losses.sum() / flat.ne(data::kIgnoreTarget).sum().clamp_min(1);
}

at::Tensor TaskLoss(models::Task task, const at::Tensor& output, const at::Tensor& target) {
  switch (task) {
    case models::Task::kLanguageModel: return LanguageModelLoss(output, target);
    case models::Task::kImageClassification: return torch::nll_loss(output, target);
    case models::Task::kSequenceClassification: return torch::nn::functional::cross_entropy(output, target);
  }
  return {};
}

absl::StatusOr<std::unique_ptr<TrainData>> OpenTrainData(const TrainOptions& options, const models::ModelInfo& model,
                                                         int64_t seq_len) {
  ZT_RETURN_IF_ERROR(CheckTask(options, model));
  if (model.task == models::Task::kImageClassification) {
    ZT_ASSIGN_OR_RETURN(auto d, OpenImageData(options));
    if (d->size(Split::kTrain) > 0) {
      at::Tensor x, y, mask;
      d->Batch(Split::kTrain, {0}, &x, &y, &mask);
      ZT_RETURN_IF_ERROR(CheckImageSize(model, x.size(2), x.size(3)));
    }
    return d;
  }
  if (model.task == models::Task::kSequenceClassification) return OpenClassifyData(options, model, seq_len);
  return OpenTokenData(options, model, seq_len);
}

}  // namespace zt::train
