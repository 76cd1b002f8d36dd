#!/usr/bin/env bash
# docs/fine-tuning.md's walkthrough, as a user follows it: every line of the
# page's ```sh blocks (commands, and the files they write inline; "# " lines
# are the output shown) must be a line of examples/fine_tuning/walkthrough.sh,
# and that script must run from an empty folder and leave what the page says.
#
#   run_walkthrough.sh SOURCE_DIR BUILD_DIR WORK_DIR
set -euo pipefail
SRC=$1
BUILD=$2
WORK=$3
DOC=$SRC/docs/fine-tuning.md
SCRIPT=$SRC/examples/fine_tuning/walkthrough.sh

# Lines with a trailing backslash joined to the next, leading space dropped.
joined() { sed -e ':a' -e '/\\$/N; s/\\\n//; ta' "$1" | sed -e 's/^[[:space:]]*//' -e 's/[[:space:]]\{2,\}/ /g'; }
script_lines=$(joined "$SCRIPT")
blocks=$(awk '/^```sh$/ {on=1; next} /^```/ {on=0} on' "$DOC" > "$WORK.doc_blocks" && joined "$WORK.doc_blocks")
rm -f "$WORK.doc_blocks"
checked=0
while IFS= read -r line; do
  case "$line" in "" | "# "* | "#") continue ;; esac
  checked=$((checked + 1))
  if ! grep -qxF -- "$line" <<<"$script_lines"; then
    echo "docs/fine-tuning.md shows a line examples/fine_tuning/walkthrough.sh does not run:"
    echo "  $line"
    exit 1
  fi
done <<<"$blocks"
if [ "$checked" -lt 10 ]; then
  echo "docs/fine-tuning.md: only $checked command lines found in its \`\`\`sh blocks"
  exit 1
fi
echo "walkthrough: the page's $checked command lines are all in the script"

rm -rf "$WORK"
ZT_BUILD_DIR=$BUILD "$SCRIPT" "$WORK"
for f in pre/model.safetensors pre/config.json notes.bin tuned/model.safetensors lora/adapter/adapter_config.json \
  lora/adapter/adapter_model.safetensors sft/model.safetensors topics-run/config.json; do
  test -f "$WORK/$f" || { echo "walkthrough: $f was not written"; exit 1; }
done
grep -q '"id2label"' "$WORK/topics-run/config.json"

# Part A's claims about the pretrained stories260K, from the runs' own CSV
# monitors: its held-out loss is far below a random init's (by more than
# 1 nat: the weights were understood, not just read), and both fine-tunes
# end below where the pretrained model started.
last_eval() { tail -n 1 "$WORK/$1/stories260K.bin/Eval_Samples_eval_loss.csv" | cut -d, -f2; }
pre=$(last_eval stories-pre)
random=$(last_eval stories-random)
full=$(last_eval stories-full)
lora=$(last_eval stories-lora)
echo "walkthrough: held-out loss: pretrained $pre, random init $random, full fine-tune $full, LoRA $lora"
awk -v p="$pre" -v r="$random" -v f="$full" -v l="$lora" 'BEGIN { exit !(p < r - 1 && f < p && l < p) }' || {
  echo "walkthrough: the held-out losses do not show the pretrained weights or the fine-tunes working"
  exit 1
}
for f in stories-full/model.safetensors stories-full/checkpoints/latest stories-lora/adapter/adapter_model.safetensors; do
  test -f "$WORK/$f" || { echo "walkthrough: $f was not written"; exit 1; }
done
echo "walkthrough: OK"
