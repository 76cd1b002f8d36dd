// The training loop behind `zt train`. Per step: this rank's micro-batches
// from the distributed sampler, Engine::TrainBatch, the loss averaged over
// ranks; rank 0 shows progress and writes monitor events. Evaluation every
// eval_interval steps and at the end; checkpoints (with the sampler position
// and the run's history, so a resumed run continues both) every
// save_interval steps and at the end; then the consolidated export and the
// report.
#include "train/trainer.h"

#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <optional>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "ckpt/export.h"
#include "ckpt/zero_checkpoint.h"
#include "comm/agreement.h"
#include "comm/collective_label.h"
#include "comm/init.h"
#include "comm/rank_env.h"
#include "data/sampler.h"
#include "engine/engine.h"
#include "models/registry.h"
#include "monitor/csv_monitor.h"
#include "monitor/progress.h"
#include "monitor/tensorboard.h"
#include "train/evaluate.h"
#include "train/run_history.h"
#include "train/train_config.h"
#include "train/train_data.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/file_io.h"
#include "util/log.h"
#include "util/status.h"
#include "util/strings.h"
#include "util/system_info.h"
#include "zero/sharded_init.h"

namespace zt::train {
namespace {

using Clock = std::chrono::steady_clock;

absl::StatusOr<std::unique_ptr<monitor::Monitor>> MakeMonitors(const Config& config, const OutputPaths& paths,
                                                               const std::string& job) {
  auto set = std::make_unique<monitor::MonitorSet>();
  auto options = [&](const MonitorConfig& m) {
    monitor::MonitorOptions o;
    o.output_path = m.output_path.empty() ? paths.monitor_dir : m.output_path;
    o.job_name = m.job_name == "DeepSpeedJobName" ? job : m.job_name;
    return o;
  };
  if (config.csv_monitor.enabled) {
    ZT_ASSIGN_OR_RETURN(auto csv, monitor::CsvMonitor::Create(options(config.csv_monitor)));
    ZT_LOG(INFO) << "csv_monitor: " << csv->dir();
    set->Add(std::move(csv));
  }
  if (config.tensorboard.enabled) {
    ZT_ASSIGN_OR_RETURN(auto tb, monitor::TensorBoardMonitor::Create(options(config.tensorboard)));
    ZT_LOG(INFO) << "tensorboard: " << tb->path();
    set->Add(std::move(tb));
  }
  return std::unique_ptr<monitor::Monitor>(std::move(set));
}

ckpt::Value ClientState(const data::SampleStream& stream, const RunHistory& history) {
  ckpt::Dict d;
  d.Set("sampler_epoch", ckpt::Value(stream.position().epoch));
  d.Set("sampler_offset", ckpt::Value(stream.position().offset));
  d.Set("sampler_world_size", ckpt::Value(static_cast<int64_t>(stream.sampler().options().world_size)));
  d.Set("sampler_num_samples", ckpt::Value(stream.sampler().options().num_samples));
  d.Set("history", history.ToValue());
  return ckpt::Value(std::move(d));
}

absl::StatusOr<int64_t> SeqLen(const TrainOptions& o, const models::ModelInfo& info) {
  if (info.task != models::Task::kLanguageModel) return 0;
  const int64_t seq_len = o.seq_len > 0 ? o.seq_len : info.max_seq_len;
  if (seq_len > info.max_seq_len) {
    return absl::InvalidArgumentError(absl::StrCat("--seq-len ", seq_len, " exceeds the maximum sequence length ",
                                                   info.max_seq_len, " of ", info.name,
                                                   "; lower it or pass --model-set seq_len=", seq_len));
  }
  return seq_len;
}

absl::Status CheckBatchFits(const TrainData& data, int64_t global_batch) {
  if (data.size(Split::kTrain) < global_batch) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "the training set has %d samples, fewer than one global batch of %d (train_batch_size); use more data or "
        "a smaller train_micro_batch_size_per_gpu",
        data.size(Split::kTrain), global_batch));
  }
  return absl::OkStatus();
}

