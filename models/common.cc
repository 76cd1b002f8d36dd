// Implementation of models/common.h.
#include "models/common.h"

#include <torch/torch.h>

#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "util/error.h"

namespace zt::models {

at::Tensor Model::ForwardMasked(const at::Tensor& input, const at::Tensor& attention_mask) {
  if (attention_mask.defined()) {
    throw Error(absl::InvalidArgumentError(
        absl::StrCat("model ", info().name,
                     " takes no attention mask (sequence classifiers take one, causal language models document ids)")));
  }
  return Forward(input);
}

at::Tensor Model::ForwardCached(const at::Tensor&, KvCache&) {
  throw Error(absl::UnimplementedError(
      absl::StrCat("model ", info().name, " does not generate text (only causal language models do)")));
}

void CheckCachedLength(int64_t past, int64_t t, const ModelInfo& info) {
  if (past + t > info.max_seq_len) {
    throw Error(absl::InvalidArgumentError(absl::StrCat("model ", info.name, ": ", past, " cached positions and ", t,
                                                        " new ones pass the model's ", info.max_seq_len,
                                                        " positions (seq_len); generate fewer tokens")));
  }
}

at::Tensor CheckTokens(const at::Tensor& tokens, const ModelInfo& info) {
  if (!tokens.defined() || tokens.dim() != 2) {
    throw Error(absl::InvalidArgumentError(absl::StrCat(
        "model ", info.name, ": input must be token ids of shape [batch, seq], got ",
        tokens.defined() ? std::to_string(tokens.dim()) + " dimensions" : std::string("an undefined tensor"))));
  }
  if (!at::isIntegralType(tokens.scalar_type(), /*includeBool=*/false)) {
    throw Error(absl::InvalidArgumentError(absl::StrCat("model ", info.name, ": token ids must be integers, got ",
                                                        std::string(c10::toString(tokens.scalar_type())))));
  }
  const int64_t t = tokens.size(1);
  if (t < 1 || t > info.max_seq_len) {
    throw Error(absl::InvalidArgumentError(
        absl::StrCat("model ", info.name, ": sequence length ", t, " is outside 1..", info.max_seq_len,
                     " (the model's seq_len); shorten the sequences or raise the seq_len override")));
  }
  at::Tensor ids = tokens.to(torch::kLong);
  // Out-of-range ids: checked on the CPU only (on a GPU the check would cost a
  // host sync per step; the embedding kernel asserts there instead).
  if (ids.device().is_cpu() && ids.numel() > 0) {
    const int64_t lo = ids.min().item<int64_t>(), hi = ids.max().item<int64_t>();
    if (lo < 0 || hi >= info.vocab_size) {
      throw Error(absl::InvalidArgumentError(
          absl::StrCat("model ", info.name, ": token id ", lo < 0 ? lo : hi, " is outside 0..", info.vocab_size - 1,
                       " (the model's vocab); check the data's tokenizer or raise the vocab override")));
    }
  }
  return ids;
}

CausalLayout MakeCachedCausalLayout(int64_t past, int64_t t, const at::Device& device) {
  const auto longs = torch::TensorOptions().dtype(torch::kLong).device(device);
  const at::Tensor keys = torch::arange(past + t, longs).view({1, past + t});
  const at::Tensor queries = torch::arange(past, past + t, longs).view({t, 1});
  return {keys.le(queries).view({1, 1, t, past + t}), queries.view({1, t})};
}

CausalLayout MakeCausalLayout(int64_t t, const at::Tensor& documents, const at::Device& device) {
  const auto bools = torch::TensorOptions().dtype(torch::kBool).device(device);
  const auto longs = torch::TensorOptions().dtype(torch::kLong).device(device);
  at::Tensor causal = torch::ones({t, t}, bools).tril();
  if (!documents.defined()) return {causal.view({1, 1, t, t}), torch::arange(t, longs).view({1, t})};
  const at::Tensor docs = documents.to(device);
  const at::Tensor same = docs.unsqueeze(2).eq(docs.unsqueeze(1));  // [B, T, T]
  const at::Tensor padding = docs.eq(0);
  at::Tensor allowed = same.logical_and(causal).logical_and(padding.logical_not().unsqueeze(2));
  allowed = allowed.logical_or(torch::eye(t, bools).unsqueeze(0).logical_and(padding.unsqueeze(2)));
  // Position = index - index of the document's first token: a running
  // maximum of the indices where a new document starts.
  const at::Tensor index = torch::arange(t, longs).expand_as(docs);
  at::Tensor starts = docs.ne(torch::cat({torch::full({docs.size(0), 1}, -1, longs), docs.narrow(1, 0, t - 1)}, 1));
  const at::Tensor first = std::get<0>(torch::where(starts, index, torch::zeros_like(index)).cummax(1));
  return {allowed.unsqueeze(1), index - first};
}

at::Tensor CheckDocuments(const at::Tensor& documents, const at::Tensor& tokens, const ModelInfo& info) {
  if (documents.dim() != 2 || documents.sizes() != tokens.sizes() ||
      !at::isIntegralType(documents.scalar_type(), /*includeBool=*/false)) {
    throw Error(absl::InvalidArgumentError(absl::StrCat(
        "model ", info.name, ": the document ids (attention mask) must be integers shaped like the tokens [",
        tokens.size(0), ", ", tokens.size(1), "]")));
  }
  at::Tensor docs = documents.to(torch::kLong);
  if (docs.device().is_cpu() && docs.numel() > 0 && docs.min().item<int64_t>() < 0) {
    throw Error(
        absl::InvalidArgumentError(absl::StrCat("model ", info.name, ": document ids must be >= 0 (0: padding)")));
  }
  return docs;
}

at::Tensor CausalAttention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& allowed,
                           double dropout, bool training) {
  at::Tensor scores = torch::matmul(q, k.transpose(-2, -1)) / std::sqrt(static_cast<double>(q.size(-1)));
  scores = scores.masked_fill(allowed.logical_not(), -std::numeric_limits<double>::infinity());
  at::Tensor probs = torch::softmax(scores, -1, torch::kFloat).to(q.scalar_type());
  if (dropout > 0 && training) probs = torch::dropout(probs, dropout, /*train=*/true);
  return torch::matmul(probs, v);
}

int CheckpointFirst(const std::vector<UnitBase*>& units, int n) {
  int on = 0;
  for (size_t i = 0; i < units.size(); ++i) {
    const bool mark = n <= 0 || static_cast<int64_t>(i) < n;
    units[i]->set_activation_checkpointing(mark);
    on += mark ? 1 : 0;
  }
  return on;
}

}  // namespace zt::models
