// Implementation of ckpt/format/llama2c.h.
#include "ckpt/format/llama2c.h"

#include <cstring>
#include <filesystem>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "ckpt/format/safetensors.h"
#include "nlohmann/json.hpp"
#include "util/file_io.h"
#include "util/status.h"

namespace zt::ckpt {
namespace {

constexpr uint32_t kMagic = 0x616b3432;  // "ak42"
constexpr uint64_t kV1Header = 256;

struct Header {
  int version = 0;
  int32_t p[7] = {};  // dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len
  bool shared = true;
  uint64_t bytes = 28;  // header size
};

absl::StatusOr<Header> ReadHeader(const ReadFile& f) {
  Header h;
  if (f.size() < 28) {
    return absl::InvalidArgumentError(
        absl::StrCat(f.path(), ": ", f.size(), " bytes, too short for a llama2.c model header (28 bytes)"));
  }
  uint32_t magic = 0;
  ZT_RETURN_IF_ERROR(f.PRead(&magic, 4, 0));
  if (magic == kMagic) {
    int32_t version = 0;
    ZT_RETURN_IF_ERROR(f.PRead(&version, 4, 4));
    if (version != 1) {
      return absl::UnimplementedError(absl::StrCat(
          f.path(), ": llama2.c model version ", version,
          version == 2 ? " (int8 groups, export.py --version 2) is not read; export it with --version 1 (fp32)"
                       : " is unknown (this reader knows the legacy format and version 1)"));
    }
    if (f.size() < kV1Header) {
      return absl::InvalidArgumentError(
          absl::StrCat(f.path(), ": ", f.size(), " bytes, too short for a version-1 header (256 bytes)"));
    }
    h.version = 1;
    ZT_RETURN_IF_ERROR(f.PRead(h.p, sizeof(h.p), 8));
    uint8_t shared = 0;
    ZT_RETURN_IF_ERROR(f.PRead(&shared, 1, 36));
    h.shared = shared != 0;
    h.bytes = kV1Header;
  } else {
    ZT_RETURN_IF_ERROR(f.PRead(h.p, sizeof(h.p), 0));
    h.shared = h.p[5] > 0;
    if (h.p[5] < 0) h.p[5] = -h.p[5];
  }
  return h;
}

// The arrays in file order, each with its HF name (empty: skipped) and shape.
struct Array {
  std::string name;
  std::vector<int64_t> shape;
  int rope_heads = 0;
};

std::vector<Array> FileOrder(const Llama2cModel& m) {
  const int64_t L = m.n_layers, d = m.dim, hd = m.hidden_dim, kv = m.n_kv_heads * m.head_size();
  auto layer = [](int64_t l, const char* rest) { return absl::StrCat("model.layers.", l, ".", rest); };
  std::vector<Array> out;
  auto per_layer = [&](const char* rest, std::vector<int64_t> shape, int rope = 0) {
    for (int64_t l = 0; l < L; ++l) out.push_back({layer(l, rest), shape, rope});
  };
  const Array embed{"model.embed_tokens.weight", {m.vocab_size, d}};
  const Array norm{"model.norm.weight", {d}};
  if (m.version == 1) {
    per_layer("input_layernorm.weight", {d});
    per_layer("post_attention_layernorm.weight", {d});
    out.push_back(norm);
    out.push_back(embed);
  } else {
    out.push_back(embed);
    per_layer("input_layernorm.weight", {d});
  }
  per_layer("self_attn.q_proj.weight", {d, d}, static_cast<int>(m.n_heads));
  per_layer("self_attn.k_proj.weight", {kv, d}, static_cast<int>(m.n_kv_heads));
  per_layer("self_attn.v_proj.weight", {kv, d});
  per_layer("self_attn.o_proj.weight", {d, d});
  if (m.version == 0) per_layer("post_attention_layernorm.weight", {d});
  per_layer("mlp.gate_proj.weight", {hd, d});  // w1
  per_layer("mlp.down_proj.weight", {d, hd});  // w2
  per_layer("mlp.up_proj.weight", {hd, d});    // w3
  if (m.version == 0) {
    out.push_back(norm);
    out.push_back({"", {m.seq_len, m.head_size() / 2}});  // freq_cis_real
    out.push_back({"", {m.seq_len, m.head_size() / 2}});  // freq_cis_imag
  }
  if (!m.shared_classifier) out.push_back({"lm_head.weight", {m.vocab_size, d}});
  return out;
}

int64_t Numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

}  // namespace

bool LooksLikeLlama2c(const std::string& path) {
  auto f = ReadFile::Open(path);
  if (!f.ok()) return false;
  auto m = OpenLlama2c(path);
  if (m.ok()) return true;
  uint32_t magic = 0;
  return f->size() >= 4 && f->PRead(&magic, 4, 0).ok() && magic == kMagic;
}

absl::StatusOr<Llama2cModel> OpenLlama2c(const std::string& path) {
  ZT_ASSIGN_OR_RETURN(ReadFile f, ReadFile::Open(path));
  ZT_ASSIGN_OR_RETURN(Header h, ReadHeader(f));
  Llama2cModel m;
  m.path = path;
  m.version = h.version;
  m.dim = h.p[0];
  m.hidden_dim = h.p[1];
  m.n_layers = h.p[2];
  m.n_heads = h.p[3];
  m.n_kv_heads = h.p[4];
  m.vocab_size = h.p[5];
  m.seq_len = h.p[6];
  m.shared_classifier = h.shared;
  const char* names[7] = {"dim", "hidden_dim", "n_layers", "n_heads", "n_kv_heads", "vocab_size", "seq_len"};
  for (int i = 0; i < 7; ++i) {
    if (h.p[i] <= 0 || h.p[i] > (1 << 24)) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": header field ", names[i], " is ", h.p[i],
                                                     ", not a size (is this a llama2.c model file?)"));
    }
  }
  if (m.dim % m.n_heads != 0 || (m.dim / m.n_heads) % 2 != 0 || m.n_heads % m.n_kv_heads != 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: dim %d, n_heads %d, n_kv_heads %d do not make an even head size shared by whole kv heads",
                        path, m.dim, m.n_heads, m.n_kv_heads));
  }
  // Offsets follow the file's order; the tensors are listed in HF's.
  std::map<std::string, Llama2cModel::Tensor> by_name;
  uint64_t offset = h.bytes;
  for (const Array& a : FileOrder(m)) {
    if (!a.name.empty()) by_name[a.name] = {a.name, a.shape, offset, a.rope_heads};
    offset += static_cast<uint64_t>(Numel(a.shape)) * 4;
  }
  if (offset != f.size()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: the header (version %d: dim %d, hidden_dim %d, %d layers, %d heads, %d kv heads, vocab %d, seq_len %d, "
        "%s classifier) needs %d bytes, the file has %d (%s)",
        path, m.version, m.dim, m.hidden_dim, m.n_layers, m.n_heads, m.n_kv_heads, m.vocab_size, m.seq_len,
        m.shared_classifier ? "shared" : "own", offset, f.size(), f.size() < offset ? "truncated" : "longer"));
  }
  auto take = [&](const std::string& name) {
    if (auto it = by_name.find(name); it != by_name.end()) m.tensors.push_back(it->second);
  };
  take("model.embed_tokens.weight");
  for (int64_t l = 0; l < m.n_layers; ++l) {
    for (const char* rest : {"input_layernorm.weight", "self_attn.q_proj.weight", "self_attn.k_proj.weight",
                             "self_attn.v_proj.weight", "self_attn.o_proj.weight", "post_attention_layernorm.weight",
                             "mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight"}) {
      take(absl::StrCat("model.layers.", l, ".", rest));
    }
  }
  take("model.norm.weight");
  take("lm_head.weight");  // only with a classifier of its own
  return m;
}

