// Command-line parsing for `zt` subcommands: --name value, --name=value,
// boolean --name, positionals, and "--" ending option parsing (the rest is
// kept verbatim, e.g. the command `zt launch` runs).
//
//   zt::cli::Flags flags("zt config check");
//   flags.Int("world-size", 1, "data-parallel size used to resolve batch sizes");
//   flags.Bool("print", "print the resolved config");
//   if (auto st = flags.Parse(args); !st.ok()) { ... exit 2 ... }
//   int world = flags.GetInt("world-size");
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace zt::cli {

class Flags {
 public:
  explicit Flags(std::string command) : command_(std::move(command)) {}

  void Int(const std::string& name, long long default_value, const std::string& help);
  void Double(const std::string& name, double default_value, const std::string& help);
  void String(const std::string& name, const std::string& default_value, const std::string& help);
  void Bool(const std::string& name, const std::string& help);
  // A flag that may be given several times (--set a=1 --set b=2).
  void Repeated(const std::string& name, const std::string& help);
  // The option's default is not its sentinel value (0, -1, "") but what the
  // config says: --help prints "(default: the config's)" instead.
  void DefaultFromConfig(const std::string& name);

  // Unknown flags, missing values and unparsable numbers are InvalidArgument
  // with a "did you mean" where a known flag is close.
  absl::Status Parse(const std::vector<std::string>& args);

  // The start of every command: Parse(args); a parse error is printed to
  // stderr and gives exit code 2, --help prints Usage(synopsis) and
  // `description` to stdout and gives 0; nullopt means "go on".
  std::optional<int> ParseCommandLine(const std::vector<std::string>& args, const std::string& synopsis,
                                      const std::string& description);

  long long GetInt(const std::string& name) const;
  double GetDouble(const std::string& name) const;
  const std::string& GetString(const std::string& name) const;
  bool GetBool(const std::string& name) const;
  const std::vector<std::string>& GetRepeated(const std::string& name) const;
  // True when the command line gave the flag, even with its default value:
  // `--stage 0` over a stage-3 config and `--lr 0` (refused) must not read
  // as "not given".
  bool WasSet(const std::string& name) const;

  const std::vector<std::string>& positional() const { return positional_; }
  // Everything after a literal "--".
  const std::vector<std::string>& rest() const { return rest_; }
  bool help_requested() const { return help_requested_; }
  const std::string& command() const { return command_; }
  std::string Usage(const std::string& synopsis) const;

 private:
  enum class Kind { kInt, kDouble, kString, kBool, kRepeated };
  struct Spec {
    Kind kind;
    std::string help;
    std::string default_text;
    bool default_is_text = false;  // DefaultFromConfig
  };
  std::string command_;
  std::map<std::string, Spec> specs_;
  std::vector<std::string> order_;
  std::map<std::string, std::string> values_;
  std::map<std::string, std::vector<std::string>> repeated_;
  std::set<std::string> given_;  // names the command line gave
  std::vector<std::string> positional_;
  std::vector<std::string> rest_;
  bool help_requested_ = false;
};

// The model dimension overrides of repeated `--model-set KEY=INTEGER` flags
// (`zt train`, `zt estimate`, the benchmarks). InvalidArgument naming the
// flag that is not KEY=INTEGER.
absl::StatusOr<std::map<std::string, int64_t>> ParseModelSets(const std::vector<std::string>& model_sets);

}  // namespace zt::cli
