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
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "ckpt/checkpoint_convert.h"
#include "ckpt/deepspeed/optimizer.h"
#include "ckpt/deepspeed/writer.h"
#include "ckpt/export.h"
#include "ckpt/lora_record.h"
#include "ckpt/memory_copies.h"
#include "ckpt/zero_checkpoint.h"
#include "comm/agreement.h"
#include "comm/collective_label.h"
#include "comm/init.h"
#include "data/sampler.h"
#include "data/supervised.h"
#include "data/tokenize_corpus.h"
#include "engine/engine.h"
#include "engine/weight_decay_groups.h"
#include "generate/generator.h"
#include "generate/sampling/text_stream.h"
#include "launch/rank_env.h"
#include "lora/apply_lora.h"
#include "models/registry.h"
#include "monitor/csv_monitor.h"
#include "monitor/from_config.h"
#include "monitor/progress.h"
#include "monitor/tensorboard.h"
#include "plan/stage_sharding.h"
#include "tokenizer/byte_tokenizer.h"
#include "tokenizer/hf_tokenizer.h"
#include "train/evaluate.h"
#include "train/job/data_checks.h"
#include "train/job/init_from.h"
#include "train/job/job_check.h"
#include "train/job/step_marker.h"
#include "train/job/train_config.h"
#include "train/run_history.h"
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

ckpt::Value ClientState(const data::SampleStream& stream, const RunHistory& history,
                        const std::optional<LoraRecord>& lora) {
  ckpt::Dict d;
  if (lora) d.Set("lora", LoraRecordToValue(*lora));
  d.Set("sampler_epoch", ckpt::Value(stream.position().epoch));
  d.Set("sampler_offset", ckpt::Value(stream.position().offset));
  d.Set("sampler_world_size", ckpt::Value(static_cast<int64_t>(stream.sampler().options().world_size)));
  d.Set("sampler_num_samples", ckpt::Value(stream.sampler().options().num_samples));
  d.Set("history", history.ToValue());
  return ckpt::Value(std::move(d));
}

// Where this run's sampler continues. Saved at the same world size: exactly
// where it stopped. At another world size: the same point of the epoch's
// global order (data::PositionAtWorldSize: exact when the global batch is
// unchanged; else rounded down, a few samples seen twice, none skipped, and
// a warning says how many). On other
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
    int64_t repeated = 0;
    pos = data::PositionAtWorldSize(pos, static_cast<int>(world->AsInt()), stream.sampler(), &repeated);
    if (now.rank == 0) {
      ZT_LOG(INFO) << "resuming at " << now.world_size << " ranks from a checkpoint saved at " << world->AsInt() << ": "
                   << consumed << " samples of epoch " << epoch->AsInt() << " done, continuing at epoch " << pos.epoch
                   << ", " << pos.offset << " per rank";
      if (repeated > 0) {
        ZT_LOG(WARNING) << consumed << " samples done is not a multiple of " << now.world_size
                        << " ranks (the global batch changed): the last " << repeated
                        << " of them are seen again; keep the global batch to resume exactly";
      }
    }
  }
  return pos;
}

// transformers' config.json beside an export, so from_pretrained(dir) loads it.
// An export into a directory of its own gets it inside; a file export gets it
// in the file's directory, unless a config.json that is not a transformers
// config is already there (not ours to replace). Models without a
// transformers counterpart get none. A classifier trained on named labels
// gets them as id2label / label2id, as transformers' pipelines show them.
// The text of that config.json ("" for models without one).
absl::StatusOr<std::string> HfConfigText(const models::ModelSpec& spec, const std::vector<std::string>& label_names) {
  ZT_ASSIGN_OR_RETURN(std::string json, models::HfConfigJson(spec));
  if (!json.empty() && !label_names.empty()) {
    nlohmann::ordered_json j = nlohmann::ordered_json::parse(json);
    nlohmann::ordered_json id2label = nlohmann::ordered_json::object(), label2id = nlohmann::ordered_json::object();
    for (size_t i = 0; i < label_names.size(); ++i) {
      id2label[std::to_string(i)] = label_names[i];
      label2id[label_names[i]] = i;
    }
    j["id2label"] = id2label;
    j["label2id"] = label2id;
    json = j.dump(2) + "\n";
  }
  return json;
}

