// `zt estimate`: memory per rank for ZeRO stages 0-3 before a run, side by
// side, from a built-in model (or a bare parameter count), a world size and a
// DeepSpeed config (estimate/memory_estimate.h). Exit codes: 0 success,
// 2 bad input.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "apps/commands.h"
#include "cli/flags.h"
#include "config/config.h"
#include "config/lora_options.h"
#include "estimate/builtin_models.h"
#include "estimate/memory_estimate.h"
#include "estimate/step_traffic.h"
#include "plan/offload_note.h"
#include "util/status.h"
#include "util/strings.h"

namespace zt::cli {
namespace {

constexpr const char* kSynopsis =
    "--model NAME|--params P --world-size N [--stage S] [--offload none|cpu|nvme] [--offload-param none|nvme] "
    "[--precision fp32|bf16|fp16] "
    "[--micro-batch B --seq-len L] [--config ds_config.json] [--model-set KEY=INT] [--activation-checkpointing] "
    "[--lora-r R [--lora-targets a,b]] [--mics-shard-size K] [--hpz-partition-size H] [--ranks-per-host L]";

constexpr const char* kHelp =
    "\nPrints the bytes each rank holds at ZeRO stages 0-3: parameters, gradients, the fp32 master, optimizer\n"
    "state (what zt::Engine::memory() reports), reduction buckets, the stage-3 gathered working set and, with\n"
    "--micro-batch, the activations of the built-in transformers. Sizes, precision, optimizer and buckets come\n"
    "from --config (default: AdamW, fp32, DeepSpeed's defaults); flags override it. Then the bytes a step sends\n"
    "inside a host and across hosts (--ranks-per-host), flat and with hierarchical sharding (--mics-shard-size\n"
    "or the config's zero_optimization.mics_shard_size). See docs/estimate.md and docs/hierarchical.md.\n";

absl::Status BadFlag(const std::string& message) {
  return absl::InvalidArgumentError(absl::StrCat(message, "\nusage: zt estimate ", kSynopsis));
}

struct Request {
  estimate::ModelShape shape;
  std::vector<int> stages;
  std::vector<estimate::EstimateOptions> options;  // one per stage
  int ranks_per_host = 0;                          // 0: the whole world on one host
  int mics_shard_size = -1;                        // hierarchical sharding at stages 1-3 (-1: flat)
  int hpz_partition_size = 1;                      // ZeRO++ hpZ at stage 3 (1: off)
  std::string optimizer_name;
  bool activations = false;
};

const char* PrecisionName(estimate::Precision p) {
  switch (p) {
    case estimate::Precision::kFp32: return "fp32";
    case estimate::Precision::kBf16: return "bf16";
    case estimate::Precision::kFp16: return "fp16";
  }
  return "?";
}

absl::StatusOr<nlohmann::json> ReadConfigJson(const std::string& path) {
  if (path.empty()) {
    return nlohmann::json{{"train_micro_batch_size_per_gpu", 1},
                          {"optimizer", {{"type", "AdamW"}, {"params", {{"lr", 1e-3}}}}}};
  }
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("--config ", path, ": cannot open the file"));
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json j = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--config ", path, ": not a JSON object (zt config check ", path, " says more)"));
  }
  return j;
}

