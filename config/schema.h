// The table of config keys: one KeySpec per JSON path with its type, default,
// allowed values, meaning and the zt::Config field it binds to. The parser,
// ConfigToJson, ConfigDifferences and docs/config_reference.md are all driven
// by it, so they cannot drift apart. Rows are defined per section in
// schema_<section>.cc; schema.cc assembles and indexes them.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "config/config.h"
#include "config/json_text.h"

namespace zt::config_internal {

enum class Kind { kBool, kInt, kFloat, kString, kEnum, kFloatPair, kObject };

enum class Support {
  kImplemented,  // bound to a zt::Config field
  kNoEffect,     // accepted so DeepSpeed configs load; documented as having no effect
  kUnsupported,  // a DeepSpeed feature zerotorch lacks: only its "off" value is accepted
};

// Accessors into zt::Config, as plain function pointers so the table is data.
template <typename T>
using FieldRef = T& (*)(Config&);
struct EnumRef {
  int (*get)(const Config&);  // -1: null (an unset optional)
  void (*set)(Config&, int);
};
using Binding =
    std::variant<std::monostate, FieldRef<bool>, FieldRef<int>, FieldRef<int64_t>, FieldRef<double>,
                 FieldRef<std::string>, FieldRef<std::array<double, 2>>, FieldRef<std::optional<int64_t>>, EnumRef>;

// A value computed from the rest of the (already parsed) config.
using Derive = Json (*)(const Config&);

// What only the run knows, for "auto" keys the Hugging Face Trainer fills late
// (transformers' trainer_config_finalize).
enum class RunInput {
  kNone,
  kTrainingSteps,  // the number of optimizer steps (the Trainer's num_training_steps)
  kHiddenSize,     // the model's hidden size (ParseOptions::hidden_size)
};

// How the Hugging Face Trainer fills "auto" in one key (transformers'
// HfTrainerDeepSpeedConfig.trainer_config_process / _finalize), when no
// ParseOptions::auto_values entry gives it.
struct TrainerAuto {
  std::string argument;  // the TrainingArguments field (or model attribute) it comes from
  // The value at the Trainer's default arguments; null when `input` or the
  // row's derive_auto decides it.
  Json default_value;
  RunInput input = RunInput::kNone;
  // kHiddenSize: the Trainer's formula and its text ("hidden_size * hidden_size").
  int64_t (*from_hidden)(int64_t hidden_size) = nullptr;
  bool stage3_only = false;  // the Trainer fills it only at ZeRO stage 3
  std::string rule;          // one line for the reference: how the value is computed
};

struct EnumChoice {
  std::string name;  // canonical spelling
  int value;         // the C++ enum value
};

struct KeySpec {
  std::string path;     // canonical JSON path, e.g. "zero_optimization.offload_param.device"
  std::string section;  // heading in the reference
  Kind kind = Kind::kBool;
  Binding field;
  Support support = Support::kImplemented;
  Json default_value;        // null: no default (see required / derive / nullable)
  std::string default_text;  // reference text when the value alone says too little
  std::string meaning;       // one line for the reference and for messages

  // Numeric bounds (kInt, kFloat, each element of kFloatPair).
  std::optional<double> min, max;
  bool min_exclusive = false, max_exclusive = false;
  std::vector<EnumChoice> choices;  // kEnum; matched case-insensitively
  bool nullable = false;            // JSON null is a valid value
  bool required = false;            // absent is an error (where applies_to matches)
  bool batch = false;               // a batch-size key: resolved by ResolveBatch
  // optimizer.params.* / scheduler.params.*: bit (1 << type) per type the key
  // belongs to; 0 = every type.
  uint32_t applies_to = 0;
  std::vector<std::string> aliases;  // other accepted names in the same object
  Derive derive = nullptr;           // default computed from other keys
  Derive derive_auto = nullptr;      // what "auto" becomes, when not the default
  std::string derive_text;           // e.g. "= optimizer.params.lr"
  std::string unsupported_hint;      // kUnsupported: what to use instead
  // Non-empty: the key is read into Config (API users see the value) but
  // nothing in this build acts on it; says what zerotorch does instead.
  // `zt config check` notes it when a config sets it off its default.
  std::string ignored_reason;
  // Set where the Hugging Face Trainer fills "auto" in this key.
  std::optional<TrainerAuto> trainer_auto;