absl::Status WriteHfConfig(const models::ModelSpec& spec, const std::vector<std::string>& label_names,
                           const std::string& export_path, std::string* written) {
  ZT_ASSIGN_OR_RETURN(std::string json, HfConfigText(spec, label_names));
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

// One rank's run, split into the phases RunTrainingRank calls in order; each
// needs the ones before it. All ranks call every phase with the same options:
// the phases hold collectives (the process group's and the engine's), so a
// rank that skipped one would leave the others waiting. Rank 0 alone prints,
// writes the monitors and the report.
//
// The members are declared in the order the objects are built, so they are
// destroyed in reverse, as the locals of one function were: the engine before
// the model and the data it trains, the process group last.
// "name (n parameters, weight_decay x), ...": the start-up line and the
// report's optimizer row.
std::string ParamGroupsLine(const ResolvedParamGroups& g) {
  std::string line;
  for (size_t k = 0; k < g.size(); ++k) {
    absl::StrAppend(&line, k == 0 ? "" : ", ", g.names[k], " (", g.members[k].size(), " parameters, weight_decay ",
                    g.configs[k].weight_decay, ")");
  }
  return line;
}

class RankTrainer {
 public:
  RankTrainer(const TrainOptions& options, Clock::time_point start)
      : o_(options), t_start_(start), paths_(ResolveOutputPaths(options)) {}

  // Joins the world from the process's rank environment; sets the intra-op
  // threads (--threads) before any tensor work.
  absl::Status JoinWorld();
  // Parses the config at this world size, builds the model (sharded as it is
  // built at stage 3) and opens the data; rank 0 prints what will run.
  absl::Status BuildModelAndData(const std::string& config_json, const std::string& config_source);
  absl::Status BuildEngine();
  // Where to start: the checkpoint in save_dir (--resume), else --init-from's
  // weights, else the fresh model. Positions the sample stream to match.
  absl::Status ChooseStart();
  // The output directory and the monitors (rank 0) and the progress bar.
  absl::Status OpenOutputs();
  // Steps until --steps, with evaluation and checkpoints at their intervals.
  absl::Status Train();
  // The final evaluation, checkpoint and export, then rank 0's report.
  absl::Status Finish();

 private:
  absl::Status TrainStep(double items_per_step);
  // Rank 0: the step on the progress bar and in the monitors.
  absl::Status ShowStep(int64_t step, double loss, double rate, int64_t rss, double step_sec);
  absl::Status EvaluateAt(int64_t step);
  // `final_save`: the run's last, waited for (the export reads it).
  absl::Status Save(bool final_save = false);
  // --sample-prompts: continuations at evaluation `step` (every rank).
  absl::Status Samples(int64_t step);
  absl::Status SaveDeepSpeedCopy(const std::string& tag);
  // Rank 0 writes the consolidated safetensors (and transformers' config.json)
  // from the final checkpoint; all ranks agree on the outcome. `exported` and
  // `hf_config` describe what was written, for the summary.
  absl::Status CheckLoraMatches() const;
  absl::Status Export(std::string* exported, std::string* hf_config);
  absl::Status ExportOnRank0(std::string* exported, std::string* hf_config);
  // Rank 0: the HTML report and the summary on stdout.
  absl::Status Report(const std::string& exported, const std::string& hf_config);
  std::string OptimizerSummary() const;
  std::string ScheduleSummary() const;
  // A restarted attempt's line: the step it starts at and the steps the
  // failure cost (from the step marker the failed attempt left).
  std::string RestartLine(int64_t start_step) const;

  const models::ModelInfo& info() const { return model_->info(); }

  const TrainOptions& o_;
  const Clock::time_point t_start_;
  std::shared_ptr<comm::ProcessGroup> pg_;
  bool rank0_ = false;
  bool local_rank0_ = false;  // the first rank on its host
  // --sample-prompts: the tokenizer they are encoded with (null: bytes).
  std::unique_ptr<data::HfTokenizer> sample_tokenizer_;
  const OutputPaths paths_;
  Config config_;
  models::ModelSpec spec_;
  std::unique_ptr<models::Model> model_;
  std::optional<LoraRecord> lora_;  // the run's LoRA settings, when it trains adapters
  std::string adapter_line_;        // where the adapter was exported (rank 0)
  bool lm_ = false;                 // a language model: token sequences, perplexity; else classes, accuracy
  int64_t seq_len_ = 0;
  std::unique_ptr<TrainData> data_;
  int64_t micro_ = 0;         // micro-batch per rank
  int64_t gas_ = 0;           // gradient accumulation steps
  int64_t global_batch_ = 0;  // samples per step over all ranks
  std::unique_ptr<Engine> engine_;
  at::ScalarType dtype_ = at::kFloat;  // what floating-point inputs are cast to
  std::optional<data::SampleStream> stream_;
  RunHistory history_;
  // The last step's bytes sent in the shard group and across replicas (NaN: not measured).
  std::pair<double, double> last_sent_{std::numeric_limits<double>::quiet_NaN(),
                                       std::numeric_limits<double>::quiet_NaN()};
  // And the seconds rank 0 waited on those groups' collectives in it.
  std::pair<double, double> last_wait_{std::numeric_limits<double>::quiet_NaN(),
                                       std::numeric_limits<double>::quiet_NaN()};
  std::unique_ptr<monitor::Monitor> monitors_;  // rank 0 only; null when none is enabled
  std::optional<StepMarker> step_marker_;       // rank 0 only: the last step reached, for restarts
  std::optional<monitor::ProgressBar> progress_;
  int64_t first_step_ = 0;  // the step this run started at (after a resume)
  Clock::time_point t_loop_;
  std::vector<at::Tensor> inputs_, targets_, masks_;  // one per accumulation step, reused across steps
};

absl::Status RankTrainer::JoinWorld() {
  ZT_ASSIGN_OR_RETURN(comm::RankEnv env, comm::ReadRankEnv());
  ZT_ASSIGN_OR_RETURN(pg_, comm::InitProcessGroup(env, {}));
  if (o_.threads > 0) at::set_num_threads(o_.threads);
  rank0_ = pg_->rank() == 0;
  local_rank0_ = env.local_rank == 0;
  return absl::OkStatus();
}

absl::Status RankTrainer::BuildModelAndData(const std::string& config_json, const std::string& config_source) {
  ZT_ASSIGN_OR_RETURN(config_, ParseTrainConfig(config_json, config_source, pg_->size()));
  spec_ = ModelSpecOf(o_);
  {
    // Stage 3 shards each block as it is built (zt::ShardedInit): no rank
    // ever holds the whole model, which is what makes models larger than one
    // rank's memory trainable at all.
    std::unique_ptr<ShardedInit> sharded;
    if (plan::StageSharding(config_.zero.stage).parameters()) sharded = std::make_unique<ShardedInit>(pg_, config_);
    ZT_ASSIGN_OR_RETURN(model_, models::CreateModel(spec_));
  }
  std::string lora_line;
  if (spec_.lora.enabled()) {
    ZT_ASSIGN_OR_RETURN(LoraOptions resolved, models::ResolveLora(spec_));
    const LoraSummary sum = SummarizeLora(*model_->module());
    lora_ = LoraRecord{resolved, sum.fan_in_fan_out,
                       info().task == models::Task::kSequenceClassification ? "SEQ_CLS" : "CAUSAL_LM"};
    lora_line = absl::StrFormat(
        "LoRA: r=%d alpha=%g dropout=%g on %s: %d layers%s, %s trainable parameters (%.3f%% of %s), base frozen\n",
        resolved.r, resolved.alpha, resolved.dropout, absl::StrJoin(resolved.targets, ","), sum.layers,
        resolved.modules_to_save.empty()
            ? ""
            : absl::StrCat(", ", absl::StrJoin(resolved.modules_to_save, ","), " trained in full"),
        HumanCount(static_cast<double>(sum.trainable_numel)),
        100.0 * static_cast<double>(sum.trainable_numel) / static_cast<double>(sum.trainable_numel + sum.frozen_numel),
        HumanCount(static_cast<double>(sum.trainable_numel + sum.frozen_numel)));
  }
  lm_ = info().task == models::Task::kLanguageModel;
  ZT_ASSIGN_OR_RETURN(seq_len_, SeqLen(o_, info()));
  ZT_ASSIGN_OR_RETURN(data_, OpenTrainData(o_, info(), seq_len_));
  if (!o_.sample_prompts.empty()) {
    ZT_ASSIGN_OR_RETURN(const std::string tokenizer, SampleTokenizerPath(o_));
    if (!tokenizer.empty()) {
      ZT_ASSIGN_OR_RETURN(sample_tokenizer_, data::HfTokenizer::Load(tokenizer));
    }
  }
  micro_ = config_.batch.micro_batch;
  gas_ = config_.batch.accumulation_steps;
  global_batch_ = config_.batch.train_batch;
  ZT_RETURN_IF_ERROR(CheckBatchFits(data_->size(Split::kTrain), global_batch_));
  if (rank0_) {
    std::printf("zt train: %s (%s parameters) on %d rank%s, ZeRO stage %d, %s\n", info().name.c_str(),
                HumanCount(static_cast<double>(info().num_params)).c_str(), pg_->size(), pg_->size() == 1 ? "" : "s",
                config_.zero.stage, config_.bf16.enabled ? "bf16" : (config_.fp16.enabled ? "fp16" : "fp32"));
    std::printf("%s", lora_line.c_str());
    std::printf("data: %s\n", data_->Describe().c_str());
    std::printf("batch: %lld per rank x %lld accumulation x %d ranks = %lld samples per step%s\n",
                static_cast<long long>(micro_), static_cast<long long>(gas_), pg_->size(),
                static_cast<long long>(global_batch_),
                lm_ ? absl::StrFormat(" (%d tokens)", global_batch_ * seq_len_).c_str() : "");
    std::printf("config (%s, with command-line values):\n%s\n", config_source.c_str(), config_json.c_str());
    for (const std::string& note : config_.notes) std::printf("  note: %s\n", note.c_str());
    std::fflush(stdout);
  }
  return absl::OkStatus();
}

absl::Status RankTrainer::BuildEngine() {
  if (o_.activation_checkpointing) {
    const int marked = model_->CheckpointActivations(
        static_cast<int>(config_.activation_checkpointing.number_checkpoints.value_or(0)));
    if (rank0_) {
      ZT_LOG(INFO) << "activation checkpointing: " << marked << " units";
    }
  }
  EngineOptions engine_options;
  engine_options.log_config_notes = false;  // printed with the config above
  engine_options.write_monitors = false;    // zt train writes its own events (eval, tokens/s) into them
  engine_options.bf16_compute = o_.bf16_compute;
  if (o_.weight_decay_groups == "hf") {
    engine_options.param_groups = WeightDecayGroups(*model_->module(), config_.optimizer.weight_decay);
  }
  ZT_ASSIGN_OR_RETURN(const std::string hf_config, HfConfigText(spec_, data_->label_names()));
  if (!hf_config.empty()) engine_options.checkpoint_files["config.json"] = hf_config;
  ZT_ASSIGN_OR_RETURN(engine_, Engine::Create(model_->module(), config_, pg_, engine_options));
  if (rank0_ && engine_->param_groups().size() > 1) {
    std::printf("optimizer param groups: %s\n", ParamGroupsLine(engine_->param_groups()).c_str());
    std::fflush(stdout);
  }
  dtype_ = config_.bf16.enabled ? at::kBFloat16 : (config_.fp16.enabled ? at::kHalf : at::kFloat);
  return absl::OkStatus();
}

// A resumed run must train the adapters the checkpoint holds, or none if it
// holds none: named here with the flags to pass, before the engine's load
// would fail on the first parameter whose trainability differs.
absl::Status RankTrainer::CheckLoraMatches() const {
  // With memory copies (a restart under --memory-copies) the files are read
  // where the copies are; where this fails (a replaced node's copies come
  // from its neighbour only in the engine's load), the load itself says
  // what is wrong.
  std::optional<ckpt::MemoryCopies> copies = ckpt::MemoryCopies::FromEnv(pg_->rank());
  absl::StatusOr<std::string> tag = ckpt::ReadLatestTag(paths_.save_dir);
  const ckpt::CheckpointReadOptions options =
      copies && tag.ok() ? ckpt::ReadFromCopies(*copies, ckpt::CanonicalSaveDir(paths_.save_dir), *tag)
                         : ckpt::CheckpointReadOptions();
  absl::StatusOr<std::unique_ptr<ckpt::ZeroCheckpoint>> opened =
      ckpt::ZeroCheckpoint::Open(paths_.save_dir, "", options);
  if (!opened.ok() && copies) return absl::OkStatus();
  ZT_ASSIGN_OR_RETURN(auto ck, std::move(opened));
  const ckpt::Value* client = ck->client_state();
  ZT_ASSIGN_OR_RETURN(
      std::optional<LoraRecord> saved,
      LoraRecordFromValue(client != nullptr && client->is_dict() ? client->AsDict().Find("lora") : nullptr));
  auto flags = [](const LoraOptions& o) {
    return absl::StrFormat("--lora-r %d --lora-alpha %g --lora-targets %s", o.r, o.alpha,
                           absl::StrJoin(o.targets, ","));
  };
  const std::string where = absl::StrCat(ck->dir(), "/", ck->tag());
  if (saved && !lora_) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, " was saved by a LoRA run; resume it with ", flags(saved->options)));
  }
  if (!saved && lora_) {
    return absl::InvalidArgumentError(absl::StrCat(
        where,
        " holds no LoRA adapters; drop --lora-r to resume it (fine-tuning it with LoRA: export it and start "
        "from the export with --init-from)"));
  }
  if (saved && (saved->options.r != lora_->options.r || saved->options.targets != lora_->options.targets)) {
    return absl::InvalidArgumentError(absl::StrCat(where, " holds LoRA adapters of ", flags(saved->options),
                                                   "; this run asks for ", flags(lora_->options)));
  }
  return absl::OkStatus();
}

