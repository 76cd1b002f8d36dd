// What `zt train` runs: the model, the data, how long, and where results go.
// Plain values filled from the command line (apps/cmd_train.cc); the
// DeepSpeed-style config (config/config.h) holds everything the engine reads.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "config/lora_options.h"
#include "plan/bf16_policy.h"

namespace zt::train {

struct TrainOptions {
  // --- Model (models/registry.h) ---
  std::string model = "gpt2-mini";
  std::map<std::string, int64_t> model_overrides;  // --model-set n_layer=4 ...
  uint64_t seed = 1234;                            // model init and data order
  // LoRA (--lora-r ...): adapters on the targets, the base frozen. The end
  // of the run then exports the adapter (PEFT's files, <output_dir>/adapter)
  // and the weights with the adapter merged (export_path).
  LoraOptions lora;

  // What the model is trained for: "causal-lm", "classify" (sequence
  // classification), "image", or "auto" (the model's own task). A task
  // the model does not do is an error naming the models that do.
  std::string task = "auto";

  // --- Data ---
  // Language models: a text file or directory (byte-level tokens), or a
  // pre-tokenized .bin file (llm.c header or raw uint16/uint32). Empty: the
  // default corpus. Image models: a directory with IDX files (default:
  // Fashion-MNIST from Debian's dataset-fashion-mnist).
  std::string data;
  // Or JSONL of {"prompt", "completion"} examples (data/supervised.h): one
  // example per sample, loss on the completion only; for sequence
  // classifiers JSONL of {"text", "label"} (data/classify.h). Both are
  // tokenized with `tokenizer` (empty: the --init-from / --model folder's).
  std::string tokenizer;
  // JSONL examples packed several per sample (data/packing.h), each attended
  // and positioned on its own, instead of one per right-padded sample.
  bool packing = false;
  std::string eval_data;             // separate eval set; empty: the tail of `data`
  std::string token_dtype = "auto";  // auto | uint16 | uint32, for .bin files
  double eval_fraction = 0.05;       // share of `data` held out when eval_data is empty
  int64_t seq_len = 0;               // 0: the model's maximum sequence length

  // --- Schedule ---
  int64_t steps = 200;         // optimizer steps in this run (resumed runs: up to this total)
  int64_t eval_interval = 50;  // 0: only at the end; < 0: never
  int64_t eval_batches = 0;    // 0: the whole eval set; else at most this many batches per rank

  bool activation_checkpointing = false;  // checkpoint the model's units (config's number_checkpoints)
  // Optimizer param groups: "all" (one group, the config's weight decay on
  // every parameter, as deepspeed.initialize(model.parameters()) does) or
  // "hf" (HF Trainer's: no decay for biases and norm weights,
  // engine/weight_decay_groups.h).
  std::string weight_decay_groups = "all";
  // With bf16: native bf16 kernels or fp32 arithmetic on bf16 tensors
  // (EngineOptions::bf16_compute, plan/bf16_policy.h).
  plan::Bf16Compute bf16_compute = plan::Bf16Compute::kAuto;

  // --- Where results go ---
  std::string output_dir;  // "" : runs/<model>; holds everything below unless given
  // --- Checkpoints ---
  std::string save_dir;       // "" : <output_dir>/checkpoints; "none": no checkpoints
  int64_t save_interval = 0;  // 0: only at the end (when save_dir is set)
  bool resume = false;        // continue from save_dir/latest when present
  // --max-restarts: zt train's own ranks are started again after a failure,
  // up to this many times, each attempt resuming from save_dir/latest
  // (launch/restarts.h). Under another launcher, that launcher's restarts.
  int max_restarts = 0;
  // A restarted attempt that finds no checkpoint (the failure came before the
  // first save) trains from step 0 again only with this (--restart-from-scratch);
  // else it stops with a named error instead of silently redoing the work.
  bool restart_from_scratch = false;
  // --memory-copies: the ranks also keep their last checkpoint's files in
  // node memory, which a restart reads first (ckpt/memory_copies.h). zt
  // train's own ranks only; under zt launch, its --memory-copies.
  bool memory_copies = false;
  // Set in the ranks of a restarted attempt (TORCHELASTIC_RESTART_COUNT > 0):
  // the attempt number, which implies resume.
  int restart_count = 0;
  // Evaluate the starting weights (--init-from, --resume's checkpoint, or the
  // initialization) and stop: no step, no checkpoint, no export.
  bool eval_only = false;
  // Language models: at each evaluation, greedy continuations of these
  // prompts (sample_tokens each) are printed and shown in the report.
  std::vector<std::string> sample_prompts;
  int64_t sample_tokens = 32;
  // --save-format deepspeed: each checkpoint also converted to DeepSpeed's
  // format, in <save_dir>/deepspeed/<tag> with its own `latest` (the
  // zerotorch checkpoint stays: --resume reads it, as it keeps the data
  // position, RNG states and run history DeepSpeed's files have no place for).
  bool save_deepspeed = false;
  std::string init_from;  // safetensors file/index/dir to start from (fine-tuning)
  // Consolidated safetensors at the end: a .safetensors file, or a folder
  // that gets model.safetensors, or shards of at most max_shard_bytes with
  // model.safetensors.index.json, as transformers' save_pretrained writes
  // ("": <output_dir>; "none": no export).
  std::string export_path;
  uint64_t max_shard_bytes = 5ull << 30;

  // --- What the user watches ---
  std::string report;    // HTML report ("" : <output_dir>/report.html)
  bool progress = true;  // progress line on rank 0
  int threads = 0;       // intra-op threads per rank (0: cores / ranks)
};

}  // namespace zt::train
