#!/usr/bin/env bash
# Which folders need LibTorch, read off the tree and checked. A source folder
# (one with its own CMakeLists.txt defining targets; a subfolder with its own
# is a folder of its own) is a LibTorch folder when one of its targets is
# built with zt_target_defaults(<target> TORCH); every other is LibTorch-free,
# and then none of its files may include LibTorch (<torch/...>, <ATen/...>,
# <c10/...>) or a header of a LibTorch folder, and none of its targets may
# link torch or a LibTorch folder's target. docs/architecture.md draws the
# result; this prints it and exits 1 on the first kind of breach, naming the
# file and line (or the CMakeLists.txt and target).
# Usage: scripts/check_layers.sh   (no build needed; about a second)
set -euo pipefail
cd "$(dirname "$0")/.."
exec python3 - <<'PY'
import os, re, sys

SKIP = {"tests", "benchmarks", "fuzz", "examples", "cmake", "scripts", "docs", "configs", "zerotorch"}
ADD = re.compile(r"add_(?:library|executable)\(\s*([\w-]+)")
TORCH_TARGET = re.compile(r"zt_target_defaults\(\s*([\w-]+)\s+TORCH\s*\)")
LINK = re.compile(r"target_link_libraries\(\s*([\w-]+)([^)]*)\)", re.S)
SYSTEM = re.compile(r'^\s*#\s*include\s*<(torch|ATen|c10|caffe2)/', re.M)
LOCAL = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)

folders = {}  # folder -> CMakeLists text
for top in sorted(os.listdir(".")):
    if top in SKIP or top.startswith((".", "build")) or not os.path.isdir(top):
        continue
    for d, subdirs, files in os.walk(top):
        subdirs.sort()
        if "CMakeLists.txt" in files:
            text = open(os.path.join(d, "CMakeLists.txt"), encoding="utf-8").read()
            if ADD.search(text):
                folders[d] = text

target_folder = {t: d for d, text in folders.items() for t in ADD.findall(text)}
torch_folders = {d for d, text in folders.items() if TORCH_TARGET.search(text)}


def folder_of(path):
    """The source folder a file belongs to: the deepest one above it."""
    d = os.path.dirname(path)
    while d and d not in folders:
        d = os.path.dirname(d)
    return d


breaches = []
for d in sorted(set(folders) - torch_folders):
    for name in sorted(os.listdir(d)):
        path = os.path.join(d, name)
        if not name.endswith((".h", ".cc")) or folder_of(path) != d:
            continue
        text = open(path, encoding="utf-8").read()
        for m in SYSTEM.finditer(text):
            breaches.append(f"{path}:{text.count(chr(10), 0, m.start()) + 1}: includes LibTorch ({m.group(1)}/...)")
        for m in LOCAL.finditer(text):
            owner = folder_of(m.group(1))
            if owner in torch_folders:
                breaches.append(f"{path}:{text.count(chr(10), 0, m.start()) + 1}: includes {m.group(1)} "
                                f"from the LibTorch folder {owner}/")
    for target, deps in LINK.findall(folders[d]):
        for dep in deps.split():
            if dep == "torch" or target_folder.get(dep) in torch_folders:
                where = "LibTorch" if dep == "torch" else f"{dep} (the LibTorch folder {target_folder[dep]}/)"
                breaches.append(f"{d}/CMakeLists.txt: {target} links {where}")

width = max(len(d) for d in folders) + 1
for d in sorted(folders):
    targets = ", ".join(ADD.findall(folders[d]))
    print(f"  {d + '/':<{width}} {'LibTorch     ' if d in torch_folders else 'LibTorch-free'}  {targets}")
if breaches:
    print("check_layers: a LibTorch-free folder reaches LibTorch (move the file, or the dependency):", file=sys.stderr)
    for b in breaches:
        print("  " + b, file=sys.stderr)
    sys.exit(1)
print(f"check_layers: {len(folders) - len(torch_folders)} LibTorch-free folders, {len(torch_folders)} LibTorch; "
      "no LibTorch-free file includes LibTorch or a LibTorch folder's header")
PY