// The model from --model (with --model-set overrides) or --params.
absl::StatusOr<estimate::ModelShape> ShapeFromFlags(const Flags& f) {
  if (f.WasSet("model") == f.WasSet("params")) return BadFlag("give exactly one of --model NAME and --params P");
  if (f.WasSet("model")) {
    models::ModelSpec spec;
    spec.name = f.GetString("model");
    auto sets = cli::ParseModelSets(f.GetRepeated("model-set"));
    if (!sets.ok()) return BadFlag(std::string(sets.status().message()));
    spec.overrides = *std::move(sets);
    spec.lora.r = f.GetInt("lora-r");
    const std::string targets = f.GetString("lora-targets");
    if (!targets.empty()) spec.lora.targets = absl::StrSplit(targets, ',', absl::SkipWhitespace());
    if (f.WasSet("lora-targets") && !spec.lora.enabled()) return BadFlag("--lora-targets needs --lora-r R");
    if (absl::Status st = ValidateLoraOptions(spec.lora); !st.ok()) return BadFlag(std::string(st.message()));
    absl::StatusOr<estimate::ModelShape> shape = estimate::BuiltinModelShape(spec);
    if (!shape.ok()) return BadFlag(absl::StrCat("--model: ", shape.status().message()));
    return *std::move(shape);
  }
  if (!f.GetRepeated("model-set").empty()) return BadFlag("--model-set needs --model");
  if (f.WasSet("lora-r")) return BadFlag("--lora-r needs --model (the adapters' sizes come from its layers)");
  int64_t p = 0;
  if (!ParseCount(f.GetString("params"), &p)) {
    return BadFlag(
        absl::StrCat("--params needs a whole parameter count >= 1 such as 7000000000, 7e9, 7.5B or 350M; got '",
                     f.GetString("params"), "'"));
  }
  return estimate::CountOnlyShape(p);
}

// The flags with a fixed set of values or a lower bound, checked before the
// config is read.
absl::Status CheckValueFlags(const Flags& f) {
  const std::string& precision = f.GetString("precision");
  if (f.WasSet("precision") && precision != "fp32" && precision != "bf16" && precision != "fp16") {
    return BadFlag(absl::StrCat("--precision must be fp32, bf16 or fp16, got '", precision, "'"));
  }
  const std::string& offload = f.GetString("offload");
  if (f.WasSet("offload") && offload != "none" && offload != "cpu" && offload != "nvme") {
    return BadFlag(absl::StrCat("--offload must be none, cpu or nvme, got '", offload, "'"));
  }
  const std::string& offload_param = f.GetString("offload-param");
  if (f.WasSet("offload-param") && offload_param != "none" && offload_param != "cpu" && offload_param != "nvme") {
    return BadFlag(absl::StrCat("--offload-param must be none, cpu or nvme, got '", offload_param, "'"));
  }
  if (f.GetInt("micro-batch") < 0) {
    return BadFlag(absl::StrCat("--micro-batch must be >= 1, got ", f.GetInt("micro-batch")));
  }
  if (f.GetInt("seq-len") < 0) {
    return BadFlag(absl::StrCat("--seq-len must be >= 1, got ", f.GetInt("seq-len")));
  }
  return absl::OkStatus();
}

estimate::Offload ToOffload(const std::string& name) {
  return name == "cpu" ? estimate::Offload::kCpu : name == "nvme" ? estimate::Offload::kNvme : estimate::Offload::kNone;
}

// --precision, --offload and --offload-param, where given, over the config's.
// The values were checked by CheckValueFlags.
void ApplyFlagOverrides(const Flags& f, estimate::EstimateOptions& o) {
  if (f.WasSet("precision")) {
    const std::string& precision = f.GetString("precision");
    o.precision = precision == "bf16"   ? estimate::Precision::kBf16
                  : precision == "fp16" ? estimate::Precision::kFp16
                                        : estimate::Precision::kFp32;
  }
  if (f.WasSet("offload")) o.offload = ToOffload(f.GetString("offload"));
  if (f.WasSet("offload-param")) o.param_offload = ToOffload(f.GetString("offload-param"));
}

