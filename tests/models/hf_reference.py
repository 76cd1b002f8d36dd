"""Reference forward passes written after Hugging Face transformers'
modeling_gpt2.py, modeling_llama.py and modeling_bert.py (GPT2LMHeadModel,
LlamaForCausalLM, BertForSequenceClassification), with their module names,
for tests/models/hf_interop_test.cc.

    python3 hf_reference.py DIR...

Each DIR holds manifest.txt (written by the test) and raw little-endian tensors;
for BERT also the config.json we export, which sizes the model here (so the
config is checked too), and the attention_mask the logits were computed with.
The script builds the HF-shaped model, loads the weights with
load_state_dict(strict=True) (names and shapes must be exactly HF's), runs it
on the saved input and compares with the saved logits. Several DIRs share
one process (importing torch is most of the run time). Exit 0 when all
match, 1 when one differs, 2 on a setup error.
"""
import json
import math
import os
import sys

import torch
from torch import nn


# ---- GPT-2 (modeling_gpt2.py) ----
class Conv1D(nn.Module):
    def __init__(self, nf, nx):
        super().__init__()
        self.nf = nf
        self.weight = nn.Parameter(torch.empty(nx, nf))
        self.bias = nn.Parameter(torch.zeros(nf))

    def forward(self, x):
        size_out = x.size()[:-1] + (self.nf,)
        x = torch.addmm(self.bias, x.view(-1, x.size(-1)), self.weight)
        return x.view(size_out)


