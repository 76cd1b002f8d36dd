// zt::Config: a DeepSpeed-style ds_config.json as typed, validated C++ values.
//
// Every field carries the default documented in docs/config_reference.md; the
// key table in config/schema_*.cc is the single source of those defaults, of
// the parser's checks and of the generated reference page (a test checks that
// the initializers below agree with it). This header
// has no JSON dependency so the engine can include it cheaply.
//
// Usage:
//   zt::ParseOptions opts;  opts.world_size = 4;
//   absl::StatusOr<zt::Config> cfg = zt::LoadConfigFile("ds_config.json", opts);
//   if (!cfg.ok()) { std::cerr << cfg.status().message(); return 2; }
#pragma once

#include <array>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace zt {

enum class OffloadDevice { kNone, kCpu, kNvme };
enum class DType { kFloat32, kFloat16, kBFloat16 };
enum class OptimizerType { kAdam, kAdamW, kAdagrad, kLion, kSGD };
enum class SchedulerType { kNone, kWarmupLR, kWarmupDecayLR, kWarmupCosineLR, kOneCycle, kLRRangeTest };
enum class WarmupType { kLog, kLinear };
enum class TagValidation { kIgnore, kWarn, kFail };

// Batch sizes as written (nullopt: absent, or "auto" to be derived from the
// others; an "auto" micro-batch with nothing to derive from holds the Hugging
// Face Trainer's default, 8, as if given) and as resolved for a
// data-parallel world size: train_batch == micro_batch * accumulation_steps * world_size.
struct BatchConfig {
  std::optional<int64_t> train_batch_size;
  std::optional<int64_t> train_micro_batch_size_per_gpu;
  std::optional<int64_t> gradient_accumulation_steps;

  int64_t train_batch = 0;
  int64_t micro_batch = 0;
  int64_t accumulation_steps = 0;
  int world_size = 0;
};

// Applies DeepSpeed's derivation rules (docs/config_reference.md, "Batch size")
// to the written values of `batch` for `world_size` ranks and fills the
// resolved fields. Errors name the keys and print the equation with numbers.
absl::Status ResolveBatch(BatchConfig& batch, int world_size);

struct Fp16Config {
  bool enabled = false;
  bool auto_cast = false;
  double loss_scale = 0.0;  // 0: dynamic scaling; > 0: static scale.
  int initial_scale_power = 16;
  int loss_scale_window = 1000;
  int hysteresis = 2;
  bool consecutive_hysteresis = false;
  double min_loss_scale = 1.0;
  bool dynamic() const { return loss_scale == 0.0; }
};

struct Bf16Config {
  bool enabled = false;
};

// One struct for every optimizer type; fields a type does not use keep their
// defaults. Defaults depend on the type (e.g. Adagrad lr 1e-2 and eps 1e-10,
// as DeepSpeed's CPU Adagrad) and are filled by the parser.
struct OptimizerConfig {
  bool present = false;  // an "optimizer" block was given
  OptimizerType type = OptimizerType::kAdamW;
  double lr = 1e-3;
  std::array<double, 2> betas = {0.9, 0.999};
  double eps = 1e-8;
  double weight_decay = 0.0;
  bool bias_correction = true;
  // DeepSpeed semantics: "Adam" decouples weight decay unless adam_w_mode is
  // false; "AdamW" always does. This is the resolved meaning.
  bool adam_w_mode = true;
  bool torch_adam = false;
  // SGD
  double momentum = 0.0;
  double dampening = 0.0;
  bool nesterov = false;
  // Adagrad
  double initial_accumulator_value = 0.0;
};

