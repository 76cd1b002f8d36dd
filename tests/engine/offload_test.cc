// Offload parity: a run with the optimizer state offloaded (to "cpu", or to
// NVMe swap files streamed by sub-group) and, at stage 3, the parameter
// shards on NVMe must end with the same parameters as the same run without
// offload (which parity_test.cc and stage3_parity_test.cc prove against
// single-process LibTorch).
//
// Tolerance against the run without offload: |a - b| <= 1e-6 |b| + 1e-12 in
// fp32 and bf16 (the same kernels see the same numbers in the same order, so
// in practice the results are bit-identical; the tolerance is the issue's
// bound).
//
// Modes exercise: several sub-groups that cut across groups, pipelined
// reads and writes, a pool too small to pipeline, parameter swap buffers
// that force evictions and synchronous reads, shards below aio.block_size
// kept in memory, and (stage 3) evaluation between steps and GatheredParameters
// writing into swapped shards. Also: checkpoints saved from NVMe-offloaded
// state load into a run without offload (and back) and continue exactly;
// configs the offload cannot run fail at Engine::Create with the key named.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <torch/torch.h>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "comm/init.h"
#include "engine/engine.h"
#include "engine/engine_tuning.h"
#include "engine/gathered_parameters.h"
#include "engine/weight_decay_groups.h"
#include "launch/rank_env.h"
#include "offload/io_engine.h"
#include "tests/engine/parity_model.h"
#include "tests/engine/stage3_model.h"
#include "tests/offload/offload_test_util.h"
#include "tests/testing/ranks.h"
#include "util/error.h"
#include "util/heap_retention.h"
#include "util/status.h"