std::string RankTrainer::RestartLine(int64_t start_step) const {
  const std::optional<int64_t> reached = ReadLastStep(paths_.output_dir);
  std::string line = absl::StrCat(
      "zt train: restart ", o_.restart_count, ": ",
      start_step > 0 ? absl::StrCat("resumed at step ", start_step) : std::string("training again from step 0"));
  if (reached) {
    absl::StrAppend(&line, "; the failed attempt reached step ", *reached, ": ",
                    std::max<int64_t>(0, *reached - start_step), " steps lost");
  } else {
    absl::StrAppend(&line, "; the failed attempt recorded no step");
  }
  return line;
}

absl::Status RankTrainer::ChooseStart() {
  data::SamplerOptions so;
  so.num_samples = data_->size(Split::kTrain);
  so.world_size = pg_->size();
  so.rank = pg_->rank();
  so.seed = o_.seed;
  ZT_ASSIGN_OR_RETURN(data::DistributedSampler sampler, data::DistributedSampler::Create(so));
  stream_.emplace(std::move(sampler));
  bool resumed = false;
  if (o_.resume && !paths_.save_dir.empty() && std::filesystem::exists(paths_.save_dir + "/latest")) {
    ZT_RETURN_IF_ERROR(CheckLoraMatches());
    ZT_ASSIGN_OR_RETURN(ckpt::Value client, engine_->LoadCheckpoint(paths_.save_dir));
    if (!client.is_dict()) client = ckpt::Value(ckpt::Dict{});
    ZT_ASSIGN_OR_RETURN(data::StreamPosition pos, ResumePosition(client.AsDict(), *stream_, engine_->global_samples()));
    ZT_RETURN_IF_ERROR(stream_->SetPosition(pos));
    if (const ckpt::Value* h = client.AsDict().Find("history")) history_ = RunHistory::FromValue(*h);
    resumed = true;
    if (rank0_) {
      std::printf("resumed from %s at step %lld (epoch %lld, sample %lld of this rank's shard)\n",
                  paths_.save_dir.c_str(), static_cast<long long>(engine_->global_steps()),
                  static_cast<long long>(pos.epoch), static_cast<long long>(pos.offset));
      if (o_.restart_count > 0) std::fprintf(stderr, "%s\n", RestartLine(engine_->global_steps()).c_str());
    }
  } else if (o_.restart_count > 0 && !o_.restart_from_scratch) {
    // A restart with nothing to resume: redoing the work from step 0 is the
    // user's call, not a silent default. Exit code 2 (InvalidArgument) tells
    // the launcher not to try again (launch/restarts.h).
    const std::optional<int64_t> reached = ReadLastStep(paths_.output_dir);
    return absl::InvalidArgumentError(absl::StrCat(
        "restart ", o_.restart_count, ": ",
        paths_.save_dir.empty() ? std::string("checkpoints are off (--save-dir none)")
                                : absl::StrCat("no checkpoint at ", paths_.save_dir, "/latest to resume from"),
        reached ? absl::StrCat(" (the failed attempt reached step ", *reached, ")") : std::string(),
        ". Add --restart-from-scratch to train again from step 0",
        paths_.save_dir.empty() ? "" : ", or save earlier (--save-interval)"));
  } else if (o_.resume && !paths_.save_dir.empty()) {
    // No `latest`: a fresh start is right only where no checkpoint was ever
    // saved. Tags without `latest` mean it was lost or deleted; starting
    // fresh would overwrite them, so refuse and name them.
    ZT_ASSIGN_OR_RETURN(std::vector<std::string> tags, ListCheckpointTags(paths_.save_dir));
    if (!tags.empty() && o_.restart_count > 0) {
      // A restart allowed to start over (--restart-from-scratch), with no
      // `latest`: the failed attempt's first save never got published. Its
      // folders are replaced when those tags are saved again.
      if (rank0_) {
        std::fprintf(stderr, "restart %d: %s holds unpublished checkpoints (%s) of the failed attempt; ignored\n",
                     o_.restart_count, paths_.save_dir.c_str(), absl::StrJoin(tags, ", ").c_str());
      }
    } else if (!tags.empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "--resume: ", paths_.save_dir, " has checkpoints (", absl::StrJoin(tags, ", "),
          ") but no 'latest' file naming which to resume; write the tag to resume into ", paths_.save_dir,
          "/latest (e.g. echo ", tags.back(), " > ", paths_.save_dir, "/latest), or use another --save-dir"));
    }
    // On stderr (unbuffered), so it shows before training rather than with
    // the buffered report lines after it.
    if (rank0_) {
      std::fprintf(stderr, "--resume: no checkpoint at %s/latest yet, training from step 0\n", paths_.save_dir.c_str());
      if (o_.restart_count > 0) std::fprintf(stderr, "%s (--restart-from-scratch)\n", RestartLine(0).c_str());
    }
  } else if (o_.restart_count > 0 && rank0_) {
    std::fprintf(stderr, "%s (--restart-from-scratch)\n", RestartLine(0).c_str());
  }
  if (!resumed && !o_.init_from.empty()) {
    // A llama2.c file: converted once per host (its first rank), then loaded
    // from the folder like any other (train/job/init_from.h).
    absl::StatusOr<bool> converted = false;
    if (InitFromIsLlama2c(o_) && local_rank0_) converted = PrepareInitFrom(o_);
    ZT_RETURN_IF_ERROR(comm::AgreeAcrossRanks(*pg_, converted.status(), "converting the llama2.c --init-from"));
    if (rank0_ && InitFromIsLlama2c(o_)) {
      std::printf("--init-from %s is a llama2.c model file: %s %s (a Hugging Face folder)\n", o_.init_from.c_str(),
                  *converted ? "converted it into" : "loading its conversion in", InitFromWeights(o_).c_str());
    }
    ZT_RETURN_IF_ERROR(engine_->LoadWeights(InitFromWeights(o_), model_->NewHeadParameters()));
    if (rank0_) std::printf("initialized the weights from %s\n", o_.init_from.c_str());
  }
  return absl::OkStatus();
}