namespace {

absl::StatusOr<std::vector<float>> ReadTensor(const ReadFile& f, const Llama2cModel& m, const Llama2cModel::Tensor& t) {
  std::vector<float> v(static_cast<size_t>(Numel(t.shape)));
  ZT_RETURN_IF_ERROR(f.PRead(v.data(), v.size() * sizeof(float), t.offset));
  if (t.rope_heads <= 0) return v;
  const int64_t hs = m.head_size(), cols = t.shape[1];
  std::vector<float> out(v.size());
  for (int64_t h = 0; h < t.rope_heads; ++h) {
    for (int64_t i = 0; i < hs / 2; ++i) {
      for (int64_t j = 0; j < 2; ++j) {
        const int64_t to = h * hs + j * (hs / 2) + i, from = h * hs + 2 * i + j;
        std::memcpy(&out[static_cast<size_t>(to * cols)], &v[static_cast<size_t>(from * cols)],
                    static_cast<size_t>(cols) * sizeof(float));
      }
    }
  }
  return out;
}

}  // namespace

absl::StatusOr<std::vector<float>> ReadLlama2cTensor(const Llama2cModel& m, const Llama2cModel::Tensor& t) {
  ZT_ASSIGN_OR_RETURN(ReadFile f, ReadFile::Open(m.path));
  return ReadTensor(f, m, t);
}

