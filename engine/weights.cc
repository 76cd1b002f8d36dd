// Implementation of engine/weights.h.
#include "engine/weights.h"

#include <torch/torch.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <set>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ckpt/format/safetensors.h"
#include "engine/tensor_ref.h"
#include "util/status.h"

namespace zt {
namespace {

class SafetensorsSource final : public WeightSource {
 public:
  SafetensorsSource(std::unique_ptr<ckpt::SafetensorsModel> model, std::string path)
      : model_(std::move(model)), path_(std::move(path)) {}
  std::string Describe() const override { return absl::StrCat("'", path_, "'"); }
  std::vector<std::string> names() const override { return model_->names(); }
  std::optional<Info> Find(const std::string& name) const override {
    auto [reader, entry] = model_->Find(name);
    if (entry == nullptr) return std::nullopt;
    return Info{entry->shape, entry->dtype};
  }
  absl::Status Read(const std::string& name, void* dst) const override {
    auto [reader, entry] = model_->Find(name);
    return entry->nbytes > 0 ? reader->Read(*entry, dst) : absl::OkStatus();
  }

 private:
  std::unique_ptr<ckpt::SafetensorsModel> model_;
  std::string path_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<WeightSource>> OpenSafetensorsSource(const std::string& path) {
  ZT_ASSIGN_OR_RETURN(auto model, ckpt::SafetensorsModel::Open(path));
  return std::unique_ptr<WeightSource>(new SafetensorsSource(std::move(model), path));
}

absl::Status LoadSafetensors(torch::nn::Module& module, const std::string& path, bool strict) {
  ZT_ASSIGN_OR_RETURN(auto model, ckpt::SafetensorsModel::Open(path));
  return LoadWeights(module, SafetensorsSource(std::move(model), path), strict);
}

absl::Status LoadWeights(torch::nn::Module& module, const WeightSource& source, bool strict) {
  const std::string where = source.Describe();
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
    if (!source.Find(name)) missing.push_back(name);
  }
  for (const std::string& n : source.names()) {
    if (known.count(n) == 0) unexpected.push_back(n);
  }
  if (!missing.empty()) {
    return absl::NotFoundError(
        absl::StrCat(where, " lacks ", missing.size(), " of the module's tensors: ", absl::StrJoin(missing, ", ")));
  }
  if (strict && !unexpected.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, " holds ", unexpected.size(), " tensors the module does not have: ", absl::StrJoin(unexpected, ", ")));
  }
  // Read everything first, then copy: a bad file changes nothing.
  std::vector<at::Tensor> values;
  for (const auto& [name, t] : targets) {
    const WeightSource::Info info = *source.Find(name);
    if (info.shape != t.sizes().vec()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": '", name, "' has shape [",
                                                     absl::StrJoin(info.shape, ", "), "], the module [",
                                                     absl::StrJoin(t.sizes().vec(), ", "), "]"));
    }
    if (ckpt::IsFloating(info.dtype) != at::isFloatingType(t.scalar_type())) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": '", name, "' is ", std::string(ckpt::DTypeName(info.dtype)), " where the module holds ",
          c10::toString(t.scalar_type()), ": integers and floating point do not convert into weights"));
    }
    at::Tensor v = at::empty(info.shape, at::TensorOptions().dtype(FromCkpt(info.dtype)));
    if (v.numel() > 0) ZT_RETURN_IF_ERROR(source.Read(name, v.data_ptr()));
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