absl::Status RankTrainer::OpenOutputs() {
  absl::Status st = absl::OkStatus();
  if (rank0_) {
    if (absl::Status made = MakeDirs(paths_.output_dir); !made.ok()) {
      st = absl::Status(made.code(), absl::StrCat("the output directory: ", made.message(), "; pass --output-dir DIR"));
    }
    if (st.ok()) {
      // A model folder's runs are named after the folder, not its path.
      auto m = monitor::MonitorsFromConfig(config_, paths_.monitor_dir, RunName(o_.model));
      if (m.ok()) {
        monitors_ = *std::move(m);
      } else {
        st = m.status();
      }
    }
  }
  if (st.ok() && rank0_) {
    // A first attempt starts the record afresh (a previous job's last step
    // is not this one's); a restart keeps the failed attempt's until it moves.
    absl::StatusOr<StepMarker> marker = StepMarker::Open(paths_.output_dir, /*truncate=*/o_.restart_count == 0);
    if (marker.ok()) {
      step_marker_.emplace(*std::move(marker));
    } else {
      st = marker.status();
    }
  }
  ZT_RETURN_IF_ERROR(comm::AgreeAcrossRanks(*pg_, st, "creating the output directory and monitors"));
  first_step_ = engine_->global_steps();
  if (rank0_ && o_.progress) {
    monitor::ProgressOptions po;
    po.total_steps = o_.steps;
    progress_.emplace(po);
  }
  return absl::OkStatus();
}

