#!/usr/bin/env bash
# Offload step time on one model: no offload vs optimizer state offloaded to
# "cpu" vs to NVMe vs (stage 3) optimizer state and parameter shards on NVMe,
# at stages 3 and 2, 2 ranks, ratios to "none" measured in the same run
# (docs/benchmarks.md, "Offload"). The scale run is run_offload_scale.sh.
#
#   benchmarks/run_offload.sh                 # ~43M-parameter GPT-2 shape, swap files under /tmp
#   NVME_PATH=/mnt/nvme/zt ROUNDS=3 STAGES=3 benchmarks/run_offload.sh
#
# Writes $BUILD_DIR/offload_stage{3,2}.json.
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD_DIR=${ZT_BUILD_DIR:-build}
NPROC=${NPROC:-2}
NVME_PATH=${NVME_PATH:-/tmp/zt_offload_bench}
ROUNDS=${ROUNDS:-2}
STAGES=${STAGES:-"3 2"}
MODEL_ARGS=(--model gpt2-tiny --set n_layer=6 --set n_embd=768 --set n_head=12 --set vocab=256 --set seq_len=128)
mkdir -p "$NVME_PATH"

for stage in $STAGES; do
  modes=none,cpu,nvme
  [ "$stage" = 3 ] && modes=none,cpu,nvme,nvme-params
  echo "== stage $stage =="
  "$BUILD_DIR"/bin/zt launch --nproc-per-node "$NPROC" -- "$BUILD_DIR"/bin/zt_bench_offload "${MODEL_ARGS[@]}" \
    --stage "$stage" --modes "$modes" --rounds "$ROUNDS" --steps 5 --warmup 2 --micro-batch 2 --seq 128 \
    --bucket 5000000 --sub-group-size 4000000 --param-buffer-count 4 --max-live 20000000 --reuse-distance 0 \
    --nvme-path "$NVME_PATH" --json "$BUILD_DIR/offload_stage$stage.json"
done
