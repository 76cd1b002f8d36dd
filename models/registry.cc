// Implementation of models/registry.h.
#include "models/registry.h"

#include <torch/torch.h>

#include "absl/strings/str_cat.h"
#include "lora/apply_lora.h"
#include "models/bert.h"
#include "models/gpt2.h"
#include "models/llama.h"
#include "models/mnist_cnn.h"
#include "util/status.h"

namespace zt::models {

absl::StatusOr<std::unique_ptr<Model>> CreateModel(const ModelSpec& spec) {
  ZT_ASSIGN_OR_RETURN(ResolvedModel r, ResolveModel(spec));
  ZT_ASSIGN_OR_RETURN(const LoraOptions lora, ResolveLora(spec));
  torch::manual_seed(spec.seed);
  try {
    // Adapters join each unit as it is built, before construction-time
    // sharding sees it; Finish covers the rest and checks the targets.
    LoraScope scope(lora);
    std::unique_ptr<Model> model;
    if (const auto* g = std::get_if<Gpt2Config>(&r.config)) {
      model = CreateGpt2(r.info, *g);
    } else if (const auto* l = std::get_if<LlamaConfig>(&r.config)) {
      model = CreateLlama(r.info, *l);
    } else if (const auto* b = std::get_if<BertConfig>(&r.config)) {
      model = CreateBert(r.info, *b);
    } else {
      model = CreateMnistCnn(r.info);
    }
    ZT_RETURN_IF_ERROR(scope.Finish(*model->module()).status());
    return model;
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError(absl::StrCat("model ", spec.name, ": out of memory building ",
                                                     FormatCount(r.info.num_params),
                                                     " parameters; pick a smaller model or override its dims"));
  } catch (const c10::Error& e) {
    return absl::InternalError(absl::StrCat("model ", spec.name, ": building it failed: ", e.what_without_backtrace()));
  }
}

}  // namespace zt::models
