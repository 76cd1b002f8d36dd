// ResolveParamGroups (config/param_groups.h): which parameter gets which
// settings, and the named errors for groups that cannot be what was meant.
#include "config/param_groups.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

namespace zt {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// fc.weight, fc.bias, ln.weight (trainable), emb.weight frozen, head.weight
// a tied alias of fc.weight.
const std::map<std::string, int> kNames = {
    {"fc.weight", 0}, {"fc.bias", 1}, {"ln.weight", 2}, {"emb.weight", -1}, {"head.weight", 0}};
const std::vector<std::string> kTrainable = {"fc.weight", "fc.bias", "ln.weight"};

OptimizerConfig Base() {
  OptimizerConfig c;
  c.weight_decay = 0.01;
  c.eps = 1e-8;
  c.betas = {0.9, 0.999};
  return c;
}

ParamGroupOptions Group(std::string name, std::vector<std::string> params) {
  ParamGroupOptions g;
  g.name = std::move(name);
  g.params = std::move(params);
  return g;
}

TEST(ParamGroups, NoGroupsIsOneDefaultGroupWithTheConfigsSettings) {
  auto r = ResolveParamGroups({}, kNames, kTrainable, Base(), /*has_scheduler=*/true);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->size(), 1u);
  EXPECT_EQ(r->names[0], "default");
  EXPECT_EQ(r->configs[0].weight_decay, 0.01);
  EXPECT_THAT(r->members[0], ElementsAre("fc.weight", "fc.bias", "ln.weight"));
  EXPECT_THAT(r->group_of, ElementsAre(0, 0, 0));
}

TEST(ParamGroups, GivenGroupsKeepTheirOrderAndTheRestFormsTheLastGroup) {
  ParamGroupOptions no_decay = Group("no_decay", {"ln.weight", "fc.bias"});
  no_decay.weight_decay = 0.0;
  no_decay.betas = std::array<double, 2>{0.8, 0.99};
  auto r = ResolveParamGroups({no_decay}, kNames, kTrainable, Base(), true);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ(r->names[0], "no_decay");
  EXPECT_EQ(r->names[1], "default");
  EXPECT_EQ(r->configs[0].weight_decay, 0.0);
  EXPECT_EQ(r->configs[0].betas[0], 0.8);
  EXPECT_EQ(r->configs[0].eps, 1e-8);  // unset: the config's
  EXPECT_EQ(r->configs[1].weight_decay, 0.01);
  // Members in model order, whatever order the group named them in.
  EXPECT_THAT(r->members[0], ElementsAre("fc.bias", "ln.weight"));
  EXPECT_THAT(r->members[1], ElementsAre("fc.weight"));
  EXPECT_THAT(r->group_of, ElementsAre(1, 0, 0));
}

TEST(ParamGroups, TiedAliasesAndFrozenNamesAreAccepted) {
  // head.weight is fc.weight; emb.weight is frozen (no effect, as in torch.optim).
  auto r =
      ResolveParamGroups({Group("tied", {"head.weight", "fc.weight", "emb.weight"})}, kNames, kTrainable, Base(), true);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(r->members[0], ElementsAre("fc.weight"));
  EXPECT_EQ(r->size(), 2u);
}

TEST(ParamGroups, EveryParameterNamedLeavesNoDefaultGroup) {
  auto r = ResolveParamGroups({Group("a", {"fc.weight"}), Group("b", {"fc.bias", "ln.weight"})}, kNames, kTrainable,
                              Base(), true);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->size(), 2u);
  EXPECT_THAT(r->names, ElementsAre("a", "b"));
}

TEST(ParamGroups, MistakesAreNamed) {
  auto unknown = ResolveParamGroups({Group("x", {"fc.wieght"})}, kNames, kTrainable, Base(), true);
  EXPECT_THAT(unknown.status().message(), HasSubstr("'fc.wieght', which is not a parameter of this model"));
  EXPECT_THAT(unknown.status().message(), HasSubstr("optimizer param group 'x'"));

  auto twice = ResolveParamGroups({Group("a", {"fc.bias"}), Group("b", {"fc.bias"})}, kNames, kTrainable, Base(), true);
  EXPECT_THAT(twice.status().message(), HasSubstr("'fc.bias' is in two optimizer param groups ('a' and 'b')"));

  auto alias_twice =
      ResolveParamGroups({Group("a", {"fc.weight"}), Group("b", {"head.weight"})}, kNames, kTrainable, Base(), true);
  EXPECT_THAT(alias_twice.status().message(), HasSubstr("'fc.weight' is in two optimizer param groups"));

  auto empty = ResolveParamGroups({Group("frozen_only", {"emb.weight"})}, kNames, kTrainable, Base(), true);
  EXPECT_THAT(empty.status().message(), HasSubstr("'frozen_only' holds no trainable parameter"));

  auto same_name =
      ResolveParamGroups({Group("a", {"fc.bias"}), Group("a", {"ln.weight"})}, kNames, kTrainable, Base(), true);
  EXPECT_THAT(same_name.status().message(), HasSubstr("two groups have this name"));

  auto reserved = ResolveParamGroups({Group("default", {"fc.bias"})}, kNames, kTrainable, Base(), true);
  EXPECT_FALSE(reserved.ok());

  ParamGroupOptions lr = Group("fast", {"fc.bias"});
  lr.lr = 0.1;
  auto with_scheduler = ResolveParamGroups({lr}, kNames, kTrainable, Base(), /*has_scheduler=*/true);
  EXPECT_THAT(with_scheduler.status().message(), HasSubstr("sets lr 0.1, but the config's scheduler sets one lr"));
  auto without = ResolveParamGroups({lr}, kNames, kTrainable, Base(), /*has_scheduler=*/false);
  ASSERT_TRUE(without.ok()) << without.status();
  EXPECT_EQ(without->lr[0], 0.1);
  EXPECT_EQ(without->configs[0].lr, 0.1);
  EXPECT_FALSE(without->lr[1].has_value());
}

TEST(ParamGroups, ReindexFollowsAnotherParameterOrder) {
  ParamGroupOptions g = Group("g", {"ln.weight"});
  auto r = ResolveParamGroups({g}, kNames, kTrainable, Base(), true);
  ASSERT_TRUE(r.ok());
  const ResolvedParamGroups by_unit = ReindexParamGroups(*r, {"ln.weight", "fc.weight", "fc.bias"});
  EXPECT_THAT(by_unit.group_of, ElementsAre(0, 1, 1));
}

}  // namespace
}  // namespace zt
