// The LoRA record a checkpoint carries and PEFT's adapter_config.json:
// round trip through a checkpoint value, named errors for malformed
// records, and the JSON keys PEFT's LoraConfig reads (peft 0.10+:
// peft_type, task_type, r, lora_alpha, lora_dropout, target_modules,
// fan_in_fan_out, bias, ...).
#include "ckpt/lora_record.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace zt {
namespace {

LoraRecord Sample() {
  LoraRecord r;
  r.options.r = 16;
  r.options.alpha = 32;
  r.options.dropout = 0.05;
  r.options.targets = {"q_proj", "v_proj"};
  r.fan_in_fan_out = false;
  return r;
}

TEST(LoraRecord, RoundTripsThroughACheckpointValue) {
  const LoraRecord r = Sample();
  const ckpt::Value v = LoraRecordToValue(r);
  absl::StatusOr<std::optional<LoraRecord>> back = LoraRecordFromValue(&v);
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_TRUE(back->has_value());
  EXPECT_EQ((*back)->options.r, 16);
  EXPECT_EQ((*back)->options.alpha, 32);
  EXPECT_EQ((*back)->options.dropout, 0.05);
  EXPECT_EQ((*back)->options.targets, r.options.targets);
  EXPECT_FALSE((*back)->fan_in_fan_out);
  EXPECT_TRUE((*back)->options.modules_to_save.empty());
  EXPECT_EQ((*back)->task_type, "CAUSAL_LM");
  // A classifier's record keeps its head and task.
  LoraRecord cls = Sample();
  cls.options.targets = {"query", "value"};
  cls.options.modules_to_save = {"classifier"};
  cls.task_type = "SEQ_CLS";
  const ckpt::Value cv = LoraRecordToValue(cls);
  back = LoraRecordFromValue(&cv);
  ASSERT_TRUE(back.ok() && back->has_value()) << back.status();
  EXPECT_EQ((*back)->options.modules_to_save, std::vector<std::string>{"classifier"});
  EXPECT_EQ((*back)->task_type, "SEQ_CLS");
  const nlohmann::json j = nlohmann::json::parse(PeftAdapterConfigJson(cls, ""));
  EXPECT_EQ(j.at("task_type"), "SEQ_CLS");
  EXPECT_EQ(j.at("modules_to_save"), nlohmann::json({"classifier"}));
  // Records written before those fields read as a decoder's without modules to save.
  ckpt::Dict old = LoraRecordToValue(Sample()).AsDict();
  ckpt::Dict trimmed;
  for (const char* k : {"r", "alpha", "dropout", "targets", "fan_in_fan_out"}) trimmed.Set(k, *old.Find(k));
  const ckpt::Value ov(trimmed);
  back = LoraRecordFromValue(&ov);
  ASSERT_TRUE(back.ok() && back->has_value()) << back.status();
  EXPECT_EQ((*back)->task_type, "CAUSAL_LM");
  absl::StatusOr<std::optional<LoraRecord>> none = LoraRecordFromValue(nullptr);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
}

TEST(LoraRecord, MalformedRecordsAreNamed) {
  ckpt::Value v = LoraRecordToValue(Sample());
  ckpt::Dict d = v.AsDict();
  d.Set("r", ckpt::Value(std::string("eight")));
  ckpt::Value bad(d);
  absl::StatusOr<std::optional<LoraRecord>> r = LoraRecordFromValue(&bad);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("\"r\""), std::string::npos) << r.status();
  d.Set("r", ckpt::Value(int64_t{0}));
  ckpt::Value zero(d);
  EXPECT_FALSE(LoraRecordFromValue(&zero).ok());
  ckpt::Value list{ckpt::List{}};
  EXPECT_FALSE(LoraRecordFromValue(&list).ok());
}

TEST(LoraRecord, PeftAdapterConfigHasPeftsKeys) {
  const nlohmann::json j = nlohmann::json::parse(PeftAdapterConfigJson(Sample(), "base/folder"));
  EXPECT_EQ(j.at("peft_type"), "LORA");
  EXPECT_EQ(j.at("task_type"), "CAUSAL_LM");
  EXPECT_EQ(j.at("r"), 16);
  EXPECT_EQ(j.at("lora_alpha"), 32.0);
  EXPECT_EQ(j.at("lora_dropout"), 0.05);
  EXPECT_EQ(j.at("target_modules"), nlohmann::json({"q_proj", "v_proj"}));
  EXPECT_EQ(j.at("fan_in_fan_out"), false);
  EXPECT_EQ(j.at("bias"), "none");
  EXPECT_EQ(j.at("base_model_name_or_path"), "base/folder");
  EXPECT_EQ(j.at("use_rslora"), false);
  EXPECT_TRUE(j.at("modules_to_save").is_null());
  LoraRecord all = Sample();
  all.options.targets = {"all-linear"};
  EXPECT_EQ(nlohmann::json::parse(PeftAdapterConfigJson(all, "")).at("target_modules"), "all-linear");
  EXPECT_TRUE(nlohmann::json::parse(PeftAdapterConfigJson(all, "")).at("base_model_name_or_path").is_null());
}

}  // namespace
}  // namespace zt
