#!/usr/bin/env python3
"""check_opset_since.py — the opset each ONNX op of ir/ops.def first appeared in, as
importer/opset.c's SINCE table states it, against ONNX's own schema history
(onnx.defs, the pip package): a model that uses an op below that opset is refused at
import, so a wrong entry refuses valid models or accepts invalid ones.

    python3 tests/check_opset_since.py REPO_ROOT
Exit 0 when every entry agrees (ops since opset 1 need none), 1 listing the ones that
do not, 77 (skipped) when the onnx package is missing."""
import re
import sys

try:
    import onnx.defs
except ImportError:
    print("check_opset_since SKIPPED: the onnx Python package is not importable")
    sys.exit(77)

root = sys.argv[1] if len(sys.argv) > 1 else "."
ops = dict(re.findall(r'^OT_OP\((\w+),\s*"(\w+)"', open(f"{root}/ir/ops.def").read(), re.M))
table = dict((e, int(v)) for e, v in re.findall(r"\[OT_OP_(\w+)\]\s*=\s*(\d+)", open(f"{root}/importer/opset.c").read()))
first = {}
for s in onnx.defs.get_all_schemas_with_history():
    if s.domain in ("", "ai.onnx"):
        first[s.name] = min(first.get(s.name, 10**9), s.since_version)
bad = []
for enum, name in ops.items():
    if name not in first:
        continue  # an internal op (ai.onnxtrain)
    want = first[name] if first[name] > 1 else 0
    got = table.get(enum, 0)
    if got != want:
        bad.append(f"{name}: importer/opset.c says {got or 'since 1 (no entry)'}, ONNX says {first[name]}")
for b in bad:
    print(b)
print(f"check_opset_since: {len(ops)} ops, {len(bad)} disagree with onnx {onnx.__version__}")
sys.exit(1 if bad else 0)
