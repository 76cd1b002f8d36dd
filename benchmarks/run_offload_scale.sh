#!/usr/bin/env bash
# The scale run for NVMe offload: full training steps of a model whose fp32
# optimizer state (master weights + Adam moments, 12 bytes a parameter) is
# larger than this machine's RAM, at world 2 with ZeRO stage 3, the optimizer
# state and the parameter shards on NVMe, the model built under
# zt::ShardedInit. Where the script may create a memory cgroup (root, cgroup
# v1 or v2), the whole job runs under MEMORY_LIMIT, so "larger than the RAM
# it is allowed" is enforced by the kernel, not just claimed.
#
#   benchmarks/run_offload_scale.sh            # ~2.5B parameters, 2 ranks
#   NVME_PATH=/mnt/nvme/zt MEMORY_LIMIT=20G STEPS=2 benchmarks/run_offload_scale.sh
#   MEMORY_LIMIT=none benchmarks/run_offload_scale.sh   # no cgroup
#
# Prints the benchmark's table (peak RSS per rank, bytes on NVMe, step time)
# and writes $OUT (JSON). Stage 3 runs with stage3_max_live_parameters 1e8 and
# stage3_max_reuse_distance 0: DeepSpeed's defaults (1e9 each) would keep up
# to 4 GB of fp32 layers gathered per rank, which is the memory this run is
# about not having.
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD_DIR=${ZT_BUILD_DIR:-build}
NPROC=${NPROC:-2}
NVME_PATH=${NVME_PATH:-/tmp/zt_offload_scale}
MEMORY_LIMIT=${MEMORY_LIMIT:-20G}
STEPS=${STEPS:-1}
OUT=${OUT:-$BUILD_DIR/offload_scale.json}
# 32 LLaMA blocks of width 2560 (SwiGLU 6912), byte-level vocabulary:
# 2.54B parameters, 30.5 GB of fp32 optimizer state.
MODEL_ARGS=(--model llama-tiny --set n_layer=32 --set n_embd=2560 --set n_head=20 --set n_kv_head=20
            --set intermediate=6912 --set vocab=256 --set seq_len=64)

mkdir -p "$NVME_PATH"
cgroup=""
home=""
limit_bytes=0
[ "$MEMORY_LIMIT" = none ] || limit_bytes=$(numfmt --from=iec "$MEMORY_LIMIT")
if [ "$limit_bytes" = 0 ]; then
  :
elif [ -d /sys/fs/cgroup/memory ] && mkdir -p /sys/fs/cgroup/memory/zt_offload_scale 2>/dev/null; then
  cgroup=/sys/fs/cgroup/memory/zt_offload_scale
  home=/sys/fs/cgroup/memory$(awk -F: '$2 == "memory" {print $3}' /proc/self/cgroup)
  echo "$limit_bytes" > "$cgroup/memory.limit_in_bytes"
  echo $$ > "$cgroup/cgroup.procs"
elif [ -f /sys/fs/cgroup/cgroup.controllers ] && mkdir -p /sys/fs/cgroup/zt_offload_scale 2>/dev/null; then
  cgroup=/sys/fs/cgroup/zt_offload_scale
  home=/sys/fs/cgroup$(awk -F: '$1 == "0" {print $3}' /proc/self/cgroup)
  echo "$limit_bytes" > "$cgroup/memory.max"
  echo $$ > "$cgroup/cgroup.procs"
fi
if [ -n "$cgroup" ]; then
  echo "run_offload_scale: the job runs in memory cgroup $cgroup limited to $MEMORY_LIMIT"
elif [ "$limit_bytes" = 0 ]; then
  echo "run_offload_scale: MEMORY_LIMIT=none: no cgroup; the limit is the machine's RAM"
else
  echo "run_offload_scale: no memory cgroup available (needs root); the limit is the machine's RAM"
fi
echo "run_offload_scale: swap files under $NVME_PATH ($(df -h --output=avail "$NVME_PATH" | tail -1 | tr -d ' ') free)"

status=0
"$BUILD_DIR"/bin/zt launch --nproc-per-node "$NPROC" -- "$BUILD_DIR"/bin/zt_bench_offload "${MODEL_ARGS[@]}" \
  --modes nvme-params --stage 3 --sharded-init --steps "$STEPS" --warmup 0 --rounds 1 --micro-batch 1 --seq 16 \
  --bucket 50000000 --sub-group-size 50000000 --buffer-count 6 --param-buffer-count 6 \
  --max-live 100000000 --reuse-distance 0 \
  --nvme-path "$NVME_PATH" --json "$OUT" || status=$?

if [ -n "$cgroup" ]; then
  peak=$(cat "$cgroup/memory.max_usage_in_bytes" 2>/dev/null || cat "$cgroup/memory.peak" 2>/dev/null || echo 0)
  echo "run_offload_scale: the job's peak memory (cgroup, both ranks): $(numfmt --to=iec "$peak") of $MEMORY_LIMIT"
  echo $$ > "$home/cgroup.procs" 2>/dev/null || true
  rmdir "$cgroup" 2>/dev/null || true
fi
exit $status