def gelu_new(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


class GPT2Attention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.embed_dim = cfg["n_embd"]
        self.num_heads = cfg["n_head"]
        self.head_dim = self.embed_dim // self.num_heads
        n = cfg["n_positions"]
        self.register_buffer("bias", torch.tril(torch.ones((n, n), dtype=torch.bool)).view(1, 1, n, n),
                             persistent=False)
        self.c_attn = Conv1D(3 * self.embed_dim, self.embed_dim)
        self.c_proj = Conv1D(self.embed_dim, self.embed_dim)

    def _split_heads(self, t):
        return t.view(t.size()[:-1] + (self.num_heads, self.head_dim)).permute(0, 2, 1, 3)

    def forward(self, hidden):
        query, key, value = self.c_attn(hidden).split(self.embed_dim, dim=2)
        query, key, value = self._split_heads(query), self._split_heads(key), self._split_heads(value)
        w = torch.matmul(query, key.transpose(-1, -2))
        w = w / torch.full([], value.size(-1) ** 0.5, dtype=w.dtype, device=w.device)
        q_len, k_len = query.size(-2), key.size(-2)
        causal = self.bias[:, :, k_len - q_len:k_len, :k_len]
        w = torch.where(causal, w, torch.full([], torch.finfo(w.dtype).min, dtype=w.dtype))
        w = nn.functional.softmax(w, dim=-1)
        out = torch.matmul(w, value).permute(0, 2, 1, 3).contiguous()
        out = out.view(out.size()[:-2] + (self.embed_dim,))
        return self.c_proj(out)


class GPT2MLP(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        d = cfg["n_embd"]
        self.c_fc = Conv1D(4 * d, d)
        self.c_proj = Conv1D(d, 4 * d)

    def forward(self, x):
        return self.c_proj(gelu_new(self.c_fc(x)))


class GPT2Block(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        d = cfg["n_embd"]
        self.ln_1 = nn.LayerNorm(d, eps=1e-5)
        self.attn = GPT2Attention(cfg)
        self.ln_2 = nn.LayerNorm(d, eps=1e-5)
        self.mlp = GPT2MLP(cfg)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT2Model(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        d = cfg["n_embd"]
        self.wte = nn.Embedding(cfg["vocab"], d)
        self.wpe = nn.Embedding(cfg["n_positions"], d)
        self.h = nn.ModuleList([GPT2Block(cfg) for _ in range(cfg["n_layer"])])
        self.ln_f = nn.LayerNorm(d, eps=1e-5)

    def forward(self, ids):
        pos = torch.arange(0, ids.size(-1), dtype=torch.long).unsqueeze(0)
        x = self.wte(ids) + self.wpe(pos)
        for block in self.h:
            x = block(x)
        return self.ln_f(x)


class GPT2LMHeadModel(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.transformer = GPT2Model(cfg)
        self.lm_head = nn.Linear(cfg["n_embd"], cfg["vocab"], bias=False)
        self.lm_head.weight = self.transformer.wte.weight  # tie_word_embeddings

    def forward(self, ids):
        return self.lm_head(self.transformer(ids))


# ---- LLaMA (modeling_llama.py) ----
class LlamaRMSNorm(nn.Module):
    def __init__(self, d, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.variance_epsilon = eps

    def forward(self, h):
        dtype = h.dtype
        h = h.to(torch.float32)
        variance = h.pow(2).mean(-1, keepdim=True)
        h = h * torch.rsqrt(variance + self.variance_epsilon)
        return self.weight * h.to(dtype)


def scaled_inv_freq(inv_freq, cfg):
    """rope_scaling as modeling_rope_utils.py computes it: _compute_linear_scaling_rope_parameters
    and _compute_llama3_parameters."""
    rope_type = cfg.get("rope_type", "default")
    if rope_type == "default":
        return inv_freq
    factor = cfg["rope_factor"]
    if rope_type == "linear":
        return inv_freq / factor
    assert rope_type == "llama3", rope_type
    low_freq_factor, high_freq_factor = cfg["rope_low"], cfg["rope_high"]
    old_context_len = cfg["rope_orig"]
    low_freq_wavelen = old_context_len / low_freq_factor
    high_freq_wavelen = old_context_len / high_freq_factor
    wavelen = 2 * math.pi / inv_freq
    inv_freq_llama = torch.where(wavelen > low_freq_wavelen, inv_freq / factor, inv_freq)
    smooth_factor = (old_context_len / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
    smoothed_inv_freq = (1 - smooth_factor) * inv_freq_llama / factor + smooth_factor * inv_freq_llama
    is_medium_freq = ~(wavelen < high_freq_wavelen) * ~(wavelen > low_freq_wavelen)
    return torch.where(is_medium_freq, smoothed_inv_freq, inv_freq_llama)


class LlamaRotaryEmbedding(nn.Module):
    def __init__(self, dim, base=10000.0, cfg=None):
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
        inv_freq = scaled_inv_freq(inv_freq, cfg or {})
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def forward(self, x, position_ids):
        inv = self.inv_freq[None, :, None].float().expand(position_ids.shape[0], -1, 1)
        pos = position_ids[:, None, :].float()
        freqs = (inv @ pos).transpose(1, 2)
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)


def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary_pos_emb(q, k, cos, sin):
    cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
    return (q * cos) + (rotate_half(q) * sin), (k * cos) + (rotate_half(k) * sin)


def repeat_kv(h, n_rep):
    b, kv, t, hd = h.shape
    if n_rep == 1:
        return h
    return h[:, :, None, :, :].expand(b, kv, n_rep, t, hd).reshape(b, kv * n_rep, t, hd)


class LlamaAttention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        d = cfg["n_embd"]
        self.num_heads = cfg["n_head"]
        self.num_kv = cfg["n_kv_head"]
        self.head_dim = d // self.num_heads
        bias = cfg.get("qkv_bias", 0) == 1  # Qwen2 (modeling_qwen2.py)
        self.q_proj = nn.Linear(d, self.num_heads * self.head_dim, bias=bias)
        self.k_proj = nn.Linear(d, self.num_kv * self.head_dim, bias=bias)
        self.v_proj = nn.Linear(d, self.num_kv * self.head_dim, bias=bias)
        self.o_proj = nn.Linear(self.num_heads * self.head_dim, d, bias=False)

    def forward(self, x, cos, sin, mask):
        b, t, _ = x.size()
        q = self.q_proj(x).view(b, t, self.num_heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(b, t, self.num_kv, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(b, t, self.num_kv, self.head_dim).transpose(1, 2)
        q, k = apply_rotary_pos_emb(q, k, cos, sin)
        k = repeat_kv(k, self.num_heads // self.num_kv)
        v = repeat_kv(v, self.num_heads // self.num_kv)
        w = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(self.head_dim) + mask
        w = nn.functional.softmax(w, dim=-1, dtype=torch.float32).to(q.dtype)
        out = torch.matmul(w, v).transpose(1, 2).contiguous().reshape(b, t, -1)
        return self.o_proj(out)


class LlamaMLP(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        d, i = cfg["n_embd"], cfg["intermediate"]
        self.gate_proj = nn.Linear(d, i, bias=False)
        self.up_proj = nn.Linear(d, i, bias=False)
        self.down_proj = nn.Linear(i, d, bias=False)

    def forward(self, x):
        return self.down_proj(nn.functional.silu(self.gate_proj(x)) * self.up_proj(x))


class LlamaDecoderLayer(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.self_attn = LlamaAttention(cfg)
        self.mlp = LlamaMLP(cfg)
        self.input_layernorm = LlamaRMSNorm(cfg["n_embd"], cfg["rms_norm_eps"])
        self.post_attention_layernorm = LlamaRMSNorm(cfg["n_embd"], cfg["rms_norm_eps"])

    def forward(self, x, cos, sin, mask):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, mask)
        return x + self.mlp(self.post_attention_layernorm(x))


class LlamaModel(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.embed_tokens = nn.Embedding(cfg["vocab"], cfg["n_embd"])
        self.layers = nn.ModuleList([LlamaDecoderLayer(cfg) for _ in range(cfg["n_layer"])])
        self.norm = LlamaRMSNorm(cfg["n_embd"], cfg["rms_norm_eps"])
        self.rotary_emb = LlamaRotaryEmbedding(cfg["n_embd"] // cfg["n_head"], cfg.get("rope_theta", 10000.0), cfg)

    def forward(self, ids):
        x = self.embed_tokens(ids)
        t = ids.size(1)
        pos = torch.arange(t).unsqueeze(0)
        cos, sin = self.rotary_emb(x, pos)
        mask = torch.full((t, t), torch.finfo(x.dtype).min).triu(1)[None, None]
        for layer in self.layers:
            x = layer(x, cos, sin, mask)
        return self.norm(x)


class LlamaForCausalLM(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.model = LlamaModel(cfg)
        self.lm_head = nn.Linear(cfg["n_embd"], cfg["vocab"], bias=False)
        if cfg.get("tie", 0) == 1:  # tie_word_embeddings: one tensor under both names
            self.lm_head.weight = self.model.embed_tokens.weight

    def forward(self, ids):
        return self.lm_head(self.model(ids))


# ---- BERT (modeling_bert.py, eager attention) ----
class BertEmbeddings(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        d = cfg["hidden_size"]
        self.word_embeddings = nn.Embedding(cfg["vocab_size"], d, padding_idx=cfg["pad_token_id"])
        self.position_embeddings = nn.Embedding(cfg["max_position_embeddings"], d)
        self.token_type_embeddings = nn.Embedding(cfg["type_vocab_size"], d)
        self.LayerNorm = nn.LayerNorm(d, eps=cfg["layer_norm_eps"])
        self.dropout = nn.Dropout(cfg["hidden_dropout_prob"])
        self.register_buffer("position_ids", torch.arange(cfg["max_position_embeddings"]).expand((1, -1)),
                             persistent=False)
        self.register_buffer("token_type_ids", torch.zeros((1, cfg["max_position_embeddings"]), dtype=torch.long),
                             persistent=False)

    def forward(self, input_ids):
        seq_length = input_ids.size(1)
        position_ids = self.position_ids[:, :seq_length]
        token_type_ids = self.token_type_ids[:, :seq_length].expand(input_ids.size(0), seq_length)
        embeddings = self.word_embeddings(input_ids) + self.token_type_embeddings(token_type_ids)
        embeddings = embeddings + self.position_embeddings(position_ids)
        return self.dropout(self.LayerNorm(embeddings))


class BertSelfAttention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.num_attention_heads = cfg["num_attention_heads"]
        self.attention_head_size = cfg["hidden_size"] // self.num_attention_heads
        self.all_head_size = self.num_attention_heads * self.attention_head_size
        self.query = nn.Linear(cfg["hidden_size"], self.all_head_size)
        self.key = nn.Linear(cfg["hidden_size"], self.all_head_size)
        self.value = nn.Linear(cfg["hidden_size"], self.all_head_size)
        self.dropout = nn.Dropout(cfg["attention_probs_dropout_prob"])

    def transpose_for_scores(self, x):
        x = x.view(x.size()[:-1] + (self.num_attention_heads, self.attention_head_size))
        return x.permute(0, 2, 1, 3)

    def forward(self, hidden_states, attention_mask):
        query_layer = self.transpose_for_scores(self.query(hidden_states))
        key_layer = self.transpose_for_scores(self.key(hidden_states))
        value_layer = self.transpose_for_scores(self.value(hidden_states))
        attention_scores = torch.matmul(query_layer, key_layer.transpose(-1, -2))
        attention_scores = attention_scores / math.sqrt(self.attention_head_size)
        attention_scores = attention_scores + attention_mask
        attention_probs = nn.functional.softmax(attention_scores, dim=-1)
        attention_probs = self.dropout(attention_probs)
        context_layer = torch.matmul(attention_probs, value_layer).permute(0, 2, 1, 3).contiguous()
        return context_layer.view(context_layer.size()[:-2] + (self.all_head_size,))


class BertSelfOutput(nn.Module):
    def __init__(self, cfg, in_size):
        super().__init__()
        self.dense = nn.Linear(in_size, cfg["hidden_size"])
        self.LayerNorm = nn.LayerNorm(cfg["hidden_size"], eps=cfg["layer_norm_eps"])
        self.dropout = nn.Dropout(cfg["hidden_dropout_prob"])

    def forward(self, hidden_states, input_tensor):
        return self.LayerNorm(self.dropout(self.dense(hidden_states)) + input_tensor)


class BertAttention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.self = BertSelfAttention(cfg)
        self.output = BertSelfOutput(cfg, cfg["hidden_size"])

    def forward(self, hidden_states, attention_mask):
        return self.output(self.self(hidden_states, attention_mask), hidden_states)


class BertIntermediate(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        assert cfg["hidden_act"] == "gelu", cfg["hidden_act"]
        self.dense = nn.Linear(cfg["hidden_size"], cfg["intermediate_size"])

    def forward(self, hidden_states):
        return nn.functional.gelu(self.dense(hidden_states))  # ACT2FN["gelu"]: the exact erf form


class BertLayer(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.attention = BertAttention(cfg)
        self.intermediate = BertIntermediate(cfg)
        self.output = BertSelfOutput(cfg, cfg["intermediate_size"])  # BertOutput: the same computation

    def forward(self, hidden_states, attention_mask):
        attention_output = self.attention(hidden_states, attention_mask)
        return self.output(self.intermediate(attention_output), attention_output)


class BertEncoder(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.layer = nn.ModuleList([BertLayer(cfg) for _ in range(cfg["num_hidden_layers"])])

    def forward(self, hidden_states, attention_mask):
        for layer in self.layer:
            hidden_states = layer(hidden_states, attention_mask)
        return hidden_states


class BertPooler(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.dense = nn.Linear(cfg["hidden_size"], cfg["hidden_size"])

    def forward(self, hidden_states):
        return torch.tanh(self.dense(hidden_states[:, 0]))


class BertModel(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        assert cfg.get("position_embedding_type", "absolute") == "absolute"
        self.embeddings = BertEmbeddings(cfg)
        self.encoder = BertEncoder(cfg)
        self.pooler = BertPooler(cfg)

    def forward(self, input_ids, attention_mask):
        embedding_output = self.embeddings(input_ids)
        # get_extended_attention_mask
        dtype = embedding_output.dtype
        extended = attention_mask[:, None, None, :].to(dtype=dtype)
        extended = (1.0 - extended) * torch.finfo(dtype).min
        return self.pooler(self.encoder(embedding_output, extended))


class BertForSequenceClassification(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.num_labels = len(cfg["id2label"])
        self.bert = BertModel(cfg)
        p = cfg["classifier_dropout"] if cfg.get("classifier_dropout") is not None else cfg["hidden_dropout_prob"]
        self.dropout = nn.Dropout(p)
        self.classifier = nn.Linear(cfg["hidden_size"], self.num_labels)

    def forward(self, input_ids, attention_mask):
        return self.classifier(self.dropout(self.bert(input_ids, attention_mask)))


DTYPES = {"float32": torch.float32, "int64": torch.int64}
FLOAT_KEYS = ("rms_norm_eps", "rope_theta", "rope_factor", "rope_low", "rope_high")
STRING_KEYS = ("family", "rope_type")


def load(directory):
    cfg, tensors = {}, {}
    with open(os.path.join(directory, "manifest.txt")) as f:
        for line in f:
            parts = line.rstrip("\n").split("\t")
            if parts[0] == "config":
                key, value = parts[1], parts[2]
                cfg[key] = value if key in STRING_KEYS else float(value) if key in FLOAT_KEYS else int(value)
            elif parts[0] == "tensor":
                name, dtype, shape, file = parts[1], parts[2], parts[3], parts[4]
                dims = [int(d) for d in shape.split(",")] if shape else []
                with open(os.path.join(directory, file), "rb") as g:
                    data = bytearray(g.read())
                tensors[name] = torch.frombuffer(data, dtype=DTYPES[dtype]).reshape(dims).clone()
    return cfg, tensors


def check(folder):
    cfg, tensors = load(folder)
    ids, logits = tensors.pop("input"), tensors.pop("logits")
    if cfg["family"] == "bert":
        with open(os.path.join(folder, "config.json")) as f:
            hf = json.load(f)
        assert hf["model_type"] == "bert" and hf["architectures"] == ["BertForSequenceClassification"], hf
        model = BertForSequenceClassification(hf)
        mask = tensors.pop("attention_mask")
        run = lambda: model(ids, mask)  # noqa: E731
    else:
        model = {"gpt2": GPT2LMHeadModel, "llama": LlamaForCausalLM}[cfg["family"]](cfg)
        run = lambda: model(ids)  # noqa: E731
    model.load_state_dict(tensors, strict=True)
    model.eval()
    with torch.no_grad():
        ref = run()
    if ref.shape != logits.shape:
        print(f"{folder}: shape {tuple(ref.shape)} != {tuple(logits.shape)}")
        return 1
    diff = (ref - logits).abs().max().item()
    ok = torch.allclose(ref, logits, rtol=1e-4, atol=1e-5)
    print(f"{folder} ({cfg['family']}): max |logits - reference| = {diff:.3g}{'' if ok else '  DIFFERS'}")
    return 0 if ok else 1


def main():
    return max(check(folder) for folder in sys.argv[1:])


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception as e:  # setup errors: exit 2 so the test can tell them apart
        print(f"error: {e!r}")
        sys.exit(2)
