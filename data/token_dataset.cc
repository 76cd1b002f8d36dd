// Token windows for next-token prediction, and the train/eval split.
#include "data/token_dataset.h"

#include <cmath>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "util/status.h"

namespace zt::data {

int64_t NumTokenSamples(int64_t n_tokens, int64_t seq_len) {
  if (seq_len < 1 || n_tokens < seq_len + 1) return 0;
  return (n_tokens - 1) / seq_len;
}

absl::Status ShorterThanOneSequence(const std::string& name, int64_t n_tokens, int64_t seq_len,
                                    const std::string& advice) {
  return absl::InvalidArgumentError(absl::StrCat(name, " of ", n_tokens,
                                                 " tokens is shorter than one sequence of seq_len+1 = ", seq_len + 1,
                                                 " tokens; ", advice));
}

absl::StatusOr<TrainEvalSplit> SplitTrainEval(int64_t n_tokens, double eval_fraction, int64_t seq_len) {
  if (!(eval_fraction >= 0.0 && eval_fraction < 1.0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("eval fraction ", eval_fraction, " is outside [0, 1); use e.g. 0.1, or 0 for no evaluation"));
  }
  if (seq_len < 1) return absl::InvalidArgumentError(absl::StrCat("seq_len ", seq_len, " must be at least 1"));
  const int64_t n_eval = static_cast<int64_t>(std::llround(static_cast<double>(n_tokens) * eval_fraction));
  TrainEvalSplit split;
  split.train = {0, n_tokens - n_eval};
  split.eval = {n_tokens - n_eval, n_tokens};
  if (NumTokenSamples(split.train.size(), seq_len) < 1) {
    return ShorterThanOneSequence(absl::StrCat("training split (", split.train.size(), " of ", n_tokens, " tokens)"),
                                  split.train.size(), seq_len,
                                  "lower --seq-len or the eval fraction, or use more data");
  }
  if (n_eval > 0 && NumTokenSamples(n_eval, seq_len) < 1) {
    return ShorterThanOneSequence(
        absl::StrCat("eval split (", eval_fraction, " of ", n_tokens, " tokens)"), n_eval, seq_len,
        "raise the eval fraction, lower --seq-len, use more data, or set the eval fraction to 0");
  }
  return split;
}

absl::StatusOr<TokenDataset> TokenDataset::Create(std::shared_ptr<const TokenSource> source, TokenRange range,
                                                  int64_t seq_len, const std::string& name) {
  ZT_CHECK(source != nullptr);
  if (seq_len < 1) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": seq_len ", seq_len, " must be at least 1"));
  }
  if (range.begin < 0 || range.end < range.begin || range.end > source->size()) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": token range [", range.begin, ", ", range.end,
                                                   ") is outside the ", source->size(), " tokens"));
  }
  const int64_t n = NumTokenSamples(range.size(), seq_len);
  if (n < 1) return ShorterThanOneSequence(name, range.size(), seq_len, "lower --seq-len or use more data");
  TokenDataset dataset;
  dataset.source_ = std::move(source);
  dataset.range_ = range;
  dataset.seq_len_ = seq_len;
  dataset.num_samples_ = n;
  return dataset;
}

absl::StatusOr<TokenDataset> TokenDataset::Create(std::shared_ptr<const TokenSource> source, int64_t seq_len,
                                                  const std::string& name) {
  ZT_CHECK(source != nullptr);
  const TokenRange all{0, source->size()};
  return Create(std::move(source), all, seq_len, name);
}

void TokenDataset::Fill(int64_t sample, int64_t* input, int64_t* target) const {
  ZT_CHECK(sample >= 0 && sample < num_samples_);
  std::vector<int32_t> window(static_cast<size_t>(seq_len_ + 1));
  source_->Copy(range_.begin + sample * seq_len_, seq_len_ + 1, window.data());
  for (int64_t t = 0; t < seq_len_; ++t) {
    input[t] = window[t];
    target[t] = window[t + 1];
  }
}

void TokenDataset::FillBatch(absl::Span<const int64_t> samples, int64_t* input, int64_t* target) const {
  for (size_t b = 0; b < samples.size(); ++b) {
    Fill(samples[b], input + b * seq_len_, target + b * seq_len_);
  }
}

}  // namespace zt::data
