#!/usr/bin/env python3
"""check_layers.py — fails when a product source includes a header from a higher layer.

The layers (shared DESIGN.md, "Layout"; docs/architecture.md) point down only:

    0 onnx/  1 ir/  2 importer/ autodiff/  3 plan/  4 exec/  5 kernels/  6 remat/
    7 train/  8 api/ include/  9 cli/

An #include "..." is resolved the way the build resolves it: relative to the including
file's folder first, then from the repository root, then from ir/ (the one extra include
folder). A file may include its own layer and any lower one, with two exceptions:
importer/ and autodiff/ are independent of each other, and the two backends
(kernels/cpu/, kernels/cuda/) share only what lies in kernels/ itself.
Run from anywhere; exit 1 lists every offending include with its file and line.
"""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LAYER = {"onnx": 0, "ir": 1, "importer": 2, "autodiff": 2, "plan": 3, "exec": 4,
         "kernels": 5, "remat": 6, "train": 7, "api": 8, "include": 8, "cli": 9}
# pairs of folders in the same layer that must not include each other
SIBLINGS = [("importer", "autodiff"), ("kernels/cpu", "kernels/cuda")]
GENERATED = {"onnx.pb-c.h": "onnx"}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def folder_of(rel):
    """Top folder (layer key) and sub-folder (for siblings) of a repository path."""
    parts = rel.split("/")
    return parts[0], "/".join(parts[:2]) if len(parts) > 2 else parts[0]


def resolve(src_rel, name):
    if name in GENERATED:
        return GENERATED[name] + "/" + name
    for base in (os.path.dirname(src_rel), "", "ir"):
        cand = os.path.normpath(os.path.join(base, name))
        if os.path.exists(os.path.join(ROOT, cand)):
            return cand
    return None


def main():
    bad = []
    for top in LAYER:
        for dirpath, _, files in os.walk(os.path.join(ROOT, top)):
            for f in sorted(files):
                if not f.endswith((".c", ".h", ".cu", ".cuh", ".def")):
                    continue
                src = os.path.relpath(os.path.join(dirpath, f), ROOT)
                s_top, s_sub = folder_of(src)
                with open(os.path.join(ROOT, src), encoding="utf-8", errors="replace") as fh:
                    for lineno, line in enumerate(fh, 1):
                        m = INCLUDE.match(line)
                        if not m:
                            continue
                        dst = resolve(src, m.group(1))
                        if dst is None:
                            continue  # a system or generated header found elsewhere
                        d_top, d_sub = folder_of(dst)
                        if d_top not in LAYER:
                            continue
                        why = None
                        if LAYER[d_top] > LAYER[s_top]:
                            why = f"layer {LAYER[s_top]} ({s_top}/) includes layer {LAYER[d_top]} ({d_top}/)"
                        for a, b in SIBLINGS:
                            for x, y in ((a, b), (b, a)):
                                if (s_sub == x or s_top == x) and (d_sub == y or d_top == y):
                                    why = f"{x}/ includes its sibling {y}/"
                        if why:
                            bad.append(f"{src}:{lineno}: #include \"{m.group(1)}\": {why}")
    for b in bad:
        print(b)
    if bad:
        print(f"check_layers: {len(bad)} include(s) point up a layer or across siblings "
              "(see .ci/check_layers.py and docs/architecture.md)", file=sys.stderr)
        return 1
    print("check_layers: every include points down a layer")
    return 0


if __name__ == "__main__":
    sys.exit(main())
