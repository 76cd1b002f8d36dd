#!/usr/bin/env bash
# Builds the communication, ZeRO and offload suites with a sanitizer into
# build-<sanitizer>/ and runs them (the parts where threads, sockets, raw
# buffers and io_uring meet). Usage: scripts/sanitize.sh [address|undefined] [ctest args]
# Default: address (AddressSanitizer). LibTorch itself is not instrumented.
set -euo pipefail
cd "$(dirname "$0")/.."
SAN=${1:-address}
shift || true
scripts/setup.sh >/dev/null
DIR=build-$SAN
if [ ! -f "$DIR/build.ninja" ]; then
  cmake -S . -B "$DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DZT_SANITIZE="$SAN" -DZT_BUILD_BENCHMARKS=OFF
fi
# The suites' binaries (their names start with the label) and what they run.
targets=$(cmake --build "$DIR" --target help | sed -n 's/^\(\(comm\|zero\|offload\)_[a-z0-9_]*_test\):.*/\1/p' | sort -u)
cmake --build "$DIR" -j "${ZT_JOBS:-$(nproc)}" --target zt $targets
cd "$DIR"
ctest --output-on-failure --timeout 900 -j "${ZT_TEST_JOBS:-2}" -L 'comm|zero|offload' "$@"
