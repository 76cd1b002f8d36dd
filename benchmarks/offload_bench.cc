// Offload step time and memory: the same model and batch trained with the
// optimizer state in memory ("none"), offloaded to "cpu", offloaded to NVMe
// ("nvme"), and at stage 3 with the parameter shards on NVMe too
// ("nvme-params"; "cpu-params": the optimizer state in host memory and the
// parameter shards on NVMe), one after another in one process group, over --rounds
// passes in alternating order. Prints per-step medians (forward, backward,
// step), the ratio to "none" measured in the same run, model states left in
// memory, bytes on disk, NVMe traffic per step, the time blocked on swap I/O
// (on the RESULT lines also split into the forward's and Backward's part)
// and each mode's peak RSS (the kernel's high-water mark, reset before each
// mode). With --interleave every mode is built once and they take turns of
// --steps timed steps, each between two untimed ones, and the ratio to
// "none" is paired per round: a shared VM's speed drifts by 10-20% over
// tens of seconds, which a mode built and run alone for its whole block
// takes in full (RunInterleaved says how the turns keep each mode's own
// work and transfers inside its own timed steps). "nvme-instep" and
// "nvme-params-instep" are the two NVMe modes with the optimizer update
// kept in Engine::Step (EngineTuning::update_during_backward and
// update_at_gather off), for the same-run comparison with the update
// during backward (optimizer state on NVMe) and at the forward's gathers
// (parameter shards on NVMe too). "-fifo" after an NVMe mode turns the I/O
// engine's priorities off (EngineTuning::io_priority): every swap transfer
// starts in submission order, parameter reads included. "-unfixed" after an
// NVMe mode leaves the swap buffers unregistered with io_uring
// (EngineTuning::io_fixed_buffers): every transfer pins its pages itself.
// "cpu s" and "sys s" are this rank's process CPU time per step (user plus
// kernel, and kernel alone; I/O threads included): what the swap I/O costs
// when the disk's wait is hidden. "faults" are its minor page faults per
// step: memory mapped in afresh (and zeroed) rather than reused. "steal s"
// is the CPU time the hypervisor took from this machine per step (all its
// CPUs; /proc/stat), which slows every mode alike while it lasts; "quiet x"
// is the ratio to none over the steps that lost at most --quiet-steal of the
// machine's CPU time that way, with their count. "cpu x" is "cpu s" over
// none's: the work the mode adds on this rank, which steal does not change
// (a hypervisor that charges its disk emulation to this machine's CPUs turns
// swap I/O into steal while every core computes:
// benchmarks/disk_steal_probe.sh measures that apart from zerotorch).
// A rank program: run it under a launcher, e.g.
//
//   zt launch --nproc-per-node 2 -- build/bin/zt_bench_offload --nvme-path /tmp/zt_swap
//
// The scale run (one step of a model whose fp32 optimizer state exceeds the
// machine's RAM; benchmarks/run_offload_scale.sh) uses --modes nvme-params
// --sharded-init with a big --set override of the model.
//
// Limits: CPU and Gloo; swap files on whatever disk --nvme-path is on.
#include <ATen/Parallel.h>
#include <sys/resource.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "benchmarks/median.h"
#include "cli/flags.h"
#include "comm/init.h"
#include "engine/engine.h"
#include "engine/engine_tuning.h"
#include "launch/rank_env.h"
#include "models/registry.h"
#include "ops/kernels.h"
#include "util/error.h"
#include "util/file_io.h"
#include "util/log.h"
#include "util/status.h"
#include "util/strings.h"
#include "util/system_info.h"
#include "zero/sharded_init.h"

