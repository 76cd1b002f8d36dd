// zero/grad_reducer.h: how the reducer reduces follows from the stage's
// gradient residency, and groups whose gradients live elsewhere are refused
// loudly (reducing the wrong buffers would give no error).
#include "zero/grad_reducer.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <memory>
#include <vector>

#include "comm/single_group.h"
#include "plan/layout.h"
#include "zero/flat_group.h"

namespace zt::zero {
namespace {

TEST(GradResidencyFor, EachStage) {
  EXPECT_EQ(GradResidencyFor(plan::StageSharding(0)), GradResidency::kFullFlat);
  EXPECT_EQ(GradResidencyFor(plan::StageSharding(1)), GradResidency::kFullFlatOwnedSlice);
  EXPECT_EQ(GradResidencyFor(plan::StageSharding(2)), GradResidency::kShardOnly);
  EXPECT_EQ(GradResidencyFor(plan::StageSharding(3)), GradResidency::kShardOnly);
}

// One group of two parameters with full flat gradients, as stage 0 has them.
struct Stage0Group {
  std::vector<at::Tensor> params;
  std::vector<FlatGroup> groups;
  Stage0Group() {
    params = {torch::randn({4, 3}, torch::requires_grad()), torch::randn({5}, torch::requires_grad())};
    std::vector<plan::ParamInfo> infos = {{"w", {4, 3}, 12}, {"b", {5}, 5}};
    const plan::Layout layout = plan::PlanLayout(infos, /*bucket_numel=*/1 << 20, /*partitions=*/1);
    groups.push_back(FlattenParams(layout.groups[0], params, 0, ParamResidency::kFull));
    AttachFlatGrads(groups[0], params);
  }
};

TEST(GradReducer, ReducesStageZeroGradientsWhole) {
  Stage0Group s;
  GradReducerOptions o;
  o.sharding = plan::StageSharding(0);
  GradReducer reducer(s.groups, s.params, std::make_shared<comm::SingleGroup>(), o);
  reducer.BeginBackward(/*reduce=*/true);
  (s.params[0].sum() * 2 + s.params[1].sum()).backward();
  reducer.FinishBackward();
  EXPECT_TRUE(torch::equal(s.groups[0].grads.narrow(0, 0, 12), torch::full({12}, 2.0f)));
  EXPECT_TRUE(torch::equal(s.groups[0].grads.narrow(0, 12, 5), torch::ones({5})));
}

TEST(GradReducerDeathTest, GroupsWhoseGradientsLiveElsewhereThanTheStageKeepsThemAreRefused) {
  Stage0Group s;
  GradReducerOptions o;
  o.sharding = plan::StageSharding(2);  // stage 2 keeps reduced shards only; these groups hold full buffers
  EXPECT_DEATH(GradReducer(s.groups, s.params, std::make_shared<comm::SingleGroup>(), o),
               "do not live where stage 2 keeps them");
}

}  // namespace
}  // namespace zt::zero
