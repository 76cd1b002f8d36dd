"""Applies a LoRA adapter the way Hugging Face PEFT does, from PEFT's files
alone, for tests/lora/peft_interop_test.cc.

    python3 peft_reference.py DIR

DIR holds manifest.txt with the base model's config and weights, an input and
the logits zerotorch's adapted model gave for it (the format of
tests/models/hf_reference.py), adapter/ (adapter_config.json +
adapter_model.safetensors, as PEFT's save_pretrained writes them) and
merged.safetensors (zerotorch's export with the adapter merged).

Written from PEFT's documented behaviour (peft/tuners/lora): target_modules
match a module whose name equals a target or ends with "." + target
("all-linear": every Linear/Conv1D but the output layer); the adapted
forward is base(x) + lora_B(lora_A(dropout(x))) * lora_alpha / r; saved
keys are "base_model.model.<module>.lora_A.weight" / "lora_B.weight"; A is
[r, in] and B [out, r] whatever the base layout (fan_in_fan_out marks
GPT-2's Conv1D, whose weight is [in, out]). Checks, each must hold:
  1. every adapter tensor is used and every adapted module gets A and B;
  2. the base + adapter reproduce zerotorch's logits;
  3. merged.safetensors holds exactly the base's names and shapes and,
     loaded alone, reproduces the same logits.
Exit 0 when all hold, 1 otherwise.
"""
import json
import os
import struct
import sys

import torch
from torch import nn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "models"))
import hf_reference  # noqa: E402

ST_DTYPES = {"F32": torch.float32, "BF16": torch.bfloat16, "F16": torch.float16, "I64": torch.int64}


def read_safetensors(path):
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
        data = bytearray(f.read())
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        b, end = e["data_offsets"]
        out[name] = torch.frombuffer(data[b:end], dtype=ST_DTYPES[e["dtype"]]).reshape(e["shape"]).clone()
    return out


class LoraWrapped(nn.Module):
    """A PEFT LoRA layer around `base` (nn.Linear or HF's Conv1D)."""

    def __init__(self, base, r, alpha, fan_in_fan_out):
        super().__init__()
        out_f, in_f = base.weight.shape
        if fan_in_fan_out:
            in_f, out_f = out_f, in_f
        self.base_layer = base
        self.lora_A = nn.Linear(in_f, r, bias=False)
        self.lora_B = nn.Linear(r, out_f, bias=False)
        self.scaling = alpha / r

    def forward(self, x):
        return self.base_layer(x) + self.lora_B(self.lora_A(x)) * self.scaling


def targeted(name, module, targets, output_layer):
    if not isinstance(module, (nn.Linear, hf_reference.Conv1D)):
        return False
    if targets == "all-linear":
        return name.split(".")[-1] != output_layer
    return any(name == t or name.endswith("." + t) for t in targets)


def main():
    d = sys.argv[1]
    cfg, tensors = hf_reference.load(d)
    ids, logits = tensors.pop("input"), tensors.pop("logits")
    family = {"gpt2": hf_reference.GPT2LMHeadModel, "llama": hf_reference.LlamaForCausalLM}[cfg["family"]]

    with open(os.path.join(d, "adapter", "adapter_config.json")) as f:
        ac = json.load(f)
    for key, want in (("peft_type", "LORA"), ("bias", "none"), ("use_rslora", False), ("use_dora", False)):
        if ac.get(key) != want:
            print(f"adapter_config.json: {key} is {ac.get(key)!r}, expected {want!r}")
            return 1
    r, alpha, fifo = ac["r"], ac["lora_alpha"], ac["fan_in_fan_out"]
    adapter = read_safetensors(os.path.join(d, "adapter", "adapter_model.safetensors"))

    model = family(cfg)
    model.load_state_dict(tensors, strict=True)
    wrapped = []
    for name, module in list(model.named_modules()):
        if not targeted(name, module, ac["target_modules"], "lm_head"):
            continue
        parent = model.get_submodule(name.rsplit(".", 1)[0]) if "." in name else model
        setattr(parent, name.rsplit(".", 1)[-1], LoraWrapped(module, r, alpha, fifo))
        wrapped.append(name)
    used = set()
    with torch.no_grad():
        for name in wrapped:
            layer = model.get_submodule(name)
            for ab in ("lora_A", "lora_B"):
                key = f"base_model.model.{name}.{ab}.weight"
                if key not in adapter:
                    print(f"adapter_model.safetensors lacks {key}")
                    return 1
                getattr(layer, ab).weight.copy_(adapter[key])
                used.add(key)
    if used != set(adapter):
        print(f"adapter tensors no target module uses: {sorted(set(adapter) - used)}")
        return 1
    model.eval()
    with torch.no_grad():
        ref = model(ids)
    diff = (ref - logits).abs().max().item()
    base_only = family(cfg)
    base_only.load_state_dict(tensors, strict=True)
    base_only.eval()
    with torch.no_grad():
        moved = (base_only(ids) - logits).abs().max().item()
    print(f"{cfg['family']}: {len(wrapped)} adapted modules; max |logits - PEFT-style reference| = {diff:.3g} "
          f"(the adapter moves them by {moved:.3g})")
    ok = torch.allclose(ref, logits, rtol=1e-4, atol=1e-5) and moved > 1e-3

    merged = read_safetensors(os.path.join(d, "merged.safetensors"))
    plain = family(cfg)
    names = {k: tuple(v.shape) for k, v in plain.state_dict().items()}
    tied = [k for k in names if k not in merged]
    for k in tied:  # a tied head is written once (transformers drops it too)
        merged[k] = merged["transformer.wte.weight" if cfg["family"] == "gpt2" else "model.embed_tokens.weight"]
    if {k: tuple(v.shape) for k, v in merged.items()} != names:
        print(f"merged.safetensors: names or shapes differ from the base model's: {sorted(set(merged) ^ set(names))}")
        return 1
    plain.load_state_dict(merged, strict=True)
    plain.eval()
    with torch.no_grad():
        mdiff = (plain(ids) - logits).abs().max().item()
    print(f"{cfg['family']}: merged weights alone: max |logits - zerotorch's adapted model| = {mdiff:.3g}")
    ok = ok and mdiff < 1e-4
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
