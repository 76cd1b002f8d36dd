// The samples `zt train` feeds a built-in model, as LibTorch tensors: token
// windows for language models (a text corpus through the byte tokenizer, or a
// pre-tokenized .bin file), images and labels for image classifiers (IDX
// files). Bridges the LibTorch-free readers of data/ to the trainer.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "models/model.h"
#include "train/train_options.h"

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
  // images [B, 1, 28, 28] float32 and labels [B] int64.
  virtual void Batch(Split split, const std::vector<int64_t>& indices, at::Tensor* input, at::Tensor* target) const = 0;
  // One line for the log: where the data came from and how much there is.
  virtual std::string Describe() const = 0;
};

// A language model's training loss: the mean cross-entropy over the targets
// that take loss (data::kIgnoreTarget marks the others: the prompts and the
// padding of supervised examples). A micro-batch without any gives 0 and no
// gradient, not 0 / 0. logits [B, T, V], target [B, T].
at::Tensor LanguageModelLoss(const at::Tensor& logits, const at::Tensor& target);

// Opens the data `options` name for `model` (options.data empty: the default
// corpus or Fashion-MNIST). Errors name the file and say what to pass. With
// evaluation off (eval_interval < 0) the eval set is not read (a separate
// --eval-data file, an image directory's test set); the split of a single
// corpus stays the same, so training sees the same samples either way.
absl::StatusOr<std::unique_ptr<TrainData>> OpenTrainData(const TrainOptions& options, const models::ModelInfo& model,
                                                         int64_t seq_len);

// OpenTrainData(...)->size(Split::kTrain) from file headers and sizes alone:
// what `zt train` checks before it starts ranks, so the data is decoded
// once, by each rank, and not first by the launcher. The same errors for
// missing or malformed files (headers), image sizes and short corpora.
absl::StatusOr<int64_t> CountTrainSamples(const TrainOptions& options, const models::ModelInfo& model, int64_t seq_len);

}  // namespace zt::train