// Where this run's sampler continues. Saved at the same world size: exactly
// where it stopped. At another world size: the same point of the epoch
// (rank r takes positions r, r+W, ... of the epoch's permutation, so offset
// k at W ranks consumed positions [0, kW): continue at kW / W' per rank,
// rounded down -- a few samples may be seen twice, none skipped). On other
// data: the start of the saved epoch. A checkpoint without a position (not
// written by zt train: DeepSpeed's own, or the C++ API's) continues this
// run's sample order after the `global_samples` it says were trained on.
absl::StatusOr<data::StreamPosition> ResumePosition(const ckpt::Dict& client, const data::SampleStream& stream,
                                                    int64_t global_samples) {
  const ckpt::Value* epoch = client.Find("sampler_epoch");
  const ckpt::Value* offset = client.Find("sampler_offset");
  const ckpt::Value* world = client.Find("sampler_world_size");
  const ckpt::Value* samples = client.Find("sampler_num_samples");
  for (const ckpt::Value* v : {epoch, offset, world, samples}) {
    if (v == nullptr || !v->is_int()) {
      const data::SamplerOptions& now = stream.sampler().options();
      const int64_t epoch_len = stream.sampler().total_size();
      data::StreamPosition pos{epoch_len > 0 ? global_samples / epoch_len : 0,
                               epoch_len > 0 ? (global_samples % epoch_len) / now.world_size : 0};
      if (now.rank == 0) {
        ZT_LOG(WARNING) << "the checkpoint holds no data position (it was not written by zt train): continuing "
                           "this run's sample order after the "
                        << global_samples << " samples it was trained on (epoch " << pos.epoch << ", sample "
                        << pos.offset << " of each rank's shard)";
      }
      return pos;
    }
  }
  const data::SamplerOptions& now = stream.sampler().options();
  data::StreamPosition pos{epoch->AsInt(), offset->AsInt()};
  if (samples->AsInt() != now.num_samples) {
    ZT_LOG(WARNING) << "the training set has " << now.num_samples << " samples, the checkpoint's had "
                    << samples->AsInt() << ": continuing at the start of epoch " << pos.epoch;
    pos.offset = 0;
  } else if (world->AsInt() != now.world_size) {
    const int64_t consumed = pos.offset * world->AsInt();
    pos.offset = std::min(consumed / now.world_size, stream.sampler().per_rank() - 1);
    if (now.rank == 0) {
      ZT_LOG(INFO) << "resuming at " << now.world_size << " ranks from a checkpoint saved at " << world->AsInt() << ": "
                   << consumed << " samples of epoch " << pos.epoch << " done, continuing at " << pos.offset
                   << " per rank";
    }
  }
  return pos;
}

// transformers' config.json beside an export, so from_pretrained(dir) loads it.
// An export into a directory of its own gets it inside; a file export gets it
// in the file's directory, unless a config.json that is not a transformers
// config is already there (not ours to replace). Models without a
// transformers counterpart get none.
absl::Status WriteHfConfig(const models::ModelSpec& spec, const std::string& export_path, std::string* written) {
  ZT_ASSIGN_OR_RETURN(std::string json, models::HfConfigJson(spec));
  if (json.empty()) return absl::OkStatus();
  std::filesystem::path p(export_path);
  const bool is_file = p.extension() == ".safetensors";
  std::filesystem::path dir = is_file ? p.parent_path() : p;
  if (dir.empty()) dir = ".";
  const std::filesystem::path target = dir / "config.json";
  if (is_file && std::filesystem::exists(target)) {
    std::ifstream in(target);
    std::string existing((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (existing.find("\"architectures\"") == std::string::npos) return absl::OkStatus();
  }
  ZT_RETURN_IF_ERROR(WriteFileAtomically(target.string(), json));
  *written = target.string();
  return absl::OkStatus();
}

// A data path must be something zt train can size and read to the end: a
// regular file or a directory of them. A pipe would block forever and
// /dev/zero never ends.
absl::Status CheckDataPath(const char* flag, const std::string& path) {
  std::error_code ec;
  const std::filesystem::file_status st = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(st)) return absl::OkStatus();  // the data reader names a missing path
  if (std::filesystem::is_regular_file(st) || std::filesystem::is_directory(st)) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(flag, " ", path,
                   " is not a regular file or directory (a pipe, socket or device): zt train sizes and "
                   "re-reads its data, so write it to a file first"));
}

