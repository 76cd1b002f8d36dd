#include "util/strings.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

namespace zt {
namespace {

TEST(HumanBytes, PicksBinaryUnits) {
  EXPECT_EQ(HumanBytes(0), "0 B");
  EXPECT_EQ(HumanBytes(1023), "1023 B");
  EXPECT_EQ(HumanBytes(1536), "1.5 KiB");
  EXPECT_EQ(HumanBytes(3.0 * 1024 * 1024 * 1024), "3 GiB");
}

TEST(ParseCount, TakesTheWaysUsersWriteParameterCounts) {
  int64_t n = 0;
  for (const auto& [text, want] : std::vector<std::pair<std::string, int64_t>>{{"7000000000", 7000000000},
                                                                               {"7e9", 7000000000},
                                                                               {"7.5e9", 7500000000},
                                                                               {"7.5E9", 7500000000},
                                                                               {"7.5B", 7500000000},
                                                                               {"7.5b", 7500000000},
                                                                               {"350M", 350000000},
                                                                               {"124k", 124000},
                                                                               {"1.5T", 1500000000000},
                                                                               {" 42 ", 42},
                                                                               {"1e+3", 1000}}) {
    EXPECT_TRUE(ParseCount(text, &n)) << text;
    EXPECT_EQ(n, want) << text;
  }
  for (const char* bad :
       {"", "B", "1.5", "0", "-5", "+5", "0x10", "inf", "nan", "7.5Q", "1e", "e9", "1e99", "7,5B", "1.2345e3"}) {
    EXPECT_FALSE(ParseCount(bad, &n)) << bad;
  }
}

TEST(JsonNestingDepth, CountsBracketsOutsideStrings) {
  EXPECT_EQ(JsonNestingDepth("1"), 0);
  EXPECT_EQ(JsonNestingDepth(R"({"a": [1, {"b": []}]})"), 4);
  EXPECT_EQ(JsonNestingDepth(R"({"a": "[[[{{{", "b": "\\\"[["})"), 1);
  EXPECT_EQ(JsonNestingDepth(std::string(100000, '[') + std::string(100000, ']')), 100000);
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
