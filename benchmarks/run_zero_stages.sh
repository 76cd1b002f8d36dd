#!/usr/bin/env bash
# ZeRO stages 0-3 against PyTorch DDP, alternated on one machine: for each
# world size, ROUNDS x (zt_bench_zero_stages, then ddp_baseline.py), then a
# table of medians over the rounds. The stage-3 runs: 3 (prefetch), 3-no-prefetch,
# 3-reuse (DeepSpeed's default reuse distance; see zero_stages_bench.cc). Ratios are taken within a round first
# (stage k / stage 0 of the same process; zt / DDP of adjacent runs), so slow
# drift in machine load cancels.
#
#   benchmarks/run_zero_stages.sh [shared flags: --width --depth --global-batch --warmup --steps
#                                  --bucket-numel --lr --seed] [zt only: --stages --prefetch-numel]
#   Environment: WORLDS (default "2 4"), ROUNDS (default 5), ZT_BUILD_DIR (default build),
#                PYTHON (default /usr/bin/python3, Debian's python3-torch).
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD_DIR=${ZT_BUILD_DIR:-build}
WORLDS=${WORLDS:-"2 4"}
ROUNDS=${ROUNDS:-5}
PYTHON=${PYTHON:-/usr/bin/python3}
LOG=${BUILD_DIR}/zero_stages_bench.log

if ! "$PYTHON" -c 'import torch.distributed as d; assert d.is_gloo_available()' 2>/dev/null; then
  echo "run_zero_stages.sh: $PYTHON cannot import torch with Gloo; install python3-torch (scripts/setup.sh)" \
       "or set PYTHON to an interpreter that has it" >&2
  exit 2
fi
cmake --build "$BUILD_DIR" --target zt zt_bench_zero_stages >/dev/null

# The DDP baseline takes the shared flags only.
ddp_args=()
skip=0
for a in "$@"; do
  if ((skip)); then skip=0; continue; fi
  case "$a" in
    --stages|--prefetch-numel) skip=1 ;;
    --stages=*|--prefetch-numel=*) ;;
    *) ddp_args+=("$a") ;;
  esac
done

echo "date: $(date -u '+%Y-%m-%d %H:%M UTC') | commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)" \
     "| load average: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "flags: ${*:-(defaults)} | worlds: $WORLDS | rounds: $ROUNDS | raw output: $LOG"
: >"$LOG"

for world in $WORLDS; do
  for round in $(seq 1 "$ROUNDS"); do
    for impl in zt ddp; do
      if [ "$impl" = zt ]; then
        cmd=("$BUILD_DIR/bin/zt_bench_zero_stages" "$@")
      else
        cmd=("$PYTHON" benchmarks/ddp_baseline.py "${ddp_args[@]}")
      fi
      echo "### world=$world round=$round impl=$impl" >>"$LOG"
      # zt launch sets OMP_NUM_THREADS = max(1, cores / world) for both programs.
      if ! "$BUILD_DIR/bin/zt" launch --nproc-per-node "$world" --timeout 900 -- "${cmd[@]}" >>"$LOG" 2>&1; then
        echo "run_zero_stages.sh: world $world round $round: $impl failed; the last lines of $LOG:" >&2
        tail -n 20 "$LOG" >&2
        exit 1
      fi
      echo "world $world round $round: $impl done" >&2
    done
  done
done

# What the ranks ran on (printed by rank 0 of the first run of each program).
grep -m1 -o 'cpu: .*' "$LOG" || true
grep -m1 -o 'ddp: torch .*' "$LOG" || true
echo
echo "Model and batch:"
grep -m1 -o 'model: .*' "$LOG" || true
echo

echo "Legend. bwd ms: Engine::Backward incl. waiting for the gradient reduction; opt ms: Engine::Step (optimizer +"
echo "  parameter all-gather). peak: LibTorch CPU bytes at the peak of the timed steps minus those before the"
echo "  model existed (largest rank). gathered: stage 3's most full-layer MiB at once. x paper: bytes this"
echo "  rank sent per step / (2Ψ(N-1)/N for stages 0-2, 3Ψ(N-1)/N for stage 3, x dtype bytes), Ψ = parameters"
echo "  (unpadded): an all-reduce (or reduce-scatter + all-gather), plus stage 3's second all-gather."
echo

