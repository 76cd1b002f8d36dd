#!/usr/bin/env bash
# The benchmark suite: builds, runs the named benchmarks (all by default), and
# rewrites their blocks in docs/benchmarks.md (tables, machine, commands,
# summary) and the SVG charts in docs/bench/. Raw output, per benchmark:
# $BUILD_DIR/bench/NAME.txt (what it printed), NAME.json (its RESULT rows and
# summary), NAME.err (stderr). Every number is a ratio measured in the same
# run; the whole suite takes about 17 minutes on a 2-core machine.
#
#   scripts/bench.sh                  # everything
#   scripts/bench.sh zero_stages nvme # some
#   scripts/bench.sh --list           # the names
#   scripts/bench.sh multihost        # 2 network-namespace hosts (root only; not in the default run)
#
# Environment: ZT_BUILD_DIR (default build), PYTHON (Debian's python3-torch,
# for the DDP baseline). The disk benchmarks write under /tmp.
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD_DIR=${ZT_BUILD_DIR:-build}
BIN=$BUILD_DIR/bin
OUT=$BUILD_DIR/bench
ALL=(collectives local_comm optimizer zero_stages activation_checkpoint generate checkpoint async_save memory_copies nvme offload)

# The command of each benchmark, as the document shows it.
command_of() {
  case "$1" in
    collectives) echo "$BIN/zt launch --nproc-per-node 2 -- $BIN/zt_bench_collectives --max-bytes 67108864" ;;
    local_comm) echo "$BIN/zt_bench_local_comm --steps 10 --warmup 3 --rounds 3" ;;
    optimizer) echo "$BIN/zt_bench_optimizer --benchmark_repetitions=3 --benchmark_report_aggregates_only=true" ;;
    zero_stages) echo "WORLDS='1 2 3 4' ROUNDS=2 benchmarks/run_zero_stages.sh --global-batch 48 --stages torch,0,1,2,3,3-no-prefetch" ;;
    activation_checkpoint) echo "$BIN/zt_bench_activation_checkpoint --seq-lens 64,256,512 --rounds 2" ;;
    generate) echo "$BIN/zt_bench_generate --rounds 3" ;;
    checkpoint) echo "$BIN/zt_bench_checkpoint --rounds 2" ;;
    async_save) echo "$BIN/zt_bench_async_save --saves 4" ;;
    memory_copies) echo "$BIN/zt_bench_memory_copies --loads 6" ;;
    nvme) echo "$BIN/zt_bench_nvme --rounds 7 --no-sweep" ;;
    offload) echo "ROUNDS=1 STAGES=3 benchmarks/run_offload.sh" ;;
    # Needs root (network namespaces): not in the default list.
    multihost) echo "$BIN/zt_bench_multihost --ranks-per-host 1,2 --steps 6 --rate 1gbit --precisions fp32,bf16" ;;
    *) return 1 ;;
  esac
}

# Extra logs whose RESULT lines belong to the benchmark (besides its stdout).
logs_of() {
  case "$1" in
    zero_stages) echo "$BUILD_DIR/zero_stages_bench.log" ;;
    *) echo "" ;;
  esac
}

if [ "${1:-}" = "--list" ]; then
  printf '%s\n' "${ALL[@]}" multihost
  exit 0
fi
names=("$@")
[ ${#names[@]} -eq 0 ] && names=("${ALL[@]}")
for n in "${names[@]}"; do
  if ! command_of "$n" >/dev/null; then
    echo "scripts/bench.sh: unknown benchmark '$n'; the names are: ${ALL[*]}" >&2
    exit 2
  fi
done

# A configured build tree (scripts/setup.sh makes one) with the benchmarks.
if [ ! -f "$BUILD_DIR/CMakeCache.txt" ]; then
  echo "scripts/bench.sh: no build in $BUILD_DIR; run scripts/setup.sh first (or set ZT_BUILD_DIR)" >&2
  exit 2
fi
cmake --build "$BUILD_DIR" --target zt zt_bench_report zt_bench_collectives zt_bench_local_comm zt_bench_optimizer \
  zt_bench_zero_stages zt_bench_activation_checkpoint zt_bench_generate zt_bench_checkpoint zt_bench_async_save zt_bench_memory_copies zt_bench_nvme zt_bench_offload \
  zt_bench_multihost >/dev/null
mkdir -p "$OUT"

commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
if ! git diff --quiet HEAD 2>/dev/null; then commit="$commit+changes"; fi
suite_start=$(date +%s)
failed=()
for n in "${names[@]}"; do
  cmd=$(command_of "$n")
  echo "== $n: $cmd" >&2
  start=$(date +%s)
  # Each benchmark runs alone: nothing else of ours competes for the 2 cores.
  if ! bash -c "$cmd" >"$OUT/$n.txt" 2>"$OUT/$n.err"; then
    echo "scripts/bench.sh: $n failed; last lines of $OUT/$n.err:" >&2
    tail -n 15 "$OUT/$n.err" >&2
    failed+=("$n")
    continue
  fi
  seconds=$(($(date +%s) - start))
  # shellcheck disable=SC2046
  if ! "$BIN/zt_bench_report" collect "$n" --out "$OUT/$n.json" --command "$cmd" \
        --date "$(date -u '+%Y-%m-%d %H:%M UTC')" --commit "$commit" --seconds "$seconds" \
        $(logs_of "$n") "$OUT/$n.txt"; then
    failed+=("$n")
    continue
  fi
  grep -h '^\(\[rank 0\] \)\?SUMMARY: ' "$OUT/$n.txt" | tail -n 1 | sed "s/^/$n (${seconds} s): /" >&2
done

ok=()
for n in "${names[@]}"; do
  [[ " ${failed[*]} " == *" $n "* ]] || ok+=("$n")
done
if [ ${#ok[@]} -gt 0 ]; then
  # The table at the top only when the whole suite ran and passed.
  suite=()
  [ $# -eq 0 ] && [ ${#failed[@]} -eq 0 ] && suite=(--suite)
  "$BIN/zt_bench_report" render --doc docs/benchmarks.md --results "$OUT" --charts bench "${suite[@]}" "${ok[@]}"
  echo "docs/benchmarks.md: rewrote ${ok[*]} ($(($(date +%s) - suite_start)) s in all)" >&2
fi
if [ ${#failed[@]} -gt 0 ]; then
  echo "scripts/bench.sh: failed: ${failed[*]} (their blocks keep the previous results)" >&2
  exit 1
fi