namespace zt::testing {
namespace {

constexpr int64_t kSteps = 6;

// Big enough for several 1024-element sub-groups per rank: 14,410 parameters
// over layers whose sizes divide by no world size.
struct MlpImpl : torch::nn::Module {
  MlpImpl() {
    fc1 = register_module("fc1", torch::nn::Linear(32, 100));
    fc2 = register_module("fc2", torch::nn::Linear(100, 100));
    fc3 = register_module("fc3", torch::nn::Linear(100, 10));
  }
  torch::Tensor forward(const torch::Tensor& x) { return fc3(torch::tanh(fc2(torch::tanh(fc1(x))))); }
  torch::nn::Linear fc1{nullptr}, fc2{nullptr}, fc3{nullptr};
};
TORCH_MODULE(Mlp);

TinyGptOptions GptOptions() {
  TinyGptOptions o;
  o.dim = 40;
  o.hidden = {72, 130, 24};
  return o;
}

// The swap directory every rank of a run shares (files are per rank and
// pid), named after the test process, which removes it when its ranks are
// done (RemoveSwapDir).
std::string SwapDirOf(pid_t test_process) {
  const char* base = std::getenv("ZT_TEST_SWAP_DIR");
  return absl::StrCat(base != nullptr ? base : "/tmp", "/zt_offload_test_", test_process);
}
std::string SwapDir() {
  const std::string dir = SwapDirOf(::getppid());
  std::filesystem::create_directories(dir);
  return dir;
}
void RemoveSwapDir() {
  std::error_code ignored;
  std::filesystem::remove_all(SwapDirOf(::getpid()), ignored);
}

struct Mode {
  std::string name;
  std::function<void(Config&, const std::string& dir)> setup;
  int min_stage = 1;
};

void NvmeOptimizer(Config& c, const std::string& dir) {
  auto& o = c.zero.offload_optimizer;
  o.device = OffloadDevice::kNvme;
  o.nvme_path = dir;
  c.zero.sub_group_size = 1024;  // several sub-groups, cutting across groups
}

std::vector<Mode> Modes() {
  std::vector<Mode> m;
  m.push_back({"cpu", [](Config& c, const std::string&) { c.zero.offload_optimizer.device = OffloadDevice::kCpu; }});
  m.push_back({"nvme_pipelined", [](Config& c, const std::string& dir) {
                 NvmeOptimizer(c, dir);
                 c.zero.offload_optimizer.buffer_count = 9;
                 c.zero.offload_optimizer.pipeline_read = true;
                 c.zero.offload_optimizer.pipeline_write = true;
               }});
  m.push_back({"nvme_read_ahead_only", [](Config& c, const std::string& dir) {
                 NvmeOptimizer(c, dir);
                 c.zero.offload_optimizer.buffer_count = 6;
                 c.zero.offload_optimizer.pipeline_read = true;
                 c.zero.offload_optimizer.pipeline_write = true;  // no room: runs read-ahead only
               }});
  m.push_back({"nvme_unpipelined", [](Config& c, const std::string& dir) {
                 NvmeOptimizer(c, dir);
                 c.zero.offload_optimizer.buffer_count = 3;
                 c.zero.sub_group_size = 3000;  // not a multiple of 1024: rounded up
               }});
  // Stage 3: the buffers hold every sub-group, so backward's non-blocking
  // update finds everything in memory and finishes the walk by itself.
  m.push_back({"nvme_pool_holds_all",
               [](Config& c, const std::string& dir) {
                 NvmeOptimizer(c, dir);
                 c.zero.offload_optimizer.buffer_count = 256;
               },
               3});
  m.push_back({"nvme_params",
               [](Config& c, const std::string& dir) {
                 auto& p = c.zero.offload_param;
                 p.device = OffloadDevice::kNvme;
                 p.nvme_path = dir;
                 p.buffer_count = 3;  // fewer than a unit's chunks: evictions and waits
                 p.buffer_size = 8192;
                 c.aio.block_size = 1;  // every shard goes to the swap file
               },
               3});
  // Stage 3: a buffer for every shard, so each stays resident from use to
  // use and the update at gather has no read to save (it stays in the step).
  m.push_back({"nvme_params_pool_holds_all",
               [](Config& c, const std::string& dir) {
                 auto& p = c.zero.offload_param;
                 p.device = OffloadDevice::kNvme;
                 p.nvme_path = dir;
                 p.buffer_count = 64;
                 p.buffer_size = 8192;
                 c.aio.block_size = 1;
               },
               3});
  m.push_back({"nvme_all",
               [](Config& c, const std::string& dir) {
                 NvmeOptimizer(c, dir);
                 c.zero.offload_optimizer.buffer_count = 9;
                 c.zero.offload_optimizer.pipeline_read = true;
                 c.zero.offload_optimizer.pipeline_write = true;
                 auto& p = c.zero.offload_param;
                 p.device = OffloadDevice::kNvme;
                 p.nvme_path = dir;
                 p.buffer_count = 8;
                 p.buffer_size = 8192;
                 c.aio.block_size = 512;  // shards below 512 bytes stay in memory
               },
               3});
  return m;
}

struct Training {
  std::string name;
  std::function<void(Config&)> setup = [](Config&) {};
  bool bf16 = false;
  // HF Trainer's optimizer param groups (weight decay 0.1 and 0.0, the
  // config 0.01): the update runs per group inside every schedule.
  bool hf_groups = false;
};

std::vector<Training> Trainings(int stage) {
  std::vector<Training> t;
  t.push_back({"adamw"});
  t.push_back({"adamw_groups", [](Config&) {}, false, true});
  t.push_back({"bf16",
               [](Config& c) {
                 c.bf16.enabled = true;
                 c.optimizer.lr = 1e-3;
               },
               true});
  t.push_back({"lion_clip_gas2", [](Config& c) {
                 c.optimizer.type = OptimizerType::kLion;
                 c.optimizer.lr = 1e-3;
                 c.optimizer.betas = {0.9, 0.99};
                 c.gradient_clipping = 0.05;
                 c.batch.gradient_accumulation_steps = 2;
               }});
  if (stage == 3) {
    // Persistent chunks inside the units (LayerNorm weights, small biases)
    // next to swapped ones: the update at gather refreshes them late.
    t.push_back({"adamw_persistent", [](Config& c) { c.zero.param_persistence_threshold = 150; }});
    // Lion without clipping: its update splits like AdamW's (the state
    // during backward, the parameters at gather), here across accumulation.
    t.push_back({"lion_gas2", [](Config& c) {
                   c.optimizer.type = OptimizerType::kLion;
                   c.optimizer.lr = 1e-3;
                   c.optimizer.betas = {0.9, 0.99};
                   c.batch.gradient_accumulation_steps = 2;
                 }});
  }
  if (stage < 3) {
    t.push_back({"sgd_momentum", [](Config& c) {
                   c.optimizer.type = OptimizerType::kSGD;
                   c.optimizer.lr = 0.05;
                   c.optimizer.momentum = 0.9;
                 }});
    t.push_back({"adagrad", [](Config& c) {
                   c.optimizer.type = OptimizerType::kAdagrad;
                   c.optimizer.lr = 0.05;
                 }});
  }
  return t;
}

// Full parameter values by name after a run (gathered at stage 3).
using Snapshot = std::map<std::string, torch::Tensor>;

Snapshot Take(Engine& engine, torch::nn::Module& module) {
  Snapshot s;
  GatheredParameters full(engine);
  for (const auto& item : module.named_parameters(/*recurse=*/true)) {
    s[item.key()] = item.value().detach().to(torch::kFloat).clone();
  }
  full.Release();
  return s;
}

std::string Compare(const Snapshot& a, const Snapshot& b, double rtol, double atol) {
  for (const auto& [name, t] : b) {
    const torch::Tensor& x = a.at(name);
    const torch::Tensor excess = (x - t).abs() - (atol + rtol * t.abs());
    const double worst = excess.max().item<double>();
    if (worst > 0) {
      return absl::StrFormat("'%s' differs by up to %g (max |a - b| %g)", name, worst,
                             (x - t).abs().max().item<double>());
    }
  }
  return "";
}

struct RunResult {
  Snapshot params;
  ModelStateBytes memory;
  zero::CoordinatorStats stage3;
  OffloadStats offload;
  std::vector<double> eval_losses;
};

// Which steps a run trains, and the checkpoints it loads first and saves
// after step `save_after` (-1: none).
struct Plan {
  int64_t from = 0;
  std::string load;
  std::string save;
  int64_t save_after = -1;
};

absl::Status Checkpoints(Engine& engine, const Plan& plan, int64_t after_step) {
  if (after_step == plan.save_after && !plan.save.empty()) return engine.SaveCheckpoint(plan.save);
  return absl::OkStatus();
}

// Trains steps [plan.from, kSteps) of `config` and snapshots the parameters.
// Stage 3 runs the GPT-style model (frozen adapter unit, tied head),
// evaluates after every other step and writes through GatheredParameters
// once (after step 2, with no evaluation before it: with the update at
// gather, a training forward, an evaluation forward and GatheredParameters
// each meet a pending update).
absl::StatusOr<RunResult> Train(const Config& config, const std::shared_ptr<comm::ProcessGroup>& pg,
                                const Plan& plan = {}, const EngineTuning& tuning = {}, bool hf_groups = false) {
  EngineOptions engine_options;
  const int rank = pg->rank();
  RunResult r;
  if (config.zero.stage < 3) {
    const ParityData data = MakeData(kSteps * config.batch.train_batch, 32, 10, 1234);
    torch::manual_seed(7 + static_cast<uint64_t>(rank));
    Mlp model;
    if (hf_groups) engine_options.param_groups = WeightDecayGroups(*model, 0.1);
    ZT_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine,
                        CreateTunedEngine(model.ptr(), config, pg, engine_options, tuning));
    if (!plan.load.empty()) ZT_RETURN_IF_ERROR(engine->LoadCheckpoint(plan.load).status());
    ZT_RETURN_IF_ERROR(Checkpoints(*engine, plan, plan.from - 1));
    for (int64_t s = plan.from; s < kSteps; ++s) {
      for (int64_t k = 0; k < config.batch.accumulation_steps; ++k) {
        const int64_t start = MicroBatchStart(config.batch, s, k, rank);
        torch::Tensor x = data.x.narrow(0, start, config.batch.micro_batch);
        if (config.bf16.enabled) x = x.to(torch::kBFloat16);
        engine->Backward(
            torch::mse_loss(model->forward(x).to(torch::kFloat), data.y.narrow(0, start, config.batch.micro_batch)));
        engine->Step();
      }
      ZT_RETURN_IF_ERROR(Checkpoints(*engine, plan, s));
    }
    r.memory = engine->memory();
    r.offload = engine->offload_stats();
    r.params = Take(*engine, *model);
    return r;
  }
  const TinyGptOptions opts = GptOptions();
  const ParityData data = MakeTokenData(kSteps * config.batch.train_batch, opts, 1234);
  const ParityData eval_data = MakeTokenData(4, opts, 4321);
  torch::manual_seed(7 + static_cast<uint64_t>(rank));
  TinyGptHandle model = MakeTinyGpt(opts, /*root_is_unit=*/false);
  if (config.bf16.enabled) model.module->to(torch::kBFloat16);
  auto loss_of = [&](const torch::Tensor& x, const torch::Tensor& y) {
    const torch::Tensor logits = model.forward(x).to(torch::kFloat);
    return torch::nn::functional::cross_entropy(logits.reshape({-1, logits.size(-1)}), y.reshape({-1}));
  };
  if (hf_groups) engine_options.param_groups = WeightDecayGroups(*model.module, 0.1);
  ZT_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine,
                      CreateTunedEngine(model.module, config, pg, engine_options, tuning));
  if (hf_groups && engine->param_groups().size() != 2) {
    return absl::InternalError("expected two optimizer param groups (decay, no_decay)");
  }
  if (!plan.load.empty()) ZT_RETURN_IF_ERROR(engine->LoadCheckpoint(plan.load).status());
  ZT_RETURN_IF_ERROR(Checkpoints(*engine, plan, plan.from - 1));
  for (int64_t s = plan.from; s < kSteps; ++s) {
    for (int64_t k = 0; k < config.batch.accumulation_steps; ++k) {
      const int64_t start = MicroBatchStart(config.batch, s, k, rank);
      engine->Backward(loss_of(data.x.narrow(0, start, config.batch.micro_batch),
                               data.y.narrow(0, start, config.batch.micro_batch)));
      engine->Step();
    }
    if (s % 2 == 1) {
      torch::NoGradGuard no_grad;
      r.eval_losses.push_back(loss_of(eval_data.x, eval_data.y).item<double>());
    }
    if (s == 2) {
      GatheredParameters full(*engine, *model.impl->h[1], /*modifier_rank=*/0);
      if (rank == 0) {
        torch::NoGradGuard no_grad;
        model.impl->h[1]->c_fc->weight.mul_(0.75);
      }
      full.Release();
    }
    ZT_RETURN_IF_ERROR(Checkpoints(*engine, plan, s));
  }
  r.memory = engine->memory();
  r.offload = engine->offload_stats();
  r.stage3 = *engine->stage3_stats();
  r.params = Take(*engine, *model.module);
  return r;
}

