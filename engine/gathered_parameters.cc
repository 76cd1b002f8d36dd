// Implementation of engine/gathered_parameters.h.
#include "engine/gathered_parameters.h"

#include "absl/strings/str_cat.h"
#include "engine/engine.h"
#include "util/error.h"
#include "util/log.h"

namespace zt {

GatheredParameters::GatheredParameters(Engine& engine, std::optional<int> modifier_rank)
    : engine_(&engine), modifier_rank_(modifier_rank) {
  Acquire({});
}

GatheredParameters::GatheredParameters(Engine& engine, const torch::nn::Module& module,
                                       std::optional<int> modifier_rank)
    : engine_(&engine), modifier_rank_(modifier_rank) {
  std::vector<at::Tensor> params = module.parameters(/*recurse=*/true);
  if (params.empty()) {
    released_ = true;
    return;
  }
  Acquire(params);
}

void GatheredParameters::Acquire(const std::vector<at::Tensor>& params) {
  if (modifier_rank_.has_value() && (*modifier_rank_ < 0 || *modifier_rank_ >= engine_->process_group().size())) {
    throw Error(absl::InvalidArgumentError(absl::StrCat("GatheredParameters: modifier rank ", *modifier_rank_,
                                                        " is outside the group of ", engine_->process_group().size(),
                                                        " ranks")));
  }
  chunks_ = engine_->ChunksOf(params);
  engine_->PinChunks(chunks_);
}

void GatheredParameters::Release() {
  if (released_) return;
  released_ = true;
  engine_->UnpinChunks(chunks_, modifier_rank_);
}

GatheredParameters::~GatheredParameters() {
  try {
    Release();
  } catch (const std::exception& e) {
    ZT_LOG(ERROR) << "GatheredParameters: releasing the gathered parameters failed: " << e.what();
  }
}

}  // namespace zt