struct SchedulerConfig {
  SchedulerType type = SchedulerType::kNone;
  // WarmupLR, WarmupDecayLR
  double warmup_min_lr = 0.0;
  double warmup_max_lr = 1e-3;
  int64_t warmup_num_steps = 1000;
  WarmupType warmup_type = WarmupType::kLog;
  // WarmupDecayLR, WarmupCosineLR (required there)
  int64_t total_num_steps = 0;
  // WarmupCosineLR
  double warmup_min_ratio = 0.0;
  double cos_min_ratio = 1e-4;
  // OneCycle (cycle_min_lr / cycle_max_lr required there)
  double cycle_min_lr = 0.0;
  double cycle_max_lr = 0.0;
  double decay_lr_rate = 0.0;
  int64_t cycle_first_step_size = 2000;
  int64_t cycle_second_step_size = 2000;  // defaults to cycle_first_step_size
  int64_t cycle_first_stair_count = 0;
  int64_t cycle_second_stair_count = 0;  // defaults to cycle_first_stair_count
  int64_t decay_step_size = 0;
  bool cycle_momentum = true;
  double cycle_min_mom = 0.8;
  double cycle_max_mom = 0.9;
  double decay_mom_rate = 0.0;
  // LRRangeTest
  double lr_range_test_min_lr = 1e-3;
  int64_t lr_range_test_step_size = 2000;
  double lr_range_test_step_rate = 1.0;
  bool lr_range_test_staircase = false;
};

struct OffloadOptimizerConfig {
  OffloadDevice device = OffloadDevice::kNone;
  std::string nvme_path;
  bool pin_memory = false;
  int buffer_count = 4;
  bool pipeline_read = false;
  bool pipeline_write = false;
  bool fast_init = false;
  double ratio = 1.0;
};

struct OffloadParamConfig {
  OffloadDevice device = OffloadDevice::kNone;
  std::string nvme_path;
  bool pin_memory = false;
  int buffer_count = 5;
  int64_t buffer_size = 100000000;
  int64_t max_in_cpu = 1000000000;
};

struct ZeroConfig {
  int stage = 0;
  bool contiguous_gradients = true;
  bool reduce_scatter = true;
  int64_t reduce_bucket_size = 500000000;  // elements
  bool allgather_partitions = true;
  int64_t allgather_bucket_size = 500000000;
  bool overlap_comm = false;  // resolved: default true for stage 3, false otherwise
  bool load_from_fp32_weights = true;
  bool elastic_checkpoint = false;
  bool round_robin_gradients = false;
  int64_t sub_group_size = 1000000000;
  int64_t prefetch_bucket_size = 50000000;
  int64_t param_persistence_threshold = 100000;
  int64_t model_persistence_threshold = std::numeric_limits<int64_t>::max();
  int64_t max_live_parameters = 1000000000;
  int64_t max_reuse_distance = 1000000000;
  bool gather_16bit_weights_on_model_save = false;
  bool ignore_unused_parameters = true;
  // MiCS / HSDP: K > 0 shards over groups of K consecutive ranks and
  // replicates across the world / K groups (comm/shard_groups.h); -1 or 0:
  // flat, over the whole world.
  int mics_shard_size = -1;
  // ZeRO++ hpZ: H > 1 keeps, at stage 3, a secondary copy of each gathered
  // chunk sharded over groups of H consecutive ranks (a host's, when H is
  // the ranks per host), so backward's re-gathers stay inside them; 1: off.
  int hpz_partition_size = 1;
  // MiCS's hierarchical gather: at stage 3, a shard group that spans hosts
  // gathers parameters in two hops (comm/two_hop_gather.h).
  bool mics_hierarchical_params_gather = false;
  // ZeRO++ qwZ at stage 3: parameter gathers send int8 blocks with scales
  // (zero/quantized_weights.h), for every non-persistent chunk / for the
  // frozen ones, quantized once.
  bool quantized_weights = false;
  bool quantized_nontrainable_weights = false;
  // ZeRO++ qgZ at stage 3: gradient buckets reduced by one all-to-all of
  // quantized slices (zero/quantized_gradients.h), int8 by default.
  bool quantized_gradients = false;
  int quantized_gradients_bits = 8;
  // LoCo error feedback for qgZ (zeropp_loco_param): on when the block sets
  // err_beta or reset_T.
  bool loco = false;
  double loco_err_beta = 0.8;
  int64_t loco_reset_t = 1024;
  OffloadOptimizerConfig offload_optimizer;
  OffloadParamConfig offload_param;
};

