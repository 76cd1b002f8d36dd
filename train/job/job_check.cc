// Implementation of train/job/job_check.h.
#include "train/job/job_check.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "ckpt/deepspeed/optimizer.h"
#include "ckpt/deepspeed/writer.h"
#include "ckpt/format/llama2c.h"
#include "ckpt/format/safetensors.h"
#include "tokenizer/hf_tokenizer.h"
#include "train/job/data_checks.h"
#include "train/job/init_from.h"
#include "train/job/train_config.h"
#include "util/file_io.h"
#include "util/status.h"

namespace zt::train {

// Images have none; a sequence classifier's 0 lets the data choose (its
// longest example).
absl::StatusOr<int64_t> SeqLen(const TrainOptions& o, const models::ModelInfo& info) {
  if (info.task == models::Task::kImageClassification) return 0;
  if (info.task == models::Task::kSequenceClassification && o.seq_len <= 0) return 0;
  const int64_t seq_len = o.seq_len > 0 ? o.seq_len : info.max_seq_len;
  if (seq_len > info.max_seq_len) {
    return absl::InvalidArgumentError(absl::StrCat("--seq-len ", seq_len, " exceeds the maximum sequence length ",
                                                   info.max_seq_len, " of ", info.name,
                                                   "; lower it or pass --model-set seq_len=", seq_len));
  }
  return seq_len;
}

absl::Status CheckBatchFits(int64_t train_samples, int64_t global_batch) {
  if (train_samples < global_batch) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "the training set has %d samples, fewer than one global batch of %d (train_batch_size); use more data or "
        "a smaller train_micro_batch_size_per_gpu",
        train_samples, global_batch));
  }
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

absl::Status CheckTrainJob(const TrainOptions& o, const std::string& config_json, const std::string& config_source,
                           int world_size) {
  ZT_ASSIGN_OR_RETURN(Config config, ParseTrainConfig(config_json, config_source, world_size));
  if (o.save_deepspeed) {
    // What the conversion after each save would refuse, refused now.
    const ckpt::DType dtype = config.bf16.enabled   ? ckpt::DType::kBFloat16
                              : config.fp16.enabled ? ckpt::DType::kFloat16
                                                    : ckpt::DType::kFloat32;
    absl::Status st = ckpt::CheckDeepSpeedWritable("this run", config.zero.stage, dtype,
                                                   config.fp16.enabled && config.fp16.dynamic());
    if (st.ok()) st = ckpt::DeepSpeedOptimizerFactsFromConfig(config_json, world_size, 0).status();
    if (!st.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--save-format deepspeed: ", st.message(),
                                                     " (or drop --save-format deepspeed and keep zerotorch's format)"));
    }
  }
  // A compute choice for bf16 on a run that is not bf16 would do nothing: said, not ignored.
  if (o.bf16_compute != plan::Bf16Compute::kAuto && !config.bf16.enabled) {
    return absl::InvalidArgumentError(
        absl::StrCat("--bf16-compute ", plan::Bf16ComputeName(o.bf16_compute), " applies to bf16 runs and this one is ",
                     config.fp16.enabled ? "fp16" : "fp32", ": add --precision bf16 or drop --bf16-compute"));
  }
  ZT_RETURN_IF_ERROR(CheckDataPath("--data", o.data));
  ZT_RETURN_IF_ERROR(CheckDataPath("--eval-data", o.eval_data));
  const OutputPaths paths = ResolveOutputPaths(o);
  ZT_RETURN_IF_ERROR(CheckWritableDir("output directory (--output-dir)", paths.output_dir));
  if (!paths.save_dir.empty())
    ZT_RETURN_IF_ERROR(CheckWritableDir("checkpoint directory (--save-dir)", paths.save_dir));
  const models::ModelSpec spec = ModelSpecOf(o);
  ZT_ASSIGN_OR_RETURN(models::ModelInfo info, models::DescribeModel(spec));
  ZT_RETURN_IF_ERROR(models::ResolveLora(spec).status());
  ZT_ASSIGN_OR_RETURN(int64_t seq_len, SeqLen(o, info));
  if (!o.sample_prompts.empty()) {
    if (info.task != models::Task::kLanguageModel) {
      return absl::InvalidArgumentError(
          absl::StrCat("--sample-prompts: ", info.name, " is not a language model; it generates no text"));
    }
    ZT_ASSIGN_OR_RETURN(const std::string tokenizer, SampleTokenizerPath(o));
    if (!tokenizer.empty()) {
      absl::StatusOr<data::HfTokenizer::Files> files = data::HfTokenizer::Locate(tokenizer);
      if (!files.ok()) {
        return absl::Status(files.status().code(), absl::StrCat("--tokenizer: ", files.status().message()));
      }
    }
  }
  // Sizes from headers: the ranks decode the data, the launcher does not.
  ZT_ASSIGN_OR_RETURN(const int64_t train_samples, CountTrainSamples(o, info, seq_len));
  ZT_RETURN_IF_ERROR(CheckBatchFits(train_samples, config.batch.train_batch));
  if (!o.init_from.empty() && !std::filesystem::exists(o.init_from)) {
    return absl::NotFoundError(absl::StrCat("--init-from ", o.init_from,
                                            " does not exist: give a .safetensors file, an index .json or a "
                                            "directory holding them (zt ckpt consolidate writes one), or a "
                                            "llama2.c model file"));
  }
  if (InitFromIsLlama2c(o)) {
    // Header against file size; the ranks convert it (train/job/init_from.h).
    absl::StatusOr<ckpt::Llama2cModel> m = ckpt::OpenLlama2c(o.init_from);
    if (!m.ok()) return absl::Status(m.status().code(), absl::StrCat("--init-from: ", m.status().message()));
  } else if (!o.init_from.empty()) {
    // Every shard an index names, and every header, once here rather than
    // once per rank after they start (the headers only: no tensor is read).
    absl::StatusOr<std::unique_ptr<ckpt::SafetensorsModel>> weights = ckpt::SafetensorsModel::Open(o.init_from);
    if (!weights.ok()) {
      return absl::Status(weights.status().code(), absl::StrCat("--init-from: ", weights.status().message()));
    }
  }
  return absl::OkStatus();
}

models::ModelSpec ModelSpecOf(const TrainOptions& o) {
  models::ModelSpec spec;
  spec.name = o.model;
  spec.overrides = o.model_overrides;
  spec.seed = o.seed;
  spec.lora = o.lora;
  return spec;
}

std::string RunName(const std::string& model) {
  std::string name = std::filesystem::path(model).filename().string();
  if (name.empty()) name = std::filesystem::path(model).parent_path().filename().string();
  return name;
}

OutputPaths ResolveOutputPaths(const TrainOptions& o) {
  OutputPaths p;
  // A model folder's runs go under its own name, not its path.
  const std::string name = RunName(o.model);
  p.output_dir = o.output_dir.empty() ? absl::StrCat("runs/", name) : o.output_dir;
  p.save_dir = o.save_dir == "none" ? "" : (o.save_dir.empty() ? p.output_dir + "/checkpoints" : o.save_dir);
  if (o.export_path == "none") {
    p.export_path = "";
  } else if (!o.export_path.empty()) {
    p.export_path = o.export_path;
  } else {
    p.export_path = p.output_dir;  // model.safetensors, or shards + index
  }
  p.report = o.report == "none" ? "" : (o.report.empty() ? p.output_dir + "/report.html" : o.report);
  p.monitor_dir = p.output_dir;
  p.adapter_dir = p.output_dir + "/adapter";
  return p;
}

}  // namespace zt::train
