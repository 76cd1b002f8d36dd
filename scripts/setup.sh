#!/usr/bin/env bash
# Installs what zerotorch needs on Debian bookworm (as root, or with sudo
# available), then configures and builds into build/. Idempotent: when every
# package is present it skips apt entirely, and the build is incremental.
#
# Environment: ZT_BUILD_DIR (default build), ZT_BUILD_TYPE (RelWithDebInfo),
#              ZT_CMAKE_ARGS (extra cmake arguments), ZT_JOBS (default nproc).
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config git
  clang                 # scripts/thread_safety.sh: clang's -Wthread-safety on the annotated locks
  clang-format          # scripts/check_format.sh: the tree as clang-format leaves it
  libclang-rt-14-dev    # libFuzzer and the sanitizer runtimes for clang (scripts/fuzz.sh)
  lld                   # links the LibTorch-sized binaries ~4x faster than GNU ld (cmake/ZtLinker.cmake)
  libtorch-dev libgloo-dev liburing-dev libabsl-dev nlohmann-json3-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libopenblas0-openmp   # LibTorch calls libblas.so.3; OpenBLAS is ~8x faster than the reference BLAS
  python3-torch         # only for the DDP baseline (benchmarks/ddp_baseline.py) and interop tests
  zlib1g-dev            # gzip-compressed IDX files (data/idx.cc)
  libicu-dev            # Unicode properties and NFC for Hugging Face tokenizers (tokenizer/hf_tokenizer.cc)
  fortunes              # zt train's default text corpus (/usr/share/games/fortunes)
  dataset-fashion-mnist # the MNIST CNN's data (/usr/share/datasets/fashion-mnist)
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -q
  $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# OpenBLAS registers itself as the libblas.so.3 alternative; say which one is
# live and which kernel set it picks on this CPU (OPENBLAS_CORETYPE overrides
# it): rounding, and so the last digits of training results, depend on it.
blas=$(readlink -f /usr/lib/x86_64-linux-gnu/libblas.so.3 2>/dev/null || true)
core=$(python3 -c 'import ctypes
f = ctypes.CDLL("libblas.so.3").openblas_get_corename
f.restype = ctypes.c_char_p
print(f().decode())' 2>/dev/null || echo "not OpenBLAS")
echo "setup: libblas.so.3 -> ${blas:-unknown} (core: ${core}${OPENBLAS_CORETYPE:+, OPENBLAS_CORETYPE=$OPENBLAS_CORETYPE})"

BUILD_DIR=${ZT_BUILD_DIR:-build}
JOBS=${ZT_JOBS:-$(nproc)}
if [ ! -f "$BUILD_DIR/build.ninja" ]; then
  # shellcheck disable=SC2086
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE="${ZT_BUILD_TYPE:-RelWithDebInfo}" ${ZT_CMAKE_ARGS:-}
fi
cmake --build "$BUILD_DIR" -j "$JOBS"