namespace zt {
namespace {

using Clock = std::chrono::steady_clock;

double Since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

using bench::Median;

struct CpuTimes {
  double user = 0, sys = 0;
  double minor_faults = 0;  // pages the kernel mapped in (and zeroed, if fresh)
};

// This process's CPU time so far, every thread included (the I/O engine's
// workers, and io_uring's kernel workers, which belong to the process).
CpuTimes ProcessCpu() {
  struct rusage ru {};
  ::getrusage(RUSAGE_SELF, &ru);
  auto seconds = [](const timeval& t) { return static_cast<double>(t.tv_sec) + 1e-6 * static_cast<double>(t.tv_usec); };
  return {seconds(ru.ru_utime), seconds(ru.ru_stime), static_cast<double>(ru.ru_minflt)};
}

// The machine's steal time so far, in seconds summed over its CPUs: time
// the hypervisor ran something else while this VM had work (/proc/stat;
// 0 on bare metal or where not reported).
double StealSeconds() {
  std::ifstream f("/proc/stat");
  std::string cpu;
  double user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
  if (!(f >> cpu >> user >> nice >> system >> idle >> iowait >> irq >> softirq >> steal) || cpu != "cpu") return 0;
  return steal / static_cast<double>(sysconf(_SC_CLK_TCK));
}

// Resets the kernel's high-water mark of this process's RSS to its current
// RSS, so each mode reports its own peak (Linux >= 4.0).
void ResetPeakRss() {
  std::ofstream f("/proc/self/clear_refs");
  f << "5";
}

struct Options {
  std::string model = "gpt2-tiny";
  std::vector<std::string> overrides;
  std::vector<std::string> modes;
  int stage = 3;
  std::string nvme_path = "/tmp/zt_offload_bench";
  int64_t steps = 5, warmup = 2, micro_batch = 2, seq = 64;
  int rounds = 2;
  bool bf16 = false;
  int64_t sub_group_size = 100000000;
  int buffer_count = 9;
  bool pipeline = true;
  int param_buffer_count = 8;
  int64_t param_buffer_size = 0;  // 0: the largest shard
  int64_t bucket = 20000000;
  int64_t max_live = 1000000000;        // stage3_max_live_parameters
  int64_t reuse_distance = 1000000000;  // stage3_max_reuse_distance
  bool sharded_init = false;
  bool interleave = false;
  double quiet_steal = 0.01;  // the share of the machine's CPU time a quiet step may lose to steal
  std::string json;
};

struct ModeResult {
  std::string mode;
  std::vector<double> steps, forwards, backwards, optimizers;         // every timed step, every round
  std::vector<double> cpu, sys;                                       // process CPU seconds per timed step
  std::vector<double> faults;                                         // minor page faults per timed step
  std::vector<double> steal;                                          // the machine's steal seconds per timed step
  double step_s = 0, forward_s = 0, backward_s = 0, optimizer_s = 0;  // their medians
  double cpu_s = 0, sys_s = 0, faults_per_step = 0, steal_s = 0;      // ... and these
  double quiet_step_s = 0;  // the median over the quiet steps (see --quiet-steal), 0 if none
  int64_t quiet_steps = 0;  // how many there were
  double paired_ratio = 0;  // --interleave: the median over rounds of step / none's step in that round
  std::vector<double> turn_steps, turn_ratios;  // --interleave: per round, the median step and its ratio
  double registered_bytes = 0;                  // swap buffers registered with io_uring
  double fixed_pieces_per_step = 0;             // transfer pieces through them
  double peak_rss = 0;                          // bytes, this rank; -1 where not measured (--interleave)
  ModelStateBytes memory;
  double nvme_read_per_step = 0, nvme_written_per_step = 0, nvme_wait_per_step = 0;
  double optimizer_wait_per_step = 0;  // the part of nvme_wait_per_step waiting for optimizer state
  double forward_wait_per_step = 0;    // ... the part inside the forward
  double backward_wait_per_step = 0;   // ... the part inside Backward (the step has the rest)
  double in_backward = 0;              // share of the optimizer's elements updated during backward
  double at_gather = 0;                // ... and where a forward gathered them
  double final_loss = 0;
  int64_t num_params = 0;
  double build_s = 0;
};

// "nvme-instep" -> "nvme": the mode's placement, whatever its schedule or
// I/O order.
std::string Placement(const std::string& mode) {
  for (absl::string_view suffix : {"-instep", "-fifo", "-unfixed"}) {
    if (absl::EndsWith(mode, suffix)) return mode.substr(0, mode.size() - suffix.size());
  }
  return mode;
}

Config MakeConfig(const Options& o, const std::string& run_mode, int world) {
  const std::string mode = Placement(run_mode);
  Config c;
  c.batch.train_micro_batch_size_per_gpu = o.micro_batch;
  c.batch.gradient_accumulation_steps = 1;
  c.batch.train_batch_size = o.micro_batch * world;
  c.steps_per_print = 0;
  c.optimizer.present = true;
  c.optimizer.type = OptimizerType::kAdamW;
  c.optimizer.lr = 1e-4;
  c.optimizer.weight_decay = 0.01;
  c.bf16.enabled = o.bf16;
  c.zero.stage = o.stage;
  c.zero.reduce_bucket_size = o.bucket;
  c.zero.overlap_comm = true;
  c.zero.sub_group_size = o.sub_group_size;
  c.zero.max_live_parameters = o.max_live;
  c.zero.max_reuse_distance = o.reuse_distance;
  if (mode == "cpu" || mode == "cpu-params") c.zero.offload_optimizer.device = OffloadDevice::kCpu;
  if (mode == "nvme" || mode == "nvme-params") {
    auto& oo = c.zero.offload_optimizer;
    oo.device = OffloadDevice::kNvme;
    oo.nvme_path = o.nvme_path;
    oo.buffer_count = o.buffer_count;
    oo.pipeline_read = oo.pipeline_write = o.pipeline;
  }
  if (mode == "nvme-params" || mode == "cpu-params") {
    auto& op = c.zero.offload_param;
    op.device = OffloadDevice::kNvme;
    op.nvme_path = o.nvme_path;
    op.buffer_count = o.param_buffer_count;
    op.buffer_size = o.param_buffer_size > 0 ? o.param_buffer_size : o.bucket;
  }
  return c;
}

// The offload counters that steps move; a mode sums them over its timed
// steps only, so untimed steps between them (interleaved turns) count nowhere.
struct Traffic {
  double read = 0, written = 0;                        // swap bytes: optimizer state and parameter shards
  double optimizer_wait = 0, param_wait = 0;           // seconds blocked on swap I/O
  double fixed_pieces = 0;                             // transfer pieces through registered buffers
  double updated = 0, in_backward = 0, at_gather = 0;  // optimizer elements
  static constexpr double Traffic::*kFields[] = {
      &Traffic::read,         &Traffic::written, &Traffic::optimizer_wait, &Traffic::param_wait,
      &Traffic::fixed_pieces, &Traffic::updated, &Traffic::in_backward,    &Traffic::at_gather};

  double waited() const { return optimizer_wait + param_wait; }
  // *this += to - from.
  void AddDelta(const Traffic& from, const Traffic& to) {
    for (auto f : kFields) this->*f += to.*f - from.*f;
  }
};

Traffic TrafficOf(const OffloadStats& s) {
  Traffic t;
  t.read = static_cast<double>(s.optimizer_read_bytes + s.param_read_bytes);
  t.written = static_cast<double>(s.optimizer_written_bytes + s.param_written_bytes);
  t.optimizer_wait = s.optimizer_wait_seconds;
  t.param_wait = s.param_wait_seconds;
  t.fixed_pieces = static_cast<double>(s.io_pieces_fixed);
  t.updated = static_cast<double>(s.optimizer_elements_updated);
  t.in_backward = static_cast<double>(s.optimizer_elements_in_backward);
  t.at_gather = static_cast<double>(s.optimizer_elements_at_gather);
  return t;
}

// One mode's model, engine and batch, built once and then stepped by a
// schedule: all its steps in one block (RunBlocked), or in turns with every
// other mode alive at once (RunInterleaved).
class ModeRun {
 public:
  static absl::StatusOr<std::unique_ptr<ModeRun>> Build(const Options& o, const std::string& mode,
                                                        const std::shared_ptr<comm::ProcessGroup>& pg);