// Stage `s`'s options: the config `json` at that stage, resolved for `world`
// ranks, then the flags. Also sets r.activations and r.optimizer_name
// (the same for every stage); needs r.shape.
absl::StatusOr<estimate::EstimateOptions> StageOptions(const Flags& f, const nlohmann::json& json, int s, int world,
                                                       Request& r) {
  const std::string source = f.WasSet("config") ? f.GetString("config") : std::string("the default config");
  // Each stage resolves its own defaults (overlap_comm is on by default at stage 3).
  nlohmann::json j = json;
  j["zero_optimization"]["stage"] = s;
  // Stage 0 shards nothing: its column is flat whatever the config says;
  // hpZ is stage 3's alone.
  if (s == 0) j["zero_optimization"].erase("mics_shard_size");
  if (s != 3) j["zero_optimization"].erase("zero_hpz_partition_size");
  ParseOptions po;
  po.world_size = world;
  po.source_name = source;
  // "auto" as the Hugging Face Trainer fills it: the ZeRO sizes from the
  // model's hidden size; what only a run knows (total_num_steps, the sizes
  // for --params) does not change memory and is left to run time.
  if (r.shape.transformer) po.hidden_size = r.shape.transformer->hidden;
  po.allow_run_time_autos = true;
  ParseResult parsed = ParseConfig(j.dump(), po);
  if (!parsed.config) return BadFlag(absl::StrCat("--config: ", parsed.status().message()));
  const Config& c = *parsed.config;
  estimate::EstimateOptions o = estimate::OptionsFromConfig(c, world);
  ApplyFlagOverrides(f, o);
  if (f.WasSet("mics-shard-size")) o.mics_shard_size = s == 0 ? -1 : static_cast<int>(f.GetInt("mics-shard-size"));
  if (f.WasSet("hpz-partition-size"))
    o.hpz_partition_size = s == 3 ? static_cast<int>(f.GetInt("hpz-partition-size")) : 1;
  r.activations = f.WasSet("micro-batch") || f.WasSet("config");
  o.micro_batch = f.WasSet("micro-batch") ? f.GetInt("micro-batch") : c.batch.micro_batch;
  if (f.WasSet("seq-len")) {
    o.seq_len = f.GetInt("seq-len");
  } else if (r.shape.transformer) {
    ZT_ASSIGN_OR_RETURN(models::ModelInfo info, models::DescribeModel(models::ModelSpec{r.shape.name, {}, 1, {}}));
    o.seq_len = info.max_seq_len;
  }
  if (!r.activations) o.micro_batch = 0;
  o.activation_checkpointing = f.GetBool("activation-checkpointing");
  r.optimizer_name = std::string(ToString(c.optimizer.type));
  return o;
}

absl::StatusOr<Request> ToRequest(const Flags& f) {
  if (!f.positional().empty()) {
    return BadFlag(absl::StrCat("unexpected argument '", f.positional().front(), "'; options start with --"));
  }
  Request r;
  const long long world = f.GetInt("world-size");
  if (world < 1) return BadFlag(absl::StrCat("--world-size must be >= 1, got ", world));
  const long long stage = f.GetInt("stage");
  if (f.WasSet("stage") && (stage < 0 || stage > 3)) {
    return BadFlag(absl::StrCat("--stage must be 0, 1, 2 or 3, got ", stage));
  }
  ZT_ASSIGN_OR_RETURN(r.shape, ShapeFromFlags(f));
  ZT_RETURN_IF_ERROR(CheckValueFlags(f));

  ZT_ASSIGN_OR_RETURN(nlohmann::json json, ReadConfigJson(f.GetString("config")));
  if (f.WasSet("stage")) {
    r.stages = {static_cast<int>(stage)};
  } else {
    r.stages = {0, 1, 2, 3};
  }
  if (f.WasSet("mics-shard-size")) {
    const long long k = f.GetInt("mics-shard-size");
    if (k != -1 && (k < 1 || k > world || world % k != 0)) {
      return BadFlag(absl::StrCat("--mics-shard-size must divide --world-size ", world, " (or be -1), got ", k));
    }
  }
  if (f.WasSet("hpz-partition-size")) {
    const long long h = f.GetInt("hpz-partition-size");
    if (h < 1 || world % h != 0) {
      return BadFlag(absl::StrCat("--hpz-partition-size must divide --world-size ", world, ", got ", h));
    }
  }
  if (f.WasSet("ranks-per-host")) {
    const long long l = f.GetInt("ranks-per-host");
    if (l < 1 || world % l != 0) {
      return BadFlag(absl::StrCat("--ranks-per-host must divide --world-size ", world, ", got ", l));
    }
    r.ranks_per_host = static_cast<int>(l);
  }
  for (int s : r.stages) {
    ZT_ASSIGN_OR_RETURN(estimate::EstimateOptions o, StageOptions(f, json, s, static_cast<int>(world), r));
    if (o.mics_shard_size > 0 && o.mics_shard_size < o.world_size) r.mics_shard_size = o.mics_shard_size;
    if (o.hpz_partition_size > 1 && o.hpz_partition_size < o.world_size) r.hpz_partition_size = o.hpz_partition_size;
    r.options.push_back(o);
  }
  if (r.mics_shard_size > 0 && r.hpz_partition_size > 1) {
    return BadFlag(
        "hierarchical sharding (mics_shard_size) and hpZ (zero_hpz_partition_size) together: the engine runs one "
        "or the other; give one");
  }
  return r;
}