// Creates `dir` if needed and proves a file can be written there, so an
// unwritable checkpoint or output directory is named before any step runs
// instead of at the first save.
absl::Status CheckWritableDir(const char* what, const std::string& dir) {
  if (absl::Status made = MakeDirs(dir); !made.ok()) {
    // MakeDirs says "cannot create <dir>: <why>"; keep the why, name the flag.
    absl::string_view why = made.message();
    absl::ConsumePrefix(&why, absl::StrCat("cannot create ", dir, ": "));
    return absl::Status(made.code(),
                        absl::StrCat("cannot create the ", what, " ", dir, ": ", why, "; choose another directory"));
  }
  const std::string probe = absl::StrCat(dir, "/.zt_write_check.", getpid());
  std::ofstream out(probe, std::ios::trunc);
  out << "ok";
  out.close();
  const bool ok = static_cast<bool>(out);
  std::error_code ec;
  std::filesystem::remove(probe, ec);
  if (!ok) {
    return absl::PermissionDeniedError(absl::StrCat("the ", what, " ", dir, " is not writable (", std::strerror(errno),
                                                    "); fix its permissions or choose another directory"));
  }
  return absl::OkStatus();
}

// Subdirectories of `save_dir` that hold checkpoint files (*model_states.pt
// or *optim_states.pt), sorted by their step number where they have one.
absl::StatusOr<std::vector<std::string>> ListCheckpointTags(const std::string& save_dir) {
  std::vector<std::pair<int64_t, std::string>> found;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(save_dir, ec)) {
    if (!entry.is_directory()) continue;
    bool has_files = false;
    for (const auto& f : std::filesystem::directory_iterator(entry.path(), ec)) {
      const std::string name = f.path().filename().string();
      if (absl::EndsWith(name, "model_states.pt") || absl::EndsWith(name, "optim_states.pt")) has_files = true;
    }
    if (!has_files) continue;
    const std::string tag = entry.path().filename().string();
    int64_t step = -1;
    if (absl::StartsWith(tag, "global_step") && !absl::SimpleAtoi(tag.substr(11), &step)) step = -1;
    found.emplace_back(step, tag);
  }
  if (ec) return absl::PermissionDeniedError(absl::StrCat("cannot list ", save_dir, ": ", ec.message()));
  std::sort(found.begin(), found.end());
  std::vector<std::string> tags;
  for (auto& f : found) tags.push_back(std::move(f.second));
  return tags;
}

}  // namespace

absl::Status CheckTrainJob(const TrainOptions& o, const std::string& config_json, const std::string& config_source,
                           int world_size) {
  ZT_ASSIGN_OR_RETURN(Config config, ParseTrainConfig(config_json, config_source, world_size));
  if (config.fp16.enabled && !at::hasCUDA()) {
    // LibTorch's CPU kernels lack fp16 for LayerNorm, matmul and more; the
    // ranks would fail at their first forward.
    return absl::InvalidArgumentError(absl::StrCat(
        "fp16 compute needs CUDA and this build runs on the CPU (fp16 comes from --precision fp16 or fp16.enabled "
        "in ",
        config_source, "): use --precision bf16 (bf16.enabled) or fp32"));
  }
  ZT_RETURN_IF_ERROR(CheckDataPath("--data", o.data));
  ZT_RETURN_IF_ERROR(CheckDataPath("--eval-data", o.eval_data));
  const OutputPaths paths = ResolveOutputPaths(o);
  ZT_RETURN_IF_ERROR(CheckWritableDir("output directory (--output-dir)", paths.output_dir));
  if (!paths.save_dir.empty())
    ZT_RETURN_IF_ERROR(CheckWritableDir("checkpoint directory (--save-dir)", paths.save_dir));
  models::ModelSpec spec;
  spec.name = o.model;
  spec.overrides = o.model_overrides;
  spec.seed = o.seed;
  ZT_ASSIGN_OR_RETURN(models::ModelInfo info, models::DescribeModel(spec));
  ZT_ASSIGN_OR_RETURN(int64_t seq_len, SeqLen(o, info));
  ZT_ASSIGN_OR_RETURN(std::unique_ptr<TrainData> data, OpenTrainData(o, info, seq_len));
  ZT_RETURN_IF_ERROR(CheckBatchFits(*data, config.batch.train_batch));
  if (!o.init_from.empty() && !std::filesystem::exists(o.init_from)) {
    return absl::NotFoundError(absl::StrCat("--init-from ", o.init_from,
                                            " does not exist: give a .safetensors file, an index .json or a "
                                            "directory holding them (zt ckpt consolidate writes one)"));
  }
  return absl::OkStatus();
}

