#!/usr/bin/env bash
# Clang's static thread-safety analysis (-Wthread-safety) over the translation
# units whose locking is annotated (absl/base/thread_annotations.h:
# ABSL_GUARDED_BY, ABSL_EXCLUSIVE_LOCKS_REQUIRED, ...). GCC, which builds the
# project, ignores the annotations; this is what checks that a member marked
# ABSL_GUARDED_BY(mu_) is only touched with mu_ held, that a ...Locked
# function is only called with its lock held, and that a function marked
# ABSL_LOCKS_EXCLUDED is not called with it held.
#
# Usage: scripts/thread_safety.sh [source files...]
# Reads ${ZT_BUILD_DIR:-build}/compile_commands.json (configure the build
# first; it needs no compiled objects). Without arguments it checks every
# source file listed there that carries an annotation, itself, in its
# header (foo.cc with foo.h) or in a "..._internal.h" header of its own
# folder that it includes (one that several sources of a folder share and
# whose locks they take: offload/io_engine.cc with io_engine_internal.h).
# Each file is parsed (-fsyntax-only) with the build's flags minus what
# only GCC takes: the precompiled header (-include .../cmake_pch.hxx),
# -Winvalid-pch, and any other flag clang rejects (probed once per flag).
# Plain -Werror is dropped too, so a warning clang has and GCC does not is
# printed but does not fail the check; only -Werror=thread-safety does.
# $CLANGXX picks the compiler (default clang++). Exit status: 0 clean,
# 1 a finding (or a file clang cannot parse), 2 nothing to run.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${ZT_BUILD_DIR:-build}
CLANG=${CLANGXX:-clang++}
DB=$BUILD_DIR/compile_commands.json
if ! command -v "$CLANG" >/dev/null; then
  echo "thread_safety: $CLANG not found (install clang, or set CLANGXX)" >&2
  exit 2
fi
if [ ! -f "$DB" ]; then
  echo "thread_safety: $DB not found; configure first (cmake -S . -B $BUILD_DIR -G Ninja)" >&2
  exit 2
fi

exec python3 - "$DB" "$CLANG" "$@" <<'PY'
import json, os, re, shlex, subprocess, sys, time

db_path, clang, wanted = sys.argv[1], sys.argv[2], sys.argv[3:]
root = os.getcwd()
ANNOTATION = re.compile(r"\bABSL_(GUARDED_BY|PT_GUARDED_BY|EXCLUSIVE_LOCKS_REQUIRED|SHARED_LOCKS_REQUIRED|"
                        r"LOCKS_EXCLUDED|ACQUIRED_AFTER|ACQUIRED_BEFORE)\(")
INTERNAL_INCLUDE = re.compile(r'^\s*#\s*include "([^"]+_internal\.h)"', re.M)


def annotated(path):
    text = open(path, encoding="utf-8", errors="replace").read() if os.path.isfile(path) else ""
    # Only a folder's own internal headers: a test including one is not checked for it.
    internal = [os.path.join(root, h) for h in INTERNAL_INCLUDE.findall(text)]
    headers = [os.path.splitext(path)[0] + ".h"] + [h for h in internal if os.path.dirname(h) == os.path.dirname(path)]
    if ANNOTATION.search(text):
        return True
    for f in headers:
        if os.path.isfile(f) and ANNOTATION.search(open(f, encoding="utf-8", errors="replace").read()):
            return True
    return False


UNITY_INCLUDE = re.compile(r'^#include "([^"]+)"', re.M)
entries = {}
for e in json.load(open(db_path)):
    f = os.path.realpath(os.path.join(e["directory"], e["file"]))
    # A unity batch (ZT_UNITY_BUILD) stands for the sources it includes:
    # each is checked on its own, with the batch's flags.
    if "/Unity/unity_" in f and os.path.isfile(f):
        for src in UNITY_INCLUDE.findall(open(f, encoding="utf-8").read()):
            entries.setdefault(os.path.realpath(os.path.join(os.path.dirname(f), src)), e)
        continue
    entries.setdefault(f, e)  # a file built into several targets: its first entry

if wanted:
    files = []
    for w in wanted:
        f = os.path.realpath(w)
        if f not in entries:
            sys.exit(f"thread_safety: {w} is not in {db_path}")
        files.append(f)
else:
    files = sorted(f for f in entries
                   if f.startswith(root + os.sep) and not f.startswith(os.path.realpath(os.path.dirname(db_path)))
                   and annotated(f))
if not files:
    print("thread_safety: no annotated translation units found", file=sys.stderr)
    sys.exit(2)

probed = {}


def clang_takes(flag):
    """Whether clang accepts `flag` without an error or an unknown-option warning."""
    if flag not in probed:
        r = subprocess.run([clang, "-fsyntax-only", "-x", "c++", "-Werror", flag, "-"], input=b"",
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        probed[flag] = r.returncode == 0
    return probed[flag]


def clang_args(e, path):
    args = e["arguments"] if "arguments" in e else shlex.split(e["command"])
    out, i = [], 1  # args[0] is the build's compiler
    own = os.path.realpath(os.path.join(e["directory"], e["file"]))  # `path`, or the unity batch holding it
    while i < len(args):
        a = args[i]
        if a in ("-o", "-MF", "-MT", "-MQ"):  # outputs
            i += 2
            continue
        if a == "-include" and i + 1 < len(args) and args[i + 1].endswith("cmake_pch.hxx"):
            i += 2  # GCC's precompiled header
            continue
        if a in ("-c", "-Werror", "-Winvalid-pch", "-MD", "-MMD") or os.path.realpath(
                os.path.join(e["directory"], a)) in (path, own):
            i += 1
            continue
        if a in ("-I", "-isystem", "-include", "-D", "-U", "-iquote", "-x"):  # flag with a separate value
            out += [a, args[i + 1]]
            i += 2
            continue
        if a.startswith("-") and not a.startswith(("-D", "-U", "-I")) and not clang_takes(a):
            i += 1  # GCC-only
            continue
        out.append(a)
        i += 1
    return [clang] + out + ["-fsyntax-only", "-Wthread-safety", "-Werror=thread-safety", path]


failed = []
start = time.monotonic()
for f in files:
    e = entries[f]
    t0 = time.monotonic()
    r = subprocess.run(clang_args(e, f), cwd=e["directory"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True)
    name = os.path.relpath(f, root)
    status = "ok" if r.returncode == 0 else "FAILED"
    print(f"thread_safety: {name}: {status} ({time.monotonic() - t0:.1f} s)", flush=True)
    if r.stdout:
        print(r.stdout, end="", flush=True)
    if r.returncode != 0:
        failed.append(name)
elapsed = time.monotonic() - start
print(f"thread_safety: {len(files) - len(failed)} of {len(files)} files clean in {elapsed:.0f} s", flush=True)
if failed:
    print("thread_safety: findings in " + ", ".join(failed), file=sys.stderr)
    sys.exit(1)
PY