// Whether the engine's swap buffers must all be io_uring fixed buffers here:
// io_uring starts, is not overridden, and locked memory is not limited.
bool ExpectFixedBuffers() {
  const char* env = std::getenv("ZT_AIO_BACKEND");
  if (env != nullptr && std::string(env) == "threads") return false;
  offload::IoOptions o;
  o.backend = offload::IoBackend::kUring;
  return offload::IoEngine::Create(o).ok() && offload::testing::HasIpcLock();
}

absl::Status CheckAccounting(const std::string& where, const Mode& mode, const Config& config, const RunResult& r) {
  const bool nvme_opt = config.zero.offload_optimizer.device == OffloadDevice::kNvme;
  const bool nvme_params = config.zero.offload_param.device == OffloadDevice::kNvme;
  // The swap pools are registered (pinned once) and transfers use them.
  static const bool expect_fixed = ExpectFixedBuffers();
  if ((nvme_opt || nvme_params) && expect_fixed &&
      (r.offload.io_bytes_registered < static_cast<uint64_t>(r.memory.swap_buffers) ||
       r.offload.io_pieces_fixed == 0)) {
    return absl::InternalError(absl::StrFormat("%s: %d of %d bytes of swap buffers registered, %d fixed transfers",
                                               where, r.offload.io_bytes_registered, r.memory.swap_buffers,
                                               r.offload.io_pieces_fixed));
  }
  // With the shards on NVMe the engine keeps a step's heap mapped
  // (EngineOptions::retain_step_heap), unless the environment sets malloc's
  // thresholds; otherwise it leaves glibc's policy alone.
  static const bool heap_env_free = PlanHeapRetention(0, [](const char* n) { return std::getenv(n); }).apply;
  const bool expect_heap = nvme_params && heap_env_free;
  if (expect_heap ? r.offload.heap_trim_threshold < (uint64_t{64} << 20) : r.offload.heap_trim_threshold != 0) {
    return absl::InternalError(absl::StrFormat("%s: heap trim threshold %d, expected %s", where,
                                               r.offload.heap_trim_threshold,
                                               expect_heap ? "at least 64 MiB" : "glibc's own (0)"));
  }
  if (nvme_opt && (r.memory.optimizer_state != 0 || r.memory.master != 0)) {
    return absl::InternalError(absl::StrFormat("%s: %d bytes of optimizer state and %d of master still in memory",
                                               where, r.memory.optimizer_state, r.memory.master));
  }
  if ((nvme_opt || nvme_params) && (r.memory.nvme <= 0 || r.memory.swap_buffers <= 0)) {
    return absl::InternalError(
        absl::StrFormat("%s: %d bytes on NVMe, %d in swap buffers", where, r.memory.nvme, r.memory.swap_buffers));
  }
  // Stage 3 with the parameter shards on NVMe and fp32 parameters: the
  // swapped groups are updated where the next forward gathers them
  // (EngineTuning::update_at_gather).
  const bool at_gather = config.zero.stage == 3 && nvme_params && !config.bf16.enabled && !config.fp16.enabled &&
                         mode.name != "nvme_params_pool_holds_all";
  // Stage 3 with the optimizer state on NVMe, no clipping and no fp16
  // updates during backward (EngineTuning::update_during_backward); with
  // the parameter shards on NVMe too, only where the update is split (the
  // state's half in backward, the parameters' at gather): AdamW and Lion.
  const OptimizerType type = config.optimizer.type;
  const bool splits = type == OptimizerType::kAdamW || type == OptimizerType::kLion ||
                      (type == OptimizerType::kAdam && config.optimizer.adam_w_mode);
  const bool may_early = config.zero.stage == 3 && nvme_opt && config.gradient_clipping <= 0.0 && !config.fp16.enabled;
  const bool early = may_early && (!nvme_params || (at_gather && splits));
  if (early != (r.offload.optimizer_elements_in_backward > 0)) {
    return absl::InternalError(absl::StrFormat("%s: %d of %d optimizer elements updated during backward, expected %s",
                                               where, r.offload.optimizer_elements_in_backward,
                                               r.offload.optimizer_elements_updated, early ? "some" : "none"));
  }
  if (at_gather != (r.offload.optimizer_elements_at_gather > 0)) {
    return absl::InternalError(absl::StrFormat("%s: %d of %d optimizer elements updated at a gather, expected %s",
                                               where, r.offload.optimizer_elements_at_gather,
                                               r.offload.optimizer_elements_updated, at_gather ? "some" : "none"));
  }
  // Persistent chunks inside the units are updated late and gathered again.
  const bool late = at_gather && config.zero.param_persistence_threshold > 0;
  if (late != (r.stage3.late_persistent_gathers > 0)) {
    return absl::InternalError(
        absl::StrFormat("%s: %d persistent chunks gathered again after the update at gather, "
                        "expected %s",
                        where, r.stage3.late_persistent_gathers, late ? "some" : "none"));
  }
  if (nvme_params) {
    const auto& sw = r.stage3.swap;
    // A pool that holds every shard reads none back.
    const bool reads = mode.name != "nvme_params_pool_holds_all";
    if (r.stage3.swapped_shard_bytes <= 0 || (sw.reads == 0) == reads || sw.writes == 0) {
      return absl::InternalError(absl::StrFormat("%s: parameter swap unused (%d bytes swapped, %d reads, %d writes)",
                                                 where, r.stage3.swapped_shard_bytes, sw.reads, sw.writes));
    }
    // Tight pools must evict; roomy ones must read ahead.
    if (mode.name == "nvme_params" && sw.evictions == 0) {
      return absl::InternalError(absl::StrCat(where, ": 3 swap buffers never evicted"));
    }
    if (mode.name == "nvme_all" && sw.read_ahead == 0) {
      return absl::InternalError(absl::StrCat(where, ": 8 swap buffers never read ahead"));
    }
    // plan/param_swap.h: aio.block_size 1 swaps every shard; 512 keeps some
    // (unless the small chunks are persistent).
    const bool keeps = mode.name == "nvme_all" && config.zero.param_persistence_threshold == 0;
    if ((r.stage3.kept_shard_bytes > 0) != keeps) {
      return absl::InternalError(absl::StrFormat("%s: %d bytes of shards kept in memory, expected %s", where,
                                                 r.stage3.kept_shard_bytes, keeps ? "some" : "none"));
    }
  }
  return absl::OkStatus();
}