  // One training step; a timed one adds to the per-step series and counters.
  void Step(bool timed);
  // What the timed steps so far measured, with the engine's memory; the
  // medians and the peak RSS are the schedule's to fill in.
  ModeResult Result() const;
  const std::vector<double>& steps() const { return r_.steps; }

 private:
  ModeRun() = default;
  torch::Tensor Loss(const torch::Tensor& out) const;

  ModeResult r_;     // the series, filled by Step
  Traffic traffic_;  // summed over the timed steps
  int64_t timed_ = 0;
  std::unique_ptr<models::Model> model_;  // declared first: the engine goes first
  std::unique_ptr<Engine> engine_;
  torch::Tensor x_, y_;
};

absl::StatusOr<std::unique_ptr<ModeRun>> ModeRun::Build(const Options& o, const std::string& mode,
                                                        const std::shared_ptr<comm::ProcessGroup>& pg) {
  std::unique_ptr<ModeRun> run(new ModeRun());
  ModeResult& r = run->r_;
  r.mode = mode;
  Config config = MakeConfig(o, mode, pg->size());
  ZT_RETURN_IF_ERROR(ResolveBatch(config.batch, pg->size()));
  models::ModelSpec spec;
  spec.name = o.model;
  for (const std::string& kv : o.overrides) {
    std::vector<std::string> parts = absl::StrSplit(kv, absl::MaxSplits('=', 1));
    int64_t v = 0;
    if (parts.size() != 2 || !absl::SimpleAtoi(parts[1], &v)) {
      return absl::InvalidArgumentError(absl::StrCat("--set expects KEY=INTEGER, got '", kv, "'"));
    }
    spec.overrides[parts[0]] = v;
  }
  const auto t_build = Clock::now();
  {
    // Stage 3 can shard each block as it is built: no rank ever holds the
    // whole model.
    std::unique_ptr<ShardedInit> init;
    if (o.sharded_init && o.stage == 3) init = std::make_unique<ShardedInit>(pg, config);
    ZT_ASSIGN_OR_RETURN(run->model_, models::CreateModel(spec));
  }
  r.num_params = run->model_->info().num_params;
  EngineTuning tuning;
  tuning.update_during_backward = !absl::EndsWith(mode, "-instep");
  tuning.update_at_gather = !absl::EndsWith(mode, "-instep");
  tuning.io_priority = !absl::EndsWith(mode, "-fifo");
  tuning.io_fixed_buffers = !absl::EndsWith(mode, "-unfixed");
  ZT_ASSIGN_OR_RETURN(run->engine_, CreateTunedEngine(run->model_->module(), config, pg, EngineOptions(), tuning));
  r.build_s = Since(t_build);
  // A random batch of the model's kind: token sequences, or images with labels.
  const models::ModelInfo& info = run->model_->info();
  torch::manual_seed(1234 + static_cast<uint64_t>(pg->rank()));
  if (info.task == models::Task::kLanguageModel) {
    const int64_t seq = std::min(o.seq, info.max_seq_len);
    const torch::Tensor tokens = torch::randint(info.vocab_size, {o.micro_batch, seq + 1}, torch::kLong);
    run->x_ = tokens.narrow(1, 0, seq);
    run->y_ = tokens.narrow(1, 1, seq);
  } else if (info.task == models::Task::kSequenceClassification) {
    run->x_ = torch::randint(info.vocab_size, {o.micro_batch, std::min(o.seq, info.max_seq_len)}, torch::kLong);
    run->y_ = torch::randint(info.num_classes, {o.micro_batch}, torch::kLong);
  } else {
    run->x_ = torch::randn({o.micro_batch, 1, info.image_size, info.image_size});
    run->y_ = torch::randint(info.num_classes, {o.micro_batch}, torch::kLong);
  }
  return run;
}

torch::Tensor ModeRun::Loss(const torch::Tensor& out) const {
  // Sequence classifiers return logits, the image classifier log-probabilities.
  const models::Task task = model_->info().task;
  if (task == models::Task::kSequenceClassification) {
    return torch::nn::functional::cross_entropy(out.to(torch::kFloat), y_);
  }
  if (task != models::Task::kLanguageModel) return torch::nll_loss(out.to(torch::kFloat), y_);
  const torch::Tensor logits = out.to(torch::kFloat);
  return torch::nn::functional::cross_entropy(logits.reshape({-1, logits.size(-1)}), y_.reshape({-1}));
}

void ModeRun::Step(bool timed) {
  const Traffic a0 = TrafficOf(engine_->offload_stats());
  const CpuTimes c0 = ProcessCpu();
  const double st0 = StealSeconds();
  const auto t0 = Clock::now();
  const torch::Tensor loss = Loss(model_->Forward(x_));
  const auto t1 = Clock::now();
  const Traffic a1 = TrafficOf(engine_->offload_stats());
  engine_->Backward(loss);
  const auto t2 = Clock::now();
  const Traffic a2 = TrafficOf(engine_->offload_stats());
  engine_->Step();
  const auto t3 = Clock::now();
  const CpuTimes c3 = ProcessCpu();
  const double st3 = StealSeconds();
  const Traffic a3 = TrafficOf(engine_->offload_stats());
  r_.final_loss = loss.item<double>();
  if (!timed) return;
  ++timed_;
  traffic_.AddDelta(a0, a3);
  r_.forward_wait_per_step += a1.waited() - a0.waited();  // sums here, per step in Result
  r_.backward_wait_per_step += a2.waited() - a1.waited();
  r_.forwards.push_back(std::chrono::duration<double>(t1 - t0).count());
  r_.backwards.push_back(std::chrono::duration<double>(t2 - t1).count());
  r_.optimizers.push_back(std::chrono::duration<double>(t3 - t2).count());
  r_.steps.push_back(std::chrono::duration<double>(t3 - t0).count());
  r_.cpu.push_back(c3.user + c3.sys - c0.user - c0.sys);
  r_.sys.push_back(c3.sys - c0.sys);
  r_.faults.push_back(c3.minor_faults - c0.minor_faults);
  r_.steal.push_back(st3 - st0);
}

ModeResult ModeRun::Result() const {
  ModeResult r = r_;
  const double n = static_cast<double>(std::max<int64_t>(1, timed_));
  r.forward_wait_per_step /= n;
  r.backward_wait_per_step /= n;
  r.nvme_read_per_step = traffic_.read / n;
  r.nvme_written_per_step = traffic_.written / n;
  r.fixed_pieces_per_step = traffic_.fixed_pieces / n;
  r.optimizer_wait_per_step = traffic_.optimizer_wait / n;
  r.nvme_wait_per_step = traffic_.waited() / n;
  r.in_backward = traffic_.updated > 0 ? traffic_.in_backward / traffic_.updated : 0.0;
  r.at_gather = traffic_.updated > 0 ? traffic_.at_gather / traffic_.updated : 0.0;
  r.registered_bytes = static_cast<double>(engine_->offload_stats().io_bytes_registered);
  r.memory = engine_->memory();
  return r;
}

// Every rank's value of `v` (rank order).
std::vector<double> GatherAll(comm::ProcessGroup& pg, double v) {
  at::Tensor all = at::zeros({pg.size()}, at::kDouble);
  all[pg.rank()] = v;
  ThrowIfError(pg.AllReduce(all, comm::ReduceOp::kSum)->Wait());
  std::vector<double> out(static_cast<size_t>(pg.size()));
  for (int r = 0; r < pg.size(); ++r) out[static_cast<size_t>(r)] = all[r].item<double>();
  return out;
}

// The share of a step spent blocked on swap I/O (optimizer state and
// parameter shards): what wall_clock_breakdown reports as swap waits.
double Stall(const ModeResult& r) { return r.step_s > 0 ? r.nvme_wait_per_step / r.step_s : 0; }

std::string Gib(double bytes) { return absl::StrFormat("%.2f", bytes / (1024.0 * 1024.0 * 1024.0)); }

void DeclareFlags(cli::Flags& f) {
  f.String("model", "gpt2-tiny", "a built-in model, language model or image classifier (zt train --help lists them)");
  f.Repeated("set", "a model dimension override KEY=VALUE (n_layer, n_embd, ...)");
  f.String("modes", "none,cpu,nvme,nvme-params",
           "comma-separated: none, cpu, nvme, nvme-params (stage 3), cpu-params (stage 3: optimizer state in memory, "
           "parameter shards on NVMe); nvme-instep, nvme-params-instep, cpu-params-instep (the update in the step "
           "rather than during backward or at the forward's gathers); nvme-fifo, nvme-params-fifo, cpu-params-fifo "
           "(swap transfers in submission order, parameter reads not ahead of the rest); nvme-unfixed, "
           "nvme-params-unfixed, cpu-params-unfixed (swap buffers not registered with io_uring)");
  f.Int("stage", 3, "ZeRO stage (1-3)");
  f.String("nvme-path", "/tmp/zt_offload_bench", "directory for the swap files (created)");
  f.Int("steps", 5, "timed steps per mode");
  f.Int("warmup", 2, "untimed steps first");
  f.Int("rounds", 2, "passes over the modes, alternating their order; medians over all of them");
  f.Int("micro-batch", 2, "sequences per rank per step");
  f.Int("seq", 64, "tokens per sequence");
  f.String("precision", "fp32", "fp32 or bf16");
  f.Int("sub-group-size", 100000000, "zero_optimization.sub_group_size (elements)");
  f.Int("buffer-count", 9, "offload_optimizer.buffer_count");
  f.Bool("no-pipeline", "pipeline_read and pipeline_write off");
  f.Int("param-buffer-count", 8, "offload_param.buffer_count");
  f.Int("param-buffer-size", 0, "offload_param.buffer_size (0: reduce_bucket_size)");
  f.Int("bucket", 20000000, "reduce_bucket_size (also the largest stage-3 chunk)");
  f.Int("max-live", 1000000000, "stage3_max_live_parameters (elements gathered at once)");
  f.Int("reuse-distance", 1000000000, "stage3_max_reuse_distance (0: free every unit after use)");
  f.Bool("sharded-init", "build the model under zt::ShardedInit (stage 3)");
  f.Bool("interleave",
         "build every mode once and run them in turns (--rounds turns each of --steps timed steps between two "
         "untimed ones); the ratio to none paired per round; no peak RSS per mode");
  f.Double("quiet-steal", 0.01,
           "a step is quiet when the hypervisor stole at most this share of the machine's CPU time during it "
           "(/proc/stat: steal over step time x CPUs); \"quiet x\" is the ratio to none over the quiet steps alone");
  f.String("json", "", "also write the results as JSON to this file (rank 0)");
}

Options OptionsFromFlags(const cli::Flags& f) {
  Options o;
  o.model = f.GetString("model");
  o.overrides = f.GetRepeated("set");
  o.modes = absl::StrSplit(f.GetString("modes"), ',', absl::SkipEmpty());
  o.stage = static_cast<int>(f.GetInt("stage"));
  o.nvme_path = f.GetString("nvme-path");
  o.steps = f.GetInt("steps");
  o.warmup = f.GetInt("warmup");
  o.rounds = std::max(1, static_cast<int>(f.GetInt("rounds")));
  o.micro_batch = f.GetInt("micro-batch");
  o.seq = f.GetInt("seq");
  o.bf16 = f.GetString("precision") == "bf16";
  o.sub_group_size = f.GetInt("sub-group-size");
  o.buffer_count = static_cast<int>(f.GetInt("buffer-count"));
  o.pipeline = !f.GetBool("no-pipeline");
  o.param_buffer_count = static_cast<int>(f.GetInt("param-buffer-count"));
  o.param_buffer_size = f.GetInt("param-buffer-size");
  o.bucket = f.GetInt("bucket");
  o.max_live = f.GetInt("max-live");
  o.reuse_distance = f.GetInt("reuse-distance");
  o.sharded_init = f.GetBool("sharded-init");
  o.interleave = f.GetBool("interleave");
  o.quiet_steal = f.GetDouble("quiet-steal");
  o.json = f.GetString("json");
  return o;
}

// Whether every --modes entry is known (and nvme-params has stage 3); says
// what is wrong on stderr.
bool CheckModes(const Options& o) {
  for (const std::string& m : o.modes) {
    const std::string p = Placement(m);
    if ((p != "none" && p != "cpu" && p != "nvme" && p != "nvme-params" && p != "cpu-params") ||
        (p != m && p != "nvme" && p != "nvme-params" && p != "cpu-params")) {
      std::fprintf(stderr,
                   "--modes: unknown mode '%s' (none, cpu, nvme, nvme-params, cpu-params, and the last three "
                   "with -instep, -fifo or -unfixed)\n",
                   m.c_str());
      return false;
    }
    if ((p == "nvme-params" || p == "cpu-params") && o.stage != 3) {
      std::fprintf(stderr, "--modes: %s needs --stage 3\n", p.c_str());
      return false;
    }
  }
  return true;
}

// The mode run k-th in `round`: A B C, C B A, A B C, ... so that the process
// warming up and the machine's drift fall on every mode alike.
size_t ModeAt(const Options& o, int round, size_t k) { return round % 2 == 0 ? k : o.modes.size() - 1 - k; }

// Runs `body` for `mode`; an error or exception is said on stderr, naming
// the mode, and returns false.
bool Attempt(const comm::ProcessGroup& pg, const std::string& mode, const std::function<absl::Status()>& body) {
  absl::Status st;
  try {
    st = body();
  } catch (const std::exception& e) {
    st = absl::InternalError(e.what());
  }
  if (st.ok()) return true;
  std::fprintf(stderr, "[rank %d] mode %s: %s\n", pg.rank(), mode.c_str(), std::string(st.message()).c_str());
  return false;
}

// The default schedule: --rounds passes over the modes, each mode built
// afresh for its warm-up and timed steps, its peak RSS the kernel's
// high-water mark from its build on. The series of every round are kept;
// memory and traffic are the latest round's.
std::optional<std::vector<ModeResult>> RunBlocked(const Options& o, const std::shared_ptr<comm::ProcessGroup>& pg) {
  static constexpr std::vector<double> ModeResult::*kSeries[] = {
      &ModeResult::steps, &ModeResult::forwards, &ModeResult::backwards, &ModeResult::optimizers,
      &ModeResult::cpu,   &ModeResult::sys,      &ModeResult::faults,    &ModeResult::steal};
  std::vector<ModeResult> results(o.modes.size());
  for (int round = 0; round < o.rounds; ++round) {
    for (size_t k = 0; k < o.modes.size(); ++k) {
      const size_t i = ModeAt(o, round, k);
      ModeResult r;
      const bool ran = Attempt(*pg, o.modes[i], [&] {
        ResetPeakRss();
        ZT_ASSIGN_OR_RETURN(std::unique_ptr<ModeRun> run, ModeRun::Build(o, o.modes[i], pg));
        for (int64_t s = 0; s < o.warmup + o.steps; ++s) run->Step(/*timed=*/s >= o.warmup);
        r = run->Result();
        r.peak_rss = static_cast<double>(PeakResidentBytes());
        return absl::OkStatus();
      });
      if (!ran) return std::nullopt;
      ModeResult& acc = results[i];
      r.peak_rss = std::max(acc.peak_rss, r.peak_rss);
      for (auto series : kSeries) (r.*series).insert((r.*series).begin(), (acc.*series).begin(), (acc.*series).end());
      acc = std::move(r);
    }
  }
  return results;
}

// --interleave: every mode built once and alive at once, then --rounds
// turns each, in the alternating order: one untimed step, --steps timed
// ones, one more untimed. The first untimed step takes the switch (the
// previous mode's transfers still in flight, cold caches); the last one
// keeps each timed step's tail (write-back behind the next forward, the
// update at the next gathers) inside its own mode. The ratio to "none" is
// paired: per round, the mode's median step over none's in that round, then
// the median over the rounds, so that the machine's drift between rounds
// cancels. No peak RSS per mode (all are alive at once): -1.
std::optional<std::vector<ModeResult>> RunInterleaved(const Options& o, const std::shared_ptr<comm::ProcessGroup>& pg) {
  const size_t n = o.modes.size();
  std::vector<std::unique_ptr<ModeRun>> runs(n);
  for (size_t i = 0; i < n; ++i) {
    const bool built = Attempt(*pg, o.modes[i], [&] {
      ZT_ASSIGN_OR_RETURN(runs[i], ModeRun::Build(o, o.modes[i], pg));
      for (int64_t s = 0; s < o.warmup; ++s) runs[i]->Step(/*timed=*/false);
      return absl::OkStatus();
    });
    if (!built) return std::nullopt;
  }
  for (int round = 0; round < o.rounds; ++round) {
    for (size_t k = 0; k < n; ++k) {
      const size_t i = ModeAt(o, round, k);
      ModeRun& run = *runs[i];
      const bool ran = Attempt(*pg, o.modes[i], [&] {
        run.Step(/*timed=*/false);
        for (int64_t s = 0; s < o.steps; ++s) run.Step(/*timed=*/true);
        run.Step(/*timed=*/false);
        return absl::OkStatus();
      });
      if (!ran) return std::nullopt;
    }
  }
  std::vector<ModeResult> results;
  for (size_t i = 0; i < n; ++i) {
    ModeResult r = runs[i]->Result();
    r.peak_rss = -1;
    for (int round = 0; round < o.rounds; ++round) {
      const auto first = r.steps.begin() + round * o.steps;
      r.turn_steps.push_back(Median(std::vector<double>(first, first + o.steps)));
    }
    results.push_back(std::move(r));
  }
  const auto none = std::find(o.modes.begin(), o.modes.end(), "none");
  if (none == o.modes.end()) return results;
  const std::vector<double>& base = results[static_cast<size_t>(none - o.modes.begin())].turn_steps;
  for (ModeResult& r : results) {
    for (int round = 0; round < o.rounds; ++round) r.turn_ratios.push_back(r.turn_steps[round] / base[round]);
    r.paired_ratio = Median(r.turn_ratios);
  }
  return results;
}

// Every mode on the chosen schedule, with the medians filled in; nullopt
// (said on stderr) when a mode fails.
std::optional<std::vector<ModeResult>> RunRounds(const Options& o, const std::shared_ptr<comm::ProcessGroup>& pg) {
  std::optional<std::vector<ModeResult>> results = o.interleave ? RunInterleaved(o, pg) : RunBlocked(o, pg);
  if (!results) return std::nullopt;
  for (ModeResult& r : *results) {
    r.step_s = Median(r.steps);
    r.forward_s = Median(r.forwards);
    r.backward_s = Median(r.backwards);
    r.optimizer_s = Median(r.optimizers);
    r.cpu_s = Median(r.cpu);
    r.sys_s = Median(r.sys);
    r.faults_per_step = Median(r.faults);
    r.steal_s = Median(r.steal);
    std::vector<double> quiet;
    const double cpus = static_cast<double>(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)));
    for (size_t k = 0; k < r.steps.size(); ++k) {
      if (r.steal[k] <= o.quiet_steal * r.steps[k] * cpus) quiet.push_back(r.steps[k]);
    }
    r.quiet_steps = static_cast<int64_t>(quiet.size());
    r.quiet_step_s = Median(quiet);
  }
  return results;
}

