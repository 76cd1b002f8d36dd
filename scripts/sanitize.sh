#!/usr/bin/env bash
# Builds the project with a sanitizer into build-<sanitizer>/ and runs tests
# under it. Usage: scripts/sanitize.sh [address|undefined|address,undefined|thread] [ctest args]
# Default: address (AddressSanitizer). LibTorch itself is not instrumented.
# ZT_SANITIZE_LABELS picks the suites: by default the communication, ZeRO
# and offload suites (where threads, sockets, raw buffers and io_uring meet;
# what CI runs); "all" builds and runs the whole suite.
set -euo pipefail
cd "$(dirname "$0")/.."
SAN=${1:-address}
shift || true
LABELS=${ZT_SANITIZE_LABELS:-comm|zero|offload}
scripts/setup.sh >/dev/null
DIR=build-${SAN/,/-}
if [ ! -f "$DIR/build.ninja" ]; then
  cmake -S . -B "$DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DZT_SANITIZE="$SAN" -DZT_BUILD_BENCHMARKS=OFF
fi
if [ "$LABELS" = all ]; then
  cmake --build "$DIR" -j "${ZT_JOBS:-$(nproc)}"
  select_args=()
else
  # The suites' binaries (their names start with the label). Not
  # comm_launcher_test and comm_node_rounds_test: they run the built
  # `zt launch`, and `zt` needs the
  # whole tree (models, data, training) built under the sanitizer too, about
  # a third more to compile; it runs in the plain pass, and
  # ZT_SANITIZE_LABELS=all covers it here.
  targets=$(cmake --build "$DIR" --target help |
            sed -n "s/^\(\(${LABELS//|/\\|}\)_[a-z0-9_]*_test\):.*/\1/p" | grep -vxE 'comm_launcher_test|comm_node_rounds_test' | sort -u)
  cmake --build "$DIR" -j "${ZT_JOBS:-$(nproc)}" --target $targets
  # Exactly those binaries' entries (a label alone would also pick, say,
  # engine_offload_test, which is not built here).
  select_args=(-R "^($(echo $targets | tr ' ' '|'))(\.shard[0-9]+)?\$")
fi
cd "$DIR"
ctest --output-on-failure --timeout 1800 -j "${ZT_TEST_JOBS:-2}" "${select_args[@]}" "$@"