Config BaseConfig(int stage) {
  Config c = ParityBaseConfig(stage);
  c.zero.reduce_bucket_size = stage == 3 ? 2000 : 3000;  // several groups / chunks
  c.zero.param_persistence_threshold = 0;
  return c;
}

ZT_RANK_WORKER(offload_parity) {
  const std::vector<std::string> args = absl::StrSplit(ctx.arg, ',');
  const int stage = std::stoi(args[0]);
  ZT_ASSIGN_OR_RETURN(comm::RankEnv env, comm::ReadRankEnv());
  comm::GroupOptions options;
  options.timeout = std::chrono::seconds(60);
  ZT_ASSIGN_OR_RETURN(std::shared_ptr<comm::ProcessGroup> pg, comm::InitProcessGroup(env, options));
  const std::string dir = SwapDir();
  for (const Training& t : Trainings(stage)) {
    Config base = BaseConfig(stage);
    t.setup(base);
    ZT_RETURN_IF_ERROR(ResolveBatch(base.batch, pg->size()));
    RunResult plain;
    try {
      ZT_ASSIGN_OR_RETURN(plain, Train(base, pg, {}, {}, t.hf_groups));
    } catch (const std::exception& e) {
      return absl::InternalError(absl::StrCat(t.name, " without offload threw: ", e.what()));
    }
    for (const Mode& m : Modes()) {
      if (stage < m.min_stage) continue;
      const std::string where = absl::StrFormat("stage %d world %d %s, offload %s", stage, pg->size(), t.name, m.name);
      Config config = base;
      m.setup(config, dir);
      // The update during backward waits for its reads, so how much of it
      // runs inside Backward (checked below) does not depend on how fast
      // the disk answered: on a loaded machine a one-rank backward can end
      // before any read completes (then the step does all of it).
      EngineTuning waits;
      waits.update_during_backward_waits = true;
      RunResult off;
      try {
        ZT_ASSIGN_OR_RETURN(off, Train(config, pg, {}, waits, t.hf_groups));
      } catch (const std::exception& e) {
        return absl::InternalError(absl::StrCat(where, " threw: ", e.what()));
      }
      const std::string diff = Compare(off.params, plain.params, 1e-6, 1e-12);
      if (!diff.empty())
        return absl::InternalError(absl::StrCat(where, ": differs from the run without offload: ", diff));
      for (size_t i = 0; i < off.eval_losses.size(); ++i) {
        if (std::abs(off.eval_losses[i] - plain.eval_losses[i]) > 1e-6 * std::abs(plain.eval_losses[i])) {
          return absl::InternalError(absl::StrFormat("%s: eval loss after step %d is %.9g, without offload %.9g", where,
                                                     i, off.eval_losses[i], plain.eval_losses[i]));
        }
      }
      ZT_RETURN_IF_ERROR(CheckAccounting(where, m, config, off));
      if (off.offload.optimizer_elements_in_backward > 0 || off.offload.optimizer_elements_at_gather > 0) {
        // The same run with the update in the step: bit for bit the same.
        EngineTuning in_step;
        in_step.update_during_backward = false;
        in_step.update_at_gather = false;
        RunResult late;
        try {
          ZT_ASSIGN_OR_RETURN(late, Train(config, pg, {}, in_step, t.hf_groups));
        } catch (const std::exception& e) {
          return absl::InternalError(absl::StrCat(where, " with the update in the step threw: ", e.what()));
        }
        if (late.offload.optimizer_elements_in_backward != 0 || late.offload.optimizer_elements_at_gather != 0) {
          return absl::InternalError(absl::StrCat(where, ": with both options off the update still left the step"));
        }
        const std::string exact = Compare(off.params, late.params, 0, 0);
        if (!exact.empty()) {
          return absl::InternalError(absl::StrCat(where,
                                                  ": the update during backward or at gather differs from the "
                                                  "update in the step: ",
                                                  exact));
        }
        for (size_t i = 0; i < off.eval_losses.size(); ++i) {
          if (off.eval_losses[i] != late.eval_losses[i]) {
            return absl::InternalError(
                absl::StrFormat("%s: eval loss after step %d is %.9g, with the update in the "
                                "step %.9g",
                                where, i, off.eval_losses[i], late.eval_losses[i]));
          }
        }
      }
    }
  }
  return absl::OkStatus();
}