std::string Cell(int64_t bytes) { return bytes < 0 ? std::string("-") : HumanBytes(static_cast<double>(bytes)); }

bool AnyNvme(const estimate::EstimateOptions& o) {
  return o.offload == estimate::Offload::kNvme || o.param_offload == estimate::Offload::kNvme;
}

// The two lines above the table: model, world, precision, optimizer, offload
// and the bucket sizes (of the first stage's options; the others share them).
void PrintSetup(const Request& r) {
  const estimate::EstimateOptions& first = r.options.front();
  const int64_t psi = r.shape.numel();
  const char* offload = first.offload == estimate::Offload::kCpu    ? "cpu"
                        : first.offload == estimate::Offload::kNvme ? "nvme"
                                                                    : "none";
  std::printf("zt estimate: %s (%s parameters), %d rank%s, %s, %s (%d fp32 state%s per element), offload %s\n",
              r.shape.name.c_str(), HumanCount(static_cast<double>(psi)).c_str(), first.world_size,
              first.world_size == 1 ? "" : "s", PrecisionName(first.precision), r.optimizer_name.c_str(),
              first.optimizer_states, first.optimizer_states == 1 ? "" : "s", offload);
  std::printf("reduce_bucket_size %lld; stage 3: param persistence threshold %lld, prefetch %lld elements\n\n",
              static_cast<long long>(first.reduce_bucket_size),
              static_cast<long long>(first.param_persistence_threshold),
              static_cast<long long>(first.prefetch_bucket_size));
  int64_t trainable = 0;
  for (const estimate::ParamShape& p : r.shape.params) trainable += p.trainable ? p.numel : 0;
  if (trainable < psi) {
    std::printf(
        "trainable: %s of the %s parameters (LoRA adapters or frozen layers); gradients and optimizer "
        "state cover only them\n\n",
        HumanCount(static_cast<double>(trainable)).c_str(), HumanCount(static_cast<double>(psi)).c_str());
  }
}

