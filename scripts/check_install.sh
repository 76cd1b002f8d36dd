#!/usr/bin/env bash
# Installs the built zerotorch into a temporary prefix, builds the outside
# example projects examples/minimal and examples/bert_classifier against that
# prefix only (their own CMakeLists.txt: find_package(zerotorch)), and runs
# each on 2 ranks under the installed `zt launch` for a few steps. What a user of the library does;
# scripts/test.sh runs it after the test suites.
#
# Environment: ZT_BUILD_DIR (default build), ZT_INSTALL_CHECK_DIR (default: a
# fresh temporary folder, removed afterwards).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
BUILD_DIR=${ZT_BUILD_DIR:-build}
WORK=${ZT_INSTALL_CHECK_DIR:-$(mktemp -d /tmp/zt_install_check.XXXXXX)}
if [ -z "${ZT_INSTALL_CHECK_DIR:-}" ]; then trap 'rm -rf "$WORK"' EXIT; fi
mkdir -p "$WORK"
PREFIX=$WORK/prefix

# step NAME COMMAND...: runs COMMAND with its output in $WORK/NAME.log, shown
# when it fails.
step() {
  local name=$1
  shift
  if ! "$@" > "$WORK/$name.log" 2>&1; then
    echo "install check: $name failed ($*):"
    tail -40 "$WORK/$name.log"
    exit 1
  fi
}

start=$(date +%s)
step install cmake --install "$BUILD_DIR" --prefix "$PREFIX"
echo "install check: installed $(find "$PREFIX/include" -name '*.h' | wc -l) headers and $(find "$PREFIX/lib" -name '*.a' | wc -l) libraries into $PREFIX"
# The installed zt runs its own commands (estimate; train's help and checks)
# and finds zt-torch (libexec) to run a training job.
step zt_estimate "$PREFIX/bin/zt" estimate --model gpt2-tiny --world-size 2
grep -q "gpt2-tiny" "$WORK/zt_estimate.log"
step zt_train_help "$PREFIX/bin/zt" train --help
grep -q "usage: zt train" "$WORK/zt_train_help.log"
OMP_NUM_THREADS=1 step zt_train "$PREFIX/bin/zt" train --model gpt2-tiny --steps 2 --nproc 2 --no-progress \
  --output-dir "$WORK/train" --save-dir none --export none --report none
grep -q "^done: 2 steps" "$WORK/zt_train.log"
# Only the installed copy may be visible: no source tree, no build tree.
cp -r "$ROOT/examples/minimal" "$WORK/minimal"
step configure cmake -S "$WORK/minimal" -B "$WORK/minimal/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$PREFIX"
step build cmake --build "$WORK/minimal/build" -j "${ZT_JOBS:-$(nproc)}"
cd "$WORK/minimal"
OMP_NUM_THREADS=1 "$PREFIX/bin/zt" launch --nproc-per-node 2 -- ./build/minimal ds_config.json 20 | tee "$WORK/run.log"
grep -q "^\[zt r0\] minimal: 20 steps at ZeRO stage 3 on 2 ranks" "$WORK/run.log" \
  || grep -q "minimal: 20 steps at ZeRO stage 3 on 2 ranks" "$WORK/run.log"
test -f minimal_checkpoints/latest

# The pieces around the loop (sampler, csv monitor, PEFT adapter config,
# export) from the installed headers and libraries, on the checkpoint the
# minimal example just wrote.
cp -r "$ROOT/examples/tools" "$WORK/tools"
step configure_tools cmake -S "$WORK/tools" -B "$WORK/tools/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$PREFIX"
step build_tools cmake --build "$WORK/tools/build" -j "${ZT_JOBS:-$(nproc)}"
step run_tools "$WORK/tools/build/tools" "$WORK/tools/out" "$WORK/minimal/minimal_checkpoints"
grep -q "^tools: OK" "$WORK/run_tools.log"
test -f "$WORK/tools/out/tools/Train_Samples_train_loss.csv"
test -f "$WORK/tools/out/adapter_config.json"
test -f "$WORK/tools/out/model.safetensors"

# The larger example: a user's BERT-style classifier at stage 3, trained,
# evaluated across ranks, saved and exported.
cp -r "$ROOT/examples/bert_classifier" "$WORK/bert_classifier"
step configure_bert cmake -S "$WORK/bert_classifier" -B "$WORK/bert_classifier/build" -G Ninja \
  -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$PREFIX"
step build_bert cmake --build "$WORK/bert_classifier/build" -j "${ZT_JOBS:-$(nproc)}"
cd "$WORK/bert_classifier"
OMP_NUM_THREADS=1 "$PREFIX/bin/zt" launch --nproc-per-node 2 -- ./build/bert_classifier --steps 20 --out run \
  | tee "$WORK/run_bert.log"
grep -q "bert_classifier: 20 steps at ZeRO stage 3 on 2 ranks" "$WORK/run_bert.log"
test -f run/model.safetensors
echo "install check: OK in $(( $(date +%s) - start )) s (install; examples/minimal and examples/bert_classifier built against it and run for 20 steps on 2 ranks; examples/tools built and run)"