std::string Llama2cHfConfigJson(const Llama2cModel& m) {
  nlohmann::ordered_json c;
  c["architectures"] = {"LlamaForCausalLM"};
  c["model_type"] = "llama";
  c["hidden_size"] = m.dim;
  c["intermediate_size"] = m.hidden_dim;
  c["num_hidden_layers"] = m.n_layers;
  c["num_attention_heads"] = m.n_heads;
  c["num_key_value_heads"] = m.n_kv_heads;
  c["head_dim"] = m.head_size();
  c["vocab_size"] = m.vocab_size;
  c["max_position_embeddings"] = m.seq_len;
  c["rms_norm_eps"] = 1e-5;  // run.c's constant
  c["rope_theta"] = 10000.0;
  c["rope_scaling"] = nullptr;
  c["hidden_act"] = "silu";
  c["tie_word_embeddings"] = m.shared_classifier;
  c["attention_bias"] = false;
  c["mlp_bias"] = false;
  c["bos_token_id"] = 1;
  c["eos_token_id"] = 2;
  c["torch_dtype"] = "float32";
  return c.dump(2) + "\n";
}

absl::Status WriteLlama2cAsHf(const Llama2cModel& m, const std::string& dir) {
  std::error_code ec;
  if (std::filesystem::exists(dir, ec) && !std::filesystem::is_empty(dir, ec)) {
    return absl::AlreadyExistsError(absl::StrCat(dir, " exists and is not empty; give a new folder"));
  }
  ZT_RETURN_IF_ERROR(MakeDirs(dir));
  std::vector<SafetensorsEntry> entries;
  for (const auto& t : m.tensors) entries.push_back({t.name, DType::kFloat32, t.shape});
  ZT_ASSIGN_OR_RETURN(auto writer, SafetensorsWriter::Create(dir + "/model.safetensors", entries, {{"format", "pt"}}));
  ZT_ASSIGN_OR_RETURN(ReadFile f, ReadFile::Open(m.path));
  for (const auto& t : m.tensors) {
    ZT_ASSIGN_OR_RETURN(std::vector<float> v, ReadTensor(f, m, t));
    ZT_RETURN_IF_ERROR(writer->Write(v.data(), v.size() * sizeof(float)));
  }
  ZT_RETURN_IF_ERROR(writer->Finish());
  return WriteFileAtomically(dir + "/config.json", Llama2cHfConfigJson(m));
}

}  // namespace zt::ckpt