// One row per kind of memory, one column per stage.
void PrintTable(const Request& r, const std::vector<estimate::MemoryEstimate>& est) {
  const estimate::EstimateOptions& first = r.options.front();
  std::string header = absl::StrFormat("%-22s", "per rank");
  for (const auto& e : est) absl::StrAppend(&header, absl::StrFormat("%14s", absl::StrCat("stage ", e.stage)));
  std::printf("%s\n", header.c_str());
  auto row = [&](const std::string& label, auto value) {
    std::string line = absl::StrFormat("%-22s", label);
    for (const auto& e : est) absl::StrAppend(&line, absl::StrFormat("%14s", value(e)));
    std::printf("%s\n", line.c_str());
  };
  using E = estimate::MemoryEstimate;
  row("params", [](const E& e) { return Cell(e.params); });
  row("grads", [](const E& e) { return Cell(e.grads); });
  row("fp32 master", [](const E& e) { return Cell(e.master); });
  row("optimizer state", [](const E& e) { return Cell(e.optimizer_state); });
  if (r.hpz_partition_size > 1) row("hpZ secondary", [](const E& e) { return Cell(e.hpz_secondary); });
  if (std::any_of(est.begin(), est.end(), [](const E& e) { return e.error_feedback > 0; })) {
    row("LoCo error records", [](const E& e) { return Cell(e.error_feedback); });
  }
  row("model states", [](const E& e) { return Cell(e.model_states()); });
  row("reduce buckets", [](const E& e) { return Cell(e.buckets); });
  row("gathered (stage 3)", [](const E& e) { return Cell(e.gathered); });
  if (est.front().activations >= 0) {
    row(absl::StrFormat("activations%s", first.activation_checkpointing ? " (ckpt)" : ""),
        [](const E& e) { return Cell(e.activations); });
  }
  row("total", [](const E& e) { return Cell(e.total()); });
  if (first.offload == estimate::Offload::kCpu) {
    row("offloaded to CPU", [](const E& e) { return Cell(e.offloaded_cpu); });
  }
  if (AnyNvme(first)) {
    row("swap buffers", [](const E& e) { return Cell(e.swap_buffers); });
    row("on NVMe", [](const E& e) { return Cell(e.offloaded_nvme); });
  }
}

// The ZeRO paper's formula per stage, then notes on what the table counts.
void PrintFormulasAndNotes(const Request& r, const std::vector<estimate::MemoryEstimate>& est) {
  const estimate::EstimateOptions& first = r.options.front();
  const int64_t psi = r.shape.numel();
  int64_t trainable = 0;
  for (const estimate::ParamShape& p : r.shape.params) trainable += p.trainable ? p.numel : 0;
  std::printf("\nZeRO paper%s (Ψ = %s parameters, N = %d ranks%s):\n",
              trainable < psi ? ", if every parameter trained (not this run)" : "",
              HumanCount(static_cast<double>(psi)).c_str(),
              r.mics_shard_size > 0 ? r.mics_shard_size : first.world_size,
              r.mics_shard_size > 0 ? " sharing a shard at stages 1-3 (mics_shard_size)" : "");
  for (size_t i = 0; i < est.size(); ++i) {
    std::printf("  stage %d: %s\n", est[i].stage, estimate::PaperFormula(est[i].stage, r.options[i], psi).c_str());
  }
  std::printf("\nnotes:\n");
  if (est.front().activations >= 0) {
    std::printf("  activations: micro-batch %lld x sequence %lld, forward + backward peak (docs/estimate.md)\n",
                static_cast<long long>(first.micro_batch), static_cast<long long>(first.seq_len));
  } else if (!r.shape.transformer) {
    std::printf("  activations: not estimated for this model\n");
  } else {
    std::printf("  activations: pass --micro-batch B (and --seq-len L) to include them\n");
  }
  if (!r.shape.units_known) std::printf("  gathered: needs the model's layers; use --model\n");
  if (first.offload == estimate::Offload::kCpu) {
    std::printf(
        "  offload cpu: the fp32 master + optimizer state a GPU build moves to host memory (stages 1-3);\n"
        "  on a CPU-only build they are in host memory either way\n");
  }
  if (AnyNvme(first)) {
    std::printf(
        "  offload nvme: optimizer state (stages 1-3) and, with --offload-param nvme, stage-3 parameter\n"
        "  shards in swap files, streamed through the swap buffers (counted in total); docs/offload.md\n");
    // Where the buffers hold everything the files do, the engine warns at
    // start-up; the same rule here (plan/offload_note.h).
    for (const estimate::MemoryEstimate& e : est) {
      for (const std::string& note :
           {plan::NvmeOffloadNote("optimizer state", e.optimizer_nvme, e.optimizer_swap_buffers),
            plan::NvmeOffloadNote("parameter shards", e.param_nvme, e.param_swap_buffers)}) {
        if (!note.empty()) std::printf("  stage %d: %s\n", e.stage, note.c_str());
      }
    }
    // The engine registers the swap buffers with io_uring (pinned once);
    // without CAP_IPC_LOCK that is charged to the locked-memory limit.
    std::string locked;
    for (const estimate::MemoryEstimate& e : est) {
      if (e.swap_buffers <= 0) continue;
      absl::StrAppend(&locked, locked.empty() ? "" : ", ", "stage ", e.stage, " ",
                      HumanBytes(static_cast<double>(e.swap_buffers)));
    }
    if (!locked.empty()) {
      std::printf(
          "  locked memory: the swap buffers are registered with io_uring, per rank %s, times\n"
          "  aio.intra_op_parallelism; without CAP_IPC_LOCK, ulimit -l must allow that, or they run\n"
          "  unregistered, with one warning (docs/offload.md, \"Fixed buffers\")\n",
          locked.c_str());
    }
  }
}

