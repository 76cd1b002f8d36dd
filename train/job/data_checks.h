// What `zt train` can tell about its data from file headers and sizes alone,
// without decoding it and without LibTorch: the checks the launching `zt`
// runs before any rank starts, and that the ranks' data readers
// (train/train_data.h) run again as they open the data. Errors name the
// file or flag and say what to pass.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "models/catalog/model_info.h"
#include "train/job/train_options.h"

namespace zt::train {

// Examples split off for evaluation from one file: the last
// floor(n * eval_fraction), none with a separate --eval-data.
int64_t EvalExamples(int64_t n, const TrainOptions& options);

// The tokenizer folder for JSONL examples: --tokenizer, else the model
// folder zt train starts from (--init-from, --model).
absl::StatusOr<std::string> SupervisedTokenizerDir(const TrainOptions& options, const std::string& data_path);

// The tokenizer --sample-prompts encodes with: --tokenizer, else a model
// folder zt train starts from that holds one (--init-from, --model); ""
// when the data is text read as bytes (the byte tokenizer). InvalidArgument
// when there is none and the data is token ids or JSONL.
absl::StatusOr<std::string> SampleTokenizerPath(const TrainOptions& options);

// --task against what the model computes.
absl::Status CheckTask(const TrainOptions& options, const models::ModelInfo& model);

// Sequence classifiers read labelled JSONL only; there is no default set.
absl::Status CheckClassifyData(const TrainOptions& options, const models::ModelInfo& model);

// A pre-tokenized token file (.bin), as opposed to text.
bool IsTokenFile(const std::string& path);

// Text is tokenized by bytes: the model's vocabulary must hold all 256.
absl::Status CheckByteVocabulary(int64_t vocab);

// Image directories carry their own test set: no --eval-data.
absl::Status CheckNoEvalDataForImages(const TrainOptions& options);

// The model takes images of its own size only.
absl::Status CheckImageSize(const models::ModelInfo& model, int64_t rows, int64_t cols);

// --packing applies to JSONL examples of a causal model.
absl::Status CheckPacking(const TrainOptions& options, const models::ModelInfo& model, const std::string& path);

// The tokens at `path` from its size alone (a .bin file is mapped, not read;
// a text corpus counts its files' bytes).
absl::StatusOr<int64_t> CountTokens(const std::string& path, const TrainOptions& options, int64_t vocab);

// The error a token range too short for one sample of seq_len gives.
absl::Status CheckOneSequence(const std::string& name, int64_t tokens, int64_t seq_len);

// The training samples the ranks' data will hold (OpenTrainData(...)->
// size(Split::kTrain)), from file headers and sizes alone (for packed JSONL
// an upper bound, the examples): so the data is decoded once, by each rank,
// and not first by the launcher. The same errors for missing or malformed
// files (headers), image sizes and short corpora.
absl::StatusOr<int64_t> CountTrainSamples(const TrainOptions& options, const models::ModelInfo& model, int64_t seq_len);

}  // namespace zt::train