// Rank 0's report of the results; each mode's peak RSS is the largest over
// the ranks (peaks[i], rank order).
class Report {
 public:
  Report(const Options& o, int world, const std::vector<ModeResult>& results,
         const std::vector<std::vector<double>>& peaks)
      : o_(o), world_(world), results_(results), peaks_(peaks) {
    for (const ModeResult& r : results) {
      if (r.mode == "none") base_ = &r;
    }
  }

  // The table with a RESULT line per mode; returns each mode's JSON object.
  std::vector<std::string> PrintTable() const;
  // The SUMMARY line, the optimizer state against this machine's RAM.
  void PrintSummary() const;
  absl::Status WriteJson(const std::vector<std::string>& json_rows) const;

 private:
  // Mode i's peak RSS, the largest over the ranks; nullopt where not
  // measured (--interleave).
  std::optional<double> Peak(size_t i) const {
    const double peak = *std::max_element(peaks_[i].begin(), peaks_[i].end());
    return peak < 0 ? std::nullopt : std::optional<double>(peak);
  }
  std::string PeakGib(size_t i) const { return Peak(i) ? Gib(*Peak(i)) : "-"; }
  // The step time over none's, with `digits` decimals, or `absent` without a
  // "none" mode: paired per round where interleaved, else the medians' ratio.
  std::string Ratio(const ModeResult& r, int digits, const char* absent) const {
    if (r.paired_ratio > 0) return absl::StrFormat("%.*f", digits, r.paired_ratio);
    return base_ != nullptr ? absl::StrFormat("%.*f", digits, r.step_s / base_->step_s) : absent;
  }
  // The process CPU time per step over none's, or `absent`.
  std::string CpuRatio(const ModeResult& r, int digits, const char* absent) const {
    if (base_ == nullptr || base_->cpu_s <= 0) return absent;
    return absl::StrFormat("%.*f", digits, r.cpu_s / base_->cpu_s);
  }
  // The quiet steps' median over none's, or `absent`.
  std::string QuietRatio(const ModeResult& r, int digits, const char* absent) const {
    if (base_ == nullptr || r.quiet_steps == 0 || base_->quiet_steps == 0) return absent;
    return absl::StrFormat("%.*f", digits, r.quiet_step_s / base_->quiet_step_s);
  }
  std::string JsonRow(size_t i) const;