class OffloadParityTest : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(OffloadParityTest, MatchesTheRunWithoutOffload) {
  const auto [stage, world] = GetParam();
  RankRunOptions options;
  options.world_size = world;
  options.arg = std::to_string(stage);
  options.timeout = std::chrono::seconds(600);
  RankRunResult result = RunRanks("offload_parity", options);
  RemoveSwapDir();
  EXPECT_TRUE(result.ok()) << result.Summary();
}

INSTANTIATE_TEST_SUITE_P(StagesAndWorlds, OffloadParityTest,
                         ::testing::Combine(::testing::Values(1, 2, 3), ::testing::Values(1, 2, 3)),
                         [](const auto& info) {
                           return absl::StrCat("stage", std::get<0>(info.param), "_world", std::get<1>(info.param));
                         });

// Checkpoints across placements: A trains with NVMe offload and saves after
// step 2; B loads it without offload, saves again at once and finishes; C
// loads B's save with NVMe offload and finishes. All three must end equal.
ZT_RANK_WORKER(offload_checkpoint) {
  const int stage = std::stoi(ctx.arg);
  ZT_ASSIGN_OR_RETURN(comm::RankEnv env, comm::ReadRankEnv());
  comm::GroupOptions options;
  options.timeout = std::chrono::seconds(60);
  ZT_ASSIGN_OR_RETURN(std::shared_ptr<comm::ProcessGroup> pg, comm::InitProcessGroup(env, options));
  const std::string dir = SwapDir();
  // bf16: a master copy to save and restore. fp32 at stage 3: A saves while
  // the split update's parameter half is still pending (no forward after
  // step 2; the increments wait in the gradient shards).
  std::vector<bool> bf16_runs = {true};
  if (stage == 3) bf16_runs.push_back(false);
  for (const bool bf16 : bf16_runs) {
    Config plain = BaseConfig(stage);
    plain.bf16.enabled = bf16;
    plain.optimizer.lr = 1e-3;
    ZT_RETURN_IF_ERROR(ResolveBatch(plain.batch, pg->size()));
    Config offloaded = plain;
    for (const Mode& m : Modes()) {
      if (m.name == (stage == 3 ? "nvme_all" : "nvme_pipelined")) m.setup(offloaded, dir);
    }
    const std::string run = absl::StrCat("stage ", stage, bf16 ? " bf16" : " fp32");
    const std::string a = dir + "/ckpt_a", b = dir + "/ckpt_b";
    try {
      Plan pa;
      pa.save = a;
      pa.save_after = 2;
      EngineTuning waits;  // the split update's first half inside Backward however slow the disk
      waits.update_during_backward_waits = true;
      ZT_ASSIGN_OR_RETURN(RunResult ra, Train(offloaded, pg, pa, waits));
      Plan pb;
      pb.from = 3;
      pb.load = a;
      pb.save = b;
      pb.save_after = 2;
      ZT_ASSIGN_OR_RETURN(RunResult rb, Train(plain, pg, pb));
      Plan pc;
      pc.from = 3;
      pc.load = b;
      ZT_ASSIGN_OR_RETURN(RunResult rc, Train(offloaded, pg, pc));
      std::string diff = Compare(rb.params, ra.params, 1e-6, 1e-12);
      if (!diff.empty()) return absl::InternalError(absl::StrCat(run, ": resumed without offload: ", diff));
      diff = Compare(rc.params, ra.params, 1e-6, 1e-12);
      if (!diff.empty()) return absl::InternalError(absl::StrCat(run, ": resumed with offload: ", diff));
      if (!bf16 && (ra.offload.optimizer_elements_at_gather == 0 || ra.offload.optimizer_elements_in_backward == 0)) {
        return absl::InternalError(absl::StrCat(run,
                                                ": the split update (state in backward, parameters at gather) "
                                                "never ran"));
      }
    } catch (const std::exception& e) {
      return absl::InternalError(absl::StrCat(run, " threw: ", e.what()));
    }
    std::error_code ignored;
    std::filesystem::remove_all(a, ignored);
    std::filesystem::remove_all(b, ignored);
  }
  return absl::OkStatus();
}