absl::Status RankTrainer::Train() {
  t_loop_ = Clock::now();
  model_->module()->train();
  inputs_.resize(gas_);
  targets_.resize(gas_);
  masks_.resize(gas_);
  const double items_per_step = static_cast<double>(global_batch_ * data_->items_per_sample());
  if (o_.eval_only) return absl::OkStatus();
  while (engine_->global_steps() < o_.steps) ZT_RETURN_IF_ERROR(TrainStep(items_per_step));
  if (progress_) progress_->Finish();
  return absl::OkStatus();
}

// The loss every rank sees is the mean over ranks, so all ranks take the
// same decisions from it (stop on a non-finite loss, the history).
absl::Status RankTrainer::TrainStep(double items_per_step) {
  const auto t0 = Clock::now();
  for (int64_t i = 0; i < gas_; ++i) {
    data_->Batch(Split::kTrain, stream_->Next(micro_), &inputs_[i], &targets_[i], &masks_[i]);
    if (inputs_[i].is_floating_point()) inputs_[i] = inputs_[i].to(dtype_);
  }
  const CommTraffic sent_before = engine_->comm_traffic();
  const double local_loss = engine_->TrainBatch([&](int64_t i) {
    at::Tensor out = model_->ForwardMasked(inputs_[i], masks_[i]).to(at::kFloat);
    return TaskLoss(info().task, out, targets_[i]);
  });
  const CommTraffic sent_after = engine_->comm_traffic();
  at::Tensor loss_t = at::full({1}, local_loss, at::kDouble);
  comm::CollectiveLabel label("the step's mean loss");
  ZT_RETURN_IF_ERROR(pg_->AllReduce(loss_t, comm::ReduceOp::kAvg)->Wait());
  const double loss = loss_t.item<double>();
  const double step_sec = Seconds(t0, Clock::now());
  const int64_t step = engine_->global_steps();
  if (!std::isfinite(loss)) {
    return absl::InternalError(absl::StrFormat(
        "step %d: the loss is %g; lower the learning rate (optimizer.params.lr), enable gradient_clipping or "
        "use bf16 instead of fp16",
        step, loss));
  }
  const double rate = step_sec > 0 ? items_per_step / step_sec : 0.0;
  const int64_t rss = CurrentResidentBytes();
  // Every rank's memory for the report, as its largest and smallest.
  at::Tensor memory_t = at::tensor({static_cast<double>(rss), -static_cast<double>(rss)}, at::kDouble);
  {
    comm::CollectiveLabel memory_label("the ranks' resident memory");
    ZT_RETURN_IF_ERROR(pg_->AllReduce(memory_t, comm::ReduceOp::kMax)->Wait());
  }
  RunHistory::Step point;
  point.step = step;
  point.loss = loss;
  point.lr = engine_->lr();
  point.items_per_sec = rate;
  point.memory_bytes = static_cast<double>(rss);
  point.memory_max = memory_t[0].item<double>();
  point.memory_min = -memory_t[1].item<double>();
  point.grad_norm = engine_->last_grad_norm().value_or(std::numeric_limits<double>::quiet_NaN());
  point.step_sec = step_sec;
  if (pg_->size() > 1) {
    // The engine's own collectives in this step, by group (the loss and
    // memory reductions above are the trainer's).
    point.sent_shard = static_cast<double>(sent_after.shard_sent - sent_before.shard_sent);
    if (sent_after.hierarchical) {
      point.sent_across = static_cast<double>(sent_after.replica_sent - sent_before.replica_sent);
    }
    point.wait_shard = sent_after.shard_wait - sent_before.shard_wait;
    if (sent_after.hierarchical) point.wait_across = sent_after.replica_wait - sent_before.replica_wait;
  }
  last_sent_ = {point.sent_shard, point.sent_across};
  last_wait_ = {point.wait_shard, point.wait_across};
  history_.AddStep(point);
  if (rank0_) {
    ZT_RETURN_IF_ERROR(ShowStep(step, loss, rate, rss, step_sec));
    ZT_RETURN_IF_ERROR(step_marker_->Record(step));
  }
  if (o_.eval_interval > 0 && step % o_.eval_interval == 0 && step < o_.steps) ZT_RETURN_IF_ERROR(EvaluateAt(step));
  if (o_.save_interval > 0 && step % o_.save_interval == 0 && step < o_.steps) ZT_RETURN_IF_ERROR(Save());
  return absl::OkStatus();
}

