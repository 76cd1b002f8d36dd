#!/usr/bin/env bash
# The main job on built-in defaults: set up, build, then `zt train` with no
# arguments -- a small GPT-2 on Debian's fortunes corpus, ZeRO stage 3 on 2
# ranks, 200 steps -- which saves a checkpoint, exports consolidated weights
# and writes a report under runs/gpt2-mini/.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
BUILD_DIR=${ZT_BUILD_DIR:-build}
"$BUILD_DIR"/bin/zt train "$@"