  // Builder steps, so each row in the table reads as one sentence.
  KeySpec&& Range(std::optional<double> lo, std::optional<double> hi) &&;
  KeySpec&& Above(double lo) &&;    // > lo
  KeySpec&& AtLeast(double lo) &&;  // >= lo
  KeySpec&& Below(double hi) &&;    // < hi
  KeySpec&& AtMost(double hi) &&;   // <= hi
  KeySpec&& Nullable() &&;
  KeySpec&& Required() &&;
  KeySpec&& Alias(std::string name) &&;
  KeySpec&& AppliesTo(std::initializer_list<OptimizerType> types) &&;
  KeySpec&& AppliesTo(std::initializer_list<SchedulerType> types) &&;
  KeySpec&& Derived(Derive fn, std::string text) &&;
  KeySpec&& AutoDerived(Derive fn, std::string text) &&;
  KeySpec&& DefaultText(std::string text) &&;
  KeySpec&& NoEffect() &&;
  KeySpec&& IgnoredHere(std::string reason) &&;
  KeySpec&& Unsupported(std::string hint) &&;
  KeySpec&& FilledByTrainer(TrainerAuto rule) &&;

  // The parent object's path and this key's own name.
  std::string parent() const;
  std::string name() const;
};

// Row constructors. `meaning` is one sentence for the reference.
KeySpec BoolKey(std::string path, Binding field, bool default_value, std::string meaning);
KeySpec IntKey(std::string path, Binding field, Json default_value, std::string meaning);
KeySpec FloatKey(std::string path, Binding field, Json default_value, std::string meaning);
KeySpec StringKey(std::string path, Binding field, Json default_value, std::string meaning);
KeySpec EnumKey(std::string path, Binding field, std::vector<EnumChoice> choices, Json default_value,
                std::string meaning);
KeySpec PairKey(std::string path, Binding field, Json default_value, std::string meaning);
KeySpec ObjectKey(std::string path, std::string meaning);
// A DeepSpeed block zerotorch does not implement: accepted when absent, null,
// false, {}, {"enabled": false} or all-false; anything else is an error.
KeySpec FeatureBlock(std::string path, std::string meaning, std::string hint);

// TrainerAuto rows: a Trainer argument with its default value; a value only
// the run knows; a ZeRO size computed from the model's hidden size.
TrainerAuto TrainerArgument(std::string argument, Json default_value, std::string rule = "");
TrainerAuto TrainerRunValue(RunInput input, std::string argument, std::string rule);
TrainerAuto TrainerHiddenSize(int64_t (*from_hidden)(int64_t), bool stage3_only, std::string rule);

// What fills a key left to run time and how to give it (messages and notes):
// "the Trainer fills it with ...: zt train ...; from C++ ...; zt config check ...".
std::string RunTimeHowTo(const KeySpec& spec);

template <typename E>
std::vector<EnumChoice> Choices(std::initializer_list<E> values) {
  std::vector<EnumChoice> out;
  for (E v : values) out.push_back({std::string(ToString(v)), static_cast<int>(v)});
  return out;
}

// A key spelled the way older DeepSpeed versions (or DeepSpeed's own
// aliases with a deprecation) spelled it.
struct LegacySpelling {
  std::string old_path;  // "zero_optimization.cpu_offload"
  std::string new_path;  // the canonical key it maps to
  std::string mapping;   // how the value maps, for the note and the reference
  bool rename = false;   // true: same value, new name (handled by the table walk)
};

// A reference section: heading, intro paragraph, and the rows that name it.
struct Section {
  std::string title;
  std::string intro;
};

class Schema {
 public:
  static const Schema& Get();

  const std::vector<KeySpec>& keys() const { return keys_; }
  const std::vector<Section>& sections() const { return sections_; }
  const std::vector<LegacySpelling>& legacy() const { return legacy_; }

