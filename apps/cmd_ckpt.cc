// `zt ckpt`: look into, export and reshard ZeRO checkpoints without a model,
// a GPU or LibTorch (ckpt/). Exit codes: 0 success, 1 a damaged or
// unreadable checkpoint, 2 usage errors.
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "apps/commands.h"
#include "ckpt/checkpoint_convert.h"
#include "ckpt/export.h"
#include "ckpt/format/llama2c.h"
#include "ckpt/lora_record.h"
#include "ckpt/reshard.h"
#include "ckpt/zero_checkpoint.h"
#include "cli/flags.h"
#include "util/clock.h"
#include "util/file_io.h"
#include "util/strings.h"
#include "util/system_info.h"

namespace zt::cli {
namespace {

constexpr const char* kUsage =
    "usage: zt ckpt <subcommand> [options]\n\n"
    "subcommands:\n"
    "  inspect      DIR: tag, stage, world size, steps, parameters, files; --verify checks every CRC\n"
    "  consolidate  DIR OUT: one set of full weights as safetensors (streams; any model size)\n"
    "  reshard      DIR OUT --world-size M: the same checkpoint written for M ranks\n"
    "  convert      SRC DST --to deepspeed|universal|zerotorch: the checkpoint in another format, for any world "
    "size;\n"
    "               --to hf: a llama2.c model file (.bin) as a Hugging Face folder\n\n"
    "`zt ckpt <subcommand> --help` describes each.\n";

int Fail(const std::string& command, const absl::Status& st) {
  std::fprintf(stderr, "zt ckpt %s: %s\n", command.c_str(), std::string(st.message()).c_str());
  return st.code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
}

bool ParseFlags(Flags& flags, const std::vector<std::string>& args, const std::string& synopsis, const char* help,
                size_t positionals, int* exit_code) {
  if (std::optional<int> done = flags.ParseCommandLine(args, synopsis, help)) {
    *exit_code = *done;
    return false;
  }
  if (flags.positional().size() != positionals) {
    std::fprintf(stderr, "%s: expected %zu argument%s, got %zu\n\n%s", flags.command().c_str(), positionals,
                 positionals == 1 ? "" : "s", flags.positional().size(), flags.Usage(synopsis).c_str());
    *exit_code = 2;
    return false;
  }
  return true;
}

// The tools below read a checkpoint once, front to back, and write
// gigabytes once: O_DIRECT both ways (util/direct_io.h says why).
ckpt::CheckpointReadOptions ReadOnce() {
  ckpt::CheckpointReadOptions o;
  o.direct_io = true;
  return o;
}

int RunInspect(const std::vector<std::string>& args) {
  Flags flags("zt ckpt inspect");
  flags.String("tag", "", "the tag to inspect (default: the one <DIR>/latest names)");
  flags.Bool("verify", "read every file and check every record's CRC-32");
  int code = 0;
  if (!ParseFlags(flags, args, "DIR [--tag T] [--verify]",
                  "\nPrints what a checkpoint holds. Exit code 1 when it cannot be read or fails --verify.\n", 1,
                  &code)) {
    return code;
  }
  auto ck = ckpt::ZeroCheckpoint::Open(flags.positional()[0], flags.GetString("tag"));
  if (!ck.ok()) return Fail("inspect", ck.status());
  const ckpt::SavedLayout& l = (*ck)->layout();
  const ckpt::TrainingState& ts = (*ck)->training_state();
  int64_t params = 0;
  for (const auto& g : l.groups) params += static_cast<int64_t>(g.params.size());
  for (const auto& g : l.frozen) params += static_cast<int64_t>(g.params.size());
  std::printf("checkpoint: %s/%s (written by %s)\n", (*ck)->dir().c_str(), (*ck)->tag().c_str(),
              (*ck)->format().c_str());
  const std::string states = (*ck)->state_names().empty() ? "none" : absl::StrJoin((*ck)->state_names(), ", ");
  std::printf("ZeRO stage %d, %d ranks, model dtype %s, optimizer %s (state: %s)\n", l.stage, l.world_size,
              std::string(ckpt::DTypeName(l.model_dtype)).c_str(), ts.optimizer_type.c_str(), states.c_str());
  std::printf("steps: %lld global (%lld skipped), %lld samples; loss scale %g\n",
              static_cast<long long>(ts.global_steps), static_cast<long long>(ts.skipped_steps),
              static_cast<long long>(ts.global_samples), ts.loss_scale);
  std::printf("parameters: %lld tensors, %lld trainable elements (%s as fp32 master), %lld frozen, %zu tied names\n",
              static_cast<long long>(params), static_cast<long long>(l.trainable_numel()),
              HumanBytes(4.0 * static_cast<double>(l.trainable_numel())).c_str(),
              static_cast<long long>(l.frozen_numel()), l.shared.size());
  // Per-group settings, where the checkpoint records them (param groups).
  for (size_t g = 0; g < l.optimizer_group_settings.size() && g < l.optimizer_groups.size(); ++g) {
    const ckpt::SavedLayout::GroupSettings& gs = l.optimizer_group_settings[g];
    std::string betas;
    if (gs.betas.size() == 2) betas = absl::StrCat(", betas [", gs.betas[0], ", ", gs.betas[1], "]");
    std::printf("optimizer param group %zu: %zu parameters, weight_decay %g, eps %g%s, lr %g\n", g,
                l.optimizer_groups[g].size(), gs.weight_decay, gs.eps, betas.c_str(), gs.lr);
  }
  std::printf("files:\n");
  for (const std::string& f : (*ck)->files()) std::printf("  %s\n", f.c_str());
  if (flags.GetBool("verify")) {
    absl::Status st = (*ck)->VerifyAll();
    if (!st.ok()) return Fail("inspect", st);
    std::printf("checksums: every record of every file matches its CRC-32\n");
  } else {
    std::printf("checksums: not read (--verify checks every record)\n");
  }
  return 0;
}

int RunConsolidate(const std::vector<std::string>& args) {
  Flags flags("zt ckpt consolidate");
  flags.String("tag", "", "the tag to export (default: the one <DIR>/latest names)");
  flags.String("dtype", "fp32", "fp32, bf16 or fp16: the dtype of floating-point tensors");
  flags.String("max-shard-size", "5GB", "split the output into shards of at most this size (when OUT is a directory)");
  flags.Bool("no-buffers", "leave the module's buffers out");
  flags.Bool("tied-copies",
             "also write tied aliases (lm_head.weight) as tensors of their own, as DeepSpeed's "
             "zero_to_fp32 does");
  flags.String("lora", "",
               "a LoRA run's checkpoint: merge (adapters folded into the base weights, the base model's names) or "
               "adapter (the adapters alone, PEFT's adapter_model.safetensors names, and adapter_config.json)");
  int code = 0;
  if (!ParseFlags(flags, args,
                  "DIR OUT [--tag T] [--dtype fp32|bf16|fp16] [--max-shard-size 5GB] [--lora merge|adapter]",
                  "\nWrites the checkpoint's full weights, by their names, as safetensors: OUT is a file ending\n"
                  "in .safetensors, or a directory that gets model.safetensors or shards plus\n"
                  "model.safetensors.index.json. Trainable weights come from the fp32 master. Streams: memory\n"
                  "stays at a few 16 MiB chunks whatever the model size.\n",
                  2, &code)) {
    return code;
  }
  ckpt::ExportOptions options;
  const std::string dtype = flags.GetString("dtype");
  if (dtype == "fp32") {
    options.dtype = ckpt::DType::kFloat32;
  } else if (dtype == "bf16") {
    options.dtype = ckpt::DType::kBFloat16;
  } else if (dtype == "fp16") {
    options.dtype = ckpt::DType::kFloat16;
  } else {
    std::fprintf(stderr, "zt ckpt consolidate: --dtype must be fp32, bf16 or fp16, got '%s'\n", dtype.c_str());
    return 2;
  }
  if (!ParseByteSize(flags.GetString("max-shard-size"), &options.max_shard_bytes)) {
    std::fprintf(stderr, "zt ckpt consolidate: --max-shard-size '%s' is not a size (e.g. 5GB, 500MB)\n",
                 flags.GetString("max-shard-size").c_str());
    return 2;
  }
  options.include_buffers = !flags.GetBool("no-buffers");
  options.direct_io = true;
  options.tied_copies = flags.GetBool("tied-copies");
  const auto t0 = SteadyClock::now();
  auto ck = ckpt::ZeroCheckpoint::Open(flags.positional()[0], flags.GetString("tag"), ReadOnce());
  if (!ck.ok()) return Fail("consolidate", ck.status());
  const std::string lora = flags.GetString("lora");
  std::optional<LoraRecord> record;
  if (!lora.empty()) {
    if (lora != "merge" && lora != "adapter") {
      std::fprintf(stderr, "zt ckpt consolidate: --lora must be merge or adapter, got '%s'\n", lora.c_str());
      return 2;
    }
    const ckpt::Value* client = (*ck)->client_state();
    auto rec = LoraRecordFromValue(client != nullptr && client->is_dict() ? client->AsDict().Find("lora") : nullptr);
    if (!rec.ok()) return Fail("consolidate", rec.status());
    if (!rec->has_value()) {
      return Fail("consolidate", absl::InvalidArgumentError(absl::StrCat(
                                     (*ck)->dir(), "/", (*ck)->tag(),
                                     " records no LoRA settings (zt train --lora-r writes them); without them "
                                     "alpha / r is unknown: drop --lora")));
    }
    record = **rec;
    options.lora = lora == "merge" ? ckpt::LoraExport::kMerged : ckpt::LoraExport::kAdapterOnly;
    options.lora_scaling = record->options.scaling();
    options.lora_fan_in_fan_out = record->fan_in_fan_out;
    options.lora_modules_to_save = record->options.modules_to_save;
  }
  const std::string out = flags.positional()[1];
  // PEFT's file name inside a directory; adapter_config.json beside it.
  const bool adapter_dir = options.lora == ckpt::LoraExport::kAdapterOnly && !absl::EndsWith(out, ".safetensors");
  if (adapter_dir) {
    if (absl::Status made = MakeDirs(out); !made.ok()) return Fail("consolidate", made);
  }
  auto result = ckpt::ExportSafetensors(**ck, adapter_dir ? out + "/adapter_model.safetensors" : out, options);
  if (!result.ok()) return Fail("consolidate", result.status());
  if (record && options.lora == ckpt::LoraExport::kAdapterOnly) {
    const std::string dir = adapter_dir ? out : std::filesystem::path(out).parent_path().string();
    if (absl::Status st = WritePeftAdapterConfig(dir.empty() ? "." : dir, *record, ""); !st.ok()) {
      return Fail("consolidate", st);
    }
    result->files.push_back((dir.empty() ? "." : dir) + "/adapter_config.json");
  }
  // From opening the checkpoint to the last fsync: the work itself, without
  // the program's start-up.
  const double seconds = Seconds(t0, SteadyClock::now());
  std::printf("wrote %lld tensors (%s) from %s/%s in %.2f s:\n", static_cast<long long>(result->tensors),
              HumanBytes(static_cast<double>(result->bytes)).c_str(), (*ck)->dir().c_str(), (*ck)->tag().c_str(),
              seconds);
  for (const std::string& f : result->files) std::printf("  %s\n", f.c_str());
  const int64_t peak = PeakResidentBytes();
  if (peak > 0) std::printf("peak resident memory: %.1f MiB\n", static_cast<double>(peak) / (1 << 20));
  return 0;
}

int RunReshard(const std::vector<std::string>& args) {
  Flags flags("zt ckpt reshard");
  flags.String("tag", "", "the tag to reshard (default: the one <DIR>/latest names)");
  flags.Int("world-size", 0, "the number of ranks the new checkpoint is for");
  int code = 0;
  if (!ParseFlags(flags, args, "DIR OUT --world-size M [--tag T]",
                  "\nWrites the checkpoint again for M ranks (same stage and tag) under OUT. Engines load any\n"
                  "world size directly; this is for tools that expect one file per rank.\n",
                  2, &code)) {
    return code;
  }
  const long long world = flags.GetInt("world-size");
  if (world < 1) {
    std::fprintf(stderr, "zt ckpt reshard: --world-size must be a positive integer (got %lld)\n", world);
    return 2;
  }
  auto ck = ckpt::ZeroCheckpoint::Open(flags.positional()[0], flags.GetString("tag"), ReadOnce());
  if (!ck.ok()) return Fail("reshard", ck.status());
  absl::Status st = ckpt::Reshard(**ck, flags.positional()[1], static_cast<int>(world));
  if (!st.ok()) return Fail("reshard", st);
  std::printf("resharded %s/%s from %d to %lld ranks into %s\n", (*ck)->dir().c_str(), (*ck)->tag().c_str(),
              (*ck)->layout().world_size, world, flags.positional()[1].c_str());
  return 0;
}

int RunConvert(const std::vector<std::string>& args) {
  Flags flags("zt ckpt convert");
  flags.String("to", "",
               "the format to write: deepspeed, universal (DeepSpeed's) or zerotorch; hf for a llama2.c model file "
               "(a Hugging Face LlamaForCausalLM folder)");
  flags.Int("world-size", 0, "the number of ranks to write for (default: the source's)");
  flags.String("tag", "", "the tag to write under DST (default: the source's)");
  flags.String("source-tag", "", "the tag to read (default: the one <SRC>/latest names)");
  int code = 0;
  if (!ParseFlags(flags, args, "SRC DST --to deepspeed|universal|zerotorch [--world-size N] [--tag T] [--source-tag S]",
                  "\nReads SRC, a checkpoint zerotorch or DeepSpeed wrote, and writes it to DST in the chosen\n"
                  "format for N ranks: DST/<tag>/ with every rank's files, then DST/latest. DeepSpeed's format is\n"
                  "what DeepSpeed 0.14.5 writes (stages 1-3; engine.load_checkpoint and zero_to_fp32 read it).\n"
                  "--to universal writes DeepSpeed's universal checkpoint (its ds_to_universal layout: a folder\n"
                  "per parameter under DST/<tag>/zero, then DST/latest_universal), for any world size.\n"
                  "DST must not exist or be empty; it gets the whole checkpoint or nothing. Streams: memory stays\n"
                  "far below the model's size.\n",
                  2, &code)) {
    return code;
  }
  if (!flags.WasSet("to")) {
    std::fprintf(stderr, "zt ckpt convert: --to is required (deepspeed, universal, zerotorch or hf)\n");
    return 2;
  }
  if (flags.GetString("to") == "hf") {
    // A llama2.c model file (ckpt/format/llama2c.h) to a Hugging Face folder.
    const std::string& src = flags.positional()[0];
    auto m = ckpt::OpenLlama2c(src);
    if (!m.ok()) {
      return Fail("convert", absl::Status(m.status().code(),
                                          absl::StrCat("--to hf reads llama2.c model files (.bin, legacy or version "
                                                       "1); ",
                                                       m.status().message(),
                                                       ". A zerotorch or DeepSpeed checkpoint becomes a safetensors "
                                                       "export with zt ckpt consolidate")));
    }
    absl::Status st = ckpt::WriteLlama2cAsHf(*m, flags.positional()[1]);
    if (!st.ok()) return Fail("convert", st);
    std::printf(
        "converted llama2.c model %s (version %d: dim %lld, %lld layers, %lld heads, %lld kv heads, vocab %lld) "
        "to a Hugging Face LlamaForCausalLM folder %s\n",
        src.c_str(), m->version, static_cast<long long>(m->dim), static_cast<long long>(m->n_layers),
        static_cast<long long>(m->n_heads), static_cast<long long>(m->n_kv_heads),
        static_cast<long long>(m->vocab_size), flags.positional()[1].c_str());
    return 0;
  }
  auto to = ckpt::ParseCheckpointFormat(flags.GetString("to"));
  if (!to.ok()) return Fail("convert", to.status());
  const long long world = flags.GetInt("world-size");
  if (flags.WasSet("world-size") && (world < 1 || world > (1 << 20))) {
    std::fprintf(stderr, "zt ckpt convert: --world-size must be a positive integer (got %lld)\n", world);
    return 2;
  }
  const auto t0 = SteadyClock::now();
  auto ck = ckpt::ZeroCheckpoint::Open(flags.positional()[0], flags.GetString("source-tag"), ReadOnce());
  if (!ck.ok()) return Fail("convert", ck.status());
  ckpt::ConvertOptions options;
  options.to = *to;
  options.world_size = static_cast<int>(world);
  options.tag = flags.GetString("tag");
  absl::Status st = ckpt::ConvertCheckpoint(**ck, flags.positional()[1], options);
  if (!st.ok()) return Fail("convert", st);
  std::printf("converted %s/%s (%s, %d ranks) to %s format for %d ranks in %s/%s in %.2f s\n", (*ck)->dir().c_str(),
              (*ck)->tag().c_str(), (*ck)->format().c_str(), (*ck)->layout().world_size, flags.GetString("to").c_str(),
              options.world_size == 0 ? (*ck)->layout().world_size : options.world_size, flags.positional()[1].c_str(),
              options.tag.empty() ? (*ck)->tag().c_str() : options.tag.c_str(), Seconds(t0, SteadyClock::now()));
  const int64_t peak = PeakResidentBytes();
  if (peak > 0) std::printf("peak resident memory: %.1f MiB\n", static_cast<double>(peak) / (1 << 20));
  return 0;
}

}  // namespace

int RunCkptCommand(const std::vector<std::string>& args) {
  if (args.empty()) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  const std::string& sub = args[0];
  if (sub == "--help" || sub == "-h" || sub == "help") {
    std::fputs(kUsage, stdout);
    return 0;
  }
  std::vector<std::string> rest(args.begin() + 1, args.end());
  if (sub == "inspect") return RunInspect(rest);
  if (sub == "consolidate") return RunConsolidate(rest);
  if (sub == "reshard") return RunReshard(rest);
  if (sub == "convert") return RunConvert(rest);
  std::string near = NearestName(sub, {"inspect", "consolidate", "reshard", "convert"});
  std::fprintf(stderr, "zt ckpt: unknown subcommand '%s'%s\n\n%s", sub.c_str(),
               near.empty() ? "" : absl::StrCat(" (did you mean '", near, "'?)").c_str(), kUsage);
  return 2;
}

}  // namespace zt::cli
