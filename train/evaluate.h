// Evaluation over the whole eval set split across ranks: each sample is
// evaluated by exactly one rank, once, and the sums are reduced so every rank
// gets the same result. Ranks run the same number of equal-size forward
// passes (stage 3 gathers parameters collectively), padding the last ones
// with masked samples that count for nothing.
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "comm/process_group.h"
#include "models/model.h"
#include "train/train_data.h"

namespace zt::train {

struct EvalResult {
  double loss_sum = 0;    // summed per token (LM) or per sample (classifiers)
  double loss_count = 0;  // tokens or samples counted
  double correct = 0;     // classifiers: correct predictions
  int64_t samples = 0;    // samples evaluated over all ranks (= the eval set, or max_batches' worth)
  double loss() const { return loss_count > 0 ? loss_sum / loss_count : 0.0; }
  double accuracy() const { return samples > 0 ? correct / static_cast<double>(samples) : 0.0; }
};

// Collective. max_batches > 0 evaluates only the first max_batches batches of
// each rank's shard (a quick estimate). input_dtype: the model's floating
// dtype for image inputs.
absl::StatusOr<EvalResult> Evaluate(models::Model& model, const TrainData& data, comm::ProcessGroup& group,
                                    int64_t batch_size, int64_t max_batches, at::ScalarType input_dtype);

}  // namespace zt::train