  const Options& o_;
  const int world_;
  const std::vector<ModeResult>& results_;
  const std::vector<std::vector<double>>& peaks_;
  const ModeResult* base_ = nullptr;  // the "none" mode, when run
};

std::vector<std::string> Report::PrintTable() const {
  std::printf("%s parameters; per rank: model states in memory, on NVMe, swap buffers; peak RSS of the largest rank\n",
              HumanCount(static_cast<double>(results_.front().num_params)).c_str());
  std::printf("%-20s %9s %8s %9s %9s %9s %7s %6s %7s %8s %7s %12s %10s %9s %9s %10s %10s %10s %7s %7s %7s %9s\n",
              "mode", "step s", "x none", "fwd s", "bwd s", "optim s", "cpu s", "cpu x", "sys s", "faults", "steal s",
              "quiet x (n)", "states GiB", "NVMe GiB", "bufs GiB", "read/step", "write/step", "wait s", "stall",
              "in bwd", "at fwd", "peak GiB");
  std::vector<std::string> json_rows;
  for (size_t i = 0; i < results_.size(); ++i) {
    const ModeResult& r = results_[i];
    const std::string ratio = Ratio(r, 2, "-");
    std::printf(
        "%-20s %9.3f %8s %9.3f %9.3f %9.3f %7.3f %6s %7.3f %8.0f %7.3f %12s %10s %9s %9s %10s %10s %10.3f %6.1f%% "
        "%6.0f%% "
        "%6.0f%% "
        "%9s\n",
        r.mode.c_str(), r.step_s, ratio.c_str(), r.forward_s, r.backward_s, r.optimizer_s, r.cpu_s,
        CpuRatio(r, 2, "-").c_str(), r.sys_s, r.faults_per_step, r.steal_s,
        absl::StrCat(QuietRatio(r, 2, "-"), " (", r.quiet_steps, ")").c_str(),
        Gib(static_cast<double>(r.memory.model_states())).c_str(), Gib(static_cast<double>(r.memory.nvme)).c_str(),
        Gib(static_cast<double>(r.memory.swap_buffers)).c_str(), HumanBytes(r.nvme_read_per_step).c_str(),
        HumanBytes(r.nvme_written_per_step).c_str(), r.nvme_wait_per_step, 100.0 * Stall(r), 100.0 * r.in_backward,
        100.0 * r.at_gather, PeakGib(i).c_str());
    std::printf(
        "RESULT mode=%s stage=%d world=%d params=%lld step_s=%.4f ratio_to_none=%s nvme_read_per_step=%.0f "
        "nvme_written_per_step=%.0f wait_s=%.4f optimizer_wait_s=%.4f forward_wait_s=%.4f backward_wait_s=%.4f "
        "stall=%.4f updated_in_backward=%.4f updated_at_gather=%.4f peak_rss_gib=%s cpu_s=%.4f cpu_ratio_to_none=%s "
        "sys_s=%.4f "
        "minor_faults_per_step=%.0f steal_s=%.4f quiet_ratio_to_none=%s quiet_steps=%lld registered_bytes=%.0f "
        "fixed_pieces_per_step=%.1f\n",
        r.mode.c_str(), o_.stage, world_, static_cast<long long>(r.num_params), r.step_s, Ratio(r, 4, "-").c_str(),
        r.nvme_read_per_step, r.nvme_written_per_step, r.nvme_wait_per_step, r.optimizer_wait_per_step,
        r.forward_wait_per_step, r.backward_wait_per_step, Stall(r), r.in_backward, r.at_gather,
        Peak(i) ? absl::StrFormat("%.3f", *Peak(i) / (1 << 30)).c_str() : "-", r.cpu_s, CpuRatio(r, 4, "-").c_str(),
        r.sys_s, r.faults_per_step, r.steal_s, QuietRatio(r, 4, "-").c_str(), static_cast<long long>(r.quiet_steps),
        r.registered_bytes, r.fixed_pieces_per_step);
    json_rows.push_back(JsonRow(i));
  }
  return json_rows;
}