// Bytes a step sends per rank (inside its host, across hosts) and the
// busiest host's cross-host load: flat, and hierarchical where asked for.
void PrintTraffic(const Request& r) {
  const estimate::EstimateOptions& first = r.options.front();
  const int world = first.world_size;
  if (world == 1) return;
  const int per_host = r.ranks_per_host > 0 ? r.ranks_per_host : world;
  int64_t trainable = 0, frozen = 0;
  for (const estimate::ParamShape& p : r.shape.params) (p.trainable ? trainable : frozen) += p.numel;
  std::printf(
      "\nbytes sent per step (%d host%s of %d ranks; stage 3 counts a forward and a backward gather per "
      "micro-step, at most: a model the coordinator keeps gathered sends stage 2's):\n",
      world / per_host, world / per_host == 1 ? "" : "s", per_host);
  std::printf("  %-34s %16s %16s %18s\n", "layout", "per rank inside", "per rank across", "busiest host across");
  for (size_t i = 0; i < r.options.size(); ++i) {
    const estimate::EstimateOptions& o = r.options[i];
    // Flat, then hierarchical and hpZ where asked for: {mics_shard_size, hpZ size,
    // two-hop gather}. At stage 3 a shard group spanning hosts also gets its
    // row with mics_hierarchical_params_gather.
    // At stage 3 each row also comes with qwZ (zero_quantized_weights), and
    // with qwZ + qgZ (zero_quantized_gradients, int8).
    struct Layout {
      int k, h;
      bool two_hop, qwz, qgz;
    };
    std::vector<Layout> layouts = {{-1, 1, false, false, false}};
    if (o.stage >= 1 && r.mics_shard_size > 0) layouts.push_back({r.mics_shard_size, 1, false, false, false});
    if (o.stage == 3 && r.hpz_partition_size > 1) layouts.push_back({-1, r.hpz_partition_size, false, false, false});
    if (o.stage == 3 && per_host < world) {
      layouts.push_back({-1, 1, true, false, false});
      if (r.mics_shard_size > per_host && r.mics_shard_size < world) {
        layouts.push_back({r.mics_shard_size, 1, true, false, false});
      }
    }
    if (o.stage == 3) {
      const size_t n = layouts.size();
      for (bool qgz : {false, true}) {
        for (size_t j = 0; j < n; ++j) layouts.push_back({layouts[j].k, layouts[j].h, layouts[j].two_hop, true, qgz});
      }
    }
    for (const auto& [k, h, two_hop, qwz, qgz] : layouts) {
      estimate::TrafficOptions t;
      t.stage = o.stage;
      t.world_size = world;
      t.ranks_per_host = per_host;
      t.mics_shard_size = k;
      t.hpz_partition_size = h;
      t.two_hop_gather = two_hop;
      t.quantized_weights = qwz;
      t.quantized_gradient_bits = qgz ? 8 : 0;
      t.element_bytes = o.precision == estimate::Precision::kFp32 ? 4 : 2;
      absl::StatusOr<estimate::StepTraffic> st = estimate::EstimateStepTraffic(trainable, frozen, t);
      if (!st.ok()) continue;  // the inputs were checked by ToRequest
      const std::string label = absl::StrCat(k > 0   ? absl::StrFormat("stage %d, mics_shard_size %d", o.stage, k)
                                             : h > 1 ? absl::StrFormat("stage %d, hpZ %d", o.stage, h)
                                                     : absl::StrFormat("stage %d, flat", o.stage),
                                             two_hop ? ", 2-hop gather" : "", qwz ? ", qwZ" : "", qgz ? " + qgZ" : "");
      std::printf("  %-34s %16s %16s %18s\n", label.c_str(), HumanBytes(static_cast<double>(st->rank_inside)).c_str(),
                  HumanBytes(static_cast<double>(st->rank_across)).c_str(),
                  HumanBytes(static_cast<double>(st->host_across)).c_str());
    }
  }
}