TEST(OffloadCheckpoint, ResumesAcrossPlacements) {
  for (int stage : {2, 3}) {
    RankRunOptions options;
    options.world_size = 2;
    options.arg = std::to_string(stage);
    options.timeout = std::chrono::seconds(300);
    RankRunResult result = RunRanks("offload_checkpoint", options);
    RemoveSwapDir();
    EXPECT_TRUE(result.ok()) << "stage " << stage << ": " << result.Summary();
  }
}

// Engine::Create on a config the offload cannot run: the error names the key.
absl::Status ExpectCreateError(const Config& config, const std::shared_ptr<comm::ProcessGroup>& pg,
                               const std::vector<std::string>& needles) {
  torch::manual_seed(1);
  TinyGptHandle model = MakeTinyGpt(GptOptions(), false);
  Mlp mlp;
  auto engine = config.zero.stage == 3 ? Engine::Create(model.module, config, pg) : Engine::Create(mlp, config, pg);
  if (engine.ok()) return absl::InternalError(absl::StrCat("expected an error mentioning ", needles.front()));
  for (const std::string& n : needles) {
    if (engine.status().message().find(n) == std::string::npos) {
      return absl::InternalError(absl::StrCat("error lacks '", n, "': ", engine.status().message()));
    }
  }
  return absl::OkStatus();
}

// Runs `train` with the file size limit at 8 KiB (the kernel then refuses
// swap writes with EFBIG): it must throw zt::Error naming the swap file and
// the offset. The limit is restored either way.
absl::Status ExpectSwapWriteError(const char* what, const std::function<void()>& train) {
  std::signal(SIGXFSZ, SIG_IGN);
  struct rlimit limit;
  ::getrlimit(RLIMIT_FSIZE, &limit);
  const struct rlimit tight = {8192, limit.rlim_max};
  ::setrlimit(RLIMIT_FSIZE, &tight);
  std::string message;
  try {
    train();
  } catch (const Error& e) {
    message = e.what();
  }
  ::setrlimit(RLIMIT_FSIZE, &limit);
  if (message.find("zerotorch-") == std::string::npos || message.find("offset") == std::string::npos) {
    return absl::InternalError(absl::StrCat(what, " should name the file and offset, got: '", message, "'"));
  }
  return absl::OkStatus();
}

ZT_RANK_WORKER(offload_errors) {
  ZT_ASSIGN_OR_RETURN(comm::RankEnv env, comm::ReadRankEnv());
  ZT_ASSIGN_OR_RETURN(std::shared_ptr<comm::ProcessGroup> pg, comm::InitProcessGroup(env, {}));
  const std::string dir = SwapDir();
  auto nvme = [&](int stage) {
    Config c = BaseConfig(stage);
    c.bf16.enabled = true;
    NvmeOptimizer(c, dir);
    return c;
  };
  {
    // A missing nvme_path is created, as DeepSpeed does.
    Config c = nvme(2);
    c.zero.offload_optimizer.nvme_path = dir + "/made/by/the/engine";
    Mlp mlp;
    auto engine = Engine::Create(mlp, c, pg);
    if (!engine.ok()) return engine.status();
    if (!std::filesystem::is_directory(dir + "/made/by/the/engine")) {
      return absl::InternalError("the engine did not create the missing nvme_path");
    }
  }
  {
    // One that cannot be created (a file in the way) is named with its key.
    std::ofstream(dir + "/a_file") << "x";
    Config c = nvme(2);
    c.zero.offload_optimizer.nvme_path = dir + "/a_file/swap";
    ZT_RETURN_IF_ERROR(ExpectCreateError(c, pg, {"zero_optimization.offload_optimizer.nvme_path", "/a_file"}));
  }
  {
    Config c = nvme(2);
    c.zero.offload_optimizer.buffer_count = 2;  // master, exp_avg, exp_avg_sq need 3
    ZT_RETURN_IF_ERROR(ExpectCreateError(c, pg, {"buffer_count", "at least 3"}));
  }
  {
    Config c = nvme(2);
    c.zero.offload_optimizer.ratio = 0.5;
    ZT_RETURN_IF_ERROR(ExpectCreateError(c, pg, {"ratio"}));
  }
  {
    Config c = BaseConfig(3);
    c.zero.offload_param.device = OffloadDevice::kNvme;
    c.zero.offload_param.nvme_path = dir;
    c.aio.block_size = 1;
    c.zero.offload_param.buffer_size = 100;  // smaller than every chunk's shard
    ZT_RETURN_IF_ERROR(ExpectCreateError(c, pg, {"offload_param.buffer_size", "unit '"}));
  }
  // A write that fails in the middle of training (the file size limit makes
  // the kernel refuse it with EFBIG): a clean error naming the swap file,
  // never a crash or silent corruption.
  {
    Config c = nvme(2);
    torch::manual_seed(1);
    Mlp model;
    ZT_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine, Engine::Create(model, c, pg));
    ZT_RETURN_IF_ERROR(ExpectSwapWriteError("a failed swap write", [&] {
      engine->Backward(torch::mse_loss(model->forward(torch::ones({2, 32}, torch::kBFloat16)).to(torch::kFloat),
                                       torch::zeros({2, 10})));
      engine->Step();
    }));
  }
  // Stage 3 with the update during backward: a second Backward at the
  // accumulation boundary before Step is refused by name, and a swap write
  // that fails during backward surfaces with the file named.
  {
    Config c = nvme(3);
    ZT_RETURN_IF_ERROR(ResolveBatch(c.batch, pg->size()));
    const TinyGptOptions opts = GptOptions();
    const ParityData data = MakeTokenData(8 * c.batch.micro_batch, opts, 99);
    torch::manual_seed(1);
    TinyGptHandle model = MakeTinyGpt(opts, /*root_is_unit=*/false);
    model.module->to(torch::kBFloat16);
    ZT_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine, Engine::Create(model.module, c, pg));
    if (engine->OffloadSummary().find("during backward") == std::string::npos) {
      return absl::InternalError(absl::StrCat("stage 3 with NVMe optimizer offload should update during backward: ",
                                              engine->OffloadSummary()));
    }
    auto loss = [&](int64_t i) {
      const int64_t mb = c.batch.micro_batch;
      const torch::Tensor logits = model.forward(data.x.narrow(0, i * mb, mb)).to(torch::kFloat);
      return torch::nn::functional::cross_entropy(logits.reshape({-1, logits.size(-1)}),
                                                  data.y.narrow(0, i * mb, mb).reshape({-1}));
    };
    engine->Backward(loss(0));
    std::string message;
    try {
      engine->Backward(loss(1));
    } catch (const Error& e) {
      message = e.what();
    }
    if (message.find("before engine.Step") == std::string::npos) {
      return absl::InternalError(absl::StrCat("a second boundary Backward should be refused, got: '", message, "'"));
    }
    engine->Step();
    ZT_RETURN_IF_ERROR(ExpectSwapWriteError("a swap write failing during backward", [&] {
      for (int64_t i = 2; i < 8; ++i) {
        engine->Backward(loss(i));
        engine->Step();
      }
    }));
  }
  // Stage 3, fp32, the optimizer state and the parameter shards on NVMe: the
  // split update (the state's half during backward, the increments added
  // where the next forward gathers the shards). A swap write that fails in
  // either half is named with its file, and the engine then refuses to go
  // on rather than train from a half-updated state.
  {
    Config c = nvme(3);
    c.bf16.enabled = false;
    c.zero.offload_optimizer.buffer_count = 9;
    c.zero.offload_param.device = OffloadDevice::kNvme;
    c.zero.offload_param.nvme_path = dir;
    c.zero.offload_param.buffer_count = 8;
    c.zero.offload_param.buffer_size = 8192;
    c.aio.block_size = 512;
    ZT_RETURN_IF_ERROR(ResolveBatch(c.batch, pg->size()));
    const TinyGptOptions opts = GptOptions();
    const ParityData data = MakeTokenData(8 * c.batch.micro_batch, opts, 99);
    torch::manual_seed(1);
    TinyGptHandle model = MakeTinyGpt(opts, /*root_is_unit=*/false);
    ZT_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine, Engine::Create(model.module, c, pg));
    if (engine->OffloadSummary().find("update is split") == std::string::npos) {
      return absl::InternalError(
          absl::StrCat("stage 3 fp32 AdamW with both on NVMe should split its update: ", engine->OffloadSummary()));
    }
    auto loss = [&](int64_t i) {
      const int64_t mb = c.batch.micro_batch;
      const torch::Tensor logits = model.forward(data.x.narrow(0, i * mb, mb));
      return torch::nn::functional::cross_entropy(logits.reshape({-1, logits.size(-1)}),
                                                  data.y.narrow(0, i * mb, mb).reshape({-1}));
    };
    ZT_RETURN_IF_ERROR(ExpectSwapWriteError("a swap write failing in the split update", [&] {
      for (int64_t i = 0; i < 8; ++i) {
        engine->Backward(loss(i));
        engine->Step();
      }
    }));
    std::string message;
    try {
      engine->Backward(loss(0));
      engine->Step();
    } catch (const Error& e) {
      message = e.what();
    }
    if (message.find("zerotorch-") == std::string::npos && message.find("checkpoint") == std::string::npos) {
      return absl::InternalError(
          absl::StrCat("after a failed split update the engine should refuse to train on, got: '", message, "'"));
    }
  }
  return absl::OkStatus();
}