// "1.0000, 0.9876": a series for the JSON.
std::string JoinFixed(const std::vector<double>& v) {
  return absl::StrJoin(v, ", ", [](std::string* out, double x) { absl::StrAppend(out, absl::StrFormat("%.4f", x)); });
}

std::string Report::JsonRow(size_t i) const {
  const ModeResult& r = results_[i];
  return absl::StrFormat(
      "{\"mode\": \"%s\", \"step_s\": %.6f, \"ratio_to_none\": %s, \"forward_s\": %.6f, \"backward_s\": %.6f, "
      "\"optimizer_s\": %.6f, \"model_states_bytes\": %d, \"nvme_bytes\": %d, \"swap_buffer_bytes\": %d, "
      "\"nvme_read_per_step\": %.0f, \"nvme_written_per_step\": %.0f, \"nvme_wait_s_per_step\": %.6f, "
      "\"forward_wait_s_per_step\": %.6f, \"backward_wait_s_per_step\": %.6f, \"stall_fraction\": %.6f, "
      "\"updated_in_backward\": %.6f, \"updated_at_gather\": %.6f, \"cpu_s_per_step\": %.6f, \"cpu_ratio_to_none\": "
      "%s, "
      "\"sys_s_per_step\": %.6f, \"minor_faults_per_step\": %.0f, \"steal_s_per_step\": %.6f, \"quiet_ratio_to_none\": "
      "%s, \"quiet_steps\": %d, \"registered_bytes\": "
      "%.0f, "
      "\"fixed_pieces_per_step\": %.1f, "
      "\"turn_step_s\": [%s], \"turn_ratio_to_none\": [%s], \"peak_rss_bytes\": %s, \"final_loss\": %.6f, \"build_s\": "
      "%.3f}",
      r.mode, r.step_s, Ratio(r, 4, "null"), r.forward_s, r.backward_s, r.optimizer_s, r.memory.model_states(),
      r.memory.nvme, r.memory.swap_buffers, r.nvme_read_per_step, r.nvme_written_per_step, r.nvme_wait_per_step,
      r.forward_wait_per_step, r.backward_wait_per_step, Stall(r), r.in_backward, r.at_gather, r.cpu_s,
      CpuRatio(r, 4, "null"), r.sys_s, r.faults_per_step, r.steal_s, QuietRatio(r, 4, "null"), r.quiet_steps,
      r.registered_bytes, r.fixed_pieces_per_step, JoinFixed(r.turn_steps), JoinFixed(r.turn_ratios),
      Peak(i) ? absl::StrCat(
                    "[",
                    absl::StrJoin(peaks_[i], ", ",
                                  [](std::string* out, double v) { absl::StrAppend(out, static_cast<int64_t>(v)); }),
                    "]")
              : "null",
      r.final_loss, r.build_s);
}