int Run(const Request& r) {
  std::vector<estimate::MemoryEstimate> est;
  for (const estimate::EstimateOptions& o : r.options) {
    absl::StatusOr<estimate::MemoryEstimate> e = estimate::EstimateMemory(r.shape, o);
    if (!e.ok()) {
      std::fprintf(stderr, "zt estimate: %s\n", std::string(e.status().message()).c_str());
      return 2;
    }
    est.push_back(*e);
  }
  PrintSetup(r);
  PrintTable(r, est);
  PrintFormulasAndNotes(r, est);
  PrintTraffic(r);
  return 0;
}

}  // namespace

int RunEstimateCommand(const std::vector<std::string>& args) {
  Flags f("zt estimate");
  f.String("model", "", "a built-in model (zt train --list-models), e.g. gpt2-xl or llama-7b");
  f.String("params", "",
           "a bare parameter count instead of --model, e.g. 7e9 or 7.5B (no stage-3 working set, no activations)");
  f.Repeated("model-set", "model dimension override KEY=INT, e.g. --model-set n_layer=6");
  f.Int("world-size", 1, "data-parallel ranks");
  f.Int("stage", -1, "only this ZeRO stage (default: all four side by side)");
  f.String("precision", "", "fp32, bf16 or fp16 (default: the config's, else fp32)");
  f.String("offload", "", "optimizer offload: none, cpu or nvme (default: the config's)");
  f.String("offload-param", "", "stage-3 parameter offload: none, cpu or nvme (default: the config's)");
  f.Int("micro-batch", 0,
        "sequences per rank per micro-step; turns on the activation estimate (default: the config's)");
  f.Int("seq-len", 0, "tokens per sequence (default: the model's longest)");
  f.String("config", "", "a DeepSpeed-style JSON config (precision, optimizer, bucket sizes, offload)");
  f.Bool("activation-checkpointing", "the transformer blocks are checkpointed (zt::Checkpoint)");
  f.Int("lora-r", 0, "LoRA rank: adapters on --lora-targets train, the base is frozen (as zt train --lora-r)");
  f.String("lora-targets", "", "LoRA layer names, comma-separated, or all-linear (default: the model's, as zt train)");
  f.Int("mics-shard-size", -1,
        "hierarchical sharding at stages 1-3: shard over groups of K ranks, replicate across them (default: the "
        "config's zero_optimization.mics_shard_size, else flat)");
  f.Int("hpz-partition-size", 1,
        "ZeRO++ hpZ at stage 3: backward gathers from secondary shards over groups of H ranks (default: the "
        "config's zero_optimization.zero_hpz_partition_size, else off)");
  f.Int("ranks-per-host", 0, "ranks on each host, for the bytes inside and across hosts (default: one host)");
  if (std::optional<int> done = f.ParseCommandLine(args, kSynopsis, kHelp)) return *done;
  absl::StatusOr<Request> r = ToRequest(f);
  if (!r.ok()) {
    std::fprintf(stderr, "zt estimate: %s\n", std::string(r.status().message()).c_str());
    return 2;
  }
  return Run(*r);
}

}  // namespace zt::cli
