// Implementation of cli/train_job.h.
#include "cli/train_job.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "ckpt/format/llama2c.h"
#include "cli/programs.h"
#include "config/lora_options.h"
#include "estimate/builtin_models.h"
#include "estimate/memory_estimate.h"
#include "launch/rank_env.h"
#include "models/catalog/catalog.h"
#include "models/catalog/hf_config.h"
#include "train/job/job_check.h"
#include "train/job/train_config.h"
#include "util/status.h"
#include "util/strings.h"
#include "util/system_info.h"

namespace zt::cli {
namespace {

constexpr char kSynopsis[] = "[--config ds_config.json] [--model NAME] [--data PATH] [--steps N] [--nproc N] [options]";

constexpr char kDescription[] =
    "\nTrains a built-in model (--list-models) with ZeRO. With no arguments: gpt2-mini on the\n"
    "default text corpus (Debian's fortunes), ZeRO stage 3, 2 ranks, 200 steps; results under\n"
    "runs/<model>/ (checkpoints, model.safetensors, report.html, monitors).\n"
    "\nCommand-line values win over the config file: --stage, --micro-batch, --grad-accum,\n"
    "--global-batch, --lr, --precision and --set KEY=JSON (any config key, dotted path) are\n"
    "written into the config before it is checked. The resolved config is printed.\n"
    "\n\"auto\" values (Hugging Face DeepSpeed configs) are filled as the Hugging Face Trainer fills\n"
    "them, from the flags above, --steps (total_num_steps), --warmup-steps / --warmup-ratio,\n"
    "--max-grad-norm, --weight-decay and the model's hidden size (the ZeRO bucket sizes), with the\n"
    "Trainer's defaults for flags not given. Those four flags are the Trainer's arguments: they fill\n"
    "keys written as \"auto\" and leave numbers alone (use --set to change a number).\n"
    "\nOutside a launcher, --nproc N starts N ranks on this machine (default: the number the\n"
    "config's batch sizes imply, else 2). Under zt launch / torchrun / mpirun / srun each\n"
    "process is one rank and --nproc is ignored.\n";

void Define(Flags& f) {
  f.String("config", "", "DeepSpeed-style JSON config (default: the built-in stage-3 config)");
  f.String("model", "gpt2-mini",
           "built-in model (--list-models), or a Hugging Face model folder (its config.json; --init-from DIR alone "
           "implies it)");
  f.Repeated("model-set", "model dimension override KEY=INT, e.g. --model-set n_layer=6");
  f.Bool("list-models", "list the built-in models and exit");
  f.String("task", "auto",
           "what the model is trained for: causal-lm, classify (labelled text JSONL, a bert-* model) or image; auto: "
           "the model's own");
  f.String("data", "",
           "text file or directory, .bin token file, JSONL (prompt/completion, text, or text/label), or IDX "
           "directory (default: per model)");
  f.String("eval-data", "", "separate evaluation data (default: the last --eval-fraction of --data)");
  f.String("tokenizer", "",
           "tokenizer for JSONL --data: a Hugging Face folder or tokenizer.json, or llama2.c's tokenizer.bin (default: "
           "the --init-from or --model folder)");
  f.Bool("packing",
         "pack JSONL examples several per sample (best-fit decreasing), each attended and positioned on its own");
  f.String("token-dtype", "auto", "token width of headerless .bin files: auto (uint16), uint16, uint32");
  f.Double("eval-fraction", 0.05, "share of the text/token data held out for evaluation");
  f.Int("seq-len", 0, "tokens per sample (default: the model's maximum)");
  f.Int("steps", 200, "optimizer steps to train to (a resumed run continues up to this total)");
  f.Int("eval-interval", 50, "evaluate every N steps and at the end (0: only at the end, -1: never)");
  f.Int("eval-batches", 0, "evaluate at most N batches per rank (0: the whole eval set)");
  f.Int("nproc", 0, "ranks to start on this machine outside a launcher (default: from the config, else 2)");
  f.Int("stage", -1, "zero_optimization.stage (0-3)");
  f.Int("micro-batch", 0, "train_micro_batch_size_per_gpu");
  f.Int("grad-accum", 0, "gradient_accumulation_steps");
  f.Int("global-batch", 0, "train_batch_size");
  f.Double("lr", 0, "optimizer.params.lr (and the scheduler's warmup_max_lr when it sets one)");
  f.String("precision", "", "fp32, bf16 or fp16 (bf16.enabled / fp16.enabled)");
  f.String("bf16-compute", "auto",
           "with bf16: auto (LibTorch's bf16 kernels where the CPU has AVX512-BF16 or AMX, else bf16 tensors whose "
           "GEMMs, layer norm and activations compute in fp32), bf16 or fp32");
  f.Repeated("set", "config override KEY=JSON, e.g. --set zero_optimization.overlap_comm=true");
  f.Int("warmup-steps", 0, "warm-up steps for scheduler.params.warmup_num_steps \"auto\" (wins over --warmup-ratio)");
  f.Double("warmup-ratio", 0, "warm-up as a share of --steps, rounded up, for warmup_num_steps \"auto\"");
  f.Double("max-grad-norm", 1.0, "gradient clipping norm for gradient_clipping \"auto\" (0: none)");
  f.Double("weight-decay", 0, "weight decay for optimizer.params.weight_decay \"auto\"");
  f.String("weight-decay-groups", "all",
           "all: the config's weight decay on every parameter (one optimizer param group, as DeepSpeed), or hf: "
           "HF Trainer's two groups, no decay for biases and LayerNorm/RMSNorm weights");
  f.Bool("activation-checkpointing", "checkpoint the model's blocks (config: activation_checkpointing.*)");
  f.String("output-dir", "", "where results go (default: runs/<model>)");
  f.String("save-dir", "", "checkpoint directory (default: <output-dir>/checkpoints; 'none': no checkpoints)");
  f.Int("save-interval", 0, "save a checkpoint every N steps (0: only at the end)");
  f.String("save-format", "zerotorch",
           "zerotorch, or deepspeed: each checkpoint also written in DeepSpeed's format to <save-dir>/deepspeed");
  f.Bool("resume", "continue from <save-dir>/latest when it exists");
  f.Int("max-restarts", 0,
        "after a rank fails, start the ranks again up to this many times, each resuming from <save-dir>/latest");
  f.Bool("memory-copies",
         "keep each rank's last checkpoint files in memory (/dev/shm) too, so a restart reads them from there");
  f.Bool("restart-from-scratch",
         "with restarts: a failure before the first checkpoint trains again from step 0 (else it stops the job)");
  f.Repeated("sample-prompts",
             "language models: at each evaluation, print a greedy continuation of this prompt and show it in the "
             "report (may be given several times)");
  f.Int("sample-tokens", 32, "tokens generated per --sample-prompts prompt");
  f.Bool("eval-only",
         "evaluate the starting weights (--init-from, --resume's checkpoint, or a fresh initialization) on the eval "
         "data and stop: no training, no checkpoint, no export");
  f.String("init-from", "",
           "start from these weights: .safetensors file, index .json or directory, or a llama2.c model file");
  f.Int("lora-r", 0, "LoRA rank: adapters on --lora-targets, the base frozen (0: full fine-tuning)");
  f.Double("lora-alpha", 8, "LoRA alpha (the adapter's update is scaled by alpha / r)");
  f.Double("lora-dropout", 0, "dropout on the LoRA adapters' input");
  f.String("lora-targets", "",
           "comma-separated layer names that get adapters (e.g. q_proj,k_proj,v_proj,o_proj), or all-linear "
           "(default: q_proj,v_proj for LLaMA-style models, c_attn for GPT-2, as PEFT)");
  f.String("export", "",
           "consolidated safetensors written at the end: a .safetensors file or a folder (default: <output-dir>, "
           "which gets model.safetensors or shards with an index; 'none')");
  f.String("max-shard-size", "5GiB", "a folder export is split into shards of at most this size (e.g. 2GB, 500MB)");
  f.String("report", "", "HTML report (default: <output-dir>/report.html; none: no report)");
  f.Int("seed", 1234, "seed for the model's initialization and the data order");
  f.Bool("no-progress", "no progress line (log lines only)");
  f.Int("threads", 0, "intra-op threads per rank (default: cores / ranks)");
  for (const char* n : {"stage", "micro-batch", "grad-accum", "global-batch", "lr", "precision"})
    f.DefaultFromConfig(n);
}

absl::Status BadFlag(const std::string& message) {
  return absl::InvalidArgumentError(absl::StrCat(message, "\nusage: zt train ", kSynopsis));
}

// The run's own options (data, steps, outputs), each checked.
absl::Status ReadRunOptions(const Flags& f, train::TrainOptions* o) {
  if (!f.positional().empty()) {
    return BadFlag(absl::StrCat("unexpected argument '", f.positional().front(), "'; options start with --"));
  }
  o->model = f.GetString("model");
  auto sets = cli::ParseModelSets(f.GetRepeated("model-set"));
  if (!sets.ok()) return BadFlag(std::string(sets.status().message()));
  o->model_overrides = *std::move(sets);
  o->data = f.GetString("data");
  o->eval_data = f.GetString("eval-data");
  o->tokenizer = f.GetString("tokenizer");
  o->task = f.GetString("task");
  o->packing = f.GetBool("packing");
  if (o->task != "auto" && o->task != "causal-lm" && o->task != "classify" && o->task != "image") {
    return BadFlag(absl::StrCat("--task must be auto, causal-lm, classify or image, got '", o->task, "'"));
  }
  o->token_dtype = f.GetString("token-dtype");
  if (o->token_dtype != "auto" && o->token_dtype != "uint16" && o->token_dtype != "uint32") {
    return BadFlag(absl::StrCat("--token-dtype must be auto, uint16 or uint32, got '", o->token_dtype, "'"));
  }
  o->eval_fraction = f.GetDouble("eval-fraction");
  if (!(o->eval_fraction >= 0 && o->eval_fraction < 1)) {
    return BadFlag(absl::StrCat("--eval-fraction must be in [0, 1), got ", o->eval_fraction));
  }
  o->seq_len = f.GetInt("seq-len");
  if (o->seq_len < 0) return BadFlag(absl::StrCat("--seq-len must be positive, got ", o->seq_len));
  o->steps = f.GetInt("steps");
  if (o->steps < 1) return BadFlag(absl::StrCat("--steps must be at least 1, got ", o->steps));
  o->eval_interval = f.GetInt("eval-interval");
  o->eval_batches = f.GetInt("eval-batches");
  if (o->eval_batches < 0) return BadFlag("--eval-batches must be >= 0 (0: the whole eval set)");
  o->activation_checkpointing = f.GetBool("activation-checkpointing");
  o->output_dir = f.GetString("output-dir");
  o->save_dir = f.GetString("save-dir");
  o->save_interval = f.GetInt("save-interval");
  if (o->save_interval < 0) return BadFlag("--save-interval must be >= 0 (0: only at the end)");
  const std::string save_format = f.GetString("save-format");
  if (save_format != "zerotorch" && save_format != "deepspeed") {
    return BadFlag(absl::StrCat("--save-format must be zerotorch or deepspeed, got '", save_format, "'"));
  }
  o->save_deepspeed = save_format == "deepspeed";
  o->resume = f.GetBool("resume");
  const long long restarts = f.GetInt("max-restarts");
  if (restarts < 0 || restarts > 100000) {
    return BadFlag(absl::StrCat("--max-restarts must be in [0, 100000], got ", restarts));
  }
  o->max_restarts = static_cast<int>(restarts);
  o->restart_from_scratch = f.GetBool("restart-from-scratch");
  o->memory_copies = f.GetBool("memory-copies");
  if (o->memory_copies && o->save_dir == "none") {
    return BadFlag("--memory-copies keeps copies of the checkpoints, and --save-dir none turns them off");
  }
  if (o->memory_copies && o->max_restarts == 0) {
    return BadFlag("--memory-copies serves restarts (the copies go when the job ends): add --max-restarts K");
  }
  o->eval_only = f.GetBool("eval-only");
  o->sample_prompts = f.GetRepeated("sample-prompts");
  o->sample_tokens = f.GetInt("sample-tokens");
  if (!o->sample_prompts.empty() && o->eval_interval < 0) {
    return BadFlag("--sample-prompts samples at each evaluation, and --eval-interval -1 turns evaluation off");
  }
  if (o->sample_tokens < 1 || o->sample_tokens > 4096) {
    return BadFlag(absl::StrCat("--sample-tokens must be in [1, 4096], got ", o->sample_tokens));
  }
  for (const std::string& p : o->sample_prompts) {
    if (p.empty()) return BadFlag("--sample-prompts: a prompt is empty");
  }
  if (o->eval_only && o->eval_interval < 0) {
    return BadFlag("--eval-only evaluates, and --eval-interval -1 turns evaluation off: drop one of them");
  }
  o->weight_decay_groups = f.GetString("weight-decay-groups");
  if (o->weight_decay_groups != "all" && o->weight_decay_groups != "hf") {
    return BadFlag(absl::StrCat("--weight-decay-groups is all or hf, got '", o->weight_decay_groups, "'"));
  }
  {
    absl::StatusOr<plan::Bf16Compute> compute = plan::ParseBf16Compute(f.GetString("bf16-compute"));
    if (!compute.ok()) return BadFlag(absl::StrCat("--", compute.status().message()));
    o->bf16_compute = *compute;
  }
  o->init_from = f.GetString("init-from");
  // A Hugging Face model folder brings its architecture: --init-from DIR
  // alone trains the model its config.json describes.
  // So does a llama2.c model file (its header).
  if (!f.WasSet("model") && !o->init_from.empty() &&
      (!models::HfConfigPath(o->init_from).empty() || ckpt::LooksLikeLlama2c(o->init_from))) {
    o->model = o->init_from;
  }
  o->lora.r = f.GetInt("lora-r");
  o->lora.alpha = f.GetDouble("lora-alpha");
  o->lora.dropout = f.GetDouble("lora-dropout");
  const std::string targets = f.GetString("lora-targets");
  if (!targets.empty()) o->lora.targets = absl::StrSplit(targets, ',', absl::SkipWhitespace());
  for (const char* flag : {"lora-alpha", "lora-dropout", "lora-targets"}) {
    if (f.WasSet(flag) && !o->lora.enabled()) {
      return BadFlag(absl::StrCat("--", flag, " needs LoRA on: add --lora-r R (e.g. --lora-r 8)"));
    }
  }
  if (absl::Status st = ValidateLoraOptions(o->lora); !st.ok()) return BadFlag(std::string(st.message()));
  o->export_path = f.GetString("export");
  if (!ParseByteSize(f.GetString("max-shard-size"), &o->max_shard_bytes)) {
    return BadFlag(absl::StrCat("--max-shard-size '", f.GetString("max-shard-size"),
                                "' is not a size; give e.g. 5GB, 500MB or 2GiB"));
  }
  o->report = f.GetString("report");
  o->seed = static_cast<uint64_t>(f.GetInt("seed"));
  o->progress = !f.GetBool("no-progress");
  o->threads = static_cast<int>(f.GetInt("threads"));
  if (o->resume && o->save_dir == "none") return BadFlag("--resume needs checkpoints: drop --save-dir none");
  if (o->max_restarts > 0 && o->save_dir == "none" && !o->restart_from_scratch) {
    return BadFlag(
        "--max-restarts resumes each restart from a checkpoint, and --save-dir none turns them off: drop --save-dir "
        "none (and set --save-interval), or add --restart-from-scratch to train again from step 0");
  }
  if (o->save_deepspeed && o->save_dir == "none") {
    return BadFlag("--save-format deepspeed converts the checkpoints, and --save-dir none turns them off");
  }
  if (o->save_dir == "none" && !o->export_path.empty() && o->export_path != "none") {
    return BadFlag(absl::StrCat("--export ", o->export_path,
                                " is written from the final checkpoint, and --save-dir none turns checkpoints off: "
                                "drop --save-dir none, or drop --export"));
  }
  return absl::OkStatus();
}

// Command-line values written into the config.
absl::Status ReadConfigOverrides(const Flags& f, train::ConfigOverrides* co) {
  if (f.WasSet("stage")) {
    const long long s = f.GetInt("stage");
    if (s < 0 || s > 3) return BadFlag(absl::StrCat("--stage must be 0, 1, 2 or 3, got ", s));
    co->values["zero_optimization.stage"] = absl::StrCat(s);
  }
  const bool micro = f.WasSet("micro-batch"), gas = f.WasSet("grad-accum"), global = f.WasSet("global-batch");
  for (const char* name : {"micro-batch", "grad-accum", "global-batch"}) {
    if (f.WasSet(name) && f.GetInt(name) < 1) {
      return BadFlag(absl::StrCat("--", name, " must be at least 1, got ", f.GetInt(name)));
    }
  }
  if (micro) co->values["train_micro_batch_size_per_gpu"] = absl::StrCat(f.GetInt("micro-batch"));
  if (gas) co->values["gradient_accumulation_steps"] = absl::StrCat(f.GetInt("grad-accum"));
  if (global) co->values["train_batch_size"] = absl::StrCat(f.GetInt("global-batch"));
  // The command line decides: a batch key it leaves out is derived from the
  // ones it gives (DeepSpeed's rules) where the file's value could contradict them.
  if ((micro || gas) && !global) co->erase.push_back("train_batch_size");
  if (global && !micro) co->erase.push_back("train_micro_batch_size_per_gpu");
  if (global && micro && !gas) co->erase.push_back("gradient_accumulation_steps");
  if (f.WasSet("lr")) {
    const double lr = f.GetDouble("lr");
    if (!(lr > 0)) return BadFlag(absl::StrCat("--lr must be > 0, got ", lr));
    co->lr = lr;
  }
  if (f.WasSet("precision")) {
    const std::string p = f.GetString("precision");
    if (p != "fp32" && p != "bf16" && p != "fp16") {
      return BadFlag(absl::StrCat("--precision must be fp32, bf16 or fp16, got '", p, "'"));
    }
    co->values["bf16.enabled"] = p == "bf16" ? "true" : "false";
    co->values["fp16.enabled"] = p == "fp16" ? "true" : "false";
  }
  for (const std::string& kv : f.GetRepeated("set")) {
    std::vector<std::string> parts = absl::StrSplit(kv, absl::MaxSplits('=', 1));
    if (parts.size() != 2 || parts[0].empty()) {
      return BadFlag(absl::StrCat("--set ", kv, ": expected KEY=JSON, e.g. --set zero_optimization.stage=2"));
    }
    co->values[parts[0]] = parts[1];
  }
  return absl::OkStatus();
}

// The Trainer's arguments: only those given are passed on, so that a flag
// that fills nothing can say so; the rest take the Trainer's defaults in
// the config parser.
void ReadTrainerArgs(const Flags& f, const train::TrainOptions& o, train::TrainerArgs* trainer) {
  trainer->steps = o.steps;
  if (f.WasSet("warmup-steps")) trainer->warmup_steps = f.GetInt("warmup-steps");
  if (f.WasSet("warmup-ratio")) trainer->warmup_ratio = f.GetDouble("warmup-ratio");
  if (f.WasSet("max-grad-norm")) trainer->max_grad_norm = f.GetDouble("max-grad-norm");
  if (f.WasSet("weight-decay")) trainer->weight_decay = f.GetDouble("weight-decay");
  const models::ModelSpec spec = train::ModelSpecOf(o);
  // An unknown model is reported by the job check, naming the model.
  if (absl::StatusOr<estimate::ModelShape> shape = estimate::BuiltinModelShape(spec);
      shape.ok() && shape->transformer) {
    trainer->hidden_size = shape->transformer->hidden;
  }
}

absl::Status ToOptions(const Flags& f, train::TrainOptions* o, train::ConfigOverrides* co,
                       train::TrainerArgs* trainer) {
  ZT_RETURN_IF_ERROR(ReadRunOptions(f, o));
  ZT_RETURN_IF_ERROR(ReadConfigOverrides(f, co));
  ReadTrainerArgs(f, *o, trainer);
  return absl::OkStatus();
}

// More ranks than cores time-share the CPU; far more also multiply the
// per-process memory. Warns about the first, refuses what cannot fit in the
// memory available now (the estimate of model states, buffers and
// activations per rank plus the LibTorch process itself, about 200 MiB).
// Before any rank starts: the model states the ranks will hold (the
// estimator's figure, which leaves out activations, so it is a floor) must
// fit in what this process may still take -- the host's available memory,
// its cgroup's limit, its ulimit -v -- or the job is refused with both
// figures, rather than killed for memory a few seconds into building the
// model. More ranks than cores is said as a warning.
absl::Status CheckRankCount(const train::TrainOptions& o, const std::string& json, const std::string& source,
                            int nproc) {
  const long cores = sysconf(_SC_NPROCESSORS_ONLN);
  constexpr int64_t kProcessBytes = int64_t{200} << 20;
  int64_t per_rank = kProcessBytes;
  absl::StatusOr<Config> config = train::ParseTrainConfig(json, source, nproc);
  const models::ModelSpec spec = train::ModelSpecOf(o);
  absl::StatusOr<estimate::ModelShape> shape = estimate::BuiltinModelShape(spec);
  if (config.ok() && shape.ok()) {
    estimate::EstimateOptions eo = estimate::OptionsFromConfig(*config, nproc);
    absl::StatusOr<estimate::MemoryEstimate> m = estimate::EstimateMemory(*shape, eo);
    if (m.ok()) per_rank += m->total() + m->offloaded_cpu;
  }
  const MemoryBound bound = ProcessMemoryBound();
  const std::string need =
      absl::StrCat(nproc, " rank", nproc == 1 ? "" : "s", " x ", HumanBytes(static_cast<double>(per_rank)), " = ",
                   HumanBytes(static_cast<double>(per_rank) * nproc));
  if (bound.bytes > 0 && per_rank * nproc > bound.bytes) {
    return absl::ResourceExhaustedError(absl::StrCat("--nproc ", nproc, " needs at least ", need,
                                                     " of memory (model states as zt estimate counts them, "
                                                     "activations not included), more than the ",
                                                     HumanBytes(static_cast<double>(bound.bytes)), " ", bound.source,
                                                     ": ", nproc > 1 ? "start fewer ranks, " : "",
                                                     "use a higher ZeRO stage or offload, or a smaller model"));
  }
  if (cores >= 1 && nproc > cores) {
    std::fprintf(stderr,
                 "zt train: warning: %d ranks on %ld cores share the CPU (each rank gets one thread and they take "
                 "turns; expect it to be slower than %ld ranks); memory: about %s\n",
                 nproc, cores, cores, need.c_str());
  }
  return absl::OkStatus();
}

}  // namespace

int FailTrain(const absl::Status& st) {
  std::string message(st.message());
  std::fprintf(stderr, "zt train: %s\n", message.c_str());
  return st.code() == absl::StatusCode::kInvalidArgument || st.code() == absl::StatusCode::kNotFound ? 2 : 1;
}

std::optional<int> ReadTrainJob(const std::vector<std::string>& args, Flags& flags, TrainJob* job) {
  Define(flags);
  if (std::optional<int> done = flags.ParseCommandLine(args, kSynopsis, kDescription)) return *done;
  if (flags.GetBool("list-models")) {
    std::printf("%s", models::ModelHelp().c_str());
    return 0;
  }
  train::ConfigOverrides overrides;
  train::TrainerArgs trainer_args;
  if (absl::Status st = ToOptions(flags, &job->options, &overrides, &trainer_args); !st.ok()) return FailTrain(st);
  const std::string config_path = flags.GetString("config");
  job->config_source = config_path.empty() ? "built-in default config" : config_path;
  absl::StatusOr<std::string> json = train::ComposeConfigJson(config_path, overrides);
  if (!json.ok()) return FailTrain(json.status());
  json = train::FillTrainAutos(*json, trainer_args, &job->auto_notes);
  if (!json.ok()) return FailTrain(json.status());
  job->config_json = *std::move(json);
  return std::nullopt;
}

absl::StatusOr<int> TrainRankCount(const Flags& flags, const TrainJob& job) {
  ZT_ASSIGN_OR_RETURN(const int from_config, train::WorldSizeFromConfig(job.config_json, 2));
  const long long nproc = flags.WasSet("nproc") ? flags.GetInt("nproc") : from_config;
  if (nproc < 1 || nproc > 256) return BadFlag(absl::StrCat("--nproc must be in [1, 256], got ", nproc));
  return static_cast<int>(nproc);
}

absl::Status CheckTrainJobBeforeRanks(const TrainJob& job, int nproc) {
  ZT_RETURN_IF_ERROR(train::CheckTrainJob(job.options, job.config_json, job.config_source, nproc));
  return CheckRankCount(job.options, job.config_json, job.config_source, nproc);
}

int RunTrainFront(const std::vector<std::string>& args, char** argv) {
  absl::StatusOr<comm::RankEnv> env = comm::ReadRankEnv();
  // A rank under a launcher, or an environment zt-torch will name: its call.
  if (!env.ok() || env->source != comm::RankEnv().source) return ExecTorchProgram(argv);
  Flags flags("zt train");
  TrainJob job;
  if (std::optional<int> done = ReadTrainJob(args, flags, &job)) return *done;
  for (const std::string& note : job.auto_notes) std::printf("zt train: note: %s\n", note.c_str());
  std::fflush(stdout);
  absl::StatusOr<int> nproc = TrainRankCount(flags, job);
  if (!nproc.ok()) return FailTrain(nproc.status());
  if (absl::Status st = CheckTrainJobBeforeRanks(job, *nproc); !st.ok()) return FailTrain(st);
  ::setenv(kTrainCheckedEnv, "1", 1);
  return ExecTorchProgram(argv);
}

}  // namespace zt::cli
