#include "util/strings.h"

#include <gtest/gtest.h>

namespace zt {
namespace {

TEST(HumanBytes, PicksBinaryUnits) {
  EXPECT_EQ(HumanBytes(0), "0 B");
  EXPECT_EQ(HumanBytes(1023), "1023 B");
  EXPECT_EQ(HumanBytes(1536), "1.5 KiB");
  EXPECT_EQ(HumanBytes(3.0 * 1024 * 1024 * 1024), "3 GiB");
}

TEST(EditDistance, Basics) {
  EXPECT_EQ(EditDistance("", ""), 0);
  EXPECT_EQ(EditDistance("stage", "stage"), 0);
  EXPECT_EQ(EditDistance("stgae", "stage"), 2);
  EXPECT_EQ(EditDistance("kitten", "sitting"), 3);
  EXPECT_EQ(EditDistance("", "abc"), 3);
}

TEST(NearestName, SuggestsCloseNamesOnly) {
  std::vector<std::string> keys = {"reduce_bucket_size", "allgather_bucket_size", "stage"};
  EXPECT_EQ(NearestName("reduce_bucket_szie", keys), "reduce_bucket_size");
  EXPECT_EQ(NearestName("Stage", keys), "stage");
  EXPECT_EQ(NearestName("reduce-bucket-size", keys), "reduce_bucket_size");
  EXPECT_EQ(NearestName("completely_unrelated", keys), "");
}

}  // namespace
}  // namespace zt