absl::Status RankTrainer::ShowStep(int64_t step, double loss, double rate, int64_t rss, double step_sec) {
  if (progress_) {
    monitor::ProgressInfo p;
    p.step = step;
    p.loss = loss;
    p.lr = engine_->lr();
    p.items_per_sec = rate;
    p.items_name = data_->items_name();
    p.memory_bytes = rss;
    p.elapsed_sec = Seconds(t_loop_, Clock::now());
    p.first_step = first_step_;
    progress_->Update(p);
  }
  if (monitors_) {
    std::vector<monitor::Event> ev = {
        {monitor::tags::kTrainLoss, loss, step},
        {monitor::tags::kLr, engine_->lr(), step},
        {lm_ ? monitor::tags::kTokensPerSec : monitor::tags::kSamplesPerSec, rate, step},
        {monitor::tags::kMemoryBytes, static_cast<double>(rss), step},
        {monitor::tags::kStepTimeSec, step_sec, step},
    };
    if (config_.fp16.enabled) ev.push_back({monitor::tags::kLossScale, engine_->loss_scale(), step});
    if (engine_->last_grad_norm()) ev.push_back({monitor::tags::kGradNorm, *engine_->last_grad_norm(), step});
    if (std::isfinite(last_sent_.first)) ev.push_back({monitor::tags::kCommShardBytes, last_sent_.first, step});
    if (std::isfinite(last_sent_.second)) ev.push_back({monitor::tags::kCommAcrossBytes, last_sent_.second, step});
    if (std::isfinite(last_wait_.first)) ev.push_back({monitor::tags::kCommShardWaitSec, last_wait_.first, step});
    if (std::isfinite(last_wait_.second)) ev.push_back({monitor::tags::kCommAcrossWaitSec, last_wait_.second, step});
    ZT_RETURN_IF_ERROR(monitors_->Write(ev));
    if (config_.steps_per_print > 0 && step % config_.steps_per_print == 0) ZT_RETURN_IF_ERROR(monitors_->Flush());
  }
  return absl::OkStatus();
}

absl::Status RankTrainer::EvaluateAt(int64_t step) {
  ZT_ASSIGN_OR_RETURN(EvalResult r, Evaluate(*model_, *data_, *pg_, micro_, o_.eval_batches, dtype_));
  if (r.samples == 0) return absl::OkStatus();
  history_.AddEval(step, r.loss(), lm_ ? std::exp(std::min(r.loss(), 50.0)) : r.accuracy());
  // Rank 0 alone writes the monitors; its error waits until every rank has
  // generated the samples (collectives), so the others do not wait on it.
  absl::Status monitor_status;
  if (rank0_) {
    if (progress_) progress_->Finish();
    if (lm_) {
      std::printf("eval at step %lld: loss %.4f, perplexity %.2f (%lld sequences, %lld tokens)\n",
                  static_cast<long long>(step), r.loss(), std::exp(std::min(r.loss(), 50.0)),
                  static_cast<long long>(r.samples), static_cast<long long>(r.loss_count));
    } else {
      std::printf("eval at step %lld: loss %.4f, accuracy %.2f%% (%lld %s)\n", static_cast<long long>(step), r.loss(),
                  100.0 * r.accuracy(), static_cast<long long>(r.samples),
                  info().task == models::Task::kImageClassification ? "images" : "texts");
    }
    std::fflush(stdout);
    if (monitors_) {
      std::vector<monitor::Event> ev = {{monitor::tags::kEvalLoss, r.loss(), step}};
      ev.push_back({lm_ ? "Eval/Samples/perplexity" : "Eval/Samples/accuracy",
                    lm_ ? std::exp(std::min(r.loss(), 50.0)) : r.accuracy(), step});
      monitor_status = monitors_->Write(ev);
    }
  }
  ZT_RETURN_IF_ERROR(Samples(step));
  return monitor_status;
}

// Every rank generates together: under stage 3 each forward gathers the
// units as training's does, so the forwards are collectives; the full
// forward per token (no KV cache, whose path bypasses the units' hooks) and
// rank 0's token broadcast at each step keep the ranks in step.
absl::Status RankTrainer::Samples(int64_t step) {
  if (o_.sample_prompts.empty() || !lm_) return absl::OkStatus();
  const generate::Decoder decode =
      sample_tokenizer_ ? generate::DecodeWith(sample_tokenizer_.get())
                        : generate::Decoder([](const std::vector<int32_t>& ids) -> absl::StatusOr<std::string> {
                            return data::DecodeBytes(ids);
                          });
  generate::GenerateOptions g;
  g.max_new_tokens = o_.sample_tokens;
  g.use_cache = false;
  // The end of a text as zt generate sees it: the tokenizer's end-of-text
  // (BOS for llama2.c's, where run.c ends a story, and its EOS).
  if (sample_tokenizer_) {
    if (const int32_t eot = data::DefaultEndOfText(*sample_tokenizer_); eot >= 0) g.stop_ids.push_back(eot);
    if (sample_tokenizer_->is_llama2c()) g.stop_ids.push_back(data::Llama2cTokenizer::kEos);
    g.vocab_limit = sample_tokenizer_->vocab_size();
  }
  g.agree = [this](int32_t token) {
    at::Tensor t = at::full({1}, static_cast<int64_t>(token), at::kLong);
    comm::CollectiveLabel label("a sample's next token (--sample-prompts)");
    ThrowIfError(pg_->Broadcast(t, 0)->Wait());
    return static_cast<int32_t>(t.item<int64_t>());
  };
  const bool was_training = model_->module()->is_training();
  for (const std::string& prompt : o_.sample_prompts) {
    std::vector<int32_t> ids;
    if (sample_tokenizer_) {
      ZT_ASSIGN_OR_RETURN(ids, sample_tokenizer_->Encode(prompt, /*add_special_tokens=*/true));
    } else {
      ids = data::EncodeBytes(prompt);
    }
    // A prompt longer than the model's positions keeps its end.
    const size_t keep = static_cast<size_t>(std::max<int64_t>(1, info().max_seq_len - 1));
    if (ids.size() > keep) ids.erase(ids.begin(), ids.end() - static_cast<std::ptrdiff_t>(keep));
    ZT_ASSIGN_OR_RETURN(generate::GenerateResult r, generate::Generate(*model_, ids, g, decode));
    const std::string text = generate::ValidUtf8(r.text);
    history_.AddSample(step, generate::ValidUtf8(prompt), text);
    if (rank0_) {
      std::printf("sample at step %lld: %s|%s\n", static_cast<long long>(step), prompt.c_str(), text.c_str());
      std::fflush(stdout);
    }
  }
  if (was_training) model_->module()->train();
  return absl::OkStatus();
}

