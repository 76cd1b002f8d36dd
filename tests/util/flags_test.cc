#include "cli/flags.h"

#include <gtest/gtest.h>

namespace zt::cli {
namespace {

Flags MakeFlags() {
  Flags f("zt test");
  f.Int("world-size", 1, "ranks");
  f.Double("lr", 1e-3, "learning rate");
  f.String("out", "x", "output");
  f.Bool("print", "print it");
  f.Repeated("set", "override");
  return f;
}

TEST(Flags, ParsesAllForms) {
  Flags f = MakeFlags();
  ASSERT_TRUE(f.Parse({"a.json", "--world-size", "4", "--lr=0.5", "--print", "--set", "a=1", "--set=b=2", "b.json",
                       "--", "cmd", "--print"})
                  .ok());
  EXPECT_EQ(f.GetInt("world-size"), 4);
  EXPECT_DOUBLE_EQ(f.GetDouble("lr"), 0.5);
  EXPECT_EQ(f.GetString("out"), "x");
  EXPECT_TRUE(f.GetBool("print"));
  EXPECT_EQ(f.GetRepeated("set"), (std::vector<std::string>{"a=1", "b=2"}));
  EXPECT_EQ(f.positional(), (std::vector<std::string>{"a.json", "b.json"}));
  EXPECT_EQ(f.rest(), (std::vector<std::string>{"cmd", "--print"}));
  EXPECT_TRUE(f.WasSet("world-size"));
  EXPECT_FALSE(f.WasSet("out"));
}

TEST(Flags, ValueEqualToTheDefaultStillCountsAsGiven) {
  Flags f = MakeFlags();
  ASSERT_TRUE(f.Parse({"--world-size", "1", "--out=x", "--lr", "0.001"}).ok());
  EXPECT_TRUE(f.WasSet("world-size"));
  EXPECT_TRUE(f.WasSet("out"));
  EXPECT_TRUE(f.WasSet("lr"));
  EXPECT_FALSE(f.WasSet("print"));
  EXPECT_FALSE(f.WasSet("set"));
}

TEST(Flags, NumbersMustBeFinite) {
  for (const char* v : {"inf", "-inf", "nan", "1e400"}) {
    Flags f = MakeFlags();
    absl::Status st = f.Parse({"--lr", v});
    ASSERT_FALSE(st.ok()) << v;
    EXPECT_NE(st.message().find(std::string("--lr needs a finite number, got '") + v + "'"), std::string::npos)
        << st.message();
  }
}

TEST(Flags, UnderscoreSpellingAccepted) {
  Flags f = MakeFlags();
  ASSERT_TRUE(f.Parse({"--world_size=3"}).ok());
  EXPECT_EQ(f.GetInt("world-size"), 3);
}

TEST(Flags, UnknownFlagSuggestsNearest) {
  Flags f = MakeFlags();
  absl::Status st = f.Parse({"--wrold-size", "2"});
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("did you mean --world-size"), std::string::npos) << st.message();
}

TEST(Flags, HuggingFaceTrainerNamesPointToOurs) {
  Flags f = MakeFlags();
  absl::Status st = f.Parse({"--learning_rate", "2e-5"});
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("unknown option --learning-rate (a Hugging Face Trainer or DeepSpeed name; here it is "
                              "--lr)"),
            std::string::npos)
      << st.message();
  // Only where this command has the option: none here for --max_steps.
  st = MakeFlags().Parse({"--max_steps", "10"});
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.message().find("Hugging Face"), std::string::npos) << st.message();
}

TEST(Flags, UsageNamesWhatEachValueIsAndNoSentinelDefaults) {
  Flags f = MakeFlags();
  f.Int("stage", -1, "ZeRO stage");
  f.DefaultFromConfig("stage");
  const std::string usage = f.Usage("[options]");
  EXPECT_NE(usage.find("--world-size N"), std::string::npos) << usage;
  EXPECT_NE(usage.find("--lr X"), std::string::npos) << usage;
  EXPECT_NE(usage.find("--set KEY=VALUE"), std::string::npos) << usage;
  EXPECT_NE(usage.find("ZeRO stage (default: the config's)"), std::string::npos) << usage;
  EXPECT_EQ(usage.find("(default -1)"), std::string::npos) << usage;
}

TEST(Flags, BadNumbersAndMissingValues) {
  EXPECT_FALSE(MakeFlags().Parse({"--world-size", "four"}).ok());
  EXPECT_FALSE(MakeFlags().Parse({"--lr", "1e-3x"}).ok());
  EXPECT_FALSE(MakeFlags().Parse({"--out"}).ok());
  EXPECT_FALSE(MakeFlags().Parse({"--print=maybe"}).ok());
}

TEST(ModelSets, KeyEqualsIntegerLaterWins) {
  auto sets = ParseModelSets({"n_layer=6", "n_embd=128", "n_layer=4", "bias=-1"});
  ASSERT_TRUE(sets.ok()) << sets.status();
  EXPECT_EQ(*sets, (std::map<std::string, int64_t>{{"bias", -1}, {"n_embd", 128}, {"n_layer", 4}}));
  EXPECT_TRUE(ParseModelSets({}).ok());
  for (const char* bad : {"n_layer", "n_layer=", "=4", "n_layer=4.5", "n_layer=four"}) {
    auto st = ParseModelSets({"n_embd=64", bad});
    ASSERT_FALSE(st.ok()) << bad;
    EXPECT_NE(st.status().message().find(std::string("--model-set ") + bad + ": expected KEY=INTEGER"),
              std::string::npos)
        << st.status();
  }
}

}  // namespace
}  // namespace zt::cli
