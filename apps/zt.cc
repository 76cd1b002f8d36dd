// `zt`: the zerotorch command. Dispatches to one subcommand per file.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "apps/commands.h"

namespace {

struct Command {
  const char* name;
  const char* summary;
  int (*run)(const std::vector<std::string>&);
};

const Command kCommands[] = {
    {"train", "train a built-in model (GPT-2, LLaMA, MNIST CNN) with ZeRO; no arguments: the default job",
     zt::cli::RunTrainCommand},
    {"config", "check DeepSpeed-style JSON configs, print them resolved or the key reference",
     zt::cli::RunConfigCommand},
    {"launch", "start the ranks of a distributed job on this node", zt::cli::RunLaunchCommand},
    {"ckpt", "inspect, consolidate (to safetensors) and reshard checkpoints", zt::cli::RunCkptCommand},
    {"estimate", "memory per rank for ZeRO stages 0-3 (model states, buckets, activations)",
     zt::cli::RunEstimateCommand},
    {"tokenize", "text or JSONL -> a token file, with a model's Hugging Face tokenizer", zt::cli::RunTokenizeCommand},
};

void PrintUsage(FILE* out) {
  std::fprintf(out, "usage: zt <command> [options]\n\ncommands:\n");
  for (const Command& c : kCommands) std::fprintf(out, "  %-10s %s\n", c.name, c.summary);
  std::fprintf(out, "\n`zt <command> --help` describes each command.\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0) {
    PrintUsage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  std::vector<std::string> args(argv + 2, argv + argc);
  for (const Command& c : kCommands) {
    if (std::strcmp(argv[1], c.name) == 0) return c.run(args);
  }
  std::fprintf(stderr, "zt: unknown command '%s'\n\n", argv[1]);
  PrintUsage(stderr);
  return 2;
}