// The checkpoint carries the sample stream's position and the history, so a
// resumed run continues both.
absl::Status RankTrainer::Save(bool final_save) {
  if (paths_.save_dir.empty()) return absl::OkStatus();
  const auto t0 = Clock::now();
  // The tag is named here (the engine's default name) so that the DeepSpeed
  // copy converts exactly the folder this save wrote.
  const std::string tag = absl::StrCat("global_step", engine_->global_steps());
  // transformers' config.json goes into the tag's folder with the save, as
  // the Trainer's checkpoint-N folders hold one: `zt generate --model`
  // reads the architecture there (BuildEngine hands it to the engine).
  ZT_RETURN_IF_ERROR(engine_->SaveCheckpoint(paths_.save_dir, tag, ClientState(*stream_, history_, lora_)));
  // The final save, and one the DeepSpeed copy is converted from, must be on
  // disk before the next step; the others may finish in the background.
  const bool async = config_.checkpoint.async_save;
  if (async && (final_save || o_.save_deepspeed)) ZT_RETURN_IF_ERROR(engine_->WaitForPendingSave());
  if (rank0_) {
    if (progress_) progress_->Finish();
    std::printf("%s checkpoint %s/%s (%.2f s)\n", async && !final_save && !o_.save_deepspeed ? "staged" : "saved",
                paths_.save_dir.c_str(), tag.c_str(), Seconds(t0, Clock::now()));
    std::fflush(stdout);
  }
  if (o_.save_deepspeed) ZT_RETURN_IF_ERROR(SaveDeepSpeedCopy(tag));
  return absl::OkStatus();
}

// Rank 0 converts the checkpoint every rank has just written (streaming, as
// `zt ckpt convert` does); the others wait for its verdict, so a failure
// stops every rank with rank 0's message.
absl::Status RankTrainer::SaveDeepSpeedCopy(const std::string& tag) {
  const std::string dst = paths_.save_dir + "/deepspeed";
  absl::Status st;
  if (rank0_) {
    const auto t0 = Clock::now();
    st = [&]() -> absl::Status {
      ZT_ASSIGN_OR_RETURN(auto ck, ckpt::ZeroCheckpoint::Open(paths_.save_dir, tag));
      ckpt::ConvertOptions options;
      options.to = ckpt::CheckpointFormat::kDeepSpeed;
      options.add_tag = true;
      return ckpt::ConvertCheckpoint(*ck, dst, options);
    }();
    if (st.ok()) {
      std::printf("wrote its DeepSpeed copy %s/%s (%.2f s)\n", dst.c_str(), tag.c_str(), Seconds(t0, Clock::now()));
      std::fflush(stdout);
    } else {
      st = absl::Status(st.code(), absl::StrCat("--save-format deepspeed: converting ", paths_.save_dir, "/", tag,
                                                " into ", dst, ": ", st.message()));
    }
  }
  return comm::AgreeAcrossRanks(*pg_, st, "writing the DeepSpeed copy of the checkpoint");
}

absl::Status RankTrainer::Finish() {
  if (o_.eval_only) {
    if (data_->size(Split::kEval) == 0) {
      return absl::InvalidArgumentError(
          "--eval-only: there is no eval data; give --eval-data, or an --eval-fraction that holds out a sequence");
    }
    ZT_RETURN_IF_ERROR(EvaluateAt(engine_->global_steps()));
    if (monitors_) ZT_RETURN_IF_ERROR(monitors_->Flush());
    return rank0_ ? Report("", "") : absl::OkStatus();
  }
  if (o_.eval_interval >= 0) ZT_RETURN_IF_ERROR(EvaluateAt(engine_->global_steps()));
  if (monitors_) ZT_RETURN_IF_ERROR(monitors_->Flush());
  ZT_RETURN_IF_ERROR(Save(/*final_save=*/true));
  std::string exported, hf_config;
  ZT_RETURN_IF_ERROR(Export(&exported, &hf_config));
  if (rank0_) ZT_RETURN_IF_ERROR(Report(exported, hf_config));
  return absl::OkStatus();
}

absl::Status RankTrainer::Export(std::string* exported, std::string* hf_config) {
  if (paths_.save_dir.empty() || (paths_.export_path.empty() && !lora_)) return absl::OkStatus();
  absl::Status st = absl::OkStatus();
  if (rank0_) st = ExportOnRank0(exported, hf_config);
  return comm::AgreeAcrossRanks(*pg_, st, "exporting the consolidated weights");
}

absl::Status RankTrainer::ExportOnRank0(std::string* exported, std::string* hf_config) {
  ZT_ASSIGN_OR_RETURN(auto ck, ckpt::ZeroCheckpoint::Open(paths_.save_dir));
  ckpt::ExportOptions eo;
  if (lora_) {
    // The adapter alone as PEFT writes it; the export below gets the weights
    // with the adapter merged (what users of the base model load).
    ckpt::ExportOptions ao;
    ao.lora = ckpt::LoraExport::kAdapterOnly;
    ao.lora_modules_to_save = lora_->options.modules_to_save;
    ZT_RETURN_IF_ERROR(MakeDirs(paths_.adapter_dir));
    ZT_ASSIGN_OR_RETURN(auto a, ckpt::ExportSafetensors(*ck, paths_.adapter_dir + "/adapter_model.safetensors", ao));
    ZT_RETURN_IF_ERROR(WritePeftAdapterConfig(paths_.adapter_dir, *lora_, o_.init_from));
    adapter_line_ = absl::StrCat(paths_.adapter_dir, " (", a.tensors, " tensors, ",
                                 HumanBytes(static_cast<double>(a.bytes)), ", PEFT's adapter files)");
    eo.lora = ckpt::LoraExport::kMerged;
    eo.lora_scaling = lora_->options.scaling();
    eo.lora_fan_in_fan_out = lora_->fan_in_fan_out;
  }
  if (paths_.export_path.empty()) return absl::OkStatus();
  eo.max_shard_bytes = o_.max_shard_bytes;
  ZT_ASSIGN_OR_RETURN(auto r, ckpt::ExportSafetensors(*ck, paths_.export_path, eo));
  const std::string where =
      r.files.size() == 1 ? r.files.front() : absl::StrCat(r.files.back(), " + ", r.files.size() - 1, " shards");
  *exported = absl::StrCat(where, " (", r.tensors, " tensors, ", HumanBytes(static_cast<double>(r.bytes)),
                           lora_ ? ", adapter merged" : "", ")");
  return WriteHfConfig(spec_, data_->label_names(), paths_.export_path, hf_config);
}

