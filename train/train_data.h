// The samples `zt train` feeds a built-in model, as LibTorch tensors: token
// windows for language models (a text corpus through the byte tokenizer, or a
// pre-tokenized .bin file, or JSONL examples), images and labels for image
// classifiers (IDX files), labelled texts for sequence classifiers (JSONL).
// Bridges the LibTorch-free readers of data/ to the trainer.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "models/model.h"
#include "train/job/train_options.h"

namespace zt::train {

enum class Split { kTrain, kEval };

class TrainData {
 public:
  virtual ~TrainData() = default;
  virtual int64_t size(Split split) const = 0;
  // What one sample counts for in throughput: tokens (seq_len) or 1 image.
  virtual int64_t items_per_sample() const = 0;
  virtual const char* items_name() const = 0;  // "tok" or "samples"
  // The samples at `indices` of `split`: LM input/target [B, T] int64;
  // images [B, 1, 28, 28] float32 and labels [B] int64; sequence
  // classification: token ids [B, T] and labels [B] int64, with `mask` the
  // attention mask [B, T] int64 (0 on the padding). Data without padding to
  // mask leaves `mask` undefined.
  virtual void Batch(Split split, const std::vector<int64_t>& indices, at::Tensor* input, at::Tensor* target,
                     at::Tensor* mask) const = 0;
  // Sequence classifiers trained on named labels: the names by class id
  // (what an export's config.json calls them); else empty.
  virtual std::vector<std::string> label_names() const { return {}; }
  // One line for the log: where the data came from and how much there is.
  virtual std::string Describe() const = 0;
};

// A language model's training loss: the mean cross-entropy over the targets
// that take loss (data::kIgnoreTarget marks the others: the prompts and the
// padding of supervised examples). A micro-batch without any gives 0 and no
// gradient, not 0 / 0. logits [B, T, V], target [B, T].
at::Tensor LanguageModelLoss(const at::Tensor& logits, const at::Tensor& target);

// The training loss of a model's output for `task`: LanguageModelLoss;
// images: NLL of the log-probabilities; sequences: cross-entropy of the
// logits [B, classes]. Means over the micro-batch.
at::Tensor TaskLoss(models::Task task, const at::Tensor& output, const at::Tensor& target);

// Opens the data `options` name for `model` (options.data empty: the default
// corpus or Fashion-MNIST; sequence classifiers have no default). For a
// sequence classifier, seq_len 0 means the longest example (special tokens
// included), capped at the model's maximum. Errors name the file and say what to pass. With
// evaluation off (eval_interval < 0) the eval set is not read (a separate
// --eval-data file, an image directory's test set); the split of a single
// corpus stays the same, so training sees the same samples either way.
absl::StatusOr<std::unique_ptr<TrainData>> OpenTrainData(const TrainOptions& options, const models::ModelInfo& model,
                                                         int64_t seq_len);

// OpenTrainData(...)->size(Split::kTrain) from file headers and sizes alone
// (for packed JSONL an upper bound, the examples):
// what `zt train` checks before it starts ranks, so the data is decoded
// once, by each rank, and not first by the launcher. The same errors for
// missing or malformed files (headers), image sizes and short corpora.
absl::StatusOr<int64_t> CountTrainSamples(const TrainOptions& options, const models::ModelInfo& model, int64_t seq_len);

}  // namespace zt::train