double RamBytes() { return static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGE_SIZE)); }

void Report::PrintSummary() const {
  // The fp32 optimizer state (master + Adam moments, 12 bytes a parameter)
  // against this machine's RAM: the point of NVMe offload.
  const double state = 12.0 * static_cast<double>(results_.front().num_params);
  const double ram = RamBytes();
  std::string summary =
      absl::StrFormat("SUMMARY: %s parameters, fp32 optimizer state %s GiB = %.2fx this machine's RAM (%s GiB)",
                      HumanCount(static_cast<double>(results_.front().num_params)), Gib(state), state / ram, Gib(ram));
  for (size_t i = 0; i < results_.size(); ++i) {
    const ModeResult& r = results_[i];
    absl::StrAppend(
        &summary, absl::StrFormat("; %s %.3f s/step%s%s%s", r.mode, r.step_s,
                                  base_ != nullptr && &r != base_ ? absl::StrCat(" (", Ratio(r, 2, ""), "x none)") : "",
                                  r.nvme_wait_per_step > 0 ? absl::StrFormat(", stall %.1f%%", 100.0 * Stall(r)) : "",
                                  Peak(i) ? absl::StrCat(", peak RSS ", Gib(*Peak(i)), " GiB/rank") : ""));
  }
  std::printf("%s\n", summary.c_str());
}