// The report's optimizer row: the type and every setting it uses, and the
// param groups when there are several.
std::string RankTrainer::OptimizerSummary() const {
  const OptimizerConfig& o = config_.optimizer;
  std::string line = absl::StrCat(std::string(ToString(o.type)), ", lr ", o.lr);
  switch (o.type) {
    case OptimizerType::kSGD: absl::StrAppend(&line, ", momentum ", o.momentum); break;
    case OptimizerType::kAdagrad: absl::StrAppend(&line, ", eps ", o.eps); break;
    case OptimizerType::kLion: absl::StrAppend(&line, ", betas (", o.betas[0], ", ", o.betas[1], ")"); break;
    default: absl::StrAppend(&line, ", betas (", o.betas[0], ", ", o.betas[1], "), eps ", o.eps); break;
  }
  absl::StrAppend(&line, ", weight decay ", o.weight_decay);
  if (engine_->param_groups().size() > 1) {
    absl::StrAppend(&line, "; param groups: ", ParamGroupsLine(engine_->param_groups()));
  }
  return line;
}

std::string RankTrainer::ScheduleSummary() const {
  const SchedulerConfig& s = config_.scheduler;
  switch (s.type) {
    case SchedulerType::kNone: return "constant";
    case SchedulerType::kWarmupLR:
    case SchedulerType::kWarmupDecayLR:
    case SchedulerType::kWarmupCosineLR:
      return absl::StrCat(
          std::string(ToString(s.type)), ": ", s.warmup_num_steps, " warm-up steps (",
          std::string(ToString(s.warmup_type)), ") from ", s.warmup_min_lr, " to ", s.warmup_max_lr,
          s.type == SchedulerType::kWarmupLR ? std::string() : absl::StrCat(", ", s.total_num_steps, " steps in all"));
    default: return std::string(ToString(s.type));
  }
}

absl::Status RankTrainer::Report(const std::string& exported, const std::string& hf_config) {
  ReportInfo ri;
  ri.title = absl::StrCat("zt train: ", info().name);
  ri.rows = {
      {"model", absl::StrCat(info().name, " (", HumanCount(static_cast<double>(info().num_params)), " parameters)")},
      {"data", data_->Describe()},
      {"ranks", absl::StrCat(pg_->size())},
      {"ZeRO stage", absl::StrCat(config_.zero.stage)},
      {"precision", config_.bf16.enabled ? "bf16" : (config_.fp16.enabled ? "fp16" : "fp32")},
      {"global batch", absl::StrCat(global_batch_, lm_ ? absl::StrCat(" x ", seq_len_, " tokens") : "", " (micro ",
                                    micro_, " x accumulation ", gas_, " x ranks ", pg_->size(), ")")},
      {"optimizer", OptimizerSummary()},
      {"lr schedule", ScheduleSummary()},
      {"gradient clipping", config_.gradient_clipping > 0 ? absl::StrCat(config_.gradient_clipping) : "off"},
      {"steps", absl::StrCat(first_step_, " -> ", engine_->global_steps())},
      {"wall time", absl::StrFormat("%.1f s", Seconds(t_start_, Clock::now()))},
      {"system", SystemInfoLine()}};
  if (!paths_.report.empty()) ZT_RETURN_IF_ERROR(WriteReport(paths_.report, ri, history_, lm_));
  if (o_.eval_only) {
    std::printf(
        "\ndone: evaluated the weights of step %lld in %.1f s (--eval-only: no training, checkpoint or export)\n",
        static_cast<long long>(engine_->global_steps()), Seconds(t_start_, Clock::now()));
  } else {
    std::printf("\ndone: %lld steps in %.1f s; final train loss %.4f\n",
                static_cast<long long>(engine_->global_steps() - first_step_), Seconds(t_start_, Clock::now()),
                history_.LastLoss());
  }
  std::printf("  output:      %s\n", paths_.output_dir.c_str());
  if (!paths_.save_dir.empty() && !o_.eval_only) {
    std::printf("  checkpoints: %s (resume with --resume)\n", paths_.save_dir.c_str());
  }
  if (!exported.empty()) std::printf("  weights:     %s (fine-tune with --init-from)\n", exported.c_str());
  if (!adapter_line_.empty()) std::printf("  adapter:     %s\n", adapter_line_.c_str());
  if (!hf_config.empty())
    std::printf("  HF config:   %s (transformers' from_pretrained reads the directory)\n", hf_config.c_str());
  if (!paths_.report.empty()) std::printf("  report:      %s\n", paths_.report.c_str());
  std::fflush(stdout);
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckComputeDevice(const std::string& config_json, const std::string& config_source, int world_size) {
  ZT_ASSIGN_OR_RETURN(Config config, ParseTrainConfig(config_json, config_source, world_size));
  if (config.fp16.enabled && !at::hasCUDA()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "fp16 compute needs CUDA and this build runs on the CPU (fp16 comes from --precision fp16 or fp16.enabled "
        "in ",
        config_source, "): use --precision bf16 (bf16.enabled) or fp32"));
  }
  return absl::OkStatus();
}

absl::Status RunTrainingRank(const TrainOptions& o, const std::string& config_json, const std::string& config_source) {
  RankTrainer trainer(o, Clock::now());
  ZT_RETURN_IF_ERROR(trainer.JoinWorld());
  ZT_RETURN_IF_ERROR(trainer.BuildModelAndData(config_json, config_source));
  ZT_RETURN_IF_ERROR(trainer.BuildEngine());
  ZT_RETURN_IF_ERROR(trainer.ChooseStart());
  ZT_RETURN_IF_ERROR(trainer.OpenOutputs());
  ZT_RETURN_IF_ERROR(trainer.Train());
  return trainer.Finish();
}

}  // namespace zt::train