  // Rows for `key` (canonical name or alias) directly inside the object at
  // canonical path `parent` ("" = top level). Several rows share a key when
  // their defaults differ by optimizer/scheduler type.
  std::vector<const KeySpec*> Find(std::string_view parent, std::string_view key) const;
  // The first row with canonical path `path`.
  const KeySpec* FindPath(std::string_view path) const;
  // Every row directly inside `parent`.
  std::vector<const KeySpec*> Children(std::string_view parent) const;
  const LegacySpelling* FindLegacy(std::string_view parent, std::string_view key) const;

 private:
  Schema();
  std::vector<KeySpec> keys_;
  std::vector<Section> sections_;
  std::vector<LegacySpelling> legacy_;
};

// Section tables (schema_<section>.cc); each appends rows and legacy spellings.
void AddBatchKeys(std::vector<KeySpec>& keys);
void AddTrainingKeys(std::vector<KeySpec>& keys);
void AddPrecisionKeys(std::vector<KeySpec>& keys, std::vector<LegacySpelling>& legacy);
void AddOptimizerKeys(std::vector<KeySpec>& keys);
void AddSchedulerKeys(std::vector<KeySpec>& keys);
void AddZeroKeys(std::vector<KeySpec>& keys, std::vector<LegacySpelling>& legacy);
void AddRuntimeKeys(std::vector<KeySpec>& keys, std::vector<LegacySpelling>& legacy);
void AddUnsupportedKeys(std::vector<KeySpec>& keys);

// For an optimizer or scheduler `type` that DeepSpeed (or torch) knows but
// zerotorch does not implement: the canonical name ("OneBitAdam"); else "".
std::string KnownUnsupportedOptimizer(std::string_view type);
std::string KnownUnsupportedScheduler(std::string_view type);

// Type-mask helpers for applies_to.
uint32_t TypeBit(OptimizerType t);
uint32_t TypeBit(SchedulerType t);

// --- Values: JSON <-> typed fields (value.cc) ---

// Checks a JSON value against the row (type, range, choices) and returns it
// in canonical form (enum names canonical, integral floats as integers).
// The error text is the message part of "<path>: <message>".
absl::StatusOr<Json> CheckValue(const KeySpec& spec, const Json& value);
void SetField(const KeySpec& spec, Config& config, const Json& value);
Json GetField(const KeySpec& spec, const Config& config);  // null for unbound rows
// "an integer >= 1", "one of \"none\", \"cpu\", \"nvme\"", ... (messages).
std::string Expectation(const KeySpec& spec);
// "int, >= 1", "`none`, `cpu`, `nvme`" (reference "type" column).
std::string TypeColumn(const KeySpec& spec);
// The default as shown to users: "5e8", "true", "\"Warn\"", "required".
std::string DefaultColumn(const KeySpec& spec);
// JSON numbers as users write them: 500000000 -> "5e8" where exact.
std::string ShortNumber(const Json& value);

}  // namespace zt::config_internal

// Accessor for a zt::Config member, usable as a Binding: ZT_FIELD(zero.stage).
#define ZT_FIELD(member) (+[](::zt::Config & c) -> auto& { return c.member; })
// Accessor for an enum member: ZT_ENUM_FIELD(zero.offload_param.device).
#define ZT_ENUM_FIELD(member)                                                                        \
  (::zt::config_internal::EnumRef{+[](const ::zt::Config& c) { return static_cast<int>(c.member); }, \
                                  +[](::zt::Config& c, int v) { c.member = static_cast<decltype(c.member)>(v); }})
// Accessor for a std::optional<Enum> member (null <-> nullopt).
#define ZT_OPT_ENUM_FIELD(member, Type)                                                                               \
  (::zt::config_internal::EnumRef{+[](const ::zt::Config& c) { return c.member ? static_cast<int>(*c.member) : -1; }, \
                                  +[](::zt::Config& c, int v) {                                                       \
                                    if (v < 0)                                                                        \
                                      c.member.reset();                                                               \
                                    else                                                                              \
                                      c.member = static_cast<Type>(v);                                                \
                                  }})
