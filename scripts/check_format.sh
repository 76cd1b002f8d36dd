#!/usr/bin/env bash
# Every tracked C++ file (.h, .cc) as clang-format leaves it (.clang-format:
# Google style at 120 columns, clang-format 14 as Debian bookworm ships it).
# Prints the files that differ and exits 1; `clang-format -i <file>` mends
# one. A block that must keep a hand layout (an aligned table) is wrapped in
# `// clang-format off` / `// clang-format on`.
# Usage: scripts/check_format.sh   ($CLANG_FORMAT picks the binary; about 10 s)
set -euo pipefail
cd "$(dirname "$0")/.."
FORMAT=${CLANG_FORMAT:-clang-format}
if ! command -v "$FORMAT" >/dev/null; then
  echo "check_format: $FORMAT not found (apt-get install clang-format, or set CLANG_FORMAT)" >&2
  exit 2
fi
bad=()
while IFS= read -r -d '' f; do
  if ! "$FORMAT" --dry-run -Werror "$f" >/dev/null 2>&1; then bad+=("$f"); fi
done < <(git ls-files -z -- '*.h' '*.cc')
if ((${#bad[@]})); then
  echo "check_format: ${#bad[@]} file(s) differ from clang-format ($("$FORMAT" --version | sed 's/.*version //')):" >&2
  printf '  clang-format -i %s\n' "${bad[@]}" >&2
  exit 1
fi
echo "check_format: $(git ls-files -- '*.h' '*.cc' | wc -l) files as clang-format leaves them"
