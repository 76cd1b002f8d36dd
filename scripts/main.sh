#!/usr/bin/env bash
# The main job on built-in defaults: set up, build, then run it.
# Until `zt train` exists, the main job validates every preset in configs/.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
BUILD_DIR=${ZT_BUILD_DIR:-build}
"$BUILD_DIR"/bin/zt config check configs/*.json
