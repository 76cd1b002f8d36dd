// Optimizer parameter groups: which trainable parameters get which
// optimizer settings (torch.optim's param_groups, what HF Trainer and most
// fine-tuning recipes pass to deepspeed.initialize as model_parameters).
// No LibTorch: the engine resolves names it read from the module.
//
//   zt::EngineOptions options;
//   zt::ParamGroupOptions no_decay;
//   no_decay.name = "no_decay";
//   no_decay.params = {"fc1.bias", "fc2.bias"};
//   no_decay.weight_decay = 0.0;
//   options.param_groups = {no_decay};  // every other parameter: the config's settings
//
// Contract of ResolveParamGroups:
//  * Groups keep the order given; trainable parameters named by no group
//    form one more group last ("default"), with the config's settings.
//  * A setting left unset is the config's ("optimizer.params").
//  * A name is a parameter's name as the module registers it (any of a tied
//    parameter's names); a frozen parameter's name is accepted and has no
//    effect (it has no gradient), as in torch.optim.
//  * Errors (InvalidArgument) name the group and the parameter: a name the
//    model does not have, a parameter in two groups, a group with no
//    trainable parameter, two groups with one name, a per-group lr while a
//    scheduler sets the lr (DeepSpeed's schedulers give every group the same
//    lr, so it would be overwritten).
#pragma once

#include <array>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "config/config.h"

namespace zt {

struct ParamGroupOptions {
  std::string name;                 // shown in messages, logs and checkpoints; "" -> "group <k>"
  std::vector<std::string> params;  // parameter names (torch::nn::Module::named_parameters)
  std::optional<double> lr;         // only without a scheduler
  std::optional<double> weight_decay;
  std::optional<double> eps;
  std::optional<std::array<double, 2>> betas;
};

struct ResolvedParamGroups {
  std::vector<std::string> names;                 // one per group
  std::vector<OptimizerConfig> configs;           // the optimizer each group runs
  std::vector<std::optional<double>> lr;          // a group's own constant lr, where it has one
  std::vector<std::vector<std::string>> members;  // each group's trainable parameters, in model order
  std::vector<int> group_of;                      // per trainable parameter (model order): its group
  size_t size() const { return names.size(); }
};

// `names`: every name the module registers a parameter under, with the
// index of that parameter among the trainable ones in model order, or -1
// for a frozen one. `trainable`: the trainable parameters' names in model
// order (the first name of each). `has_scheduler`: a scheduler sets the lr.
// With no groups given: one group, "default", holding every parameter.
absl::StatusOr<ResolvedParamGroups> ResolveParamGroups(const std::vector<ParamGroupOptions>& groups,
                                                       const std::map<std::string, int>& names,
                                                       const std::vector<std::string>& trainable,
                                                       const OptimizerConfig& base, bool has_scheduler);

// `groups` with group_of indexed by `order` (the names of the trainable
// parameters in another order: stage 3 keeps them by unit). Every name of
// `order` must be a member of some group.
ResolvedParamGroups ReindexParamGroups(const ResolvedParamGroups& groups, const std::vector<std::string>& order);

// One line per group for the ranks to compare and the log: its name,
// settings and members.
std::vector<std::pair<std::string, std::string>> DescribeParamGroups(const ResolvedParamGroups& groups);

}  // namespace zt
