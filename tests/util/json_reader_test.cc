#include "util/json_reader.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "util/limits.h"

namespace zt {
namespace {

TEST(ReadJsonText, KeepsDocumentOrderAndValues) {
  auto j = ReadJsonText(R"({"b": [1, -2, 3.5, "x", null, true], "a": {"z": {}, "y": []}})", "t");
  ASSERT_TRUE(j.ok()) << j.status();
  ASSERT_EQ(j->size(), 2u);
  EXPECT_EQ(j->begin().key(), "b");
  EXPECT_EQ((*j)["b"].dump(), R"([1,-2,3.5,"x",null,true])");
  EXPECT_EQ((*j)["a"].begin().key(), "z");
  // The same as nlohmann's own parser gives.
  const std::string text = R"({"k": [{"a": 1, "b": [2, {"c": "d"}]}, 1e300, -0.0, 18446744073709551615]})";
  auto mine = ReadJsonText(text, "t");
  ASSERT_TRUE(mine.ok());
  EXPECT_EQ(*mine, nlohmann::ordered_json::parse(text));
}

TEST(ReadJsonText, RefusesDuplicateKeysNamingThePath) {
  auto j = ReadJsonText(R"({"a": {"x": 1, "y": [0, {"q": 1, "q": 2}]}})", "file 'f.json'");
  ASSERT_FALSE(j.ok());
  EXPECT_EQ(j.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(j.status().message().find("file 'f.json': key \"q\" appears twice in the object at 'a'.'y'[1]"),
            std::string::npos)
      << j.status();
  EXPECT_FALSE(ReadJsonText(R"({"a": 1, "a": 1})", "t").ok());
}

TEST(ReadJsonText, BoundsDepthAndKeys) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  auto j = ReadJsonText(deep, "t");
  ASSERT_FALSE(j.ok());
  EXPECT_NE(j.status().message().find("nested deeper than 64 levels"), std::string::npos) << j.status();
  JsonReadLimits three;
  three.max_depth = 3;
  EXPECT_TRUE(ReadJsonText(R"({"a": {"b": [1]}})", "t", three).ok());
  EXPECT_FALSE(ReadJsonText(R"({"a": {"b": [[1]]}})", "t", three).ok());

  JsonReadLimits keys;
  keys.max_object_keys = 2;
  keys.object_keys_note = "the limit is 2";
  EXPECT_TRUE(ReadJsonText(R"({"a": 1, "b": {"c": 1, "d": 2}})", "t", keys).ok());
  j = ReadJsonText(R"({"a": 1, "b": {"c": 1, "d": 2, "e": 3}})", "t", keys);
  ASSERT_FALSE(j.ok());
  EXPECT_NE(j.status().message().find("the object at 'b' has more than 2 keys; the limit is 2"), std::string::npos)
      << j.status();
}

TEST(ReadJsonText, IsLinearInAMillionKeys) {
  // nlohmann's ordered_json inserts by a linear search: quadratic here.
  std::string text = "{";
  for (int i = 0; i < 1000000; ++i) absl::StrAppend(&text, i ? "," : "", "\"k", i, "\":", i);
  text += "}";
  auto j = ReadJsonText(text, "t");
  ASSERT_TRUE(j.ok()) << j.status();
  EXPECT_EQ(j->size(), 1000000u);
  EXPECT_EQ((*j)["k999999"], 999999);  // also found at the end
}

TEST(ReadJsonText, NamesTheByteOfASyntaxError) {
  auto j = ReadJsonText(R"({"a": 1,})", "t");
  ASSERT_FALSE(j.ok());
  EXPECT_NE(j.status().message().find("t: not valid JSON at byte"), std::string::npos) << j.status();
  EXPECT_FALSE(ReadJsonText("", "t").ok());
  EXPECT_FALSE(ReadJsonText("{} {}", "t").ok());
  EXPECT_FALSE(ReadJsonText("// c\n{}", "t").ok());
  JsonReadLimits comments;
  comments.allow_comments = true;
  EXPECT_TRUE(ReadJsonText("// c\n{}", "t", comments).ok());
}

TEST(Limits, TableFollowsTheEnumAndTheEnvironmentRaisesThem) {
  const auto& all = AllLimits();
  for (size_t i = 0; i < all.size(); ++i) EXPECT_EQ(static_cast<size_t>(all[i].limit), i) << all[i].env;
  const LimitInfo& t = all[static_cast<size_t>(Limit::kSafetensorsTensors)];
  EXPECT_EQ(LimitValue(Limit::kSafetensorsTensors), t.default_value);
  EXPECT_TRUE(CheckLimitEnvironment().ok());
  setenv("ZT_MAX_SAFETENSORS_TENSORS", "5000000", 1);
  EXPECT_EQ(LimitValue(Limit::kSafetensorsTensors), 5000000);
  EXPECT_NE(LimitNote(Limit::kSafetensorsTensors).find("5000000 (ZT_MAX_SAFETENSORS_TENSORS raises it)"),
            std::string::npos);
  EXPECT_TRUE(CheckLimitEnvironment().ok());
  setenv("ZT_MAX_SAFETENSORS_TENSORS", "0", 1);  // a typo: the default stays, and zt refuses it
  EXPECT_EQ(LimitValue(Limit::kSafetensorsTensors), t.default_value);
  absl::Status st = CheckLimitEnvironment();
  EXPECT_NE(st.message().find("ZT_MAX_SAFETENSORS_TENSORS='0' is below"), std::string::npos) << st;
  setenv("ZT_MAX_SAFETENSORS_TENSORS", "lots", 1);
  EXPECT_FALSE(CheckLimitEnvironment().ok());
  unsetenv("ZT_MAX_SAFETENSORS_TENSORS");
  setenv("ZT_MAX_TENSORS", "5", 1);  // not a known name
  st = CheckLimitEnvironment();
  EXPECT_NE(st.message().find("ZT_MAX_TENSORS is not a limit zerotorch knows"), std::string::npos) << st;
  unsetenv("ZT_MAX_TENSORS");
  EXPECT_TRUE(CheckLimitEnvironment().ok());
}

}  // namespace
}  // namespace zt
