// Assembles the per-section key tables into one indexed Schema, and the small
// builder helpers the tables are written with.
#include "config/schema.h"

#include <utility>

#include "util/status.h"

namespace zt::config_internal {
namespace {

KeySpec MakeKey(std::string path, Kind kind, Binding field, Json default_value, std::string meaning) {
  KeySpec spec;
  spec.path = std::move(path);
  spec.kind = kind;
  spec.field = field;
  spec.default_value = std::move(default_value);
  spec.meaning = std::move(meaning);
  return spec;
}

std::vector<Section> MakeSections() {
  return {
      {"Batch size",
       "The three batch keys are tied by `train_batch_size = train_micro_batch_size_per_gpu * "
       "gradient_accumulation_steps * world size`, where the world size is the data-parallel size "
       "(`--world-size`, or `WORLD_SIZE`). Give any one or two of them and the rest are derived; give all "
       "three and they must agree. Every value must be a positive integer.\n\n"
       "| given | derived |\n|---|---|\n"
       "| all three | nothing; they must satisfy the equation |\n"
       "| `train_batch_size` + `train_micro_batch_size_per_gpu` | `gradient_accumulation_steps = "
       "train_batch_size / (micro * world)` |\n"
       "| `train_batch_size` + `gradient_accumulation_steps` | `train_micro_batch_size_per_gpu = "
       "train_batch_size / (world * gas)` |\n"
       "| `train_micro_batch_size_per_gpu` + `gradient_accumulation_steps` | `train_batch_size = micro * "
       "gas * world` |\n"
       "| `train_batch_size` only | `gradient_accumulation_steps = 1`, `micro = train_batch_size / world` |\n"
       "| `train_micro_batch_size_per_gpu` only | `gradient_accumulation_steps = 1`, `train_batch_size = "
       "micro * world` |\n"
       "| `gradient_accumulation_steps` only, or none | error: give `train_batch_size` or "
       "`train_micro_batch_size_per_gpu` |\n\n"
       "A division that leaves a remainder is an error that prints the equation with the numbers. "
       "`\"auto\"` counts as not given, so it is derived from the others; when no batch key has a value "
       "(Hugging Face templates) and none is passed with `--auto`, `train_micro_batch_size_per_gpu` becomes 8 "
       "and `gradient_accumulation_steps` 1, the Hugging Face Trainer's defaults (`per_device_train_batch_size`, "
       "`gradient_accumulation_steps`), and the check says so."},
      {"Training", "Top-level keys that shape every step."},
      {"fp16",
       "Mixed precision with fp16 weights and dynamic (or static) loss scaling. With dynamic "
       "scaling the scale starts at 2^`initial_scale_power`; a step whose gradients overflow on any "
       "rank is skipped everywhere; after `hysteresis` overflows the scale halves (never below "
       "`min_loss_scale`), and after `loss_scale_window` clean steps it doubles. `fp16` and `bf16` "
       "cannot both be enabled."},
      {"bf16",
       "Mixed precision with bfloat16 weights; no loss scaling. `bfloat16` is accepted as the old "
       "name of this block."},
      {"optimizer",
       "`{\"type\": ..., \"params\": {...}}`. `type` is matched case-insensitively. Each parameter belongs to "
       "the types listed next to it; a parameter of another type is an error. Defaults follow DeepSpeed's "
       "optimizers (FusedAdam / DeepSpeedCPUAdam, CPU Adagrad, FusedLion) and torch.optim.SGD. "
       "`max_grad_norm` is not an optimizer parameter: use the top-level `gradient_clipping`."},
      {"scheduler",
       "`{\"type\": ..., \"params\": {...}}`, stepped once per optimizer step, with DeepSpeed's "
       "semantics (deepspeed/runtime/lr_schedules.py). Log warm-up: `lr = min + (max - min) * ln(step + 1) / "
       "ln(warmup_num_steps)`; warm-up lengths below 2 act as 2, as in DeepSpeed."},
      {"zero_optimization",
       "ZeRO partitioning. Stage 0 is plain data parallelism, 1 partitions optimizer states, 2 also "
       "gradients, 3 also parameters. Sizes are in elements, not bytes. Unknown keys here are errors, as in "
       "DeepSpeed. The `stage3_` keys are also accepted without the prefix, as DeepSpeed does."},
      {"zero_optimization.offload_optimizer",
       "Keeps optimizer state (and runs the optimizer step) on the CPU or on NVMe. Needs stage 1, 2 or 3."},
      {"zero_optimization.offload_param",
       "Keeps partitioned parameters on the CPU or on NVMe between uses. Needs stage 3."},
      {"aio",
       "Asynchronous I/O for NVMe offload (a top-level block, not part of `zero_optimization`). "
       "DeepSpeed uses libaio; zerotorch uses io_uring with the same knobs."},
      {"activation_checkpointing", "Activation checkpointing for models that use zerotorch's checkpoint API."},
      {"checkpoint", "Checkpoint saving and loading."},
      {"data_types", "Data types of internal buffers."},
      {"Monitoring",
       "`tensorboard` and `csv_monitor` write training metrics (loss, learning rate, loss "
       "scale) every `steps_per_print` steps."},
  };
}

}  // namespace

KeySpec&& KeySpec::Range(std::optional<double> lo, std::optional<double> hi) && {
  min = lo;
  max = hi;
  return std::move(*this);
}
KeySpec&& KeySpec::Above(double lo) && {
  min = lo;
  min_exclusive = true;
  return std::move(*this);
}
KeySpec&& KeySpec::AtLeast(double lo) && {
  min = lo;
  min_exclusive = false;
  return std::move(*this);
}
KeySpec&& KeySpec::Below(double hi) && {
  max = hi;
  max_exclusive = true;
  return std::move(*this);
}
KeySpec&& KeySpec::AtMost(double hi) && {
  max = hi;
  max_exclusive = false;
  return std::move(*this);
}
KeySpec&& KeySpec::Nullable() && {
  nullable = true;
  return std::move(*this);
}
KeySpec&& KeySpec::Required() && {
  required = true;
  return std::move(*this);
}
KeySpec&& KeySpec::Alias(std::string alias) && {
  aliases.push_back(std::move(alias));
  return std::move(*this);
}
KeySpec&& KeySpec::AppliesTo(std::initializer_list<OptimizerType> types) && {
  for (OptimizerType t : types) applies_to |= TypeBit(t);
  return std::move(*this);
}
KeySpec&& KeySpec::AppliesTo(std::initializer_list<SchedulerType> types) && {
  for (SchedulerType t : types) applies_to |= TypeBit(t);
  return std::move(*this);
}
KeySpec&& KeySpec::Derived(Derive fn, std::string text) && {
  derive = fn;
  derive_text = std::move(text);
  return std::move(*this);
}
KeySpec&& KeySpec::AutoDerived(Derive fn, std::string text) && {
  derive_auto = fn;
  derive_text = std::move(text);
  return std::move(*this);
}
KeySpec&& KeySpec::DefaultText(std::string text) && {
  default_text = std::move(text);
  return std::move(*this);
}
KeySpec&& KeySpec::NoEffect() && {
  support = Support::kNoEffect;
  return std::move(*this);
}
KeySpec&& KeySpec::IgnoredHere(std::string reason) && {
  ignored_reason = std::move(reason);
  return std::move(*this);
}
KeySpec&& KeySpec::Unsupported(std::string hint) && {
  support = Support::kUnsupported;
  unsupported_hint = std::move(hint);
  return std::move(*this);
}
KeySpec&& KeySpec::FilledByTrainer(TrainerAuto rule) && {
  trainer_auto = std::move(rule);
  return std::move(*this);
}

std::string KeySpec::parent() const {
  size_t dot = path.rfind('.');
  return dot == std::string::npos ? std::string() : path.substr(0, dot);
}

std::string KeySpec::name() const {
  size_t dot = path.rfind('.');
  return dot == std::string::npos ? path : path.substr(dot + 1);
}

KeySpec BoolKey(std::string path, Binding field, bool default_value, std::string meaning) {
  return MakeKey(std::move(path), Kind::kBool, field, Json(default_value), std::move(meaning));
}
KeySpec IntKey(std::string path, Binding field, Json default_value, std::string meaning) {
  return MakeKey(std::move(path), Kind::kInt, field, std::move(default_value), std::move(meaning));
}
KeySpec FloatKey(std::string path, Binding field, Json default_value, std::string meaning) {
  return MakeKey(std::move(path), Kind::kFloat, field, std::move(default_value), std::move(meaning));
}
KeySpec StringKey(std::string path, Binding field, Json default_value, std::string meaning) {
  return MakeKey(std::move(path), Kind::kString, field, std::move(default_value), std::move(meaning));
}
KeySpec EnumKey(std::string path, Binding field, std::vector<EnumChoice> choices, Json default_value,
                std::string meaning) {
  KeySpec spec = MakeKey(std::move(path), Kind::kEnum, field, std::move(default_value), std::move(meaning));
  spec.choices = std::move(choices);
  return spec;
}
KeySpec PairKey(std::string path, Binding field, Json default_value, std::string meaning) {
  return MakeKey(std::move(path), Kind::kFloatPair, field, std::move(default_value), std::move(meaning));
}
KeySpec ObjectKey(std::string path, std::string meaning) {
  return MakeKey(std::move(path), Kind::kObject, std::monostate{}, Json(), std::move(meaning));
}
KeySpec FeatureBlock(std::string path, std::string meaning, std::string hint) {
  KeySpec spec = ObjectKey(std::move(path), std::move(meaning));
  spec.support = Support::kUnsupported;
  spec.unsupported_hint = std::move(hint);
  return spec;
}

uint32_t TypeBit(OptimizerType t) { return 1u << static_cast<int>(t); }
uint32_t TypeBit(SchedulerType t) { return 1u << static_cast<int>(t); }

Schema::Schema() : sections_(MakeSections()) {
  AddBatchKeys(keys_);
  AddTrainingKeys(keys_);
  AddPrecisionKeys(keys_, legacy_);
  AddOptimizerKeys(keys_);
  AddSchedulerKeys(keys_);
  AddZeroKeys(keys_, legacy_);
  AddRuntimeKeys(keys_, legacy_);
  AddUnsupportedKeys(keys_);
  // Every row must name a known section: the reference lists rows by section.
  for (const KeySpec& spec : keys_) {
    bool known = spec.support == Support::kUnsupported;
    for (const Section& s : sections_) known = known || s.title == spec.section;
    ZT_CHECK_MSG(known, "config key %s names unknown section '%s'", spec.path.c_str(), spec.section.c_str());
  }
}

const Schema& Schema::Get() {
  static const Schema* schema = new Schema();  // never destroyed: used from static contexts
  return *schema;
}

std::vector<const KeySpec*> Schema::Find(std::string_view parent, std::string_view key) const {
  std::vector<const KeySpec*> out;
  for (const KeySpec& spec : keys_) {
    if (spec.parent() != parent) continue;
    bool match = spec.name() == key;
    for (const std::string& alias : spec.aliases) match = match || alias == key;
    if (match) out.push_back(&spec);
  }
  return out;
}

const KeySpec* Schema::FindPath(std::string_view path) const {
  for (const KeySpec& spec : keys_) {
    if (spec.path == path) return &spec;
  }
  return nullptr;
}

std::vector<const KeySpec*> Schema::Children(std::string_view parent) const {
  std::vector<const KeySpec*> out;
  for (const KeySpec& spec : keys_) {
    if (spec.parent() == parent) out.push_back(&spec);
  }
  return out;
}

const LegacySpelling* Schema::FindLegacy(std::string_view parent, std::string_view key) const {
  for (const LegacySpelling& l : legacy_) {
    if (l.old_path == JoinPath(parent, key)) return &l;
  }
  return nullptr;
}

}  // namespace zt::config_internal