TEST(OffloadErrors, NameTheKeyOrFile) {
  RankRunOptions options;
  options.world_size = 1;
  options.timeout = std::chrono::seconds(120);
  RankRunResult result = RunRanks("offload_errors", options);
  RemoveSwapDir();
  EXPECT_TRUE(result.ok()) << result.Summary();
}

}  // namespace
// Offload that saves no host memory is said once at start-up (rank 0): the
// default sub_group_size puts this small model's whole optimizer state in
// one sub-group, so the swap buffers hold all of it. With sub-groups of
// 1024 elements and 3 buffers they hold a fraction, and that is not said;
// at stage 2 the engine says instead that the update waits for the step
// (its swap I/O is not hidden behind backward), at stage 3 nothing: the
// update runs during backward.
ZT_RANK_WORKER(offload_note) {
  ZT_ASSIGN_OR_RETURN(comm::RankEnv env, comm::ReadRankEnv());
  ZT_ASSIGN_OR_RETURN(std::shared_ptr<comm::ProcessGroup> pg, comm::InitProcessGroup(env, {}));
  const std::string dir = SwapDir();
  struct NoteCase {
    int stage;
    bool whole;
    const char* expected;  // the one note's start, or nullptr for none
  };
  for (const NoteCase& n : {NoteCase{2, true, "NVMe offload of the optimizer state saves no host memory"},
                            NoteCase{2, false, "the optimizer update runs in the step"}, NoteCase{3, false, nullptr}}) {
    Config c = BaseConfig(n.stage);
    NvmeOptimizer(c, dir);
    c.zero.sub_group_size = n.whole ? 1000000000 : 1024;
    c.zero.offload_optimizer.buffer_count = 3;
    std::unique_ptr<Engine> engine;
    Mlp mlp;
    TinyGptHandle gpt;
    if (n.stage == 3) {
      gpt = MakeTinyGpt(GptOptions(), /*root_is_unit=*/false);
      ZT_ASSIGN_OR_RETURN(engine, Engine::Create(gpt.module, c, pg));
    } else {
      ZT_ASSIGN_OR_RETURN(engine, Engine::Create(mlp, c, pg));
    }
    const std::vector<std::string> notes = engine->OffloadNotes();
    const bool ok =
        n.expected == nullptr ? notes.empty() : notes.size() == 1 && absl::StartsWith(notes.front(), n.expected);
    if (!ok) {
      return absl::InternalError(
          absl::StrCat("stage ", n.stage, ", sub-groups of ", n.whole ? "the whole state" : "1024", ": expected ",
                       n.expected == nullptr ? "no note" : n.expected, ", got: ", absl::StrJoin(notes, " | ")));
    }
    // On stderr, where the engine's log goes, so the order is kept.
    std::fprintf(stderr, "--- engine with sub-groups of %s done\n", n.whole ? "the whole state" : "1024");
    std::fflush(stderr);
  }
  return absl::OkStatus();
}

