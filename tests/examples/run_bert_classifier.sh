#!/usr/bin/env bash
# run_bert_classifier.sh ZT EXAMPLE CONFIG DIR: trains examples/bert_classifier
# on 2 ranks to step 20 (saving and exporting), resumes to step 40, and checks
# what each run printed.
set -euo pipefail
zt=$1 example=$2 config=$3 dir=$4
rm -rf "$dir" && mkdir -p "$dir"
"$zt" launch --nproc-per-node 2 -- "$example" --config "$config" --steps 20 --out "$dir" | tee "$dir/first.log"
grep -q "bert_classifier: step 20 loss .* eval accuracy" "$dir/first.log"
test -f "$dir/model.safetensors" && test -f "$dir/checkpoints/latest"
"$zt" launch --nproc-per-node 2 -- "$example" --config "$config" --steps 40 --out "$dir" --resume | tee "$dir/second.log"
grep -q "bert_classifier: resumed at step 20" "$dir/second.log"
grep -q "bert_classifier: step 40 loss .* eval accuracy" "$dir/second.log"
grep -q "bert_classifier: 40 steps at ZeRO stage 3 on 2 ranks" "$dir/second.log"
# The task is learnable well past chance (0.5) in 40 steps: a model that
# did not train, or ranks that trained on different data, would not get there.
accuracy=$(sed -n 's/.*step 40 loss .* eval accuracy \([0-9.]*\).*/\1/p' "$dir/second.log")
awk -v a="$accuracy" 'BEGIN { exit !(a >= 0.8) }' || { echo "accuracy $accuracy at step 40 is below 0.8"; exit 1; }
"$zt" ckpt inspect "$dir/checkpoints" --verify > "$dir/inspect.log"
echo "run_bert_classifier: OK"
