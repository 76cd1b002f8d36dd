// `zt config`: check DeepSpeed-style JSON configs (`check`) and print the key
// reference (`reference`). Exit codes: 0 valid, 2 invalid input or usage.
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "apps/commands.h"
#include "cli/flags.h"
#include "config/config.h"
#include "util/strings.h"

namespace zt::cli {
namespace {

constexpr const char* kConfigUsage =
    "usage: zt config <subcommand> [options]\n\n"
    "subcommands:\n"
    "  check      validate config files; print them fully resolved with --print\n"
    "  reference  print the config key reference (docs/config_reference.md) as markdown\n\n"
    "`zt config <subcommand> --help` describes each.\n";

constexpr const char* kCheckHelp =
    "\nValidates DeepSpeed-style JSON configs against zerotorch's key table. For each valid file prints one\n"
    "\"OK\" line (ZeRO stage, precision, the resolved batch equation) or, with --print, the fully resolved\n"
    "config as JSON with every default filled in. Notes (what each \"auto\" became, deprecated spellings)\n"
    "go to stderr. Exits 0 when every file is valid; otherwise prints every error of every file to stderr\n"
    "as \"FILE: JSON.PATH: message\" and exits 2.\n"
    "\n\"auto\" is filled as the Hugging Face Trainer fills it (docs/config.md). Values only the run knows --\n"
    "total_num_steps (the number of training steps) and the ZeRO sizes the Trainer computes from the model's\n"
    "hidden size -- are left to run time unless --auto or --hidden-size gives them: the file is still valid,\n"
    "and a note names each such key and what fills it.\n";

std::string Precision(const Config& c) {
  if (c.fp16.enabled) return "fp16";
  if (c.bf16.enabled) return "bf16";
  return "fp32";
}

std::string Summary(const Config& c) {
  std::string out = absl::StrCat("ZeRO stage ", c.zero.stage, ", ", Precision(c));
  if (c.optimizer.present) absl::StrAppend(&out, ", ", std::string(ToString(c.optimizer.type)));
  if (c.scheduler.type != SchedulerType::kNone) {
    absl::StrAppend(&out, c.optimizer.present ? " + " : ", ", std::string(ToString(c.scheduler.type)));
  }
  if (c.zero.offload_optimizer.device != OffloadDevice::kNone) {
    absl::StrAppend(&out, ", optimizer offload ", std::string(ToString(c.zero.offload_optimizer.device)));
  }
  if (c.zero.offload_param.device != OffloadDevice::kNone) {
    absl::StrAppend(&out, ", param offload ", std::string(ToString(c.zero.offload_param.device)));
  }
  absl::StrAppend(&out, ", train_batch_size ", c.batch.train_batch, " = micro ", c.batch.micro_batch, " * gas ",
                  c.batch.accumulation_steps, " * world ", c.batch.world_size);
  if (!c.run_time_autos.empty()) {
    absl::StrAppend(&out, ", ", c.run_time_autos.size(), " \"auto\" left to run time");
  }
  return out;
}

// --world-size defaults to $WORLD_SIZE (set by launchers), else 1.
bool DefaultWorldSize(long long* out) {
  const char* env = std::getenv("WORLD_SIZE");
  *out = 1;
  if (env == nullptr || *env == '\0') return true;
  char* end = nullptr;
  long long v = std::strtoll(env, &end, 10);
  if (*end != '\0' || v < 1) {
    std::fprintf(stderr, "zt config check: WORLD_SIZE='%s' is not a positive integer; fix it or pass --world-size\n",
                 env);
    return false;
  }
  *out = v;
  return true;
}

int RunCheck(const std::vector<std::string>& args) {
  long long world_default = 1;
  if (!DefaultWorldSize(&world_default)) return 2;
  Flags flags("zt config check");
  flags.Int("world-size", world_default, "data-parallel size used to resolve batch sizes ($WORLD_SIZE, else 1)");
  flags.Bool("print", "print each resolved config as JSON instead of the OK line");
  flags.Repeated("auto", "KEY=VALUE: the value for a key written as \"auto\", e.g. optimizer.params.lr=3e-4");
  flags.Int("hidden-size", 0,
            "the model's hidden size: \"auto\" ZeRO sizes take the Hugging Face Trainer's values from it "
            "(0: left to run time)");
  const std::string synopsis = "FILE... [--world-size N] [--print] [--auto KEY=VALUE]... [--hidden-size N]";
  if (std::optional<int> done = flags.ParseCommandLine(args, synopsis, kCheckHelp)) return *done;
  if (flags.positional().empty()) {
    std::fprintf(stderr, "zt config check: give at least one config file\n\n%s", flags.Usage(synopsis).c_str());
    return 2;
  }
  const long long world = flags.GetInt("world-size");
  if (world < 1 || world > 1 << 30) {
    std::fprintf(stderr, "zt config check: --world-size must be a positive integer, got %lld\n", world);
    return 2;
  }
  ParseOptions options;
  options.world_size = static_cast<int>(world);
  // A check runs before the run: what only the run knows is noted, not refused.
  options.allow_run_time_autos = true;
  if (flags.WasSet("hidden-size")) {
    const long long hidden = flags.GetInt("hidden-size");
    if (hidden < 1) {
      std::fprintf(stderr, "zt config check: --hidden-size must be a positive integer, got %lld\n", hidden);
      return 2;
    }
    options.hidden_size = hidden;
  }
  for (const std::string& kv : flags.GetRepeated("auto")) {
    size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) {
      std::fprintf(stderr, "zt config check: --auto needs KEY=VALUE (e.g. optimizer.params.lr=3e-4), got '%s'\n",
                   kv.c_str());
      return 2;
    }
    options.auto_values[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  bool all_ok = true;
  for (const std::string& file : flags.positional()) {
    absl::StatusOr<Config> config = LoadConfigFile(file, options);
    if (!config.ok()) {
      all_ok = false;
      std::string message(config.status().message());
      // Missing/unreadable files carry no "FILE:" prefix of their own.
      if (config.status().code() != absl::StatusCode::kInvalidArgument) message = "zt config check: " + message;
      std::fprintf(stderr, "%s\n", message.c_str());
      continue;
    }
    for (const std::string& note : config->notes) std::fprintf(stderr, "%s: note: %s\n", file.c_str(), note.c_str());
    if (flags.GetBool("print")) {
      std::printf("%s\n", ConfigToJson(*config).c_str());
    } else {
      std::printf("%s: OK (%s)\n", file.c_str(), Summary(*config).c_str());
    }
  }
  std::fflush(stdout);
  return all_ok ? 0 : 2;
}

int RunReference(const std::vector<std::string>& args) {
  Flags flags("zt config reference");
  if (std::optional<int> done =
          flags.ParseCommandLine(args, "",
                                 "\nPrints the reference of every config key (type, default, meaning) as markdown; "
                                 "docs/config_reference.md is its output.\n")) {
    return *done;
  }
  if (!flags.positional().empty()) {
    std::fprintf(stderr, "zt config reference: takes no arguments, got '%s'\n", flags.positional()[0].c_str());
    return 2;
  }
  std::fputs(ConfigReferenceMarkdown().c_str(), stdout);
  return 0;
}

}  // namespace

int RunConfigCommand(const std::vector<std::string>& args) {
  if (args.empty()) {
    std::fputs(kConfigUsage, stderr);
    return 2;
  }
  const std::string& sub = args[0];
  if (sub == "--help" || sub == "-h" || sub == "help") {
    std::fputs(kConfigUsage, stdout);
    return 0;
  }
  std::vector<std::string> rest(args.begin() + 1, args.end());
  if (sub == "check") return RunCheck(rest);
  if (sub == "reference") return RunReference(rest);
  std::string near = NearestName(sub, {"check", "reference"});
  std::fprintf(stderr, "zt config: unknown subcommand '%s'%s\n\n%s", sub.c_str(),
               near.empty() ? "" : absl::StrCat(" (did you mean '", near, "'?)").c_str(), kConfigUsage);
  return 2;
}

}  // namespace zt::cli