// --json: the run's settings and every mode's JSON object.
absl::Status Report::WriteJson(const std::vector<std::string>& json_rows) const {
  if (o_.json.empty()) return absl::OkStatus();
  return zt::WriteFileAtomically(
      o_.json, absl::StrFormat(
                   "{\"benchmark\": \"offload\", \"system\": \"%s\", \"model\": \"%s\", \"overrides\": \"%s\", "
                   "\"num_params\": %d, "
                   "\"world_size\": %d, \"stage\": %d, \"precision\": \"%s\", \"ram_bytes\": %.0f, \"modes\": [%s]}\n",
                   SystemInfoLine(), o_.model, absl::StrJoin(o_.overrides, " "), results_.front().num_params, world_,
                   o_.stage, o_.bf16 ? "bf16" : "fp32", RamBytes(), absl::StrJoin(json_rows, ", ")));
}

// Rank 0's lines before the runs: the machine and the setup.
void PrintSetup(const Options& o, int world) {
  std::printf("%s\n", SystemInfoLine().c_str());
  std::printf(
      "optimizer kernels: %s; model %s, stage %d, %d ranks, %s, micro-batch %lld x %lld tokens, swap dir %s (%s "
      "free); %s\n",
      ops::kernels::IsaName(ops::kernels::ActiveIsa()), o.model.c_str(), o.stage, world, o.bf16 ? "bf16" : "fp32",
      static_cast<long long>(o.micro_batch), static_cast<long long>(o.seq), o.nvme_path.c_str(),
      HumanBytes(static_cast<double>(std::filesystem::space(o.nvme_path).available)).c_str(),
      o.interleave ? absl::StrFormat("interleaved: %d turns of %lld timed steps per mode, ratios paired per turn",
                                     o.rounds, static_cast<long long>(o.steps))
                         .c_str()
                   : absl::StrFormat("blocked: %d rounds of %lld timed steps per mode", o.rounds,
                                     static_cast<long long>(o.steps))
                         .c_str());
}

int Main(int argc, char** argv) {
  cli::Flags f("zt_bench_offload");
  DeclareFlags(f);
  std::vector<std::string> args(argv + 1, argv + argc);
  absl::Status parsed = f.Parse(args);
  if (!parsed.ok() || f.help_requested()) {
    std::fprintf(stderr, "%s\n%s", std::string(parsed.message()).c_str(),
                 f.Usage("zt launch --nproc-per-node N -- zt_bench_offload [flags]").c_str());
    return parsed.ok() ? 0 : 2;
  }
  const Options o = OptionsFromFlags(f);
  if (!CheckModes(o)) return 2;
  if (o.steps < 1 || o.warmup < 0) {
    std::fprintf(stderr, "--steps must be at least 1 and --warmup at least 0 (got %lld and %lld)\n",
                 static_cast<long long>(o.steps), static_cast<long long>(o.warmup));
    return 2;
  }

  auto env = comm::ReadRankEnv();
  if (!env.ok()) {
    std::fprintf(stderr, "zt_bench_offload is a rank program: run it under zt launch (%s)\n",
                 std::string(env.status().message()).c_str());
    return 2;
  }
  at::set_num_threads(std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / env->world_size));
  auto pg_or = comm::InitProcessGroup(*env, {});
  if (!pg_or.ok()) {
    std::fprintf(stderr, "%s\n", std::string(pg_or.status().message()).c_str());
    return 1;
  }
  std::shared_ptr<comm::ProcessGroup> pg = *pg_or;
  const bool lead = pg->rank() == 0;
  if (absl::Status made = zt::MakeDirs(o.nvme_path); !made.ok()) {
    std::fprintf(stderr, "zt_bench_offload: %s\n", std::string(made.message()).c_str());
    return 1;
  }
  if (lead) PrintSetup(o, pg->size());
  std::optional<std::vector<ModeResult>> results = RunRounds(o, pg);
  if (!results) return 1;

  // Rank 0 prints; peak RSS is per rank (the largest shown).
  std::vector<std::vector<double>> peaks;
  for (const ModeResult& r : *results) peaks.push_back(GatherAll(*pg, r.peak_rss));
  if (!lead) return 0;
  const Report report(o, pg->size(), *results, peaks);
  const std::vector<std::string> json_rows = report.PrintTable();
  report.PrintSummary();
  if (const absl::Status written = report.WriteJson(json_rows); !written.ok()) {
    std::fprintf(stderr, "zt_bench_offload: %s\n", std::string(written.message()).c_str());
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace zt

int main(int argc, char** argv) { return zt::Main(argc, argv); }
