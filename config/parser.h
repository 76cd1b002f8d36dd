// The config parser's state, shared by parser.cc (walking the document with
// the key table, "auto", defaults, legacy spellings) and checks.cc (checks
// across keys and batch sizes). Internal to zt_config: use ParseConfig().
//
// One Parser parses one document. It never stops at the first problem: every
// error is collected with the JSON path the user wrote, then sorted into
// document order.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "config/config.h"
#include "config/json_text.h"
#include "config/schema.h"

namespace zt::config_internal {

class Parser {
 public:
  Parser(std::string_view text, const ParseOptions& options);
  ParseResult Run();

 private:
  struct AutoKey {
    const KeySpec* spec;
    std::string written;
  };

  // --- The walk (parser.cc) ---
  void ReadTypes();
  void WalkObject(const Json& object, const std::string& canonical, const std::string& written);
  void HandleKey(const std::string& canonical_parent, const std::string& written_parent, const std::string& key,
                 const Json& value);
  void HandleBlock(const KeySpec& spec, const Json& value, const std::string& written);
  void HandleFeatureBlock(const KeySpec& spec, const Json& value, const std::string& written);
  void HandleScalar(const KeySpec& spec, const Json& value, const std::string& written);
  void HandleLegacy(const LegacySpelling& legacy, const Json& value, const std::string& written);
  void ReportUnknownKey(const std::string& canonical_parent, const std::string& written_parent, const std::string& key);
  void ReportWrongType(const std::string& canonical_parent, const std::vector<const KeySpec*>& rows,
                       const std::string& key, const std::string& written);
  // Records that `canonical` was given (as `written`); false (with an error)
  // when it already was, e.g. under an alias.
  bool Claim(const std::string& canonical, const std::string& written);
  // Applies a checked value to the config (or notes/rejects it for keys
  // without a field); `source` says where it came from, for notes.
  void Apply(const KeySpec& spec, const Json& value, const std::string& written);

  // --- After the walk (parser.cc) ---
  void ApplyLegacyPinMemory();
  void ApplyDefaults();
  void ResolveAutos();
  // A Trainer-filled "auto" without an auto_values entry (ResolveAutos).
  void ResolveTrainerAuto(const AutoKey& a);
  void ApplyDerived();
  // "auto" ZeRO sizes from ParseOptions::hidden_size; after ApplyDerived, as
  // two of them depend on the stage.
  void ResolveHiddenSizeAutos();
  // An "auto" only the run can fill: listed in Config::run_time_autos with a
  // note, or an error, as ParseOptions::allow_run_time_autos says.
  void LeaveToRunTime(const AutoKey& a);
  // Sets the resolved value of an "auto" key and says where it came from.
  void ApplyAuto(const AutoKey& a, const Json& value, const std::string& why);
  void CheckRequired();
  void CheckAutoValues();
  std::optional<std::string> AutoValueText(const KeySpec& spec, const std::string& written) const;

  // --- Checks across keys and batch sizes (checks.cc) ---
  void CheckCombinations();
  void CheckPrecision();
  void CheckZero();
  void CheckOptimizer();
  void CheckScheduler();
  void CheckActivationCheckpointing();
  void ResolveBatchSizes();

  // --- Helpers ---
  void Error(std::string path, std::string message);
  void Note(const std::string& path, const std::string& text);
  // Whether a per-type row belongs to the optimizer/scheduler type in force.
  bool Applies(const KeySpec& spec) const;
  // The path as the user wrote it for a canonical path (alias, legacy name).
  std::string Written(const std::string& canonical) const;
  bool IsExplicit(const std::string& canonical) const { return explicit_.count(canonical) > 0; }
  // Whether the key's value was rejected: checks that depend on it stay quiet
  // rather than report a consequence of the default standing in for it.
  bool Failed(const std::string& canonical) const { return failed_.count(canonical) > 0; }
  int DocumentOrder(const std::string& path) const;

  const Schema& schema_;
  const ParseOptions& options_;
  std::string_view text_;
  JsonDocument doc_;
  Config config_;
  std::vector<ConfigError> errors_;
  std::vector<std::string> notes_;

  std::map<std::string, std::string> claimed_;      // canonical path -> written path
  std::set<std::string> explicit_;                  // canonical paths whose value came from the user
  std::set<std::string> failed_;                    // canonical paths whose value was rejected
  std::vector<AutoKey> autos_;                      // keys written as "auto", document order
  std::vector<AutoKey> derived_autos_;              // "auto" keys resolved from other keys
  std::vector<AutoKey> hidden_autos_;               // "auto" keys the Trainer computes from the hidden size
  std::map<std::string, std::string> resolutions_;  // ParseResult::auto_resolutions
  std::map<std::string, int64_t> batch_written_;

  // The optimizer / scheduler type in force (set when the block names a valid one).
  std::optional<OptimizerType> optimizer_type_;
  std::optional<SchedulerType> scheduler_type_;
  bool scheduler_block_ = false;
  std::optional<bool> legacy_pin_memory_;  // zero_optimization.cpu_offload_use_pin_memory
};

}  // namespace zt::config_internal
