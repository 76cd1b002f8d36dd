// Implementation of config/param_groups.h.
#include "config/param_groups.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace zt {
namespace {

std::string Shown(const std::vector<std::string>& names, size_t limit = 3) {
  std::vector<std::string> shown(names.begin(), names.begin() + std::min(names.size(), limit));
  return absl::StrCat(absl::StrJoin(shown, ", "), names.size() > limit ? ", ..." : "");
}

}  // namespace

absl::StatusOr<ResolvedParamGroups> ResolveParamGroups(const std::vector<ParamGroupOptions>& groups,
                                                       const std::map<std::string, int>& names,
                                                       const std::vector<std::string>& trainable,
                                                       const OptimizerConfig& base, bool has_scheduler) {
  ResolvedParamGroups r;
  r.group_of.assign(trainable.size(), -1);
  std::set<std::string> group_names;
  for (size_t k = 0; k < groups.size(); ++k) {
    const ParamGroupOptions& g = groups[k];
    const std::string name = g.name.empty() ? absl::StrCat("group ", k) : g.name;
    const std::string where = absl::StrCat("optimizer param group '", name, "'");
    if (!group_names.insert(name).second || name == "default") {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": ",
                       name == "default" ? "'default' is the name of the group the unnamed parameters form"
                                         : "two groups have this name",
                       "; give each group a name of its own"));
    }
    if (g.lr.has_value() && has_scheduler) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, " sets lr ", *g.lr,
          ", but the config's scheduler sets one lr for every group each step (as DeepSpeed's schedulers do), "
          "so it would be overwritten; drop the group's lr or the \"scheduler\" block"));
    }
    std::vector<std::string> members;
    for (const std::string& p : g.params) {
      auto it = names.find(p);
      if (it == names.end()) {
        return absl::InvalidArgumentError(absl::StrCat(
            where, " names '", p, "', which is not a parameter of this model (its parameters: ", Shown(trainable, 4),
            "; ", trainable.size(), " trainable)"));
      }
      if (it->second < 0) continue;  // frozen: no gradient, nothing to update
      const size_t i = static_cast<size_t>(it->second);
      if (r.group_of[i] == static_cast<int>(k)) continue;  // named twice (a tied alias): once
      if (r.group_of[i] >= 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "parameter '", trainable[i], "' is in two optimizer param groups ('",
            r.names[static_cast<size_t>(r.group_of[i])], "' and '", name, "'); a parameter belongs to one group"));
      }
      r.group_of[i] = static_cast<int>(k);
    }
    OptimizerConfig c = base;
    if (g.lr) c.lr = *g.lr;
    if (g.weight_decay) c.weight_decay = *g.weight_decay;
    if (g.eps) c.eps = *g.eps;
    if (g.betas) c.betas = *g.betas;
    r.names.push_back(name);
    r.configs.push_back(c);
    r.lr.push_back(g.lr);
    r.members.emplace_back();
  }
  bool rest = false;
  for (int k : r.group_of) rest |= k < 0;
  if (rest || r.names.empty()) {
    r.names.push_back("default");
    r.configs.push_back(base);
    r.lr.emplace_back();
    r.members.emplace_back();
    for (int& k : r.group_of) {
      if (k < 0) k = static_cast<int>(r.names.size()) - 1;
    }
  }
  for (size_t i = 0; i < trainable.size(); ++i) r.members[static_cast<size_t>(r.group_of[i])].push_back(trainable[i]);
  for (size_t k = 0; k < r.members.size(); ++k) {
    if (r.members[k].empty() && !trainable.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("optimizer param group '", r.names[k],
                                                     "' holds no trainable parameter; name at least one or "
                                                     "leave the group out"));
    }
  }
  return r;
}

ResolvedParamGroups ReindexParamGroups(const ResolvedParamGroups& groups, const std::vector<std::string>& order) {
  ResolvedParamGroups r = groups;
  std::map<std::string, int> group;
  for (size_t k = 0; k < r.members.size(); ++k) {
    for (const std::string& n : r.members[k]) group[n] = static_cast<int>(k);
  }
  r.group_of.clear();
  for (const std::string& n : order) r.group_of.push_back(group.at(n));
  return r;
}

std::vector<std::pair<std::string, std::string>> DescribeParamGroups(const ResolvedParamGroups& groups) {
  std::vector<std::pair<std::string, std::string>> out;
  for (size_t k = 0; k < groups.size(); ++k) {
    const OptimizerConfig& c = groups.configs[k];
    std::string settings =
        absl::StrCat("weight_decay ", c.weight_decay, ", eps ", c.eps, ", betas [", c.betas[0], ", ", c.betas[1], "]");
    if (groups.lr[k]) absl::StrAppend(&settings, ", lr ", *groups.lr[k]);
    out.emplace_back(absl::StrCat("optimizer param group ", k, " '", groups.names[k], "'"),
                     absl::StrCat(settings, "; ", groups.members[k].size(),
                                  " parameters: ", absl::StrJoin(groups.members[k], ", ")));
  }
  return out;
}

}  // namespace zt
