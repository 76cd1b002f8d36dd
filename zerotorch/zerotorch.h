// zerotorch: everything a training program needs, in one include.
//
//   #include <zerotorch/zerotorch.h>
//
//   int main() {
//     auto env = zt::ValueOrThrow(zt::comm::ReadRankEnv());           // torchrun-style variables
//     auto pg = zt::ValueOrThrow(zt::comm::InitProcessGroup(env, {}));
//     zt::Config config = zt::ValueOrThrow(zt::LoadConfigFile("ds_config.json", {}));
//     auto model = std::make_shared<MyModelImpl>();                    // zt::Unit<...> blocks for stage 3
//     auto engine = zt::ValueOrThrow(zt::Engine::Create(model, config, pg));
//     for (...) { engine->Backward(loss_of(model->forward(x), y)); engine->Step(); }
//   }
//
// docs/api.md has the complete program (examples/minimal/main.cc). This is
// the public API: the headers below and what they include are installed by
// `cmake --install`; everything else in the source tree is internal.
#pragma once

#include <torch/torch.h>  // LibTorch: tensors, torch::nn modules, optimizers, autograd

#include "comm/init.h"                   // ReadRankEnv, InitProcessGroup, zt::comm::ProcessGroup
#include "config/config.h"               // zt::Config, LoadConfigFile, ParseConfig
#include "engine/engine.h"               // zt::Engine: Backward, Step, checkpoints, memory
#include "engine/gathered_parameters.h"  // zt::GatheredParameters: full values under stage 3
#include "engine/weight_decay_groups.h"  // zt::WeightDecayGroups: HF Trainer's decay / no-decay param groups
#include "engine/weights.h"              // zt::LoadSafetensors outside an engine
#include "lora/apply_lora.h"             // zt::ApplyLora, zt::LoraScope: LoRA adapters on a frozen base
#include "lora/lora_linear.h"            // zt::LoraLinear: torch::nn::Linear that takes an adapter
#include "util/error.h"                  // zt::Error, ValueOrThrow, ThrowIfError
#include "util/log.h"                    // ZT_LOG
#include "util/status.h"                 // ZT_RETURN_IF_ERROR, ZT_ASSIGN_OR_RETURN
#include "zero/activation_checkpoint.h"  // zt::Checkpoint, checkpointed units
#include "zero/sharded_init.h"           // zt::ShardedInit: shard while the model is built
#include "zero/unit.h"                   // zt::Unit<Impl>: stage-3 sharding units

// Around the training loop: what zt train itself uses, for a program of its own.
#include "ckpt/export.h"             // zt::ckpt::ExportSafetensors: a checkpoint as consolidated safetensors
#include "ckpt/lora_record.h"        // zt::WritePeftAdapterConfig: PEFT's adapter_config.json
#include "ckpt/zero_checkpoint.h"    // zt::ckpt::ZeroCheckpoint: open and read a checkpoint folder
#include "data/classify.h"           // labelled text JSONL for sequence classification
#include "data/packing.h"            // zt::data::PackExamples: several examples per sample
#include "data/sampler.h"            // zt::data::DistributedSampler, SampleStream: shuffle, shard, resume
#include "data/supervised.h"         // prompt/completion and chat JSONL, loss on the answer only
#include "monitor/csv_monitor.h"     // zt::monitor::CsvMonitor: DeepSpeed's csv_monitor files
#include "monitor/progress.h"        // zt::monitor::ProgressBar: the one-line progress display
#include "monitor/report.h"          // zt::monitor::ReportCollector: the HTML end-of-run report
#include "monitor/tensorboard.h"     // zt::monitor::TensorBoardMonitor: TensorBoard event files
#include "template/chat_template.h"  // zt::data::ChatTemplate: a tokenizer's Jinja chat template
#include "tokenizer/hf_tokenizer.h"  // zt::data::HfTokenizer: tokenizer.json (BPE, WordPiece)