struct AioConfig {
  int64_t block_size = 1048576;
  int queue_depth = 8;
  int intra_op_parallelism = 1;  // DeepSpeed's older name: thread_count
  bool single_submit = false;
  bool overlap_events = true;
};

struct ActivationCheckpointingConfig {
  bool partition_activations = false;
  bool cpu_checkpointing = false;
  bool contiguous_memory_optimization = false;
  std::optional<int64_t> number_checkpoints;
  bool synchronize_checkpoint_boundary = false;
  bool profile = false;
};

struct CheckpointConfig {
  TagValidation tag_validation = TagValidation::kWarn;
  bool load_universal = false;
  bool use_node_local_storage = false;
  bool async_save = false;  // engine/background_save.h
};

struct MonitorConfig {
  bool enabled = false;
  std::string output_path;
  std::string job_name = "DeepSpeedJobName";
};

struct Config {
  BatchConfig batch;
  int steps_per_print = 10;
  bool wall_clock_breakdown = false;
  double gradient_clipping = 0.0;  // 0: off
  bool prescale_gradients = false;
  double gradient_predivide_factor = 1.0;
  std::optional<DType> communication_data_type;  // nullopt: the model's dtype
  std::optional<DType> grad_accum_dtype;         // data_types.grad_accum_dtype
  bool zero_allow_untested_optimizer = false;
  bool zero_force_ds_cpu_optimizer = true;
  bool dump_state = false;
  bool memory_breakdown = false;

  Fp16Config fp16;
  Bf16Config bf16;
  OptimizerConfig optimizer;
  SchedulerConfig scheduler;
  ZeroConfig zero;
  AioConfig aio;
  ActivationCheckpointingConfig activation_checkpointing;
  CheckpointConfig checkpoint;
  MonitorConfig tensorboard;
  MonitorConfig csv_monitor;

  // Canonical paths of keys written as "auto" whose value only the run knows
  // and that nothing gave: scheduler.params.total_num_steps (the number of
  // training steps) and the ZeRO sizes the Hugging Face Trainer computes from
  // the model's hidden size. Only a parse with
  // ParseOptions::allow_run_time_autos leaves any; their fields then hold a
  // stand-in (the key's default, 0 where it has none), ConfigToJson writes
  // them as "auto" again, and CheckAutosResolved refuses the config: it is for
  // checking, not for training.
  std::vector<std::string> run_time_autos;

  // The text the config was parsed from (checkpoints store it as ds_config).
  std::string source_json;
  // Human-readable notes from parsing: which value each "auto" became,
  // deprecated spellings that were mapped, keys accepted without effect.
  // The parser does not log; callers print them (`zt config check` does).
  std::vector<std::string> notes;
};

// One problem found in a config file. `path` is the JSON path of the key
// ("zero_optimization.offload_param.device"), "" for the document itself.
struct ConfigError {
  std::string path;
  std::string message;
};

// "auto" follows the Hugging Face Trainer (transformers'
// HfTrainerDeepSpeedConfig), which fills it from its TrainingArguments and
// the model: docs/config.md, "Hugging Face Trainer configs", has the table.
// A key written with a value is never changed.
struct ParseOptions {
  int world_size = 1;       // data-parallel size used to resolve batch sizes
  std::string source_name;  // shown in messages, e.g. the file path
  // Values for keys written as "auto" (JSON path -> JSON text), e.g. from a
  // command line: {"optimizer.params.lr", "3e-4"}: what the Trainer argument
  // behind the key would be. Keys without an entry take the value the
  // Trainer gives at its default arguments (optimizer.params.lr: 5e-5,
  // gradient_clipping: 1.0, scheduler.params.warmup_num_steps: 0, ...); keys
  // the Trainer does not fill take their documented default or derived
  // value. An entry naming no config key is an error; an entry for a key the
  // file sets to a value (not "auto") is ignored with a note: the file wins.
  std::map<std::string, std::string> auto_values;
  // The model's hidden size (transformers' model.config.hidden_size), from
  // which "auto" ZeRO sizes take the Trainer's values: reduce_bucket_size =
  // h * h and, at stage 3, stage3_prefetch_bucket_size = int(0.9 * h * h) and
  // stage3_param_persistence_threshold = 10 * h. An auto_values entry for one
  // of these keys wins. Must be >= 1 when set.
  std::optional<int64_t> hidden_size;
  // What happens to an "auto" only the run can fill (total_num_steps without
  // an auto_values entry; a hidden-size key without hidden_size): false, an
  // error naming the key and how to give it; true, accepted and listed in
  // Config::run_time_autos with a note saying what fills it (`zt config
  // check` does this: it checks a config before the run).
  bool allow_run_time_autos = false;
};

