#!/usr/bin/env bash
# Set up, build and run every test; prints the ctest summary.
# Extra arguments go to ctest (e.g. scripts/test.sh -R config).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
BUILD_DIR=${ZT_BUILD_DIR:-build}
cd "$BUILD_DIR"
ctest --output-on-failure --timeout 900 -j "${ZT_TEST_JOBS:-2}" "$@"
