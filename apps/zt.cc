// `zt`: the zerotorch command. Dispatches to one subcommand per file; the
// commands that need LibTorch run in zt-torch, which this program execs
// (cli/programs.h), after `zt train` has checked its job here
// (cli/train_job.h). This program itself links no LibTorch.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "apps/commands.h"
#include "ckpt/deepspeed/writer.h"
#include "cli/programs.h"
#include "cli/train_job.h"
#include "util/limits.h"

namespace {

// `zt launch -- zt train ...` runs in zt-torch, whose launcher forks the
// ranks with LibTorch loaded; any other command is exec'd from here.
int RunLaunch(const std::vector<std::string>& args, char** argv) {
  std::vector<std::string> command;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--") {
      command.assign(args.begin() + static_cast<std::ptrdiff_t>(i) + 1, args.end());
      break;
    }
  }
  if (zt::cli::RunsThisProgramsTrain(command)) return zt::cli::ExecTorchProgram(argv);
  zt::cli::LaunchBackends backends;  // no store here: restarts across nodes run in zt-torch
  backends.run_in_torch_program = [argv] { return zt::cli::ExecTorchProgram(argv); };
  return zt::cli::RunLaunchCommand(args, backends);
}

struct Command {
  const char* name;
  const char* summary;
  int (*run)(const std::vector<std::string>&);  // nullptr: zt-torch's (train, generate) or main's own (launch)
};

const Command kCommands[] = {
    {"train", "train a built-in model (GPT-2, LLaMA, MNIST CNN) with ZeRO; no arguments: the default job", nullptr},
    {"config", "check DeepSpeed-style JSON configs, print them resolved or the key reference",
     zt::cli::RunConfigCommand},
    {"launch", "start the ranks of a distributed job on this node", nullptr},
    {"ckpt", "inspect, consolidate (to safetensors) and reshard checkpoints", zt::cli::RunCkptCommand},
    {"estimate", "memory per rank for ZeRO stages 0-3 (model states, buckets, activations)",
     zt::cli::RunEstimateCommand},
    {"tokenize", "text or JSONL -> a token file, with a model's Hugging Face tokenizer", zt::cli::RunTokenizeCommand},
    {"generate", "text from a model folder, export, checkpoint, LoRA adapter or llama2.c file (KV cache)", nullptr},
};

void PrintUsage(FILE* out) {
  std::fprintf(out, "usage: zt <command> [options]\n\ncommands:\n");
  for (const Command& c : kCommands) std::fprintf(out, "  %-10s %s\n", c.name, c.summary);
  std::fprintf(out, "\n`zt <command> --help` describes each command; `zt --version` prints the version.\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0) {
    PrintUsage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  if (std::strcmp(argv[1], "--version") == 0 || std::strcmp(argv[1], "-V") == 0) {
    // The DeepSpeed version is the checkpoint format `--to deepspeed` writes.
    std::printf("zt (zerotorch) %s; DeepSpeed checkpoint format %s\n", ZT_VERSION, zt::ckpt::kDeepSpeedFormatVersion);
    return 0;
  }
  // A mistyped ZT_MAX_* limit would otherwise fall back to the default
  // with only a warning deep in a run.
  if (const absl::Status limits = zt::CheckLimitEnvironment(); !limits.ok()) {
    std::fprintf(stderr, "zt: %s\n", std::string(limits.message()).c_str());
    return 2;
  }
  std::vector<std::string> args(argv + 2, argv + argc);
  if (std::strcmp(argv[1], "launch") == 0) return RunLaunch(args, argv);
  if (std::strcmp(argv[1], "train") == 0) return zt::cli::RunTrainFront(args, argv);
  for (const Command& c : kCommands) {
    if (std::strcmp(argv[1], c.name) != 0) continue;
    return c.run != nullptr ? c.run(args) : zt::cli::ExecTorchProgram(argv);
  }
  std::fprintf(stderr, "zt: unknown command '%s'\n\n", argv[1]);
  PrintUsage(stderr);
  return 2;
}