TEST(OffloadNote, SaidOnceWhenTheSwapBuffersHoldTheWholeState) {
  RankRunOptions options;
  options.world_size = 1;
  options.timeout = std::chrono::seconds(120);
  RankRunResult result = RunRanks("offload_note", options);
  RemoveSwapDir();
  ASSERT_TRUE(result.ok()) << result.Summary();
  const std::string& out = result.outputs[0];
  const size_t first = out.find("--- engine with sub-groups of the whole state done");
  ASSERT_NE(first, std::string::npos) << out;
  const std::string note = "NVMe offload of the optimizer state saves no host memory";
  const size_t at = out.find(note);
  EXPECT_LT(at, first) << "the first engine should log the note:\n" << out;
  EXPECT_EQ(out.find(note, at + 1), std::string::npos) << "said once, by the first engine only:\n" << out;
}

// The read-ahead keeps the forward and backward fed: with a pool that holds
// two units' shards, once the first step has recorded the unit order, every
// shard a gather needs was read ahead of it, no shard is read back that the
// pool already held for a use coming sooner (each is read at most once per
// pass), and the update at gather never waits for a write-back. Before the
// read-ahead retried when a gather gave its buffer back, and kept the copies
// needed first, the backward's first units were read on demand and some
// shards twice. Counted in reads, so it holds on any machine; the time it
// saves is the benchmark's (zt_bench_offload's forward_wait_s and
// backward_wait_s).
ZT_RANK_WORKER(offload_read_ahead) {
  ZT_ASSIGN_OR_RETURN(comm::RankEnv env, comm::ReadRankEnv());
  ZT_ASSIGN_OR_RETURN(std::shared_ptr<comm::ProcessGroup> pg, comm::InitProcessGroup(env, {}));
  const std::string dir = SwapDir();
  for (const int64_t reuse : {int64_t{0}, int64_t{1000000000}}) {
    Config c = BaseConfig(3);
    NvmeOptimizer(c, dir);            // the split update, as in the benchmark
    c.zero.reduce_bucket_size = 700;  // two chunks per block
    c.zero.max_reuse_distance = reuse;
    auto& p = c.zero.offload_param;
    p.device = OffloadDevice::kNvme;
    p.nvme_path = dir;
    p.buffer_count = 4;  // two units' shards
    p.buffer_size = 8192;
    c.aio.block_size = 1;  // every shard goes to the swap file
    ZT_RETURN_IF_ERROR(ResolveBatch(c.batch, pg->size()));
    TinyGptOptions opts;
    opts.dim = 12;
    opts.hidden = {20, 20, 20, 20, 20, 20};
    opts.frozen_adapter = false;
    constexpr int64_t kRuns = 4;
    const ParityData data = MakeTokenData(kRuns * c.batch.train_batch, opts, 99);
    torch::manual_seed(3);
    TinyGptHandle model = MakeTinyGpt(opts, /*root_is_unit=*/false);
    ZT_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine, Engine::Create(model.module, c, pg));
    offload::ParamSwapStats first;
    for (int64_t s = 0; s < kRuns; ++s) {
      if (s == 1) first = engine->stage3_stats()->swap;
      const int64_t start = MicroBatchStart(c.batch, s, 0, pg->rank());
      const torch::Tensor logits = model.forward(data.x.narrow(0, start, c.batch.micro_batch));
      engine->Backward(torch::nn::functional::cross_entropy(
          logits.reshape({-1, logits.size(-1)}), data.y.narrow(0, start, c.batch.micro_batch).reshape({-1})));
      engine->Step();
    }
    const zero::CoordinatorStats st = *engine->stage3_stats();
    const offload::ParamSwapStats& sw = st.swap;
    const uint64_t reads = sw.reads - first.reads;
    const uint64_t ahead = sw.read_ahead - first.read_ahead;
    const int64_t slots = st.swapped_shards;
    const std::string where =
        absl::StrFormat("max_reuse_distance %d, %d swapped shards, steps 2-%d", reuse, slots, kRuns);
    if (slots < 12) return absl::InternalError(absl::StrCat(where, ": expected two swapped chunks per block"));
    if (reads == 0) return absl::InternalError(absl::StrCat(where, ": no shard was read (the pool holds them all?)"));
    if (reads != ahead) {
      return absl::InternalError(
          absl::StrFormat("%s: %d of %d shard reads were not read ahead of their gather", where, reads - ahead, reads));
    }
    const uint64_t at_most = 2 * static_cast<uint64_t>(slots) * (kRuns - 1);
    if (reads > at_most) {
      return absl::InternalError(absl::StrFormat(
          "%s: %d shard reads, more than one per shard and pass (%d): copies evicted before a use coming sooner", where,
          reads, at_most));
    }
    std::fprintf(stderr, "%s: %llu reads, all ahead (at most %llu)\n", where.c_str(),
                 static_cast<unsigned long long>(reads), static_cast<unsigned long long>(at_most));
  }
  return absl::OkStatus();
}

TEST(OffloadReadAhead, EveryShardIsReadAheadAndOncePerPass) {
  for (int world : {1, 2}) {
    RankRunOptions options;
    options.world_size = world;
    options.timeout = std::chrono::seconds(300);
    RankRunResult result = RunRanks("offload_read_ahead", options);
    RemoveSwapDir();
    EXPECT_TRUE(result.ok()) << "world " << world << ": " << result.Summary();
  }
}

}  // namespace zt::testing

int main(int argc, char** argv) { return zt::testing::RankTestMain(argc, argv); }