OutputPaths ResolveOutputPaths(const TrainOptions& o) {
  OutputPaths p;
  p.output_dir = o.output_dir.empty() ? absl::StrCat("runs/", o.model) : o.output_dir;
  p.save_dir = o.save_dir == "none" ? "" : (o.save_dir.empty() ? p.output_dir + "/checkpoints" : o.save_dir);
  if (o.export_path == "none") {
    p.export_path = "";
  } else if (!o.export_path.empty()) {
    p.export_path = o.export_path;
  } else {
    p.export_path = p.output_dir + "/model.safetensors";
  }
  p.report = o.report == "none" ? "" : (o.report.empty() ? p.output_dir + "/report.html" : o.report);
  p.monitor_dir = p.output_dir;
  return p;
}

absl::Status RunTrainingRank(const TrainOptions& o, const std::string& config_json, const std::string& config_source) {
  const auto t_start = Clock::now();
  ZT_ASSIGN_OR_RETURN(comm::RankEnv env, comm::ReadRankEnv());
  ZT_ASSIGN_OR_RETURN(std::shared_ptr<comm::ProcessGroup> pg, comm::InitProcessGroup(env, {}));
  if (o.threads > 0) at::set_num_threads(o.threads);
  const bool rank0 = pg->rank() == 0;
  const OutputPaths paths = ResolveOutputPaths(o);

  ZT_ASSIGN_OR_RETURN(Config config, ParseTrainConfig(config_json, config_source, pg->size()));
  models::ModelSpec spec;
  spec.name = o.model;
  spec.overrides = o.model_overrides;
  spec.seed = o.seed;
  std::unique_ptr<models::Model> model;
  {
    // Stage 3 shards each block as it is built (zt::ShardedInit): no rank
    // ever holds the whole model, which is what makes models larger than one
    // rank's memory trainable at all.
    std::unique_ptr<ShardedInit> sharded;
    if (config.zero.stage == 3) sharded = std::make_unique<ShardedInit>(pg, config);
    ZT_ASSIGN_OR_RETURN(model, models::CreateModel(spec));
  }
  const models::ModelInfo& info = model->info();
  const bool lm = info.task == models::Task::kLanguageModel;
  ZT_ASSIGN_OR_RETURN(const int64_t seq_len, SeqLen(o, info));
  ZT_ASSIGN_OR_RETURN(std::unique_ptr<TrainData> data, OpenTrainData(o, info, seq_len));
  const int64_t micro = config.batch.micro_batch;
  const int64_t gas = config.batch.accumulation_steps;
  const int64_t global_batch = config.batch.train_batch;
  ZT_RETURN_IF_ERROR(CheckBatchFits(*data, global_batch));
  if (rank0) {
    std::printf("zt train: %s (%s parameters) on %d rank%s, ZeRO stage %d, %s\n", info.name.c_str(),
                HumanCount(static_cast<double>(info.num_params)).c_str(), pg->size(), pg->size() == 1 ? "" : "s",
                config.zero.stage, config.bf16.enabled ? "bf16" : (config.fp16.enabled ? "fp16" : "fp32"));
    std::printf("data: %s\n", data->Describe().c_str());
    std::printf("batch: %lld per rank x %lld accumulation x %d ranks = %lld samples per step%s\n",
                static_cast<long long>(micro), static_cast<long long>(gas), pg->size(),
                static_cast<long long>(global_batch),
                lm ? absl::StrFormat(" (%d tokens)", global_batch * seq_len).c_str() : "");
    std::printf("config (%s, with command-line values):\n%s\n", config_source.c_str(), config_json.c_str());
    for (const std::string& note : config.notes) std::printf("  note: %s\n", note.c_str());
    std::fflush(stdout);
  }

  if (o.activation_checkpointing) {
    const int marked =
        model->CheckpointActivations(static_cast<int>(config.activation_checkpointing.number_checkpoints.value_or(0)));
    if (rank0) {
      ZT_LOG(INFO) << "activation checkpointing: " << marked << " units";
    }
  }
  ZT_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine, Engine::Create(model->module(), config, pg));
  const at::ScalarType dtype = config.bf16.enabled ? at::kBFloat16 : (config.fp16.enabled ? at::kHalf : at::kFloat);

  // --- Where to start: a checkpoint, imported weights, or the fresh model ---
  data::SamplerOptions so;
  so.num_samples = data->size(Split::kTrain);
  so.world_size = pg->size();
  so.rank = pg->rank();
  so.seed = o.seed;
  ZT_ASSIGN_OR_RETURN(data::DistributedSampler sampler, data::DistributedSampler::Create(so));
  data::SampleStream stream(std::move(sampler));
  RunHistory history;
  bool resumed = false;
  if (o.resume && !paths.save_dir.empty() && std::filesystem::exists(paths.save_dir + "/latest")) {
    ZT_ASSIGN_OR_RETURN(ckpt::Value client, engine->LoadCheckpoint(paths.save_dir));
    if (!client.is_dict()) client = ckpt::Value(ckpt::Dict{});
    ZT_ASSIGN_OR_RETURN(data::StreamPosition pos, ResumePosition(client.AsDict(), stream, engine->global_samples()));
    ZT_RETURN_IF_ERROR(stream.SetPosition(pos));
    if (const ckpt::Value* h = client.AsDict().Find("history")) history = RunHistory::FromValue(*h);
    resumed = true;
    if (rank0) {
      std::printf("resumed from %s at step %lld (epoch %lld, sample %lld of this rank's shard)\n",
                  paths.save_dir.c_str(), static_cast<long long>(engine->global_steps()),
                  static_cast<long long>(pos.epoch), static_cast<long long>(pos.offset));
    }
  } else if (o.resume && !paths.save_dir.empty()) {
    // No `latest`: a fresh start is right only where no checkpoint was ever
    // saved. Tags without `latest` mean it was lost or deleted; starting
    // fresh would overwrite them, so refuse and name them.
    ZT_ASSIGN_OR_RETURN(std::vector<std::string> tags, ListCheckpointTags(paths.save_dir));
    if (!tags.empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "--resume: ", paths.save_dir, " has checkpoints (", absl::StrJoin(tags, ", "),
          ") but no 'latest' file naming which to resume; write the tag to resume into ", paths.save_dir,
          "/latest (e.g. echo ", tags.back(), " > ", paths.save_dir, "/latest), or use another --save-dir"));
    }
    if (rank0) std::printf("--resume: no checkpoint at %s/latest yet, starting fresh\n", paths.save_dir.c_str());
  }
  if (!resumed && !o.init_from.empty()) {
    ZT_RETURN_IF_ERROR(engine->LoadWeights(o.init_from));
    if (rank0) std::printf("initialized the weights from %s\n", o.init_from.c_str());
  }

  std::unique_ptr<monitor::Monitor> monitors;
  std::optional<monitor::ProgressBar> progress;
  {
    absl::Status st = absl::OkStatus();
    if (rank0) {
      if (absl::Status made = MakeDirs(paths.output_dir); !made.ok()) {
        st = absl::Status(made.code(),
                          absl::StrCat("the output directory: ", made.message(), "; pass --output-dir DIR"));
      }
      if (st.ok()) {
        auto m = MakeMonitors(config, paths, info.name);
        if (m.ok()) {
          monitors = *std::move(m);
        } else {
          st = m.status();
        }
      }
    }
    ZT_RETURN_IF_ERROR(comm::AgreeAcrossRanks(*pg, st, "creating the output directory and monitors"));
  }
  const int64_t first_step = engine->global_steps();
  if (rank0 && o.progress) {
    monitor::ProgressOptions po;
    po.total_steps = o.steps;
    progress.emplace(po);
  }

  auto evaluate = [&](int64_t step) -> absl::Status {
    ZT_ASSIGN_OR_RETURN(EvalResult r, Evaluate(*model, *data, *pg, micro, o.eval_batches, dtype));
    if (r.samples == 0) return absl::OkStatus();
    history.AddEval(step, r.loss(), lm ? std::exp(std::min(r.loss(), 50.0)) : r.accuracy());
    if (rank0) {
      if (progress) progress->Finish();
      if (lm) {
        std::printf("eval at step %lld: loss %.4f, perplexity %.2f (%lld sequences, %lld tokens)\n",
                    static_cast<long long>(step), r.loss(), std::exp(std::min(r.loss(), 50.0)),
                    static_cast<long long>(r.samples), static_cast<long long>(r.loss_count));
      } else {
        std::printf("eval at step %lld: loss %.4f, accuracy %.2f%% (%lld images)\n", static_cast<long long>(step),
                    r.loss(), 100.0 * r.accuracy(), static_cast<long long>(r.samples));
      }
      std::fflush(stdout);
      if (monitors) {
        std::vector<monitor::Event> ev = {{monitor::tags::kEvalLoss, r.loss(), step}};
        ev.push_back({lm ? "Eval/Samples/perplexity" : "Eval/Samples/accuracy",
                      lm ? std::exp(std::min(r.loss(), 50.0)) : r.accuracy(), step});
        ZT_RETURN_IF_ERROR(monitors->Write(ev));
      }
    }
    return absl::OkStatus();
  };
  auto save = [&]() -> absl::Status {
    if (paths.save_dir.empty()) return absl::OkStatus();
    const auto t0 = Clock::now();
    ZT_RETURN_IF_ERROR(engine->SaveCheckpoint(paths.save_dir, "", ClientState(stream, history)));
    if (rank0) {
      if (progress) progress->Finish();
      std::printf("saved checkpoint %s/global_step%lld (%.2f s)\n", paths.save_dir.c_str(),
                  static_cast<long long>(engine->global_steps()), Seconds(t0, Clock::now()));
      std::fflush(stdout);
    }
    return absl::OkStatus();
  };

  // --- The loop ---
  const auto t_loop = Clock::now();
  model->module()->train();
  std::vector<at::Tensor> inputs(gas), targets(gas);
  const double items_per_step = static_cast<double>(global_batch * data->items_per_sample());
  while (engine->global_steps() < o.steps) {
    const auto t0 = Clock::now();
    for (int64_t i = 0; i < gas; ++i) {
      data->Batch(Split::kTrain, stream.Next(micro), &inputs[i], &targets[i]);
      if (inputs[i].is_floating_point()) inputs[i] = inputs[i].to(dtype);
    }
    const double local_loss = engine->TrainBatch([&](int64_t i) {
      at::Tensor out = model->Forward(inputs[i]).to(at::kFloat);
      if (lm) return torch::cross_entropy_loss(out.reshape({-1, out.size(-1)}), targets[i].reshape({-1}));
      return torch::nll_loss(out, targets[i]);
    });
    at::Tensor loss_t = at::full({1}, local_loss, at::kDouble);
    comm::CollectiveLabel label("the step's mean loss");
    ZT_RETURN_IF_ERROR(pg->AllReduce(loss_t, comm::ReduceOp::kAvg)->Wait());
    const double loss = loss_t.item<double>();
    const double step_sec = Seconds(t0, Clock::now());
    const int64_t step = engine->global_steps();
    if (!std::isfinite(loss)) {
      return absl::InternalError(absl::StrFormat(
          "step %d: the loss is %g; lower the learning rate (optimizer.params.lr), enable gradient_clipping or "
          "use bf16 instead of fp16",
          step, loss));
    }
    const double rate = step_sec > 0 ? items_per_step / step_sec : 0.0;
    const int64_t rss = CurrentResidentBytes();
    history.AddStep(step, loss, engine->lr(), rate, static_cast<double>(rss));
    if (rank0) {
      if (progress) {
        monitor::ProgressInfo p;
        p.step = step;
        p.loss = loss;
        p.lr = engine->lr();
        p.items_per_sec = rate;
        p.items_name = data->items_name();
        p.memory_bytes = rss;
        p.elapsed_sec = Seconds(t_loop, Clock::now());
        p.first_step = first_step;
        progress->Update(p);
      }
      if (monitors) {
        std::vector<monitor::Event> ev = {
            {monitor::tags::kTrainLoss, loss, step},
            {monitor::tags::kLr, engine->lr(), step},
            {lm ? monitor::tags::kTokensPerSec : monitor::tags::kSamplesPerSec, rate, step},
            {monitor::tags::kMemoryBytes, static_cast<double>(rss), step},
            {monitor::tags::kStepTimeSec, step_sec, step},
        };
        if (config.fp16.enabled) ev.push_back({monitor::tags::kLossScale, engine->loss_scale(), step});
        if (engine->last_grad_norm()) ev.push_back({monitor::tags::kGradNorm, *engine->last_grad_norm(), step});
        ZT_RETURN_IF_ERROR(monitors->Write(ev));
        if (config.steps_per_print > 0 && step % config.steps_per_print == 0) ZT_RETURN_IF_ERROR(monitors->Flush());
      }
    }
    if (o.eval_interval > 0 && step % o.eval_interval == 0 && step < o.steps) ZT_RETURN_IF_ERROR(evaluate(step));
    if (o.save_interval > 0 && step % o.save_interval == 0 && step < o.steps) ZT_RETURN_IF_ERROR(save());
  }
  if (progress) progress->Finish();

  // --- The end: evaluation, checkpoint, export, report ---
  if (o.eval_interval >= 0) ZT_RETURN_IF_ERROR(evaluate(engine->global_steps()));
  if (monitors) ZT_RETURN_IF_ERROR(monitors->Flush());
  ZT_RETURN_IF_ERROR(save());
  std::string exported, hf_config;
  if (!paths.export_path.empty() && !paths.save_dir.empty()) {
    absl::Status st = absl::OkStatus();
    if (rank0) {
      auto ck = ckpt::ZeroCheckpoint::Open(paths.save_dir);
      if (!ck.ok()) {
        st = ck.status();
      } else {
        auto r = ckpt::ExportSafetensors(**ck, paths.export_path);
        if (!r.ok()) {
          st = r.status();
        } else {
          exported = absl::StrCat(paths.export_path, " (", r->tensors, " tensors, ",
                                  HumanBytes(static_cast<double>(r->bytes)), ")");
          st = WriteHfConfig(spec, paths.export_path, &hf_config);
        }
      }
    }
    ZT_RETURN_IF_ERROR(comm::AgreeAcrossRanks(*pg, st, "exporting the consolidated weights"));
  }
  if (rank0) {
    ReportInfo ri;
    ri.title = absl::StrCat("zt train: ", info.name);
    ri.rows = {
        {"model", absl::StrCat(info.name, " (", HumanCount(static_cast<double>(info.num_params)), " parameters)")},
        {"data", data->Describe()},
        {"ranks", absl::StrCat(pg->size())},
        {"ZeRO stage", absl::StrCat(config.zero.stage)},
        {"precision", config.bf16.enabled ? "bf16" : (config.fp16.enabled ? "fp16" : "fp32")},
        {"global batch", absl::StrCat(global_batch, lm ? absl::StrCat(" x ", seq_len, " tokens") : "")},
        {"steps", absl::StrCat(first_step, " -> ", engine->global_steps())},
        {"wall time", absl::StrFormat("%.1f s", Seconds(t_start, Clock::now()))},
        {"system", SystemInfoLine()}};
    if (!paths.report.empty()) ZT_RETURN_IF_ERROR(WriteReport(paths.report, ri, history, lm));
    std::printf("\ndone: %lld steps in %.1f s; final train loss %.4f\n",
                static_cast<long long>(engine->global_steps() - first_step), Seconds(t_start, Clock::now()),
                history.LastLoss());
    std::printf("  output:      %s\n", paths.output_dir.c_str());
    if (!paths.save_dir.empty()) std::printf("  checkpoints: %s (resume with --resume)\n", paths.save_dir.c_str());
    if (!exported.empty()) std::printf("  weights:     %s (fine-tune with --init-from)\n", exported.c_str());
    if (!hf_config.empty())
      std::printf("  HF config:   %s (transformers' from_pretrained reads the directory)\n", hf_config.c_str());
    if (!paths.report.empty()) std::printf("  report:      %s\n", paths.report.c_str());
    std::fflush(stdout);
  }
  return absl::OkStatus();
}

}  // namespace zt::train
