// Implementation of engine/weights.h.
#include "engine/weights.h"

#include <torch/torch.h>

#include <algorithm>
#include <set>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ckpt/format/safetensors.h"
#include "engine/tensor_ref.h"
#include "util/status.h"

namespace zt {
absl::Status LoadSafetensors(torch::nn::Module& module, const std::string& path, bool strict) {
  ZT_ASSIGN_OR_RETURN(auto model, ckpt::SafetensorsModel::Open(path));
  // Each tensor once; later names of a tied tensor are aliases.
  std::vector<std::pair<std::string, at::Tensor>> targets;
  std::set<std::string> known, aliases;
  std::unordered_map<const void*, bool> seen;
  for (const auto& item : module.named_parameters(/*recurse=*/true)) {
    known.insert(item.key());
    if (seen.emplace(item.value().unsafeGetTensorImpl(), true).second) {
      targets.emplace_back(item.key(), item.value());
    } else {
      aliases.insert(item.key());
    }
  }
  for (const auto& item : module.named_buffers(/*recurse=*/true)) {
    known.insert(item.key());
    if (item.value().defined()) targets.emplace_back(item.key(), item.value());
  }
  std::vector<std::string> missing, unexpected;
  for (const auto& [name, t] : targets) {
    if (model->Find(name).second == nullptr) missing.push_back(name);
  }
  for (const std::string& n : model->names()) {
    if (known.count(n) == 0) unexpected.push_back(n);
  }
  if (!missing.empty()) {
    return absl::NotFoundError(absl::StrCat("'", path, "' lacks ", missing.size(),
                                            " of the module's tensors: ", absl::StrJoin(missing, ", ")));
  }
  if (strict && !unexpected.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", path, "' holds ", unexpected.size(),
                     " tensors the module does not have: ", absl::StrJoin(unexpected, ", ")));
  }
  // Read everything first, then copy: a bad file changes nothing.
  std::vector<at::Tensor> values;
  for (const auto& [name, t] : targets) {
    auto [reader, entry] = model->Find(name);
    if (entry->shape != t.sizes().vec()) {
      return absl::InvalidArgumentError(absl::StrCat("'", path, "': '", name, "' has shape [",
                                                     absl::StrJoin(entry->shape, ", "), "], the module [",
                                                     absl::StrJoin(t.sizes().vec(), ", "), "]"));
    }
    if (ckpt::IsFloating(entry->dtype) != at::isFloatingType(t.scalar_type())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "'", path, "': '", name, "' is ", std::string(ckpt::DTypeName(entry->dtype)), " where the module holds ",
          c10::toString(t.scalar_type()), ": integers and floating point do not convert into weights"));
    }
    at::Tensor v = at::empty(entry->shape, at::TensorOptions().dtype(FromCkpt(entry->dtype)));
    if (entry->nbytes > 0) ZT_RETURN_IF_ERROR(reader->Read(*entry, v.data_ptr()));
    values.push_back(v);
  }
  at::NoGradGuard no_grad;
  for (size_t i = 0; i < targets.size(); ++i) {
    at::Tensor t = targets[i].second;
    t.copy_(values[i]);
  }
  return absl::OkStatus();
}

}  // namespace zt