# RESULT lines -> medians. Keys: world, round, impl/stage.
awk -v world_list="$WORLDS" '
function median(list,    n, a, i, j, t) {
  n = split(list, a, " ")
  for (i = 2; i <= n; i++) { t = a[i] + 0; for (j = i - 1; j >= 1 && a[j] + 0 > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
  if (n == 0) return -1
  return (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
function add(key, v) { vals[key] = (key in vals) ? vals[key] " " v : v }
/^### world=/ { split($2, w, "="); split($3, r, "="); world = w[2]; round = r[2] }
/RESULT / {
  line = substr($0, index($0, "RESULT ") + 7)
  n = split(line, kv, " ")
  delete f
  for (i = 1; i <= n; i++) { split(kv[i], p, "="); f[p[1]] = p[2] }
  id = f["impl"] == "ddp" ? "ddp" : "zt" f["stage"]
  if (id != "ddp" && !(id in run_seen)) { run_seen[id] = 1; run_order[++nruns] = f["stage"] }
  worlds[world] = 1
  for (k in f) v[world, round, id, k] = f[k]
  seen[world, round, id] = 1
  rounds[world, round] = 1
}
END {
  nw = split(world_list, wl, " ")
  for (wi = 1; wi <= nw; wi++) {
    world = wl[wi]
    if (!(world in worlds)) continue
    printf "world %s (medians over rounds; x st0 = median of per-round ratios to stage 0)\n", world
    printf "%-13s %8s %6s %7s %7s %9s %6s %19s %9s %9s %7s %10s\n", "run", "step ms", "x st0", "bwd ms", "opt ms",
           "peak MiB", "x st0", "states/formula MiB", "gathered", "sent MiB", "x paper", "samples/s"
    for (ri = 1; ri <= nruns; ri++) {
      s = run_order[ri]
      id = "zt" s
      delete acc
      for (key in rounds) {
        split(key, kr, SUBSEP); if (kr[1] != world) continue; rd = kr[2]
        if (!((world, rd, id) in seen)) continue
        acc["ms"] = acc["ms"] " " v[world, rd, id, "step_ms"]
        acc["bwd"] = acc["bwd"] " " v[world, rd, id, "bwd_ms"]
        acc["opt"] = acc["opt"] " " v[world, rd, id, "opt_ms"]
        acc["peak"] = acc["peak"] " " v[world, rd, id, "peak_mib"]
        acc["sent"] = acc["sent"] " " v[world, rd, id, "sent_mib"]
        acc["sps"] = acc["sps"] " " v[world, rd, id, "samples_per_s"]
        if (v[world, rd, id, "ideal_mib"] > 0)
          acc["bratio"] = acc["bratio"] " " (v[world, rd, id, "sent_mib"] / v[world, rd, id, "ideal_mib"])
        states = v[world, rd, id, "model_state_mib"]; formula = v[world, rd, id, "formula_mib"]
        gathered = (s ~ /^3/) ? sprintf("%.1f", v[world, rd, id, "gathered_mib"]) : "-"
        if ((world, rd, "zt0") in seen) {
          acc["msr"] = acc["msr"] " " (v[world, rd, id, "step_ms"] / v[world, rd, "zt0", "step_ms"])
          acc["peakr"] = acc["peakr"] " " (v[world, rd, id, "peak_mib"] / v[world, rd, "zt0", "peak_mib"])
        }
      }
      if (acc["ms"] == "") continue
      msr_med[world, s] = median(acc["msr"]); st_mib[world, s] = states; fo_mib[world, s] = formula
      if (acc["bratio"] != "") paper[world, s] = median(acc["bratio"])
      bratio = acc["bratio"] == "" ? "-" : sprintf("%.2f", median(acc["bratio"]))
      printf "%-13s %8.1f %6.2f %7.1f %7.1f %9.1f %6.2f %8.1f / %8.1f %9s %9.2f %7s %10.1f\n", s, median(acc["ms"]),
             median(acc["msr"]), median(acc["bwd"]), median(acc["opt"]), median(acc["peak"]), median(acc["peakr"]),
             states, formula, gathered, median(acc["sent"]), bratio, median(acc["sps"])
    }
    delete acc
    for (key in rounds) {
      split(key, kr, SUBSEP); if (kr[1] != world) continue; rd = kr[2]
      if (!((world, rd, "ddp") in seen)) continue
      acc["ddp"] = acc["ddp"] " " v[world, rd, "ddp", "samples_per_s"]
      acc["dms"] = acc["dms"] " " v[world, rd, "ddp", "step_ms"]
      acc["dbwd"] = acc["dbwd"] " " v[world, rd, "ddp", "bwd_ms"]
      acc["dopt"] = acc["dopt"] " " v[world, rd, "ddp", "opt_ms"]
      ddp_loss = v[world, rd, "ddp", "final_loss"]; zt_loss = v[world, rd, "zt0", "final_loss"]
      if ((world, rd, "zt0") in seen) {
        acc["rel"] = acc["rel"] " " (v[world, rd, "zt0", "samples_per_s"] / v[world, rd, "ddp", "samples_per_s"])
      }
    }
    if (acc["ddp"] != "") {
      printf "%-13s %8.1f %6s %7.1f %7.1f %9s %6s %19s %9s %9s %7s %10.1f\n", "DDP", median(acc["dms"]), "",
             median(acc["dbwd"]), median(acc["dopt"]), "", "", "", "", "", "", median(acc["ddp"])
      ddp_rel[world] = median(acc["rel"])
      printf "zt stage 0 throughput / DDP throughput: %.2f (median of the per-round ratios:%s)\n", median(acc["rel"]),
             acc["rel"]
      printf "same training, same result: final loss after the last step: zt stage 0 %s, DDP %s\n", zt_loss, ddp_loss
    }
    printf "\n"
  }
  # One line for the suite: the largest world first (memory, traffic, time),
  # then zt vs DDP per world and, at world 1, vs plain LibTorch.
  top = ""
  for (wi = 1; wi <= nw; wi++) if (wl[wi] in worlds) top = wl[wi]
  if (top == "") exit
  line = sprintf("world %s: model states per rank", top)
  worst = 0
  for (ri = 1; ri <= nruns; ri++) {
    s = run_order[ri]
    if (!((top, s) in st_mib) || s == "torch") continue
    if (s == "1" || s == "2" || s == "3") line = line sprintf(" st%s %.2fx", s, st_mib[top, s] / st_mib[top, "0"])
    dev = st_mib[top, s] / fo_mib[top, s] - 1; if (dev < 0) dev = -dev; if (dev > worst) worst = dev
  }
  line = line sprintf(" of stage 0 (within %.1f%% of the ZeRO formulas); step time", 100 * worst)
  for (ri = 1; ri <= nruns; ri++) {
    s = run_order[ri]
    if ((top, s) in msr_med && s != "0" && s != "torch") line = line sprintf(" %s %.2fx", s, msr_med[top, s])
  }
  line = line " of stage 0; sent/paper"
  for (ri = 1; ri <= nruns; ri++) {
    s = run_order[ri]
    if ((top, s) in paper && s != "torch") line = line sprintf(" %s %.2f", s, paper[top, s])
  }
  sep = "; zt stage 0 throughput / DDP:"
  for (wi = 1; wi <= nw; wi++) {
    if (wl[wi] in ddp_rel) { line = line sprintf("%s %.2f (world %s)", sep, ddp_rel[wl[wi]], wl[wi]); sep = "," }
  }
  for (wi = 1; wi <= nw; wi++) {
    if ((wl[wi], "torch") in msr_med && wl[wi] == 1)
      line = line sprintf("; single rank: plain LibTorch takes %.2fx our stage-0 step", msr_med[1, "torch"])
  }
  print "SUMMARY: " line
}' "$LOG"
