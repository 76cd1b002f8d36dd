#!/usr/bin/env bash
# Offload step time: no offload vs optimizer state offloaded to "cpu" vs to
# NVMe vs (stage 3) optimizer state and parameter shards on NVMe, or the
# shards alone (cpu-params), 2 ranks,
# ratios to "none" and the share of each step blocked on swap I/O ("stall"),
# all measured in the same run (docs/benchmarks.md, "Offload"), for three
# models: the MNIST CNN (1.2M parameters) and gpt2-mini (0.84M) with
# DeepSpeed's default offload settings, and a 42.8M-parameter GPT-2 shape
# whose optimizer state is larger than its swap buffers. The scale run is
# run_offload_scale.sh.
#
#   benchmarks/run_offload.sh                        # swap files under /tmp
#   NVME_PATH=/mnt/nvme/zt ROUNDS=3 STAGES=3 MODELS="gpt2-42m" benchmarks/run_offload.sh
#   PAIRED=0 benchmarks/run_offload.sh               # without the interleaved 42.8M pass
#   PROBE=0 benchmarks/run_offload.sh                # without the disk steal probe first
#
# Writes $BUILD_DIR/offload_<model>_stage<k>.json.
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD_DIR=${ZT_BUILD_DIR:-build}
NPROC=${NPROC:-2}
NVME_PATH=${NVME_PATH:-/tmp/zt_offload_bench}
ROUNDS=${ROUNDS:-2}
STAGES=${STAGES:-"3 2"}
MODELS=${MODELS:-"mnist-cnn gpt2-mini gpt2-42m"}
mkdir -p "$NVME_PATH"

# First, what disk I/O on this machine costs its CPUs while they all compute
# (a hypervisor's disk emulation charged to the guest as steal), measured
# with dd alone: the part of the NVMe modes' step time that no overlap hides.
if [ "${PROBE:-1}" = 1 ]; then
  echo "== disk steal probe =="
  DIR="$NVME_PATH" MIB=${PROBE_MIB:-512} benchmarks/disk_steal_probe.sh
fi

for model in $MODELS; do
  case "$model" in
    mnist-cnn)
      # DeepSpeed's defaults: sub_group_size 1e9 (the whole state in one
      # sub-group), 4 optimizer and 5 parameter buffers.
      ARGS=(--model mnist-cnn --micro-batch 32 --steps 30 --warmup 3 --sub-group-size 1000000000 --buffer-count 4
        --param-buffer-count 5) ;;
    gpt2-mini)
      ARGS=(--model gpt2-mini --micro-batch 8 --seq 128 --steps 20 --warmup 3 --sub-group-size 1000000000
        --buffer-count 4 --param-buffer-count 5) ;;
    gpt2-42m)
      # 21.4M optimizer elements per rank in 6 sub-groups of 4M, 9 buffers
      # (4 sub-groups of 2 kinds): the state does not fit the pool.
      ARGS=(--model gpt2-tiny --set n_layer=6 --set n_embd=768 --set n_head=12 --set vocab=256 --set seq_len=128
        --micro-batch 2 --seq 128 --steps 5 --warmup 2 --bucket 5000000 --sub-group-size 4000000 --buffer-count 9
        --param-buffer-count 4 --max-live 20000000 --reuse-distance 0) ;;
    *) echo "run_offload.sh: unknown model '$model' (mnist-cnn, gpt2-mini, gpt2-42m)" >&2; exit 2 ;;
  esac
  for stage in $STAGES; do
    modes=none,cpu,nvme
    # At stage 3 the NVMe modes run twice: with the optimizer update during
    # backward or at the forward's gathers (the defaults) and kept in the
    # step ("-instep"); cpu-params keeps the optimizer state in memory and
    # puts the parameter shards on NVMe; nvme-params-fifo turns the I/O
    # engine's priorities off (every transfer in submission order);
    # nvme-params-unfixed leaves the swap buffers unregistered with io_uring
    # (every transfer pins its pages itself).
    [ "$stage" = 3 ] &&
      modes=none,cpu,nvme,nvme-params,cpu-params,nvme-instep,nvme-params-instep,cpu-params-instep,nvme-params-fifo,nvme-params-unfixed
    echo "== $model, stage $stage =="
    "$BUILD_DIR"/bin/zt launch --nproc-per-node "$NPROC" -- "$BUILD_DIR"/bin/zt_bench_offload "${ARGS[@]}" \
      --stage "$stage" --modes "$modes" --rounds "$ROUNDS" --nvme-path "$NVME_PATH" \
      --json "$BUILD_DIR/offload_${model}_stage$stage.json"
    # The 42.8M model once more, the four placements alive at once and taking
    # turns of 3 timed steps (one untimed step before and after each turn):
    # this VM's speed drifts by 10-20% over tens of seconds, which a mode
    # run in one block takes in full; "x none" is paired per turn, "quiet x"
    # counts only the steps the hypervisor stole no CPU from.
    if [ "$model" = gpt2-42m ] && [ "$stage" = 3 ] && [ "${PAIRED:-1}" = 1 ]; then
      echo "== $model, stage $stage, interleaved =="
      # A flag given twice takes its last value: --steps 3 overrides ARGS's.
      "$BUILD_DIR"/bin/zt launch --nproc-per-node "$NPROC" -- "$BUILD_DIR"/bin/zt_bench_offload "${ARGS[@]}" \
        --steps 3 --stage 3 --modes none,cpu,nvme,nvme-params --interleave --rounds "${PAIRED_ROUNDS:-6}" \
        --nvme-path "$NVME_PATH" --json "$BUILD_DIR/offload_${model}_stage3_interleaved.json"
    fi
  done
done