struct ParseResult {
  std::optional<Config> config;     // set exactly when errors is empty
  std::vector<ConfigError> errors;  // every problem in the file, in document order
  std::vector<std::string> notes;
  // What each key written as "auto" became, as JSON text, by the path as
  // written ("bfloat16.enabled"). Filled even when there are errors, for the
  // keys that resolved. Leaves out the batch keys (they follow the world
  // size) and keys left to run time.
  std::map<std::string, std::string> auto_resolutions;
  std::string source_name;  // ParseOptions::source_name
  // InvalidArgument listing all errors, one per line as
  // "<source_name>: <path>: <message>", or OK.
  absl::Status status() const;
};

// Parses and validates a whole document, collecting every error.
ParseResult ParseConfig(std::string_view json_text, const ParseOptions& options);

// Reads `path` and parses it. Missing/unreadable files are NotFound/
// PermissionDenied naming the path; invalid content is InvalidArgument with
// all errors, each prefixed by the path.
absl::StatusOr<Config> LoadConfigFile(const std::string& path, const ParseOptions& options);

// OK when the config has no "auto" left to run time
// (Config::run_time_autos); else InvalidArgument naming each such key and how
// to give its value. Call it before training with a config parsed with
// ParseOptions::allow_run_time_autos.
absl::Status CheckAutosResolved(const Config& config);

// The Hugging Face Trainer's warm-up length (TrainingArguments.get_warmup_steps):
// `warmup_steps` when it is above 0, else ceil(num_training_steps *
// warmup_ratio), computed in double precision as Python does.
int64_t TrainerWarmupSteps(int64_t warmup_steps, double warmup_ratio, int64_t num_training_steps);

// The fully resolved config as JSON (every default filled in, canonical key
// names, keys left to run time as "auto"); re-parsing it yields an equal
// Config (with ParseOptions::allow_run_time_autos where some are left).
std::string ConfigToJson(const Config& config, int indent = 2);

// The settings every rank of one job must share, as (key, JSON value) in
// schema order: what ConfigToJson writes, without the keys that may rightly
// differ from node to node (NVMe paths, aio.*, the monitors' outputs, which
// only rank 0 writes, and the logging cadence). Engine::Create compares them
// across ranks (a node started with another ds_config.json would otherwise
// train its shard with other settings, silently).
std::vector<std::pair<std::string, std::string>> ConfigSharedSettings(const Config& config);

// docs/config_reference.md, generated from the schema table.
std::string ConfigReferenceMarkdown();

// The field-by-field differences between two configs, as JSON paths
// ("zero_optimization.stage", "train_batch_size"); empty when they are equal.
// Compares every resolved value and which keys are left to run time; ignores
// source_json, notes and the batch sizes as written (only the resolved ones
// count).
std::vector<std::string> ConfigDifferences(const Config& a, const Config& b);
inline bool ConfigsEqual(const Config& a, const Config& b) { return ConfigDifferences(a, b).empty(); }

// Canonical spellings, as written in JSON ("cpu", "bf16", "AdamW", "WarmupLR").
std::string_view ToString(OffloadDevice v);
std::string_view ToString(DType v);
std::string_view ToString(OptimizerType v);
std::string_view ToString(SchedulerType v);  // kNone: "none"
std::string_view ToString(WarmupType v);
std::string_view ToString(TagValidation v);

}  // namespace zt
