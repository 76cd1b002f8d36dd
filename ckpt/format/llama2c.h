// llama2.c model files (Karpathy's llama2.c run.c / export.py): the legacy
// format (version 0: 7 int32 header, a negative vocab_size meaning a
// classifier of its own) and version 1 ("ak42" magic, 256-byte header, the
// norms first), fp32 little-endian, every matrix row-major [out, in].
// Version 2 (int8 groups) is refused by name.
//
// Read as a Hugging Face LlamaForCausalLM: each array under its HF name,
// q_proj / k_proj rows reordered per head from llama2.c's adjacent RoPE
// pairs (2i, 2i+1) to HF's rotate_half halves (i, i + head_size/2): new row
// h*hs + j*(hs/2) + i = old row h*hs + 2i + j (export.py's permute, inverted).
// The legacy RoPE tables (freq_cis_real / imag) are skipped, as run.c does.
// No LibTorch.
//
//   auto m = zt::ckpt::OpenLlama2c("stories260K.bin");
//   ZT_RETURN_IF_ERROR(zt::ckpt::WriteLlama2cAsHf(*m, "out/hf"));  // config.json + model.safetensors
//
// Errors name the file and what is wrong: a header field out of range, a
// size that does not match the header (truncated or longer), a version this
// reader does not know.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace zt::ckpt {

struct Llama2cModel {
  std::string path;
  int version = 0;  // 0: legacy, 1: "ak42" version 1
  int64_t dim = 0, hidden_dim = 0, n_layers = 0, n_heads = 0, n_kv_heads = 0, vocab_size = 0, seq_len = 0;
  bool shared_classifier = true;
  // Each tensor: its HF name and shape, where its fp32 values start in the
  // file, and whether its rows are reordered for HF's RoPE (q/k: the heads).
  struct Tensor {
    std::string name;
    std::vector<int64_t> shape;
    uint64_t offset = 0;
    int rope_heads = 0;  // > 0: q/k rows reordered within each of that many heads
  };
  std::vector<Tensor> tensors;  // in HF's order (embed, per layer, norm, head)
  int64_t head_size() const { return dim / n_heads; }
};

// True where `path` starts like a llama2.c model file (the "ak42" magic, or
// a legacy header whose sizes match the file exactly).
bool LooksLikeLlama2c(const std::string& path);

absl::StatusOr<Llama2cModel> OpenLlama2c(const std::string& path);

// Tensor `t` of `m` as HF holds it (rows reordered where t.rope_heads > 0).
absl::StatusOr<std::vector<float>> ReadLlama2cTensor(const Llama2cModel& m, const Llama2cModel::Tensor& t);

// The config.json of `m` as a Hugging Face LlamaForCausalLM (the one
// WriteLlama2cAsHf writes).
std::string Llama2cHfConfigJson(const Llama2cModel& m);

// `dir` (absent or empty) gets config.json (LlamaForCausalLM, rms_norm_eps
// 1e-5 as run.c, rope_theta 10000, bos 1, eos 2, tie_word_embeddings where
// the classifier is shared, whose lm_head.weight is then not stored, as HF's
// tied checkpoints do) and model.safetensors (F32), one tensor at a time.
absl::Status WriteLlama2cAsHf(const Llama2cModel& m, const std::string& dir);

}  // namespace zt::ckpt
