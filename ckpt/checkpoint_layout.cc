// Implementation of ckpt/checkpoint_layout.h.
#include "ckpt/checkpoint_layout.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"

namespace zt::ckpt {
namespace {

Value IntList(const std::vector<int64_t>& v) {
  List l;
  for (int64_t x : v) l.emplace_back(x);
  return Value(std::move(l));
}

Value GroupValue(const SavedGroup& g) {
  List params;
  for (const SavedParam& p : g.params) {
    Dict d;
    d.Set("name", p.name);
    d.Set("shape", IntList(p.shape));
    d.Set("offset", p.offset);
    d.Set("numel", p.numel);
    params.emplace_back(std::move(d));
  }
  Dict d;
  d.Set("padded_numel", g.padded_numel);
  d.Set("params", std::move(params));
  return Value(std::move(d));
}

absl::StatusOr<const Value*> Get(const Dict& d, const std::string& key, const std::string& where) {
  const Value* v = d.Find(key);
  if (v == nullptr) return absl::DataLossError(absl::StrCat("checkpoint layout: ", where, " has no '", key, "'"));
  return v;
}

absl::StatusOr<int64_t> GetInt(const Dict& d, const std::string& key, const std::string& where) {
  const Value* v = nullptr;
  {
    auto r = Get(d, key, where);
    if (!r.ok()) return r.status();
    v = *r;
  }
  if (!v->is_int()) {
    return absl::DataLossError(
        absl::StrCat("checkpoint layout: ", where, ".", key, " is a ", v->TypeName(), ", expected an int"));
  }
  return v->AsInt();
}

absl::StatusOr<std::vector<SavedGroup>> GroupsFrom(const Value& v, const std::string& where) {
  if (!v.is_list()) return absl::DataLossError(absl::StrCat("checkpoint layout: ", where, " is not a list"));
  std::vector<SavedGroup> groups;
  for (size_t i = 0; i < v.AsList().size(); ++i) {
    const std::string gw = absl::StrCat(where, "[", i, "]");
    const Value& gv = v.AsList()[i];
    if (!gv.is_dict()) return absl::DataLossError(absl::StrCat("checkpoint layout: ", gw, " is not a dict"));
    SavedGroup g;
    auto padded = GetInt(gv.AsDict(), "padded_numel", gw);
    if (!padded.ok()) return padded.status();
    g.padded_numel = *padded;
    auto params = Get(gv.AsDict(), "params", gw);
    if (!params.ok()) return params.status();
    if (!(*params)->is_list())
      return absl::DataLossError(absl::StrCat("checkpoint layout: ", gw, ".params is not a list"));
    for (size_t k = 0; k < (*params)->AsList().size(); ++k) {
      const std::string pw = absl::StrCat(gw, ".params[", k, "]");
      const Value& pv = (*params)->AsList()[k];
      if (!pv.is_dict()) return absl::DataLossError(absl::StrCat("checkpoint layout: ", pw, " is not a dict"));
      SavedParam p;
      auto name = Get(pv.AsDict(), "name", pw);
      if (!name.ok()) return name.status();
      if (!(*name)->is_string())
        return absl::DataLossError(absl::StrCat("checkpoint layout: ", pw, ".name is not a str"));
      p.name = (*name)->AsString();
      auto shape = Get(pv.AsDict(), "shape", pw);
      if (!shape.ok()) return shape.status();
      if (!(*shape)->is_list())
        return absl::DataLossError(absl::StrCat("checkpoint layout: ", pw, ".shape is not a list"));
      for (const Value& s : (*shape)->AsList()) {
        if (!s.is_int()) return absl::DataLossError(absl::StrCat("checkpoint layout: ", pw, ".shape holds a non-int"));
        p.shape.push_back(s.AsInt());
      }
      auto offset = GetInt(pv.AsDict(), "offset", pw);
      auto numel = GetInt(pv.AsDict(), "numel", pw);
      if (!offset.ok()) return offset.status();
      if (!numel.ok()) return numel.status();
      p.offset = *offset;
      p.numel = *numel;
      if (p.offset < 0 || p.numel < 0 || p.offset + p.numel > g.padded_numel) {
        return absl::DataLossError(absl::StrCat("checkpoint layout: ", pw, " ('", p.name, "') lies outside its group"));
      }
      g.numel += p.numel;
      g.params.push_back(std::move(p));
    }
    groups.push_back(std::move(g));
  }
  return groups;
}

}  // namespace

std::pair<int64_t, int64_t> SavedLayout::Range(int64_t padded_numel, int rank) const {
  const int64_t n = world_size;
  if (rule == PartitionRule::kEven) {
    const int64_t shard = padded_numel / n;
    return {shard * rank, shard * (rank + 1)};
  }
  const int64_t shard = (padded_numel + n - 1) / n;
  return {std::min(padded_numel, shard * rank), std::min(padded_numel, shard * (rank + 1))};
}

std::optional<std::pair<size_t, size_t>> SavedLayout::FindTrainable(const std::string& name) const {
  for (size_t g = 0; g < groups.size(); ++g) {
    for (size_t p = 0; p < groups[g].params.size(); ++p) {
      if (groups[g].params[p].name == name) return std::make_pair(g, p);
    }
  }
  return std::nullopt;
}

std::optional<std::pair<size_t, size_t>> SavedLayout::FindFrozen(const std::string& name) const {
  for (size_t g = 0; g < frozen.size(); ++g) {
    for (size_t p = 0; p < frozen[g].params.size(); ++p) {
      if (frozen[g].params[p].name == name) return std::make_pair(g, p);
    }
  }
  return std::nullopt;
}

int64_t SavedLayout::trainable_numel() const {
  int64_t n = 0;
  for (const SavedGroup& g : groups) n += g.numel;
  return n;
}

int64_t SavedLayout::frozen_numel() const {
  int64_t n = 0;
  for (const SavedGroup& g : frozen) n += g.numel;
  return n;
}

Value SavedLayout::ToValue() const {
  Dict d;
  d.Set("format", 1);
  d.Set("stage", stage);
  d.Set("world_size", world_size);
  d.Set("model_dtype", std::string(DTypeName(model_dtype)));
  d.Set("partition_rule", rule == PartitionRule::kEven ? "even" : "ceil");
  List gs, fs;
  for (const SavedGroup& g : groups) gs.push_back(GroupValue(g));
  for (const SavedGroup& g : frozen) fs.push_back(GroupValue(g));
  d.Set("groups", std::move(gs));
  d.Set("frozen_groups", std::move(fs));
  Dict shared_d;
  for (const auto& [alias, name] : shared) shared_d.Set(alias, name);
  d.Set("shared", std::move(shared_d));
  if (!optimizer_groups.empty()) {
    List og;
    for (const auto& names : optimizer_groups) {
      List l;
      for (const std::string& n : names) l.emplace_back(n);
      og.emplace_back(std::move(l));
    }
    d.Set("optimizer_groups", std::move(og));
  }
  if (!optimizer_group_settings.empty()) {
    List gs_list;
    for (const GroupSettings& g : optimizer_group_settings) {
      Dict gd;
      gd.Set("lr", g.lr);
      gd.Set("weight_decay", g.weight_decay);
      gd.Set("eps", g.eps);
      List betas;
      for (double b : g.betas) betas.emplace_back(b);
      gd.Set("betas", std::move(betas));
      gs_list.emplace_back(std::move(gd));
    }
    d.Set("optimizer_group_settings", std::move(gs_list));
  }
  return Value(std::move(d));
}

absl::StatusOr<SavedLayout> SavedLayout::FromValue(const Value& v) {
  if (!v.is_dict()) return absl::DataLossError("checkpoint layout: 'zt_layout' is not a dict");
  const Dict& d = v.AsDict();
  SavedLayout l;
  auto format = GetInt(d, "format", "zt_layout");
  if (!format.ok()) return format.status();
  if (*format != 1) {
    return absl::DataLossError(absl::StrCat("checkpoint layout: format ", *format,
                                            " is newer than this zerotorch understands (1); update zerotorch"));
  }
  auto stage = GetInt(d, "stage", "zt_layout");
  auto world = GetInt(d, "world_size", "zt_layout");
  if (!stage.ok()) return stage.status();
  if (!world.ok()) return world.status();
  if (*stage < 0 || *stage > 3 || *world < 1)
    return absl::DataLossError("checkpoint layout: stage or world_size out of range");
  l.stage = static_cast<int>(*stage);
  l.world_size = static_cast<int>(*world);
  const Value* dt = d.Find("model_dtype");
  if (dt == nullptr || !dt->is_string()) return absl::DataLossError("checkpoint layout: no 'model_dtype'");
  bool found = false;
  for (DType t : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
    if (DTypeName(t) == dt->AsString()) {
      l.model_dtype = t;
      found = true;
    }
  }
  if (!found) return absl::DataLossError(absl::StrCat("checkpoint layout: model_dtype '", dt->AsString(), "' unknown"));
  const Value* rule = d.Find("partition_rule");
  if (rule == nullptr || !rule->is_string() || (rule->AsString() != "even" && rule->AsString() != "ceil")) {
    return absl::DataLossError("checkpoint layout: 'partition_rule' must be \"even\" or \"ceil\"");
  }
  l.rule = rule->AsString() == "even" ? PartitionRule::kEven : PartitionRule::kCeil;
  auto groups = Get(d, "groups", "zt_layout");
  if (!groups.ok()) return groups.status();
  auto g = GroupsFrom(**groups, "zt_layout.groups");
  if (!g.ok()) return g.status();
  l.groups = std::move(*g);
  auto frozen = Get(d, "frozen_groups", "zt_layout");
  if (!frozen.ok()) return frozen.status();
  auto f = GroupsFrom(**frozen, "zt_layout.frozen_groups");
  if (!f.ok()) return f.status();
  l.frozen = std::move(*f);
  if (const Value* s = d.Find("shared"); s != nullptr && s->is_dict()) {
    for (const auto& [k, val] : s->AsDict().items) {
      if (k.is_string() && val.is_string()) l.shared[k.AsString()] = val.AsString();
    }
  }
  if (const Value* og = d.Find("optimizer_groups"); og != nullptr) {
    // Optional; when present, every trainable parameter exactly once.
    std::set<std::string> seen;
    const bool is_list = og->is_list();
    for (const Value& names : is_list ? og->AsList() : List{}) {
      if (!names.is_list()) return absl::DataLossError("checkpoint layout: 'optimizer_groups' holds a non-list");
      l.optimizer_groups.emplace_back();
      for (const Value& n : names.AsList()) {
        if (!n.is_string() || !l.FindTrainable(n.AsString()) || !seen.insert(n.AsString()).second) {
          return absl::DataLossError(
              "checkpoint layout: 'optimizer_groups' names something other than each trainable parameter once");
        }
        l.optimizer_groups.back().push_back(n.AsString());
      }
    }
    size_t trainable = 0;
    for (const SavedGroup& grp : l.groups) trainable += grp.params.size();
    if (!is_list || seen.size() != trainable) {
      return absl::DataLossError(
          "checkpoint layout: 'optimizer_groups' must list every trainable parameter (in param groups)");
    }
  }
  if (const Value* gs = d.Find("optimizer_group_settings"); gs != nullptr) {
    // Optional; when present, one per optimizer group.
    auto number = [](const Value* v, double* out) {
      if (v == nullptr || !(v->is_double() || v->is_int())) return false;
      *out = v->AsDouble();  // an int widens
      return true;
    };
    const bool is_list = gs->is_list();
    if (!is_list || gs->AsList().size() != l.optimizer_groups.size()) {
      return absl::DataLossError(
          "checkpoint layout: 'optimizer_group_settings' must hold one entry per optimizer group");
    }
    for (const Value& g : gs->AsList()) {
      SavedLayout::GroupSettings s;
      const Value* betas = g.is_dict() ? g.AsDict().Find("betas") : nullptr;
      bool ok = g.is_dict() && number(g.AsDict().Find("lr"), &s.lr) &&
                number(g.AsDict().Find("weight_decay"), &s.weight_decay) && number(g.AsDict().Find("eps"), &s.eps) &&
                betas != nullptr && betas->is_list();
      for (const Value& b : ok ? betas->AsList() : List{}) {
        double x = 0;
        ok = ok && number(&b, &x);
        s.betas.push_back(x);
      }
      if (!ok) {
        return absl::DataLossError(
            "checkpoint layout: an 'optimizer_group_settings' entry lacks a number lr, weight_decay, eps or betas");
      }
      l.optimizer_group_settings.push_back(std::move(s));
    }
  }
  for (const SavedGroup& grp : l.groups) {
    if (l.rule == PartitionRule::kEven && grp.padded_numel % l.world_size != 0) {
      return absl::DataLossError("checkpoint layout: a group's padded size does not split evenly over the ranks");
    }
  }
  return l;
}

}  // namespace zt::ckpt
