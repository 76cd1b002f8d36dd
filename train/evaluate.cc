#include "train/evaluate.h"

#include <torch/torch.h>

#include "absl/strings/str_cat.h"
#include "comm/collective_label.h"
#include "data/sampler.h"
#include "data/supervised.h"
#include "util/status.h"

namespace zt::train {

absl::StatusOr<EvalResult> Evaluate(models::Model& model, const TrainData& data, comm::ProcessGroup& group,
                                    int64_t batch_size, int64_t max_batches, at::ScalarType input_dtype) {
  const int64_t n = data.size(Split::kEval);
  EvalResult result;
  if (n == 0) return result;
  ZT_ASSIGN_OR_RETURN(std::vector<data::EvalBatch> batches, data::EvalShard(n, group.size(), group.rank(), batch_size));
  if (max_batches > 0 && static_cast<int64_t>(batches.size()) > max_batches) batches.resize(max_batches);
  const models::Task task = model.info().task;
  torch::NoGradGuard no_grad;
  const bool was_training = model.module()->is_training();
  model.module()->eval();
  // [loss_sum, loss_count, correct, samples], accumulated in float64.
  at::Tensor sums = at::zeros({4}, at::kDouble);
  for (const data::EvalBatch& b : batches) {
    at::Tensor input, target, mask;
    data.Batch(Split::kEval, b.indices, &input, &target, &mask);
    if (input.is_floating_point()) input = input.to(input_dtype);
    at::Tensor valid = torch::tensor(std::vector<int64_t>(b.valid.begin(), b.valid.end()), at::kLong).to(at::kDouble);
    at::Tensor out = model.ForwardMasked(input, mask).to(at::kFloat);
    at::Tensor per_sample, correct;
    if (task == models::Task::kLanguageModel) {
      const int64_t vocab = out.size(-1);
      // Targets marked kIgnoreTarget (supervised prompts, padding) count
      // neither loss nor tokens.
      at::Tensor losses = torch::nn::functional::cross_entropy(
          out.reshape({-1, vocab}), target.reshape({-1}),
          torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kNone).ignore_index(data::kIgnoreTarget));
      per_sample = losses.reshape(target.sizes()).sum(1).to(at::kDouble);
      sums[1] += (target.ne(data::kIgnoreTarget).sum(1).to(at::kDouble) * valid).sum();
    } else {
      // Images: log-probabilities; sequences: logits.
      per_sample = (task == models::Task::kImageClassification
                        ? torch::nll_loss(out, target, {}, at::Reduction::None)
                        : torch::nn::functional::cross_entropy(
                              out, target, torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kNone)))
                       .to(at::kDouble);
      correct = out.argmax(1).eq(target).to(at::kDouble);
      sums[2] += (correct * valid).sum();
      sums[1] += valid.sum();
    }
    sums[0] += (per_sample * valid).sum();
    sums[3] += valid.sum();
  }
  if (was_training) model.module()->train();
  comm::CollectiveLabel label("the evaluation results");
  std::unique_ptr<comm::Work> work = group.AllReduce(sums, comm::ReduceOp::kSum);
  absl::Status st = work->Wait();
  if (!st.ok()) return absl::Status(st.code(), absl::StrCat("reducing the evaluation results: ", st.message()));
  result.loss_sum = sums[0].item<double>();
  result.loss_count = sums[1].item<double>();
  result.correct = sums[2].item<double>();
  result.samples = static_cast<int64_t>(sums[3].item<double>() + 0.5);
  return result;
}

}  // namespace zt::train
